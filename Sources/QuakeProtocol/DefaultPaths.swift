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
        if let first = Self.firstEntry(environment["STATE_DIRECTORY"]) { return first }
        if isRoot { return "/var/lib/quaked" }
        if let xdg = Self.absolute(environment["XDG_STATE_HOME"]) { return xdg + "/quaked" }
        return home + "/.local/state/quaked"
    }

    /// `$RUNTIME_DIRECTORY/quaked.sock`, else `/run/quaked/quaked.sock` as root, else
    /// `$XDG_RUNTIME_DIR/quaked/quaked.sock`, else `/tmp/quaked-<uid>/quaked.sock`.
    public var socketPath: String {
        if let first = Self.firstEntry(environment["RUNTIME_DIRECTORY"]) { return first + "/quaked.sock" }
        if isRoot { return "/run/quaked/quaked.sock" }
        if let xdg = Self.absolute(environment["XDG_RUNTIME_DIR"]) { return xdg + "/quaked/quaked.sock" }
        return "/tmp/quaked-\(getuid())/quaked.sock"
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
