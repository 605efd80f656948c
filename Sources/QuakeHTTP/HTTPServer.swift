import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOHTTPCompression
import NIOPosix

#if canImport(Glibc)
    import Glibc
#endif

/// quaked's small HTTP/1.1 server: the catalog's (`http-listen`, a ``CatalogRouter``) and the
/// metrics listener's (`metrics-listen`) are each one of these, with their own handler.
///
/// HTTP is NIO's (`configureHTTPServerPipeline`: parsing, pipelining, keep-alive, 400 for what
/// does not parse), gzip NIOHTTPCompression's (a 200 is compressed when the request's
/// `Accept-Encoding` takes gzip or deflate; each piece of a streamed body is flushed compressed).
/// At most ``maxConnections`` connections are served at once (more are closed at once), and a
/// connection that neither reads nor writes for ``idleTimeout`` is closed when the client is the
/// one holding it up (an idle keep-alive connection, or a client that stopped reading a long
/// answer), never while the server still works out an answer the socket would take. Bodies are
/// streamed with back pressure: nothing is written ahead of what the socket takes.
public final class HTTPServer: Sendable {
    typealias Connection = NIOAsyncChannel<HTTPServerRequestPart, HTTPServerResponsePart>

    public static let maxConnections = 32
    /// A header the writer marks an answer to HEAD with, which the compressor's predicate removes.
    static let noCompressionMarker = "x-quaked-no-compression"
    public static let idleTimeout = TimeAmount.seconds(30)

    /// Why the server could not start listening.
    public struct StartupError: Error, CustomStringConvertible {
        public var description: String
    }

    /// A listening socket, opened before the daemon says it is ready; served by ``run()``.
    public struct Socket: Sendable {
        let channel: NIOAsyncChannel<Connection, Never>
        /// What it listens on (`127.0.0.1:8080`; the port chosen when 0 was asked for).
        public let localAddress: String
        /// The port it listens on.
        public let port: Int

        init(_ channel: NIOAsyncChannel<Connection, Never>) {
            self.channel = channel
            let address = channel.channel.localAddress
            self.port = address?.port ?? 0
            if let ip = address?.ipAddress, let port = address?.port {
                self.localAddress = ip.contains(":") ? "[\(ip)]:\(port)" : "\(ip):\(port)"
            } else {
                self.localAddress = "?"
            }
        }

        /// Closes it unserved (when the daemon does not start after all).
        public func close() async {
            try? await channel.executeThenClose { _ in }
        }
    }

    private let socket: Socket
    private let handler: HTTPHandler
    private let logger: Logger
    private let connections = NIOLockedValueBox(0)

    /// Serves `socket`, every request through `handler`.
    public init(socket: Socket, handler: @escaping HTTPHandler, logger: Logger) {
        self.socket = socket
        self.handler = handler
        self.logger = logger
    }

    /// Serves `socket` with `router`'s catalog.
    public convenience init(socket: Socket, router: CatalogRouter, logger: Logger) {
        self.init(socket: socket, handler: router.respond, logger: logger)
    }

    public var localAddress: String { socket.localAddress }
    public var port: Int { socket.port }

    /// Opens a listening socket on `host` (loopback unless told otherwise) and `port` (0: any free
    /// one). `setting` names what asked for it in the error (`http-listen: cannot listen on ...`);
    /// a connection idle for `idleTimeout` is closed.
    public static func open(
        host: String = "127.0.0.1", port: Int, setting: String = "http-listen", idleTimeout: TimeAmount = idleTimeout
    ) async throws -> Socket {
        do {
            let address = try SocketAddress(ipAddress: host, port: port)
            return try await open(idleTimeout: idleTimeout, bootstrap: { bootstrap, initializer in
                try await bootstrap.bind(to: address, childChannelInitializer: initializer)
            })
        } catch {
            let shown = host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
            throw StartupError(description: "\(setting): cannot listen on \(shown): \(reason(error))")
        }
    }

    /// Serves a listening socket passed in by descriptor (systemd's socket activation); `serving`
    /// names what it is for in the error (`cannot serve HTTP on ...`).
    public static func open(descriptor: CInt, serving: String = "HTTP") async throws -> Socket {
        do {
            return try await open(idleTimeout: idleTimeout, bootstrap: { bootstrap, initializer in
                try await bootstrap.bind(descriptor, childChannelInitializer: initializer)
            })
        } catch {
            throw StartupError(description: "cannot serve \(serving) on the socket systemd passed (fd \(descriptor)): \(reason(error))")
        }
    }

    private static func open(
        idleTimeout: TimeAmount,
        bootstrap bind: (
            ServerBootstrap, @escaping @Sendable (any Channel) -> EventLoopFuture<Connection>
        ) async throws -> NIOAsyncChannel<Connection, Never>
    ) async throws -> Socket {
        let bootstrap = ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.backlog, value: 64)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
        let initializer: @Sendable (any Channel) -> EventLoopFuture<Connection> = { channel in
            channel.eventLoop.makeCompletedFuture {
                try channel.pipeline.syncOperations.addHandler(IdleStateHandler(allTimeout: idleTimeout))
                try channel.pipeline.syncOperations.configureHTTPServerPipeline()
                try channel.pipeline.syncOperations.addHandler(CloseWhenIdle())
                try channel.pipeline.syncOperations.addHandler(
                    HTTPResponseCompressor(initialByteBufferCapacity: 4096) { head, _ in
                        // Bodies worth compressing: the answers, not 304, 204, errors or HEAD's.
                        let marked = head.headers.contains(name: Self.noCompressionMarker)
                        head.headers.remove(name: Self.noCompressionMarker)
                        return head.status == .ok && !marked ? .compressIfPossible : .doNotCompress
                    })
                return try Connection(wrappingChannelSynchronously: channel)
            }
        }
        return Socket(try await bind(bootstrap, initializer))
    }

    /// Serves connections until cancelled (then closes the socket) or the socket fails.
    public func run() async throws {
        try await withThrowingDiscardingTaskGroup { group in
            try await self.socket.channel.executeThenClose { inbound in
                try await withTaskCancellationHandler {
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
                } onCancel: {
                    self.socket.channel.channel.close(promise: nil)
                }
            }
        }
    }

    private func admit() -> Bool {
        connections.withLockedValue { count in
            guard count < Self.maxConnections else { return false }
            count += 1
            return true
        }
    }

    /// Answers the requests of one connection, in order, until the client closes it (or asks for
    /// no keep-alive), or an answer fails after its head.
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
                        let writer = ConnectionWriter(outbound: outbound, request: head)
                        try await handler(HTTPRequest(method: head.method, uri: head.uri, headers: head.headers), writer)
                        if !head.isKeepAlive { return }
                    }
                }
            }
        } catch {
            logger.debug("HTTP connection ended", metadata: ["error": "\(error)"])
        }
    }

    /// What went wrong, as a person reads it: the errno's text for a system call's failure.
    public static func reason(_ error: any Error) -> String {
        if let error = error as? IOError { return String(cString: strerror(error.errnoCode)) }
        return "\(error)"
    }
}

/// The response writer of one request on a connection.
///
/// The head is held until the first piece of the body (or the end) and goes out with it, and a
/// whole answer goes out in one flush: the compressor then sees what it needs to set the
/// headers right (a whole answer's compressed length; chunked for a streamed one).
private final class ConnectionWriter: HTTPResponseWriter, @unchecked Sendable {
    let outbound: NIOAsyncChannelOutboundWriter<HTTPServerResponsePart>
    let request: HTTPRequestHead
    /// Only touched by the one task answering the request, one call at a time.
    private var pendingHead: HTTPResponseHead?

    init(outbound: NIOAsyncChannelOutboundWriter<HTTPServerResponsePart>, request: HTTPRequestHead) {
        self.outbound = outbound
        self.request = request
    }

    private func head(_ status: HTTPResponseStatus, _ headers: HTTPHeaders) -> HTTPResponseHead {
        var headers = headers
        if !request.isKeepAlive { headers.replaceOrAdd(name: "Connection", value: "close") }
        // An answer to HEAD has no body, so nothing to compress (the compressor would write
        // gzip's header and trailer as one).
        if request.method == .HEAD { headers.add(name: HTTPServer.noCompressionMarker, value: "1") }
        return HTTPResponseHead(version: request.version, status: status, headers: headers)
    }

    func writeHead(_ status: HTTPResponseStatus, _ headers: HTTPHeaders) async throws {
        pendingHead = head(status, headers)
    }

    func writeBody(_ bytes: ByteBuffer) async throws {
        if request.method == .HEAD { return }
        if let head = pendingHead {
            pendingHead = nil
            try await outbound.write(contentsOf: [.head(head), .body(.byteBuffer(bytes))])
        } else {
            try await outbound.write(.body(.byteBuffer(bytes)))
        }
    }

    func end() async throws {
        if let head = pendingHead {
            pendingHead = nil
            try await outbound.write(contentsOf: [.head(head), .end(nil)])
        } else {
            try await outbound.write(.end(nil))
        }
    }

    func writeResponse(_ status: HTTPResponseStatus, _ headers: HTTPHeaders, body: ByteBuffer) async throws {
        let head = head(status, headers)
        if request.method == .HEAD || body.readableBytes == 0 {
            try await outbound.write(contentsOf: [.head(head), .end(nil)])
        } else {
            try await outbound.write(contentsOf: [.head(head), .body(.byteBuffer(body)), .end(nil)])
        }
    }
}

/// Closes a connection that neither read nor wrote for the idle timeout (IdleStateHandler's event),
/// when the client is the one holding it up: it sends no request, or it does not read the answer
/// (the socket takes no more). While the server is still working out an answer it owes and the
/// socket would take it, the connection stays: a slow store (or a loaded machine) is no reason to
/// drop a request the client is waiting for.
private final class CloseWhenIdle: ChannelDuplexHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = HTTPServerRequestPart
    typealias OutboundIn = HTTPServerResponsePart
    typealias OutboundOut = HTTPServerResponsePart

    /// Requests whose answer has not ended yet (more than one when the client pipelines).
    private var owed = 0

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if case .head = unwrapInboundIn(data) { owed += 1 }
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        if case .end = unwrapOutboundIn(data) { owed = max(0, owed - 1) }
        context.write(data, promise: promise)
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if event is IdleStateHandler.IdleStateEvent {
            if owed == 0 || !context.channel.isWritable { context.close(promise: nil) }
        } else {
            context.fireUserInboundEventTriggered(event)
        }
    }
}
