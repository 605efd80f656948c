import QuakeClient
import QuakeProtocol
import Foundation
import Varlink

/// Where quakectl looks for quaked's control socket when `--socket` is not given.
///
/// `$QUAKED_SOCKET` first; then the daemon's own default rule (``DefaultPaths``, shared with
/// the daemon through QuakeVarlink). As a plain user whose per-user socket does not exist, the system
/// socket `/run/quaked/quaked.sock` is used when it exists, so quakectl finds a system daemon too.
public struct SocketPath: Sendable {
    public var environment: [String: String]
    public var isRoot: Bool
    public var fileExists: @Sendable (String) -> Bool

    public static let systemSocket = "/run/quaked/quaked.sock"

    public init(
        environment: [String: String] = ProcessInfo.processInfo.environment, isRoot: Bool = geteuid() == 0,
        fileExists: @escaping @Sendable (String) -> Bool = { FileManager.default.fileExists(atPath: $0) }
    ) {
        self.environment = environment
        self.isRoot = isRoot
        self.fileExists = fileExists
    }

    /// The socket to connect to.
    public var resolved: String {
        if let explicit = environment["QUAKED_SOCKET"], !explicit.isEmpty { return explicit }
        let own = daemonDefault
        if !isRoot, !fileExists(own), fileExists(Self.systemSocket) { return Self.systemSocket }
        return own
    }

    /// The daemon's own rule (``DefaultPaths/socketPath``): `$RUNTIME_DIRECTORY/quaked.sock`,
    /// else `/run/quaked/quaked.sock` as root, else `$XDG_RUNTIME_DIR/quaked/quaked.sock`, else
    /// `/tmp/quaked-<uid>/quaked.sock`.
    public var daemonDefault: String {
        DefaultPaths(environment: environment, isRoot: isRoot).socketPath
    }
}

/// Where `watch` and `list --cache` keep the local cache by default:
/// `$XDG_CACHE_HOME/quakectl/cache.sqlite`, else `~/.cache/quakectl/cache.sqlite`.
public enum CachePath {
    /// `$XDG_CACHE_HOME/quakectl/FILE`, else `~/.cache/quakectl/FILE`: `cache.sqlite` for watch and
    /// list, `map.sqlite` for map.
    public static func defaultPath(
        file: String = "cache.sqlite", environment: [String: String] = ProcessInfo.processInfo.environment
    ) -> String {
        if let xdg = environment["XDG_CACHE_HOME"], xdg.hasPrefix("/") { return xdg + "/quakectl/" + file }
        return NSHomeDirectory() + "/.cache/quakectl/" + file
    }
}
