import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOHTTPCompression
import NIOPosix

/// Errors of ``FeedTestServer``.
public enum FeedTestServerError: Error, CustomStringConvertible {
    /// ``FeedTestServer/waitForRequests(_:count:timeout:)`` ran out of time.
    case timedOut(path: String, expected: Int, received: Int)
    /// The server could not tell its own port.
    case noLocalAddress

    public var description: String {
        switch self {
        case .timedOut(let path, let expected, let received):
            return "timed out waiting for \(expected) request(s) to \(path); received \(received)"
        case .noLocalAddress:
            return "the test server's listening socket has no local address"
        }
    }
}

/// A real HTTP/1.1 server on 127.0.0.1 (ephemeral port) that serves scripted responses and misbehaves
/// on demand, for pointing an HTTP client at in tests.
///
/// ```swift
/// let server = try await FeedTestServer.start()
/// server.setResponses("/feed", [.status(500), .feed(Fixtures.usgs("abruzzi__earthquake-viz__all_day.geojson"))])
/// // ... client GETs server.url("/feed") ...
/// #expect(server.requestCount("/feed") == 2)
/// try await server.shutdown()
/// ```
///
/// - Each path has a script of responses: each request takes the next one and the last repeats forever.
///   A path may instead have a handler (``setHandler(_:_:)``) that computes each response from the request;
///   a script set later overrides the handler until it is cleared. A path with neither answers 404.
/// - 200 responses with `lastModified`/`etag` answer matching conditional requests with 304.
/// - Bodies are gzip-compressed (chunked) when the request accepts gzip, unless the response opts out.
/// - Keep-alive, pipelining and concurrent connections work; clients vanishing midway are ignored.
/// - Always call ``shutdown()`` (or use ``withServer(_:)``): it closes every connection, stalled ones too.
public final class FeedTestServer: Sendable {
    struct State {
        var scripts: [String: [TestResponse]] = [:]
        var handlers: [String: @Sendable (RecordedRequest) -> TestResponse] = [:]
        var served: [String: Int] = [:]
        var log: [String: [RecordedRequest]] = [:]
    }

    /// The bytes per chunk when streaming a body.
    static let chunkSize = 64 * 1024

    let state = NIOLockedValueBox(State())
    private let serverChannel: any Channel
    private let runTask: Task<Void, Never>

    /// The TCP port the server listens on (127.0.0.1).
    public let port: Int

    private init(serverChannel: any Channel, port: Int, runTask: Task<Void, Never>) {
        self.serverChannel = serverChannel
        self.port = port
        self.runTask = runTask
    }

    /// Starts a server on 127.0.0.1 on an ephemeral port, using `MultiThreadedEventLoopGroup.singleton`.
    public static func start() async throws -> FeedTestServer {
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.tcpOption(.tcp_nodelay), value: 1)
            .bind(host: "127.0.0.1", port: 0) { channel in
                channel.eventLoop.makeCompletedFuture {
                    let sync = channel.pipeline.syncOperations
                    try sync.configureHTTPServerPipeline(withErrorHandling: true)
                    try sync.addHandler(ArrivalStamper())
                    try sync.addHandler(AcceptEncodingNormalizer())
                    try sync.addHandler(
                        HTTPResponseCompressor(responseCompressionPredicate: { head, _ in
                            guard head.headers.contains(name: compressMarker) else { return .doNotCompress }
                            head.headers.remove(name: compressMarker)
                            return .compressIfPossible
                        })
                    )
                    return try NIOAsyncChannel<HTTPServerRequestPart, HTTPServerResponsePart>(
                        wrappingChannelSynchronously: channel
                    )
                }
            }
        guard let port = channel.channel.localAddress?.port else {
            try? await channel.channel.close()
            throw FeedTestServerError.noLocalAddress
        }
        // The server is created after the task starts, so the task reaches it through a box.
        let box = ServerBox()
        // On its own threads, as a machine of its own would be (see OwnThreadExecutor.servers).
        let task = Task(executorPreference: OwnThreadExecutor.servers) {
            await withDiscardingTaskGroup { group in
                do {
                    try await channel.executeThenClose { inbound in
                        for try await connection in inbound {
                            group.addTask {
                                guard let server = box.server else {
                                    try? await connection.channel.close()
                                    return
                                }
                                await server.serve(connection)
                            }
                        }
                    }
                } catch {
                    // The listening socket closed (shutdown); the connections are cancelled with the group.
                }
                group.cancelAll()
            }
        }
        let server = FeedTestServer(serverChannel: channel.channel, port: port, runTask: task)
        box.set(server)
        return server
    }

    /// Runs `body` with a started server and shuts it down afterwards, whether `body` throws or not.
    public static func withServer<R>(_ body: (FeedTestServer) async throws -> R) async throws -> R {
        let server = try await start()
        do {
            let result = try await body(server)
            try await server.shutdown()
            return result
        } catch {
            try? await server.shutdown()
            throw error
        }
    }

    /// Closes the listening socket and every connection (stalled ones too), and waits for them all.
    public func shutdown() async throws {
        runTask.cancel()
        try? await serverChannel.close()
        await runTask.value
    }

    /// `http://127.0.0.1:PORT/path` (a missing leading slash is added).
    public func url(_ path: String) -> String {
        "http://127.0.0.1:\(port)" + (path.hasPrefix("/") ? path : "/" + path)
    }

    // MARK: Script

    /// Sets the script of `path` (without query; a missing leading slash is added) and resets its position:
    /// the next request gets `responses[0]`, then `responses[1]`, …, the last repeating forever.
    /// An empty script makes the path answer 404 again, or its handler if it has one (see
    /// ``setHandler(_:_:)``, which a non-empty script overrides). The request log is kept.
    public func setResponses(_ path: String, _ responses: [TestResponse]) {
        let key = Self.normalize(path)
        state.withLockedValue {
            $0.scripts[key] = responses.isEmpty ? nil : responses
            $0.served[key] = 0
        }
    }

    /// Sets a one-response script: every request to `path` gets `response`.
    public func setResponse(_ path: String, _ response: TestResponse) {
        setResponses(path, [response])
    }

    /// Makes `path` (without query; a missing leading slash is added) answer each request with
    /// `handler`'s response, computed from the request (``RecordedRequest/query`` has its parameters).
    ///
    /// Setting a handler clears the path's script, so the handler answers from the next request on.
    /// A script set afterwards with ``setResponses(_:_:)`` takes priority over the handler until it
    /// is cleared with an empty script; then the handler answers again. Handled requests are logged
    /// like scripted ones (``requests(_:)``), before the handler runs. The handler is called outside
    /// the server's lock, on the connection's task, possibly for several connections at once.
    public func setHandler(_ path: String, _ handler: @escaping @Sendable (RecordedRequest) -> TestResponse) {
        let key = Self.normalize(path)
        state.withLockedValue {
            $0.handlers[key] = handler
            $0.scripts[key] = nil
            $0.served[key] = 0
        }
    }

    /// Removes the handler of `path`, if any (its script, if any, is kept).
    public func removeHandler(_ path: String) {
        let key = Self.normalize(path)
        state.withLockedValue { _ = $0.handlers.removeValue(forKey: key) }
    }

    // MARK: Request log

    /// The requests received for `path` (query ignored), oldest first, including 404s.
    public func requests(_ path: String) -> [RecordedRequest] {
        let key = Self.normalize(path)
        return state.withLockedValue { $0.log[key] ?? [] }
    }

    /// How many requests `path` received.
    public func requestCount(_ path: String) -> Int {
        let key = Self.normalize(path)
        return state.withLockedValue { $0.log[key]?.count ?? 0 }
    }

    /// Every request received, oldest first per path, in path order.
    public var allRequests: [RecordedRequest] {
        state.withLockedValue { state in state.log.keys.sorted().flatMap { state.log[$0]! } }
    }

    /// Forgets the request log (scripts and their positions are kept).
    public func clearRequests() {
        state.withLockedValue { $0.log = [:] }
    }

    /// Waits until `path` has received at least `count` requests, or throws
    /// ``FeedTestServerError/timedOut(path:expected:received:)`` after `timeout`.
    /// A request counts as soon as its head and body have arrived (before it is answered).
    public func waitForRequests(_ path: String, count: Int, timeout: Duration = .seconds(10)) async throws {
        let clock = ContinuousClock()
        let deadline = clock.now.advanced(by: timeout)
        while true {
            let received = requestCount(path)
            if received >= count { return }
            if clock.now >= deadline {
                throw FeedTestServerError.timedOut(path: Self.normalize(path), expected: count, received: received)
            }
            try await Task.sleep(for: .milliseconds(5))
        }
    }


    /// `path` without its query or fragment, with a leading slash: the key of scripts and the log.
    static func normalize(_ path: String) -> String {
        var path = path
        if let query = path.firstIndex(where: { $0 == "?" || $0 == "#" }) {
            path = String(path[..<query])
        }
        return path.hasPrefix("/") ? path : "/" + path
    }
}

/// The marker header by which the server tells the compressor to compress a response (removed before sending).
let compressMarker = "x-feedtestserver-compress"

/// Lets the server reach itself from the accept loop, which starts before the server object exists.
private final class ServerBox: Sendable {
    private let value = NIOLockedValueBox<FeedTestServer?>(nil)
    var server: FeedTestServer? { value.withLockedValue { $0 } }
    func set(_ server: FeedTestServer) { value.withLockedValue { $0 = server } }
}
