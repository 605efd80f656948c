import QuakeClient
import QuakeProtocol
import ArgumentParser

/// Options every command takes: where the daemon is and how to print.
public struct ClientOptions: ParsableArguments, Sendable {
    @Option(
        name: .long,
        help: ArgumentHelp(
            "quaked's control socket. Default: $QUAKED_SOCKET, else quaked's default for this user.", valueName: "path")
    )
    public var socket: String?

    @Option(
        name: .long,
        help: ArgumentHelp(
            "quaked on another host (HOST or USER@HOST), through `ssh HOST quakectl bridge`; --socket then names the socket there.",
            valueName: "host"))
    public var host: String?

    @Flag(name: .long, help: "Print JSON for scripts: one object, or one object per line for streams.")
    public var json = false

    @Flag(name: .long, help: "Print absolute times instead of relative ones (\"3 minutes ago\").")
    public var absolute = false

    public init() {}

    public func validate() throws {
        if let host {
            do {
                try SSHRoute.validate(destination: host)
            } catch let error as SSHRoute.InvalidDestination {
                throw ValidationError("--host \(host.debugDescription): \(error.reason).")
            }
        }
    }

    /// `--socket`, else `$QUAKED_SOCKET`, else the daemon's default for this user.
    public var socketPath: String { socket ?? SocketPath().resolved }

    /// Where quaked is: over ssh with `--host` (the remote bridge gets `--socket` when it was
    /// given, and otherwise finds its own default, not this machine's `$QUAKED_SOCKET`), else the
    /// local socket.
    public var endpoint: QuakedEndpoint {
        get throws {
            guard let host else { return .socket(socketPath) }
            return .ssh(try SSHRoute(destination: host, remoteSocket: socket))
        }
    }

    /// How to print on this terminal (or pipe).
    public var style: OutputStyle { OutputStyle.detect(json: json, absoluteTimes: absolute) }

    /// Connects, runs `body` and closes the connection (see ``QuakedConnection/with(_:_:)``).
    /// Through ssh, a stop signal sent to quakectl meanwhile is passed on to ssh first
    /// (``SSHSignalForwarding``).
    public func withConnection<T: Sendable>(_ body: (QuakedConnection) async throws -> T) async throws -> T {
        try await QuakedConnection.with(try endpoint) { connection in
            try await SSHSignalForwarding.during(connection) { try await body(connection) }
        }
    }
}
