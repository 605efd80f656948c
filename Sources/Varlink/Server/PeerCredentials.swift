import Foundation
import NIOCore

/// Who is connected: the peer process's credentials as the kernel reports them (SO_PEERCRED),
/// read once when the connection is accepted.
public struct PeerCredentials: Sendable, Hashable, CustomStringConvertible {
    public var pid: Int32
    public var uid: UInt32
    public var gid: UInt32

    public init(pid: Int32, uid: UInt32, gid: UInt32) {
        self.pid = pid
        self.uid = uid
        self.gid = gid
    }

    static func read(from channel: any Channel) -> EventLoopFuture<PeerCredentials?> {
        guard let provider = channel as? any SocketOptionProvider else {
            return channel.eventLoop.makeSucceededFuture(nil)
        }
        let future: EventLoopFuture<RawCredentials> = provider.unsafeGetSocketOption(
            level: SocketOptionLevel(SOL_SOCKET), name: SocketOptionName(SO_PEERCRED))
        return future.map { Optional(PeerCredentials(pid: $0.pid, uid: $0.uid, gid: $0.gid)) }.recover { _ in nil }
    }

    /// `struct ucred` from <sys/socket.h> (hidden behind _GNU_SOURCE in Swift's Glibc module).
    struct RawCredentials: Sendable {
        var pid: Int32 = 0
        var uid: UInt32 = 0
        var gid: UInt32 = 0
    }

    public var description: String { "pid \(pid) uid \(uid) gid \(gid)" }

    /// Whether this peer may call the privileged methods (Delete, Reload): root, the daemon's
    /// own user, or a member of `adminGroup` (primary group, or listed in the group database).
    public func isAdministrator(adminGroup: String?) -> Bool {
        if uid == 0 || uid == getuid() { return true }
        guard let adminGroup, let group = getgrnam(adminGroup) else { return false }
        let adminGID = group.pointee.gr_gid
        if gid == adminGID { return true }
        guard let user = getpwuid(uid) else { return false }
        var count: Int32 = 64
        var groups = [gid_t](repeating: 0, count: Int(count))
        if getgrouplist(user.pointee.pw_name, user.pointee.pw_gid, &groups, &count) < 0 {
            groups = [gid_t](repeating: 0, count: Int(count))
            guard getgrouplist(user.pointee.pw_name, user.pointee.pw_gid, &groups, &count) >= 0 else { return false }
        }
        return groups.prefix(Int(count)).contains(adminGID)
    }
}
