import Foundation

/// Where quaked keeps its state and its socket when nothing is configured: the one rule both
/// the daemon and quakectl use (hence it lives here, with the protocol).
///
/// As a systemd service the directories systemd made (`$STATE_DIRECTORY`, `$RUNTIME_DIRECTORY`);
/// as root the FHS locations; otherwise the XDG base directories of the user, so that
/// `swift run quaked` works with no configuration and no privileges.
public struct DefaultPaths: Sendable {
    public var environment: [String: String]
    public var isRoot: Bool
    public var home: String

    public init(
        environment: [String: String] = ProcessInfo.processInfo.environment, isRoot: Bool = geteuid() == 0,
        home: String = NSHomeDirectory()
    ) {
        self.environment = environment
        self.isRoot = isRoot
        self.home = home
    }

    /// `$STATE_DIRECTORY` (its first entry), else `/var/lib/quaked` as root, else
    /// `$XDG_STATE_HOME/quaked`, else `~/.local/state/quaked`.
    public var stateDirectory: String {
        switch stateDirectoryBase {
        case .serviceManager: return Self.firstEntry(environment["STATE_DIRECTORY"])!
        case .root: return "/var/lib/quaked"
        case .user: return Self.absolute(environment["XDG_STATE_HOME"])! + "/quaked"
        case .fallback: return home + "/.local/state/quaked"
        }
    }

    /// Which rule gives ``stateDirectory``.
    public var stateDirectoryBase: Base {
        if Self.firstEntry(environment["STATE_DIRECTORY"]) != nil { return .serviceManager }
        if isRoot { return .root }
        if Self.absolute(environment["XDG_STATE_HOME"]) != nil { return .user }
        return .fallback
    }

    /// `$RUNTIME_DIRECTORY/quaked.sock`, else `/run/quaked/quaked.sock` as root, else
    /// `$XDG_RUNTIME_DIR/quaked/quaked.sock`, else `/tmp/quaked-<uid>/quaked.sock`.
    public var socketPath: String {
        switch socketBase {
        case .serviceManager: return Self.firstEntry(environment["RUNTIME_DIRECTORY"])! + "/quaked.sock"
        case .root: return "/run/quaked/quaked.sock"
        case .user: return Self.absolute(environment["XDG_RUNTIME_DIR"])! + "/quaked/quaked.sock"
        case .fallback: return "/tmp/quaked-\(getuid())/quaked.sock"
        }
    }

    /// Which rule gives ``socketPath``. Only with `.serviceManager` did someone other than quaked
    /// choose the socket's directory; the daemon holds the others to stricter rules.
    public var socketBase: Base {
        if Self.firstEntry(environment["RUNTIME_DIRECTORY"]) != nil { return .serviceManager }
        if isRoot { return .root }
        if Self.absolute(environment["XDG_RUNTIME_DIR"]) != nil { return .user }
        return .fallback
    }

    /// The rules behind a default, in the order they are tried.
    public enum Base: Sendable, Equatable {
        /// systemd's `$STATE_DIRECTORY` or `$RUNTIME_DIRECTORY`.
        case serviceManager
        /// The FHS locations, as root.
        case root
        /// `$XDG_STATE_HOME` or `$XDG_RUNTIME_DIR`.
        case user
        /// `~/.local/state/quaked`, or `/tmp/quaked-<uid>` without `$XDG_RUNTIME_DIR`.
        case fallback
    }

    /// systemd passes several directories separated by colons.
    private static func firstEntry(_ value: String?) -> String? {
        value?.split(separator: ":").first.map(String.init).flatMap(absolute)
    }

    /// XDG says relative paths are invalid and must be ignored.
    private static func absolute(_ value: String?) -> String? {
        guard let value, value.hasPrefix("/") else { return nil }
        return value
    }
}
