import CSystemd
import Glibc

/// Sockets passed by systemd socket activation (`sd_listen_fds(3)`).
///
/// The `LISTEN_*` variables are unset when read so that child processes do not mistake the
/// sockets for their own; therefore read them ONCE, early, and keep the result.
public enum SocketActivation {
    /// One passed socket: its descriptor and its `FileDescriptorName=` (systemd's default is
    /// the socket unit's name; `"unknown"` when no names were passed).
    public struct Socket: Sendable, Hashable {
        public var fileDescriptor: CInt
        public var name: String

        public init(fileDescriptor: CInt, name: String) {
            self.fileDescriptor = fileDescriptor
            self.name = name
        }
    }

    /// The passed descriptors, starting at `SD_LISTEN_FDS_START` (3); empty when not
    /// socket-activated. The descriptors are marked close-on-exec.
    public static func listenFileDescriptors() -> [CInt] {
        listenSockets().map(\.fileDescriptor)
    }

    /// The passed descriptors with their names (`LISTEN_FDNAMES`); empty when not socket-activated.
    public static func listenSockets() -> [Socket] {
        var names: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = nil
        let count = sd_listen_fds_with_names(1, &names)
        defer {
            // sd_listen_fds_with_names allocates a NULL-terminated strv.
            if let names {
                var index = 0
                while let name = names[index] {
                    free(name)
                    index += 1
                }
                free(names)
            }
        }
        guard count > 0 else { return [] }
        return (0..<Int(count)).map { index in
            let name = names?[index].map { String(cString: $0) } ?? "unknown"
            return Socket(fileDescriptor: CInt(SD_LISTEN_FDS_START) + CInt(index), name: name)
        }
    }

    /// Whether `fd` is a listening `AF_UNIX` `SOCK_STREAM` socket (what a `ListenStream=/path`
    /// socket unit with `Accept=no` passes).
    public static func isUnixStreamSocket(_ fd: CInt) -> Bool {
        sd_is_socket_unix(fd, CInt(SOCK_STREAM.rawValue), 1, nil, 0) > 0
    }
}
