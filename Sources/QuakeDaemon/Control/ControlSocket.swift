import Foundation
import Glibc
import Logging
import NIOCore
import NIOPosix
import Varlink

/// The listening Unix socket clients connect to: the one systemd passed (socket activation), or
/// one quaked binds itself.
///
/// Binding happens before the services start so that `READY=1` is only sent once the socket
/// listens, and so that a socket another quaked answers on is a start-up error, not a takeover.
public enum ControlSocket {
    /// Where the socket came from, for the log.
    public enum Origin: Sendable, Equatable {
        case activated(fd: CInt)
        case bound(path: String)
    }

    public struct StartupError: Error, CustomStringConvertible {
        public var description: String
    }

    /// Opens the listener. `activated` is the fd systemd passed, if any; otherwise the socket is
    /// bound at `path`, whose directory ``prepareDirectory(of:_:)`` has checked.
    public static func open(
        path: String, group: String?, activated: CInt?, limits: VarlinkServer.Limits = .init(),
        limitReplies: VarlinkServer.LimitReplies, logger: Logger
    ) async throws -> (VarlinkServer.Listener, Origin) {
        let bootstrap = ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.backlog, value: 256)
            // A client may send its call and shut down its side (socat does): still answer.
            .childChannelOption(.allowRemoteHalfClosure, value: true)
        let initializer: @Sendable (any NIOCore.Channel) -> EventLoopFuture<VarlinkServer.Connection> = {
            VarlinkServer.makeConnection($0, limits: limits, limitReplies: limitReplies)
        }
        if let fd = activated {
            let listener = try await bootstrap.bind(fd, childChannelInitializer: initializer)
            return (listener, .activated(fd: fd))
        }
        try prepare(path: path)
        let listener = try await bootstrap.bind(unixDomainSocketPath: path, childChannelInitializer: initializer)
        // 0660 and the configured group: only the daemon's user and the group may connect.
        chmod(path, 0o660)
        if let group {
            if let entry = getgrnam(group) {
                if chown(path, uid_t.max, entry.pointee.gr_gid) != 0 {
                    logger.warning(
                        "cannot give the socket to its group",
                        metadata: ["socket.path": "\(path)", "socket.group": "\(group)", "error": "\(errno)"])
                }
            } else {
                logger.notice(
                    "the socket group does not exist; only this user can connect",
                    metadata: ["socket.path": "\(path)", "socket.group": "\(group)"])
            }
        }
        return (listener, .bound(path: path))
    }

    /// Who chose the socket's directory, which decides what quaked asks of it before it binds.
    public struct Directory: Sendable, Equatable {
        public enum Rule: Sendable, Equatable {
            /// quaked's own default (`/tmp/quaked-<uid>`, `$XDG_RUNTIME_DIR/quaked`, `/run/quaked` as
            /// root), which it creates with `mode` when missing: the directory itself, not a symbolic
            /// link, owned by quaked's user and writable by nobody else.
            case own(mode: mode_t)
            /// Named by the configuration (`socket`) or by the service manager
            /// (`$RUNTIME_DIRECTORY`), and created (0755, with its parents) when missing: a
            /// directory, possibly through a symbolic link, owned by quaked's user or root, and
            /// writable by its group or others only when sticky (like `/tmp`).
            case given
        }

        public var rule: Rule
        /// Where the `socket` setting came from, for the error: `default`, `--socket`, ...
        public var source: String

        public init(rule: Rule, source: String) {
            self.rule = rule
            self.source = source
        }

        /// The rule for the socket of `resolved`.
        public init(_ resolved: ResolvedConfiguration) {
            let source = resolved.source(of: .socket)
            guard resolved.isDefault(.socket) else {
                self.init(rule: .given, source: source)
                return
            }
            switch resolved.defaults.socketBase {
            case .serviceManager: self.init(rule: .given, source: source)
            case .root: self.init(rule: .own(mode: 0o755), source: source)  // group members must reach the socket
            case .user, .fallback: self.init(rule: .own(mode: 0o700), source: source)
            }
        }
    }

    /// Makes sure the directory of the socket `path` exists and is safe to bind in, by `directory`'s
    /// rule. Throws ``ConfigurationError`` naming `socket` and the reason (quaked exits 78).
    ///
    /// Checked on the directory opened without following a link (`O_NOFOLLOW`, then `fstat`), so
    /// what is checked is what is there. The bind that follows goes by path: safe because the
    /// checked directory is writable only by quaked's user (or sticky, when given), so no one
    /// else can replace the socket in it.
    public static func prepareDirectory(of path: String, _ directory: Directory) throws {
        let dir = (path as NSString).deletingLastPathComponent
        func fail(_ problem: String) -> ConfigurationError {
            ConfigurationError(
                key: "socket", source: directory.source, problem: "the socket directory \(dir) \(problem)")
        }
        let me = geteuid()
        var info = stat()
        switch directory.rule {
        case .own(let mode):
            func notOwned(_ owner: uid_t) -> ConfigurationError {
                fail("is owned by \(user(owner)), not by quaked's user \(user(me)); remove it, or set socket")
            }
            let created = mkdir(dir, mode) == 0
            if !created, errno != EEXIST { throw fail("cannot be created: \(String(cString: strerror(errno)))") }
            let fd = Glibc.open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
            guard fd >= 0 else {
                let code = errno
                // Refused already; lstat only says why.
                guard lstat(dir, &info) == 0 else { throw fail("cannot be opened: \(String(cString: strerror(code)))") }
                switch info.st_mode & S_IFMT {
                case S_IFLNK: throw fail("is a symbolic link; remove it, or set socket")
                case S_IFDIR where info.st_uid != me: throw notOwned(info.st_uid)  // and unreadable
                case S_IFDIR: throw fail("cannot be opened: \(String(cString: strerror(code)))")
                default: throw fail("is not a directory; remove it, or set socket")
                }
            }
            defer { close(fd) }
            // The exact mode, whatever the umask (UMask=0077 would make /run/quaked 0700).
            if created, fchmod(fd, mode) != 0 { throw fail("cannot be given mode \(octal(mode))") }
            guard fstat(fd, &info) == 0 else { throw fail("cannot be examined: \(String(cString: strerror(errno)))") }
            guard info.st_uid == me else { throw notOwned(info.st_uid) }
            guard info.st_mode & 0o022 == 0 else {
                throw fail(
                    "is writable by its group or by others (mode \(octal(info.st_mode))); "
                        + "remove it or chmod go-w it, or set socket")
            }
        case .given:
            if stat(dir, &info) != 0 {
                guard errno == ENOENT else { throw fail("cannot be examined: \(String(cString: strerror(errno)))") }
                do {
                    try FileManager.default.createDirectory(
                        atPath: dir, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o755])
                } catch {
                    throw fail("cannot be created: \(error.localizedDescription)")
                }
                guard stat(dir, &info) == 0 else {
                    throw fail("cannot be examined: \(String(cString: strerror(errno)))")
                }
            }
            guard info.st_mode & S_IFMT == S_IFDIR else { throw fail("is not a directory") }
            guard info.st_uid == me || info.st_uid == 0 else {
                throw fail(
                    me == 0
                        ? "is owned by \(user(info.st_uid)), not by root, quaked's user"
                        : "is owned by \(user(info.st_uid)), neither quaked's user \(user(me)) nor root")
            }
            guard info.st_mode & 0o022 == 0 || info.st_mode & S_ISVTX != 0 else {
                throw fail(
                    "is writable by its group or by others and not sticky (mode \(octal(info.st_mode))): "
                        + "anyone who may write there could replace the socket")
            }
        }
    }

    /// `nobody (uid 65534)`, or `uid 4242` without a passwd entry.
    private static func user(_ uid: uid_t) -> String {
        guard let entry = getpwuid(uid), let name = entry.pointee.pw_name else { return "uid \(uid)" }
        return "\(String(cString: name)) (uid \(uid))"
    }

    private static func octal(_ mode: mode_t) -> String {
        "0" + String(mode & 0o7777, radix: 8)
    }

    /// Removes a stale socket file (nobody answers on it). Refuses when another process answers
    /// on the path. The directory is ``prepareDirectory(of:_:)``'s.
    static func prepare(path: String) throws {
        var info = stat()
        guard lstat(path, &info) == 0 else { return }  // nothing there
        guard (info.st_mode & S_IFMT) == S_IFSOCK else {
            throw StartupError(description: "\(path) exists and is not a socket; remove it or choose another --socket")
        }
        switch probe(path: path) {
        case .answers:
            throw StartupError(
                description: "another process (probably quaked) answers on \(path); stop it or choose another --socket")
        case .refused:
            unlink(path)  // a stale socket left by a process that died
        case .error(let code):
            throw StartupError(
                description: "cannot check the existing socket \(path): \(String(cString: strerror(code)))")
        }
    }

    enum Probe { case answers, refused, error(Int32) }

    static func probe(path: String) -> Probe {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return .error(errno) }
        defer { close(fd) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            let bytes = Array(path.utf8.prefix(raw.count - 1))
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        if result == 0 { return .answers }
        switch errno {
        case ECONNREFUSED, ENOENT: return .refused
        case EAGAIN: return .answers  // listening, backlog full
        case let code: return .error(code)
        }
    }
}
