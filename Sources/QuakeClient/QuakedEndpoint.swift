import Foundation

/// Where quaked is: its control socket on this machine, or a quaked on another host reached with
/// `ssh HOST quakectl bridge` (see ``SSHRoute``).
public enum QuakedEndpoint: Sendable, Hashable, CustomStringConvertible {
    case socket(String)
    case ssh(SSHRoute)

    public var description: String {
        switch self {
        case .socket(let path): path
        case .ssh(let route): route.description
        }
    }
}

/// How to reach a quaked on another host: `ssh [options] -- [USER@]HOST quakectl bridge
/// [--socket PATH]`, speaking Varlink over the ssh child's stdin and stdout. OpenSSH does the
/// transport and the authentication; quaked opens no network port.
///
/// - `QUAKECTL_SSH` replaces `ssh`: a program and its first arguments, split on whitespace and run
///   without a shell (`QUAKECTL_SSH="ssh -p 2222 -i /path/key"`; a path with spaces needs a
///   wrapper script). quakectl adds its own options, `--`, the host and the remote command after them.
/// - `QUAKECTL_REMOTE` replaces `quakectl` in the remote command (`/usr/local/bin/quakectl`); like
///   every ssh remote command it is run by the remote user's shell, so it is written in that shell's
///   syntax. The remote `--socket` path is quoted for it.
/// - `BatchMode=yes` (no password or passphrase prompts, no host-key questions: ssh fails
///   instead) unless quakectl's standard input is a terminal, where ssh may ask on /dev/tty.
public struct SSHRoute: Sendable, Hashable, CustomStringConvertible {
    /// `[USER@]HOST`, as ssh takes it (a `Host` alias of ssh_config works too).
    public var destination: String
    /// The socket the remote bridge connects to; nil for the remote quakectl's default.
    public var remoteSocket: String?
    /// The ssh program and its first arguments (`QUAKECTL_SSH`, else `ssh`).
    public var sshCommand: [String]
    /// The remote quakectl, in the remote shell's syntax (`QUAKECTL_REMOTE`, else `quakectl`).
    public var remoteCommand: String
    /// Adds `-o BatchMode=yes`.
    public var batchMode: Bool
    /// Discards ssh's stderr instead of passing it through (the watch loop's retries during an
    /// outage it has already reported).
    public var quiet = false

    /// A destination quakectl refuses before running ssh.
    public struct InvalidDestination: Error, Sendable, Hashable, CustomStringConvertible {
        public var destination: String
        public var reason: String
        public var description: String { "invalid --host \(destination.debugDescription): \(reason)" }
    }

    public init(
        destination: String, remoteSocket: String? = nil,
        environment: [String: String] = ProcessInfo.processInfo.environment,
        interactive: Bool = isatty(STDIN_FILENO) != 0
    ) throws {
        try Self.validate(destination: destination)
        self.destination = destination
        self.remoteSocket = remoteSocket
        let ssh = (environment["QUAKECTL_SSH"] ?? "").split(whereSeparator: \.isWhitespace).map(String.init)
        self.sshCommand = ssh.isEmpty ? ["ssh"] : ssh
        let remote = (environment["QUAKECTL_REMOTE"] ?? "").trimmingCharacters(in: .whitespaces)
        self.remoteCommand = remote.isEmpty ? "quakectl" : remote
        self.batchMode = !interactive
    }

    /// Refuses what ssh would take for an option (option injection: `-oProxyCommand=...`) or
    /// could not mean a host.
    public static func validate(destination: String) throws {
        func invalid(_ reason: String) -> InvalidDestination {
            InvalidDestination(destination: destination, reason: reason)
        }
        if destination.isEmpty { throw invalid("it is empty") }
        if destination.hasPrefix("-") { throw invalid("a host cannot start with '-'") }
        if destination.unicodeScalars.contains(where: { $0.properties.isWhitespace || $0.value < 0x20 || $0.value == 0x7F }) {
            throw invalid("a host cannot contain spaces or control characters")
        }
        if destination.hasSuffix("@") || destination.hasPrefix("@") { throw invalid("expected [USER@]HOST") }
    }

    /// The command the remote shell runs: `quakectl bridge [--socket 'PATH']`.
    public var remoteCommandLine: String {
        var line = "\(remoteCommand) bridge"
        if let remoteSocket { line += " --socket " + Self.shellQuoted(remoteSocket) }
        return line
    }

    /// The ssh program (the first word of ``sshCommand``).
    public var program: String { sshCommand[0] }

    /// Everything after the program: its own first arguments, quakectl's options, `--`, the
    /// destination and the remote command line (one argument; ssh hands it to the remote shell).
    public var arguments: [String] {
        // -T: no terminal (a pty would mangle the bytes); -x, -a: no X11 or agent forwarding, which
        // a Varlink pipe never needs, whatever ssh_config says for the host.
        var arguments = Array(sshCommand.dropFirst()) + ["-T", "-x", "-a"]
        if batchMode { arguments += ["-o", "BatchMode=yes"] }
        return arguments + ["--", destination, remoteCommandLine]
    }

    public var description: String {
        remoteSocket.map { destination + ":" + $0 } ?? destination
    }

    /// `text` in single quotes for a POSIX shell.
    static func shellQuoted(_ text: String) -> String {
        "'" + text.replacingOccurrences(of: "'", with: "'\\''") + "'"
    }
}
