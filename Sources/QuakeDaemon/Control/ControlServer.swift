import Foundation
import Logging
import NIOCore
import QuakeProtocol
import ServiceLifecycle
import Varlink

/// The control socket's service: serves io.quaked (and org.varlink.service) with the generic
/// ``VarlinkServer`` until graceful shutdown, and removes a socket file it bound itself.
public final class ControlServer: Service, Sendable {
    private let listener: VarlinkServer.Listener
    private let origin: ControlSocket.Origin
    private let server: VarlinkServer

    public init(
        listener: VarlinkServer.Listener, origin: ControlSocket.Origin, service: QuakedService,
        limits: VarlinkServer.Limits = .init(), logger: Logger, metrics: QuakedMetrics? = nil
    ) {
        self.listener = listener
        self.origin = origin
        // Its series (``CallMetrics``): every call it handles.
        var observer: (@Sendable (VarlinkServer.CallOutcome) -> Void)?
        if let metrics {
            let calls = CallMetrics(metrics)
            observer = { @Sendable outcome in calls.record(outcome) }
        }
        self.server = VarlinkServer(
            info: Self.info, interfaces: [IOQuaked.handler(service)], limits: limits, limitReplies: Self.limitReplies,
            logger: logger, callObserver: observer)
    }

    /// What org.varlink.service.GetInfo says of quaked.
    static let info = VarlinkServer.Info(
        vendor: "quaked", product: "quaked", version: QuakedVersion.string, url: "https://github.com/quaked/quaked")

    /// io.quaked's own errors for broken limits.
    public static let limitReplies = VarlinkServer.LimitReplies(
        messageTooLarge: { VarlinkReply.frame(error: IOQuaked.MessageTooLarge(limit: $0)) },
        messageTimeout: { VarlinkReply.frame(error: IOQuaked.MessageTimeout(seconds: $0)) },
        tooManyConnections: { VarlinkReply.frame(error: IOQuaked.TooManyConnections(limit: $0)) })

    public func run() async throws {
        defer {
            // A socket we bound ourselves goes with us; one systemd passed stays systemd's.
            if case .bound(let path) = origin { unlink(path) }
        }
        do {
            try await cancelWhenGracefulShutdown { try await self.server.serve(self.listener) }
        } catch is CancellationError {
            // Graceful shutdown: open connections were cancelled with the group.
        }
    }
}
