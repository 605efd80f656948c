import NIOCore
import NIOHTTP1
import NIOPosix
import NIOWebSocket
import Synchronization

/// A real websocket server on 127.0.0.1 (NIOWebSocket's `NIOWebSocketServerUpgrader` over
/// NIOHTTP1) that the tests drive frame by frame and that misbehaves on purpose: bad frames
/// between good ones, an abrupt close, pings left unanswered, connections refused (the
/// listener closed, then opened again on the same port).
final class WebSocketTestServer: Sendable {
    private struct State {
        var listener: (any Channel)?
        var port = 0
        var connections: [ServerConnection] = []
        var upgradeRequests: [String] = []
    }

    private let state = Mutex(State())

    private init() {}

    /// Listens on an ephemeral port.
    static func start() async throws -> WebSocketTestServer {
        let server = WebSocketTestServer()
        try await server.listen()
        return server
    }

    var port: Int { state.withLock { $0.port } }
    var url: String { "ws://127.0.0.1:\(port)/standing_order/websocket" }
    /// The upgraded connections so far, in order.
    var connections: [ServerConnection] { state.withLock { $0.connections } }
    /// The URIs of the upgrade requests so far.
    var upgradeRequests: [String] { state.withLock { $0.upgradeRequests } }

    /// Opens the listener: on the port it had before, the first time on any free port.
    func listen() async throws {
        let port = self.port
        let bootstrap = ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                let upgrader = NIOWebSocketServerUpgrader(
                    maxFrameSize: 1 << 22,
                    shouldUpgrade: { channel, head in
                        self.state.withLock { $0.upgradeRequests.append(head.uri) }
                        return channel.eventLoop.makeSucceededFuture(HTTPHeaders())
                    },
                    upgradePipelineHandler: { channel, _ in
                        channel.eventLoop.makeCompletedFuture {
                            let connection = ServerConnection(channel: channel)
                            try channel.pipeline.syncOperations.addHandler(FrameHandler(connection: connection))
                            self.state.withLock { $0.connections.append(connection) }
                        }
                    })
                return channel.pipeline.configureHTTPServerPipeline(
                    withServerUpgrade: (upgraders: [upgrader], completionHandler: { _ in }))
            }
        let listener = try await bootstrap.bind(host: "127.0.0.1", port: port).get()
        state.withLock {
            $0.listener = listener
            $0.port = listener.localAddress?.port ?? port
        }
    }

    /// Closes the listener: connecting is refused until ``listen()``. Open connections stay.
    func stopListening() async {
        let listener = state.withLock { state -> (any Channel)? in
            defer { state.listener = nil }
            return state.listener
        }
        try? await listener?.close().get()
    }

    /// Closes the listener and every connection, without waiting.
    func shutdown() {
        let channels = state.withLock { state -> [any Channel] in
            defer { state.listener = nil }
            return (state.listener.map { [$0] } ?? []) + state.connections.map(\.channel)
        }
        for channel in channels { channel.close(promise: nil) }
    }

    /// The `index`th upgraded connection (0 for the first), once it has come.
    func connection(_ index: Int, within timeout: Duration = patience) async throws -> ServerConnection {
        try await eventually("connection \(index) to come", within: timeout) {
            let connections = self.connections
            return connections.count > index ? connections[index] : nil
        }
    }
}

/// One upgraded connection of ``WebSocketTestServer``.
final class ServerConnection: Sendable {
    private struct State {
        var answersPings = true
        var pings = 0
        var closed = false
    }

    let channel: any Channel
    private let state = Mutex(State())

    init(channel: any Channel) {
        self.channel = channel
    }

    /// Whether pings are answered with pongs (true at first): false makes the connection look
    /// half-open to the client.
    var answersPings: Bool {
        get { state.withLock { $0.answersPings } }
        set { state.withLock { $0.answersPings = newValue } }
    }

    /// The pings the client has sent.
    var pings: Int { state.withLock { $0.pings } }
    /// Whether the connection is closed (either side).
    var isClosed: Bool { state.withLock { $0.closed } }

    /// A text message in one frame.
    func send(_ text: String) async throws {
        try await write(.text, ByteBuffer(string: text))
    }

    /// A text frame of any bytes (not UTF-8 ones too).
    func sendText(bytes: [UInt8]) async throws {
        try await write(.text, ByteBuffer(bytes: bytes))
    }

    func sendBinary(_ bytes: [UInt8]) async throws {
        try await write(.binary, ByteBuffer(bytes: bytes))
    }

    /// One text message in several frames: a text frame, then continuations, the last with FIN.
    func sendFragments(_ parts: [String]) async throws {
        for (i, part) in parts.enumerated() {
            try await write(i == 0 ? .text : .continuation, ByteBuffer(string: part), fin: i == parts.count - 1)
        }
    }

    /// A continuation frame that continues nothing.
    func sendStrayContinuation(_ text: String) async throws {
        try await write(.continuation, ByteBuffer(string: text))
    }

    func write(_ opcode: WebSocketOpcode, _ data: ByteBuffer, fin: Bool = true) async throws {
        try await channel.writeAndFlush(WebSocketFrame(fin: fin, opcode: opcode, data: data)).get()
    }

    /// Closes the TCP connection without a close frame.
    func closeAbruptly() async {
        try? await channel.close().get()
    }

    fileprivate func receivedPing() -> Bool {
        state.withLock {
            $0.pings += 1
            return $0.answersPings
        }
    }

    fileprivate func markClosed() {
        state.withLock { $0.closed = true }
    }
}

/// Answers pings (unless told not to) and close frames; ignores what the client sends.
private final class FrameHandler: ChannelInboundHandler {
    typealias InboundIn = WebSocketFrame
    typealias OutboundOut = WebSocketFrame

    let connection: ServerConnection

    init(connection: ServerConnection) {
        self.connection = connection
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        switch frame.opcode {
        case .ping:
            if connection.receivedPing() {
                let pong = WebSocketFrame(fin: true, opcode: .pong, data: frame.unmaskedData)
                context.writeAndFlush(wrapOutboundOut(pong), promise: nil)
            }
        case .connectionClose:
            let close = WebSocketFrame(fin: true, opcode: .connectionClose, data: frame.unmaskedData)
            context.writeAndFlush(wrapOutboundOut(close), promise: nil)
            context.close(promise: nil)
        default:
            break
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        connection.markClosed()
        context.fireChannelInactive()
    }
}

/// A TCP server on 127.0.0.1 that never upgrades: it accepts and either never answers or closes
/// the connection during the upgrade.
final class StallingServer: Sendable {
    let listener: any Channel
    private let accepted: Counter

    private init(listener: any Channel, accepted: Counter) {
        self.listener = listener
        self.accepted = accepted
    }

    /// `closes`: close each connection 50 ms after accepting it instead of holding it open.
    static func start(closes: Bool) async throws -> StallingServer {
        let accepted = Counter()
        let listener = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .childChannelInitializer { channel in
                _ = accepted.increment()
                if closes {
                    channel.eventLoop.scheduleTask(in: .milliseconds(50)) { channel.close(promise: nil) }
                }
                return channel.eventLoop.makeSucceededVoidFuture()
            }
            .bind(host: "127.0.0.1", port: 0).get()
        return StallingServer(listener: listener, accepted: accepted)
    }

    var url: String { "ws://127.0.0.1:\(listener.localAddress?.port ?? 0)/standing_order/websocket" }
    var connectionsAccepted: Int { accepted.value }

    func shutdown() { listener.close(promise: nil) }
}

struct TimedOut: Error, CustomStringConvertible {
    var what: String
    var description: String { "timed out waiting for \(what)" }
}

/// How long a test waits for what must come: it fails, rather than hangs, when it does not.
/// Alone these tests take a second or two; with every suite running on two cores a refused
/// connection attempt was seen to take 2 s (CI, 2026-11-28: six attempts with a 10-80 ms
/// backoff did not fit in 20 s, and two of these suites' tests took 38-41 s in a passing run).
/// What the tests assert (the order of events, the delays the backoff chose, the counters) does
/// not depend on it.
let patience = Duration.seconds(90)

/// Polls `value` every 10 ms until it is not nil; throws ``TimedOut`` after `timeout`.
func eventually<T>(
    _ what: String, within timeout: Duration = patience, _ value: () async throws -> T?
) async throws -> T {
    let deadline = ContinuousClock.now + timeout
    while true {
        if let v = try await value() { return v }
        if ContinuousClock.now >= deadline { throw TimedOut(what: what) }
        try await Task.sleep(for: .milliseconds(10))
    }
}

/// Polls `condition` every 10 ms until it holds; throws ``TimedOut`` after `timeout`.
func eventually(
    _ what: String, within timeout: Duration = patience, _ condition: () async throws -> Bool
) async throws {
    let _: Bool = try await eventually(what, within: timeout) { try await condition() ? true : nil }
}
