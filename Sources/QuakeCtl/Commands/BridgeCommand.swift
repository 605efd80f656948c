import QuakeClient
import QuakeProtocol
import ArgumentParser
import Foundation

/// `quakectl bridge`: standard input and output to quaked's socket, for `quakectl --host`.
public struct BridgeCommand: AsyncParsableCommand {
    public static let configuration = CommandConfiguration(
        commandName: "bridge",
        abstract: "Connect standard input and output to quaked's socket (what `quakectl --host` runs over ssh).",
        discussion: """
            Copies bytes both ways, as they come, between standard input and output and quaked's \
            control socket, until quaked closes the connection; when standard input ends first, \
            the replies still due are copied, then quaked closes. `quakectl --host HOST` runs \
            `ssh HOST quakectl bridge`, which makes the bridge a Varlink connection to that \
            host's quaked. Exit status: 0 when quaked closed the connection after a whole \
            message, 69 when its socket cannot be reached, 77 when permission is denied, 1 when \
            the connection broke.
            """)

    @Option(
        name: .long,
        help: ArgumentHelp(
            "quaked's control socket. Default: $QUAKED_SOCKET, else quaked's default for this user.", valueName: "path")
    )
    public var socket: String?

    public init() {}

    public func run() async throws {
        let path = socket ?? SocketPath().resolved
        do {
            try await StdioBridge.run(socketPath: path)
        } catch {
            // Under ssh this message travels back to the other host's quakectl: say where it is from.
            let failure = QuakectlError.from(error)
            throw QuakectlError(failure.exitCode, "bridge on \(Self.hostName): \(failure.message)")
        }
    }

    static var hostName: String {
        var name = [CChar](repeating: 0, count: 256)
        guard gethostname(&name, name.count - 1) == 0 else { return "this host" }
        return String(decoding: name.prefix(while: { $0 != 0 }).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
