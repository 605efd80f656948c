import Foundation
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import PostgresNIO

/// One connection of a sink, every request on which ends: with PostgreSQL's answer, with an
/// error when the connection closes, or, when no answer comes within the settings' reply timeout
/// (a stopped server, a black-holed network), by closing the connection, which rolls back
/// whatever transaction was open and fails the request.
///
/// Two hazards of postgres-nio it exists for:
/// - A request written after the channel has closed is dropped at the pipeline's head, and its
///   reply is awaited forever (postgres-nio writes it with no promise). That happens whenever
///   PostgreSQL dies between two requests of a step (a backend of a killed postmaster exits as
///   soon as it has answered one): the sink stalled in silence. Here every request is written
///   from the channel's event loop after checking that the channel is open, so it reaches
///   postgres-nio's handler, which answers it or fails it.
/// - A server that stops answering (SIGSTOP, a network that drops everything) leaves a request
///   waiting for as long as TCP does (hours): each request has a deadline.
final class PostgresLink: Sendable {
    let connection: PostgresConnection
    let settings: PostgresSettings
    private let logger: Logger
    /// Set when a deadline closed the connection.
    private let abandoned = NIOLockedValueBox<String?>(nil)

    private init(connection: PostgresConnection, settings: PostgresSettings, logger: Logger) {
        self.connection = connection
        self.settings = settings
        self.logger = logger
    }

    /// The connection closed before a request could be written.
    struct Closed: Error {}

    /// Why the connection was closed by a deadline ("the COMMIT"), when it was.
    var abandonedDuring: String? { abandoned.withLockedValue { $0 } }

    var isClosed: Bool { connection.isClosed }

    /// Connects and logs in, within `connect_timeout` (postgres-nio's deadline covers the TCP
    /// connection and the startup, so a server that accepts and never answers fails it too).
    /// Over TCP the socket gets the settings' keepalive options.
    static func connect(_ settings: PostgresSettings, id: Int, logger: Logger) async throws -> PostgresLink {
        let configuration = try settings.configuration()
        let loop = MultiThreadedEventLoopGroup.singleton.next()
        let connection: PostgresConnection
        if settings.unixSocketPath == nil {
            let channel: any Channel
            do {
                channel = try await keepaliveBootstrap(settings, on: loop).connect(host: settings.host, port: settings.port).get()
            } catch {
                throw PostgresSinkError("cannot connect to PostgreSQL at \(settings.redacted): \(error)")
            }
            var established = PostgresConnection.Configuration(
                establishedChannel: channel, tls: configuration.tls, username: configuration.username,
                password: configuration.password, database: configuration.database)
            established.options = configuration.options
            if established.options.tlsServerName == nil, !settings.hostIsAddress {
                established.options.tlsServerName = settings.host
            }
            do {
                connection = try await PostgresConnection.connect(
                    on: channel.eventLoop, configuration: established, id: id, logger: logger)
            } catch {
                try? await channel.close()
                throw error
            }
        } else {
            connection = try await PostgresConnection.connect(on: loop, configuration: configuration, id: id, logger: logger)
        }
        return PostgresLink(connection: connection, settings: settings, logger: logger)
    }

    /// A TCP bootstrap whose sockets have SO_KEEPALIVE with TCP_KEEPIDLE, TCP_KEEPINTVL and
    /// TCP_KEEPCNT (libpq's keepalives parameters), and TCP_NODELAY as postgres-nio sets it.
    static func keepaliveBootstrap(_ settings: PostgresSettings, on loop: any EventLoop) -> ClientBootstrap {
        var bootstrap = ClientBootstrap(group: loop)
            .connectTimeout(.seconds(Int64(settings.connectTimeout)))
            .channelOption(ChannelOptions.socketOption(.tcp_nodelay), value: 1)
        if settings.keepalives {
            func tcp(_ name: Int32) -> ChannelOptions.Types.SocketOption {
                ChannelOptions.Types.SocketOption(level: .tcp, name: NIOBSDSocket.Option(rawValue: name))
            }
            bootstrap = bootstrap
                .channelOption(ChannelOptions.socketOption(.so_keepalive), value: 1)
                .channelOption(tcp(Int32(TCP_KEEPIDLE)), value: SocketOptionValue(settings.keepalivesIdle))
                .channelOption(tcp(Int32(TCP_KEEPINTVL)), value: SocketOptionValue(settings.keepalivesInterval))
                .channelOption(tcp(Int32(TCP_KEEPCNT)), value: SocketOptionValue(settings.keepalivesCount))
        }
        return bootstrap
    }

    /// Runs `query` and collects its rows.
    @discardableResult
    func query(_ query: PostgresQuery, _ what: @autoclosure () -> String = "a query") async throws -> PostgresQueryResult {
        let connection = connection
        let logger = logger
        let loop = connection.eventLoop
        let what = what()
        let future = loop.flatSubmit { () -> EventLoopFuture<PostgresQueryResult> in
            // On the event loop, an open channel still has postgres-nio's handler (it goes after
            // the channel is inactive), so the request cannot be dropped unanswered.
            guard !connection.isClosed else { return loop.makeFailedFuture(Closed()) }
            let result = connection.query(query, logger: logger)
            self.bound(result, what: what)
            return result
        }
        return try await future.get()
    }

    /// `operation` (a COPY's start, write or end), which fails once the connection closes, and
    /// closes it when it takes longer than the reply timeout.
    func guarded<T: Sendable>(_ what: String, _ operation: @escaping @Sendable () async throws -> T) async throws -> T {
        let (closing, signal) = AsyncStream<Void>.makeStream()
        connection.closeFuture.whenComplete { _ in
            signal.yield()
            signal.finish()
        }
        let finished = connection.eventLoop.makePromise(of: Void.self)
        bound(finished.futureResult, what: what)
        defer { finished.succeed(()) }
        return try await withThrowingTaskGroup(of: T?.self) { group in
            group.addTask { try await operation() }
            group.addTask {
                // An AsyncStream, not the future's get(), which a cancellation cannot end.
                for await _ in closing { break }
                if Task.isCancelled { return nil }
                throw Closed()
            }
            defer { group.cancelAll() }
            while let result = try await group.next() {
                if let result { return result }
            }
            throw Closed()
        }
    }

    /// Closes the connection when `future` has not completed within the reply timeout.
    private func bound<T>(_ future: EventLoopFuture<T>, what: String) {
        let connection = connection
        let abandoned = abandoned
        let timer = future.eventLoop.scheduleTask(in: .milliseconds(Int64(settings.replyTimeoutMilliseconds))) {
            abandoned.withLockedValue { $0 = $0 ?? what }
            // A hard close: postgres-nio fails the request in flight; PostgreSQL rolls back.
            let _: EventLoopFuture<Void> = connection.close()
        }
        future.whenComplete { _ in timer.cancel() }
    }

    func close() async {
        try? await connection.close()
    }
}
