import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A blocking Unix stream socket client for tests: sends raw bytes, reads NUL-terminated
/// messages. Deliberately independent of quaked's own Varlink code, but for the typed calls of
/// UnixSocketClient+Varlink.swift, which write and read the generated types.
public final class UnixSocketClient: @unchecked Sendable {
    public let fd: Int32
    private var buffer: [UInt8] = []
    private var scratch = [UInt8](repeating: 0, count: 65536)
    /// Bytes of `buffer` already searched for a NUL: large replies are scanned once.
    private var scanned = 0

    public struct Failure: Error, CustomStringConvertible {
        public var description: String
    }

    public init(path: String) throws {
        fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw Failure(description: "socket: \(String(cString: strerror(errno)))") }
        let result = withUnixAddress(path) { connect(fd, $0, $1) }
        guard result == 0 else {
            // No close here: a class whose stored properties are all set runs its deinit when
            // its init throws, and that closes the socket. Closing it here as well closed the
            // descriptor twice; between the two, another thread's open could take the number,
            // so the second close closed another test's file (quaked's start polls this in a
            // loop: the intermittent "disk I/O error" and "no such table" of other suites).
            throw Failure(description: "connect \(path): \(String(cString: strerror(errno)))")
        }
    }

    /// The one place the socket is closed, also when init threw after making it.
    deinit { if fd >= 0 { close(fd) } }

    /// Whether something accepts connections on `path` now.
    public static func canConnect(_ path: String) -> Bool {
        (try? UnixSocketClient(path: path)) != nil
    }

    public func send(_ bytes: [UInt8]) throws {
        var offset = 0
        while offset < bytes.count {
            let n = bytes[offset...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard n > 0 else { throw Failure(description: "send: \(String(cString: strerror(errno)))") }
            offset += n
        }
    }

    /// Sends one message (the JSON text plus its NUL).
    public func send(_ json: String) throws {
        try send(Array(json.utf8) + [0])
    }

    /// Whether a whole message has been read from the socket and not yet returned (poll(2) on
    /// the socket does not see it).
    public var hasBufferedMessage: Bool { buffer[scanned...].contains(0) }

    /// Whether the socket has something to read, or its end, within `timeout` (at least 1 ms, at
    /// most 60 s). False when the wait times out or is interrupted.
    public func isReadable(within timeout: Duration) -> Bool {
        var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        let ms = Int32(min(timeout / .milliseconds(1), 60_000))
        return poll(&poller, 1, max(ms, 1)) > 0
    }

    /// The next NUL-terminated message as text; nil at EOF. Throws on timeout.
    public func receive(timeout: Duration = .seconds(10)) throws -> String? {
        try receiveBytes(timeout: timeout).map { String(decoding: $0, as: UTF8.self) }
    }

    /// The next NUL-terminated message's bytes (without the NUL); nil at EOF. Throws on timeout.
    public func receiveBytes(timeout: Duration = .seconds(10)) throws -> [UInt8]? {
        let deadline = ContinuousClock.now + timeout
        while true {
            if let nul = buffer[scanned...].firstIndex(of: 0) {
                let message = Array(buffer[..<nul])
                buffer.removeSubrange(...nul)
                scanned = 0
                return message
            }
            scanned = buffer.count
            let remaining = deadline - ContinuousClock.now
            guard remaining > .zero else { throw Failure(description: "no reply in time") }
            guard isReadable(within: remaining) else { continue }
            // Into one scratch buffer made once per client, then only the bytes read are copied:
            // no chunk to allocate and zero per read (the protocol benchmark reads from 1,000
            // sockets per notification).
            var failure: Int32 = 0
            let n = scratch.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n < 0 { failure = errno }
            if n == 0 { return nil }
            guard n > 0 else { throw Failure(description: "recv: \(String(cString: strerror(failure)))") }
            buffer += scratch[..<n]
        }
    }

    /// One call, one reply, decoded as a JSON object.
    public func call(_ method: String, _ parameters: [String: Any] = [:], timeout: Duration = .seconds(30)) throws
        -> [String: Any]
    {
        let object: [String: Any] = ["method": method, "parameters": parameters]
        let data = try JSONSerialization.data(withJSONObject: object)
        try send(Array(data) + [0])
        guard let reply = try receive(timeout: timeout) else { throw Failure(description: "connection closed") }
        guard let decoded = try JSONSerialization.jsonObject(with: Data(reply.utf8)) as? [String: Any] else {
            throw Failure(description: "reply is not an object: \(reply)")
        }
        return decoded
    }
}

/// Calls `body` with the `sockaddr_un` of `path` (cut to what fits) and its length.
public func withUnixAddress<T>(_ path: String, _ body: (UnsafePointer<sockaddr>, socklen_t) -> T) -> T {
    var address = sockaddr_un()
    address.sun_family = sa_family_t(AF_UNIX)
    withUnsafeMutableBytes(of: &address.sun_path) { raw in
        let bytes = Array(path.utf8.prefix(raw.count - 1))
        raw.copyBytes(from: bytes)
        raw[bytes.count] = 0
    }
    return withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
    }
}

/// A Unix socket of `type` (SOCK_STREAM, SOCK_DGRAM) bound at `path` (an old file there is
/// removed first); its descriptor.
public func boundUnixSocket(_ path: String, type: Int32) throws -> Int32 {
    unlink(path)
    let fd = socket(AF_UNIX, type, 0)
    guard fd >= 0, withUnixAddress(path, { bind(fd, $0, $1) }) == 0 else {
        let failure = String(cString: strerror(errno))
        if fd >= 0 { close(fd) }
        throw UnixSocketClient.Failure(description: "bind \(path): \(failure)")
    }
    return fd
}

/// Runs blocking work (socket reads that wait on a server) on a thread of its own, off Swift's
/// cooperative pool, so that in-process async servers (``FeedTestServer``) keep running meanwhile.
///
/// Not on Dispatch's global queue: on Linux its pool runs as many blocks as there are processors
/// and adds a thread about once a second when they block. With a few long blocking loops at once
/// (a client that abandons 4,000 subscriptions, one that commits, three that read), the next block
/// waited seconds to start: on 2 cores under AddressSanitizer, live subscribers that were meant to
/// read went unread past quaked's 10 s write timeout and were disconnected (CI at stop 36).
public func onBlockingThread<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        let thread = Thread {
            continuation.resume(with: Result { try body() })
        }
        thread.name = "onBlockingThread"
        thread.start()
    }
}
