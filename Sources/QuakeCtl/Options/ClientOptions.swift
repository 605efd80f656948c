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

    @Flag(name: .long, help: "Print JSON for scripts: one object, or one object per line for streams.")
    public var json = false

    @Flag(name: .long, help: "Print absolute times instead of relative ones (\"3 minutes ago\").")
    public var absolute = false

    public init() {}

    /// `--socket`, else `$QUAKED_SOCKET`, else the daemon's default for this user.
    public var socketPath: String { socket ?? SocketPath().resolved }

    /// How to print on this terminal (or pipe).
    public var style: OutputStyle { OutputStyle.detect(json: json, absoluteTimes: absolute) }

    /// Connects to the daemon, mapping failures to exit codes 69 and 77.
    public func connect() async throws -> QuakedConnection {
        try await QuakedConnection.connect(to: socketPath)
    }
}
