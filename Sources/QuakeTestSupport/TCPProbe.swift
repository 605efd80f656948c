import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A plain TCP connection to 127.0.0.1, for clients an HTTP library will not be: one that sends
/// garbage, holds a connection open, goes over a limit, or stops reading.
public final class TCPProbe {
    private var descriptor: Int32

    /// `receiveBufferSize`: a small receive buffer (SO_RCVBUF), so that a server writing to a
    /// probe that does not read meets back pressure early.
    public init(port: Int, receiveBufferSize: Int32? = nil) throws {
        descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { throw POSIXError(.init(rawValue: errno) ?? .EIO) }
        if var size = receiveBufferSize {
            setsockopt(descriptor, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let status = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard status == 0 else {
            let error = errno
            // Closed once, and marked closed: a class whose stored properties are all set runs
            // its deinit when its init throws, and the deinit closes too. Closing here without
            // marking it closed the number twice; between the two, another thread could take
            // the number (an accepted connection), so the second close closed that socket
            // under its event loop (NIO: "unacceptable errno 9 Bad file descriptor in
            // epoll_ctl", the test process killed).
            close()
            throw POSIXError(.init(rawValue: error) ?? .EIO)
        }
    }

    deinit { close() }

    /// Sends all of `text` (a closed peer is an error, never SIGPIPE).
    public func send(_ text: String) throws {
        let bytes = Array(text.utf8)
        var sent = 0
        while sent < bytes.count {
            let n = bytes[sent...].withUnsafeBytes { Glibc.send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard n > 0 else { throw POSIXError(.init(rawValue: errno) ?? .EIO) }
            sent += n
        }
    }

    /// One read of at most `count` bytes, waiting up to 60 s without blocking a thread (a server
    /// under test may run on the same cooperative pool); empty at end of file, or when the peer
    /// reset the connection.
    public func receive(upTo count: Int) async throws -> [UInt8] {
        // Generous: CI runs every suite at once on two cores.
        let deadline = ContinuousClock.now + .seconds(60)
        var buffer = [UInt8](repeating: 0, count: count)
        while true {
            let n = buffer.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, count, Int32(MSG_DONTWAIT)) }
            if n >= 0 { return Array(buffer.prefix(n)) }
            let error = errno
            if error == ECONNRESET { return [] }
            guard error == EAGAIN || error == EWOULDBLOCK, ContinuousClock.now < deadline else {
                throw POSIXError(.init(rawValue: error) ?? .EIO)
            }
            try await Task.sleep(for: .milliseconds(10))
        }
    }

    public func close() {
        if descriptor >= 0 {
            Glibc.close(descriptor)
            descriptor = -1
        }
    }
}
