import Foundation
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

    /// Opens the listener. `activated` is the fd systemd passed, if any.
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

    /// Creates the socket's directory and removes a stale socket file (nobody answers on it).
    /// Refuses when another process answers on the path.
    static func prepare(path: String) throws {
        let directory = (path as NSString).deletingLastPathComponent
        do {
            try FileManager.default.createDirectory(
                atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o755])
        } catch {
            throw StartupError(
                description: "cannot create the socket directory \(directory): \(error.localizedDescription)")
        }
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
