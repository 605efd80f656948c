import Foundation
import Logging
import NIOCore
import QuakeVarlink
import ServiceLifecycle

/// Serves Varlink on the control socket: one child task per connection, so one client never
/// delays another. Stops accepting on graceful shutdown.
public final class ControlServer: Service, Sendable {
    private let listener: ControlSocket.Listener
    private let methods: ControlMethods
    private let logger: Logger
    private let origin: ControlSocket.Origin

    public init(listener: ControlSocket.Listener, origin: ControlSocket.Origin, methods: ControlMethods, logger: Logger) {
        self.listener = listener
        self.origin = origin
        self.methods = methods
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
        do {
            try await connection.executeThenClose { inbound, outbound in
                let reply: @Sendable (VarlinkReply) async throws -> Void = { message in
                    try await outbound.write(ByteBuffer(bytes: try VarlinkCoding.frame(message)))
                }
                do {
                    for try await frame in inbound {
                        let call: VarlinkCall
                        do {
                            call = try VarlinkCoding.decoder().decode(VarlinkCall.self, from: Data(frame.readableBytesView))
                        } catch {
                            // Not a call: say so; the connection stays usable.
                            try await reply(
                                VarlinkReply(
                                    parameters: .object(["parameter": .string("message")]),
                                    error: VarlinkErrorName.invalidParameter))
                            continue
                        }
                        let noReply: @Sendable (VarlinkReply) async throws -> Void = { _ in }
                        try await methods.handle(call, reply: call.oneway == true ? noReply : reply)
                    }
                } catch let error as NULFrameDecoder.MessageTooLarge {
                    // The stream is out of step after an oversized message: answer, then close.
                    try? await reply(
                        VarlinkReply(
                            parameters: .object(["limit": .number(Double(error.limit))]),
                            error: "io.quaked.MessageTooLarge"))
                }
            }
        } catch {
            logger.debug("connection ended", metadata: ["error": "\(error)"])
        }
    }
}

/// Answers Varlink calls. `reply` writes one reply; a call with `more` may get several.
public protocol ControlMethods: Sendable {
    func handle(_ call: VarlinkCall, reply: @escaping @Sendable (VarlinkReply) async throws -> Void) async throws
}
