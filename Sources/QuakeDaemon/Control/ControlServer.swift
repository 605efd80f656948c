import Foundation
import Logging
import NIOCore
import QuakeVarlink
import ServiceLifecycle
import Synchronization

/// Serves Varlink on the control socket: one child task per connection, so one client never
/// delays another or the importer. Stops accepting on graceful shutdown.
public final class ControlServer: Service, Sendable {
    public struct Limits: Sendable {
        /// Connections served at once; one more is answered TooManyConnections and closed.
        public var maxConnections = 4096
        /// A client whose socket does not take a reply within this time is disconnected: a
        /// subscriber or a snapshot reader that stopped reading holds no memory, no read
        /// transaction and no task for longer.
        public var writeTimeout: Duration = .seconds(10)
        public init() {}
    }

    private let listener: ControlSocket.Listener
    private let methods: any ControlMethods
    private let logger: Logger
    private let origin: ControlSocket.Origin
    private let limits: Limits
    private let connections = Mutex(0)

    public init(
        listener: ControlSocket.Listener, origin: ControlSocket.Origin, methods: any ControlMethods,
        limits: Limits = .init(),
        logger: Logger
    ) {
        self.listener = listener
        self.origin = origin
        self.methods = methods
        self.limits = limits
        self.logger = logger
    }

    public func run() async throws {
        defer {
            // A socket we bound ourselves goes with us; one systemd passed stays systemd's.
            if case .bound(let path) = origin { unlink(path) }
        }
        do {
            try await cancelWhenGracefulShutdown {
                try await withThrowingDiscardingTaskGroup { group in
                    try await self.listener.executeThenClose { inbound in
                        for try await connection in inbound {
                            group.addTask { await self.serve(connection) }
                        }
                    }
                }
            }
        } catch is CancellationError {
            // Graceful shutdown: open connections were cancelled with the group.
        }
    }

    private func serve(_ connection: ControlSocket.Connection) async {
        let admitted = connections.withLock { count in
            guard count < limits.maxConnections else { return false }
            count += 1
            return true
        }
        defer { if admitted { connections.withLock { $0 -= 1 } } }
        var logger = self.logger
        logger[metadataKey: "peer"] = "\(connection.peer.map { "\($0)" } ?? "unknown")"
        do {
            try await connection.channel.executeThenClose { inbound, outbound in
                let writeTimeout = limits.writeTimeout
                let logger = logger
                let reply: @Sendable (VarlinkReply) async throws -> Void = { message in
                    let bytes = ByteBuffer(bytes: try message.frame())
                    do {
                        try await withTimeout(writeTimeout) { try await outbound.write(bytes) }
                    } catch is TimedOut {
                        logger.notice("disconnecting a client that stopped reading its replies")
                        throw TimedOut()
                    }
                }
                guard admitted else {
                    try await reply(
                        Self.error("io.quaked.TooManyConnections", ["limit": .number(Double(limits.maxConnections))]))
                    return
                }
                // Oversized and never-ending messages never get here: MessageLimitsHandler answers
                // and closes first.
                for try await frame in inbound {
                    let call: VarlinkCall
                    do {
                        call = try VarlinkCoding.decoder().decode(
                            VarlinkCall.self, from: Data(frame.readableBytesView))
                    } catch {
                        // Not a call: say so; the connection stays usable.
                        try await reply(
                            Self.error(VarlinkErrorName.invalidParameter, ["parameter": .string("message")]))
                        continue
                    }
                    let noReply: @Sendable (VarlinkReply) async throws -> Void = { _ in }
                    try await methods.handle(
                        call, peer: connection.peer, reply: call.oneway == true ? noReply : reply)
                }
            }
        } catch {
            logger.debug("connection ended", metadata: ["error": "\(error)"])
        }
    }

    static func error(_ name: String, _ parameters: [String: JSONValue] = [:]) -> VarlinkReply {
        VarlinkReply(parameters: .object(parameters), error: name)
    }
}

/// Answers Varlink calls. `reply` writes one reply; a call with `more` may get several.
public protocol ControlMethods: Sendable {
    func handle(
        _ call: VarlinkCall, peer: PeerCredentials?, reply: @escaping @Sendable (VarlinkReply) async throws -> Void
    ) async throws
}
