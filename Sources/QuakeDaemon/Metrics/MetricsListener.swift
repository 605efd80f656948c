import CSystemd
import Glibc
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix
import ServiceLifecycle

/// The optional HTTP listener that serves the metrics on `/metrics` for Prometheus to scrape:
/// on `metrics-listen`, or on the socket systemd passes with `FileDescriptorName=metrics`
/// (quaked-metrics.socket).
///
/// HTTP is NIO's (`configureHTTPServerPipeline`: parsing, pipelining, keep-alive, 400 for what
/// does not parse). Only `GET` and `HEAD` of `/metrics` (any query string) are served; another
/// path is 404, another method on `/metrics` 405. At most ``maxConnections`` connections are
/// served at once (more are closed at once), and a connection idle for ``idleTimeout`` is closed.
/// Its failure is logged and never stops the daemon: run it with `.ignore` termination behaviours.
public final class MetricsListener: Service, Sendable {
    typealias Connection = NIOAsyncChannel<HTTPServerRequestPart, HTTPServerResponsePart>

    /// The `FileDescriptorName=` of the socket systemd passes for the metrics.
    public static let fileDescriptorName = "metrics"
    static let maxConnections = 32
    static let idleTimeout = TimeAmount.seconds(30)

    /// Why the listener (or the catalog's, http-listen) could not start: quaked exits 78
    /// (EX_CONFIG), as for a bad setting.
    public struct StartupError: Error, CustomStringConvertible {
        public var description: String
    }

    /// A listening socket, opened before the daemon says it is ready; served by ``run()``.
    public struct Socket: Sendable {
        let channel: NIOAsyncChannel<Connection, Never>
        /// What it listens on, as the log says it (the port chosen when 0 was asked for).
        public let localAddress: String

        init(_ channel: NIOAsyncChannel<Connection, Never>) {
            self.channel = channel
            self.localAddress = channel.channel.localAddress.map(MetricsListener.describe) ?? "?"
        }

        /// Closes it unserved (when the daemon does not start after all).
        func close() async {
            try? await channel.executeThenClose { _ in }
        }
    }

    private let socket: Socket
    private let render: @Sendable () async -> String
    private let logger: Logger
    private let connections = NIOLockedValueBox(0)

    /// Serves `socket`; `render` makes the text of each scrape.
    public init(socket: Socket, render: @escaping @Sendable () async -> String, logger: Logger) {
        self.socket = socket
        self.render = render
        self.logger = logger
    }

    /// Opens the listening socket: the one systemd passed, if any, else one on `address`; nil
    /// when there is neither (metrics over HTTP are off). Throws ``StartupError`` when it cannot.
    public static func open(address: MetricsAddress?, activated: CInt?) async throws -> Socket? {
        let bootstrap = ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.backlog, value: 64)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
        let initializer: @Sendable (any Channel) -> EventLoopFuture<Connection> = { channel in
            channel.eventLoop.makeCompletedFuture {
                try channel.pipeline.syncOperations.addHandler(IdleStateHandler(readTimeout: Self.idleTimeout))
                try channel.pipeline.syncOperations.addHandler(CloseWhenIdle())
                try channel.pipeline.syncOperations.configureHTTPServerPipeline()
                return try Connection(wrappingChannelSynchronously: channel)
            }
        }
        if let fd = activated {
            guard sd_is_socket(fd, AF_UNSPEC, CInt(SOCK_STREAM.rawValue), 1) > 0 else {
                throw StartupError(
                    description:
                        "the socket systemd passed as \(fileDescriptorName) (fd \(fd)) is not a listening stream socket")
            }
            do {
                return Socket(try await bootstrap.bind(fd, childChannelInitializer: initializer))
            } catch {
                throw StartupError(
                    description: "cannot serve the metrics on the socket systemd passed (fd \(fd)): \(Self.reason(error))")
            }
        }
        guard let address else { return nil }
        do {
            let socketAddress = try SocketAddress(ipAddress: address.host, port: address.port)
            return Socket(try await bootstrap.bind(to: socketAddress, childChannelInitializer: initializer))
        } catch {
            throw StartupError(description: "metrics-listen: cannot listen on \(address): \(Self.reason(error))")
        }
    }

    public func run() async throws {
        do {
            try await cancelWhenGracefulShutdown {
                try await withThrowingDiscardingTaskGroup { group in
                    try await self.socket.channel.executeThenClose { inbound in
                        for try await connection in inbound {
                            guard self.admit() else {
                                // Closed through the channel's own API: a NIOAsyncChannel dropped
                                // without it traps (its writer deinits unfinished).
                                try? await connection.executeThenClose { _, _ in }
                                continue
                            }
                            group.addTask {
                                defer { self.connections.withLockedValue { $0 -= 1 } }
                                await self.serve(connection)
                            }
                        }
                    }
                }
            }
        } catch is CancellationError {
            // Graceful shutdown.
        } catch {
            // The daemon goes on without it (and so the service's end must not stop the group).
            logger.error(
                "the metrics listener failed; quakectl metrics still works", metadata: ["error": "\(error)"])
        }
    }

    private func admit() -> Bool {
        connections.withLockedValue { count in
            guard count < Self.maxConnections else { return false }
            count += 1
            return true
        }
    }

    /// Answers the requests of one connection, in order, until the client closes it (or asks
    /// for no keep-alive).
    private func serve(_ connection: Connection) async {
        do {
            try await connection.executeThenClose { inbound, outbound in
                var request: HTTPRequestHead?
                for try await part in inbound {
                    switch part {
                    case .head(let head):
                        request = head
                    case .body:
                        continue  // a GET has none; anything else is answered without reading it
                    case .end:
                        guard let head = request else { continue }
                        request = nil
                        try await self.respond(to: head, outbound)
                        if !head.isKeepAlive { return }
                    }
                }
            }
        } catch {
            logger.debug("metrics connection ended", metadata: ["error": "\(error)"])
        }
    }

    private func respond(to request: HTTPRequestHead, _ outbound: NIOAsyncChannelOutboundWriter<HTTPServerResponsePart>)
        async throws
    {
        let path = request.uri.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
        let status: HTTPResponseStatus
        var headers = HTTPHeaders()
        let body: String
        if path != "/metrics" {
            status = .notFound
            body = "not found: quaked serves its metrics on /metrics\n"
        } else if request.method != .GET && request.method != .HEAD {
            status = .methodNotAllowed
            headers.add(name: "Allow", value: "GET, HEAD")
            body = "method not allowed: use GET or HEAD\n"
        } else {
            status = .ok
            body = await render()
        }
        headers.add(
            name: "Content-Type", value: status == .ok ? QuakedMetrics.contentType : "text/plain; charset=utf-8")
        let bytes = ByteBuffer(string: body)
        headers.add(name: "Content-Length", value: "\(bytes.readableBytes)")
        if !request.isKeepAlive { headers.add(name: "Connection", value: "close") }
        try await outbound.write(.head(HTTPResponseHead(version: request.version, status: status, headers: headers)))
        if request.method != .HEAD {
            try await outbound.write(.body(.byteBuffer(bytes)))
        }
        try await outbound.write(.end(nil))
    }

    private static func reason(_ error: any Error) -> String {
        if let error = error as? IOError { return String(cString: strerror(error.errnoCode)) }
        return "\(error)"
    }

    fileprivate static func describe(_ address: SocketAddress) -> String {
        guard let ip = address.ipAddress, let port = address.port else { return "\(address)" }
        return MetricsAddress(host: ip, port: port).description
    }
}

/// Closes a connection that sent nothing for the idle timeout (IdleStateHandler's event).
private final class CloseWhenIdle: ChannelInboundHandler {
    typealias InboundIn = NIOAny

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if event is IdleStateHandler.IdleStateEvent {
            context.close(promise: nil)
        } else {
            context.fireUserInboundEventTriggered(event)
        }
    }
}
