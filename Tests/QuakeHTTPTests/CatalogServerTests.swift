import Foundation
import NIOHTTP1
import Synchronization
import Logging
import NIOCore
import QuakeHTTP
import QuakeStore
import QuakeTestSupport
import Testing

/// The server itself: its connection limit and its shutdown.
@Suite struct CatalogServerTests {
    static func withServer(
        idleTimeout: TimeAmount = HTTPServer.idleTimeout, routes: [String: HTTPHandler] = [:],
        _ body: (HTTPServer.Socket, Task<Void, any Error>) async throws -> Void
    ) async throws {
        try await withTemporaryDirectory { directory in
            let store = try QuakeStore(directory: directory)
            defer { try? store.close() }
            let socket = try await HTTPServer.open(port: 0, idleTimeout: idleTimeout)
            #expect(socket.localAddress == "127.0.0.1:\(socket.port)", "loopback by default")
            let server = HTTPServer(
                socket: socket, router: CatalogRouter(store: store, routes: routes),
                logger: Logger(label: "quaked.http.test"))
            let task = Task(executorPreference: OwnThreadExecutor.servers) { try await server.run() }
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

    @Test("an answer the server takes longer than the idle timeout to work out is not cut off")
    func slowAnswerIsNotIdle() async throws {
        let slow: HTTPHandler = { _, writer in
            try await Task.sleep(for: .milliseconds(1500))
            try await writer.respond(.ok, body: "worked out\n")
        }
        try await Self.withServer(idleTimeout: .milliseconds(200), routes: ["/slow": slow]) { socket, _ in
            let connection = try TCPProbe(port: socket.port, receiveBufferSize: 4096)
            try connection.send("GET /slow HTTP/1.1\r\nHost: test\r\n\r\n")
            let answer = String(decoding: try await connection.receive(upTo: 4096), as: UTF8.self)
            #expect(answer.hasPrefix("HTTP/1.1 200 OK\r\n"), "\(answer)")
            #expect(answer.hasSuffix("\r\n\r\nworked out\n"), "\(answer)")
        }
    }

    @Test("a keep-alive connection left idle, and a client that stops reading an answer, are closed after the idle timeout")
    func idleClientsAreClosed() async throws {
        let ended = Mutex<(any Error)?>(nil)
        // An answer far larger than the socket buffers take: its writer waits on the client.
        let endless: HTTPHandler = { _, writer in
            do {
                try await writer.writeHead(.ok, HTTPHeaders([("Content-Type", "text/plain")]))
                let piece = ByteBuffer(repeating: UInt8(ascii: "x"), count: 64 << 10)
                for _ in 0..<4096 { try await writer.writeBody(piece) }
                try await writer.end()
            } catch {
                ended.withLock { $0 = error }
                throw error
            }
        }
        try await Self.withServer(idleTimeout: .milliseconds(300), routes: ["/endless": endless]) { socket, _ in
            let idle = try TCPProbe(port: socket.port, receiveBufferSize: 4096)
            let answer = try await Self.version(idle)
            #expect(answer.hasSuffix("1.2.0\n"))
            #expect(try await idle.receive(upTo: 4096).isEmpty, "closed by the server: end of file")

            let stalled = try TCPProbe(port: socket.port, receiveBufferSize: 4096)
            try stalled.send("GET /endless HTTP/1.1\r\nHost: test\r\n\r\n")
            #expect(String(decoding: try await stalled.receive(upTo: 4096), as: UTF8.self).hasPrefix("HTTP/1.1 200 OK"))
            let deadline = ContinuousClock.now + .seconds(60)
            while ended.withLock({ $0 }) == nil && ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(50))
            }
            #expect(ended.withLock({ $0 }) != nil, "the stalled answer's writer fails once the connection is closed")
        }
    }
}
