import Foundation
import Logging
import NIOCore
import QuakeHTTP
import QuakeStore
import QuakeTestSupport
import Testing

/// The server itself: its connection limit and its shutdown.
@Suite struct CatalogServerTests {
    static func withServer(
        idleTimeout: TimeAmount = HTTPServer.idleTimeout,
        _ body: (HTTPServer.Socket, Task<Void, any Error>) async throws -> Void
    ) async throws {
        try await withTemporaryDirectory { directory in
            let store = try QuakeStore(directory: directory)
            defer { try? store.close() }
            let socket = try await HTTPServer.open(port: 0, idleTimeout: idleTimeout)
            #expect(socket.localAddress == "127.0.0.1:\(socket.port)", "loopback by default")
            let server = HTTPServer(
                socket: socket, router: CatalogRouter(store: store), logger: Logger(label: "quaked.http.test"))
            let task = Task { try await server.run() }
            defer { task.cancel() }
            try await body(socket, task)
        }
    }

    static func version(_ connection: TCPProbe) async throws -> String {
        try connection.send("GET /fdsnws/event/1/version HTTP/1.1\r\nHost: test\r\n\r\n")
        return String(decoding: try await connection.receive(upTo: 4096), as: UTF8.self)
    }

    @Test("at most 32 connections at once: the next is closed unanswered, and a freed place is taken again")
    func connectionLimit() async throws {
        // Idle connections are closed after 10 minutes, not the 30 s default: on a loaded machine
        // the first of the 32 may otherwise idle out (freeing its place) before the 33rd comes.
        try await Self.withServer(idleTimeout: .minutes(10)) { socket, _ in
            var open: [TCPProbe] = []
            for _ in 0..<HTTPServer.maxConnections {
                let connection = try TCPProbe(port: socket.port, receiveBufferSize: 4096)
                let answer = try await Self.version(connection)
                #expect(answer.hasSuffix("\r\n\r\n1.2.0\n"))
                open.append(connection)
            }
            let extra = try TCPProbe(port: socket.port, receiveBufferSize: 4096)
            try? extra.send("GET /fdsnws/event/1/version HTTP/1.1\r\nHost: test\r\n\r\n")
            let unanswered = try? await extra.receive(upTo: 4096)
            #expect(unanswered?.isEmpty == true, "closed without an answer: \(String(describing: unanswered))")
            open.removeLast().close()
            // The server notices the close, then admits again.
            var answered = false
            for _ in 0..<50 where !answered {
                try await Task.sleep(for: .milliseconds(100))
                let again = try TCPProbe(port: socket.port, receiveBufferSize: 4096)
                answered = (try? await Self.version(again))?.hasSuffix("1.2.0\n") == true
            }
            #expect(answered)
            let first = try await Self.version(open[0])
            #expect(first.hasSuffix("1.2.0\n"), "the admitted connections are still served")
        }
    }

    /// The connection would be closed as idle after 10 minutes: ending well before that shows
    /// the cancellation ended it, not the idle close (the minute allowed is for a loaded machine,
    /// where every suite runs at once on two cores).
    @Test("cancelling run() ends it promptly with a keep-alive connection open, and stops listening")
    func shutdown() async throws {
        try await Self.withServer(idleTimeout: .minutes(10)) { socket, task in
            let connection = try TCPProbe(port: socket.port, receiveBufferSize: 4096)
            let answer = try await Self.version(connection)
            #expect(answer.hasPrefix("HTTP/1.1 200 OK\r\n"))
            let started = ContinuousClock.now
            task.cancel()
            _ = try? await task.value
            #expect(ContinuousClock.now - started < .seconds(60))
            #expect(throws: (any Error).self) { try TCPProbe(port: socket.port, receiveBufferSize: 4096) }
        }
    }
}
