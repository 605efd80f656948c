import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOWebSocket

/// A real websocket server on 127.0.0.1 (NIOWebSocket's `NIOWebSocketServerUpgrader` over
/// NIOHTTP1, no framing of its own) for the daemon's push-source tests: it sends text messages
/// to the connected clients, answers pings, and drops connections on purpose.
public final class PushTestServer: Sendable {
    private struct State {
        var listener: (any Channel)?
        var port = 0
        var connections: [any Channel] = []
        var upgrades = 0
        var pings = 0
    }

    private let state = NIOLockedValueBox(State())

    private init() {}

    /// Listens on an ephemeral port of 127.0.0.1.
    public static func start() async throws -> PushTestServer {
        let server = PushTestServer()
        let bootstrap = ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                let upgrader = NIOWebSocketServerUpgrader(
                    maxFrameSize: 1 << 22,
                    shouldUpgrade: { channel, _ in channel.eventLoop.makeSucceededFuture(HTTPHeaders()) },
                    upgradePipelineHandler: { channel, _ in
                        channel.eventLoop.makeCompletedFuture {
                            try channel.pipeline.syncOperations.addHandler(PushFrameHandler(server: server))
                            server.state.withLockedValue {
                                $0.connections.append(channel)
                                $0.upgrades += 1
                            }
                        }
                    })
                return channel.pipeline.configureHTTPServerPipeline(
                    withServerUpgrade: (upgraders: [upgrader], completionHandler: { _ in }))
            }
        let listener = try await bootstrap.bind(host: "127.0.0.1", port: 0).get()
        server.state.withLockedValue {
            $0.listener = listener
            $0.port = listener.localAddress?.port ?? 0
        }
        return server
    }

    /// Runs `body` with a started server, and shuts it down after.
    public static func withServer<R>(_ body: (PushTestServer) async throws -> R) async throws -> R {
        let server = try await start()
        do {
            let result = try await body(server)
            await server.shutdown()
            return result
        } catch {
            await server.shutdown()
            throw error
        }
    }

    public var port: Int { state.withLockedValue { $0.port } }
    /// `ws://127.0.0.1:PORT/standing_order/websocket`.
    public var url: String { "ws://127.0.0.1:\(port)/standing_order/websocket" }
    /// Websocket upgrades so far (the first connection and every reconnect).
    public var upgrades: Int { state.withLockedValue { $0.upgrades } }
    /// Connections open now.
    public var openConnections: Int { state.withLockedValue { $0.connections.count } }
    /// Pings received (and answered).
    public var pings: Int { state.withLockedValue { $0.pings } }

    /// A text message in one frame to every open connection; returns how many it went to.
    @discardableResult
    public func send(_ text: String) async throws -> Int {
        try await write(.text, ByteBuffer(string: text))
    }

    /// A binary message to every open connection (EMSC sends text: a bad message).
    @discardableResult
    public func sendBinary(_ bytes: [UInt8]) async throws -> Int {
        try await write(.binary, ByteBuffer(bytes: bytes))
    }

    private func write(_ opcode: WebSocketOpcode, _ data: ByteBuffer) async throws -> Int {
        let connections = state.withLockedValue { $0.connections }
        for channel in connections {
            try await channel.writeAndFlush(WebSocketFrame(fin: true, opcode: opcode, data: data)).get()
        }
        return connections.count
    }

    /// Closes every open connection's TCP connection, without a close frame (the listener stays:
    /// the client reconnects).
    public func dropConnections() async {
        let connections = state.withLockedValue { state -> [any Channel] in
            defer { state.connections = [] }
            return state.connections
        }
        for channel in connections { try? await channel.close().get() }
    }

    /// Closes the listener and every connection.
    public func shutdown() async {
        let channels = state.withLockedValue { state -> [any Channel] in
            defer {
                state.listener = nil
                state.connections = []
            }
            return (state.listener.map { [$0] } ?? []) + state.connections
        }
        for channel in channels { try? await channel.close().get() }
    }

    fileprivate func closed(_ channel: any Channel) {
        state.withLockedValue { $0.connections.removeAll { $0 === channel } }
    }

    fileprivate func pinged() {
        state.withLockedValue { $0.pings += 1 }
    }
}

/// Answers pings and close frames; ignores what else the client sends.
private final class PushFrameHandler: ChannelInboundHandler {
    typealias InboundIn = WebSocketFrame
    typealias OutboundOut = WebSocketFrame

    let server: PushTestServer

    init(server: PushTestServer) {
        self.server = server
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        switch frame.opcode {
        case .ping:
            server.pinged()
            let pong = WebSocketFrame(fin: true, opcode: .pong, data: frame.unmaskedData)
            context.writeAndFlush(wrapOutboundOut(pong), promise: nil)
        case .connectionClose:
            let close = WebSocketFrame(fin: true, opcode: .connectionClose, data: frame.unmaskedData)
            context.writeAndFlush(wrapOutboundOut(close), promise: nil)
            context.close(promise: nil)
        default:
            break
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        server.closed(context.channel)
        context.fireChannelInactive()
    }
}
