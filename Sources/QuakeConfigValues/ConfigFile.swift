import Glibc

/// Reading the files the configuration names: quaked.conf itself (QuakeDaemon's
/// `ConfigurationLoader`) and a `prefer` line's polygon file.
package enum ConfigFile {
    /// Why ``readBytes(_:limit:)`` failed: the system's words (`No such file or directory`).
    package struct ReadFailure: Error {
        package var reason: String
    }

    /// The bytes of the file at `path`, read with plain `read(2)` (which `/dev/null` and named
    /// pipes allow too); at most `limit` of them, a longer file failing.
    package static func readBytes(_ path: String, limit: Int = .max) throws(ReadFailure) -> [UInt8] {
        func fail(_ code: Int32) -> ReadFailure { ReadFailure(reason: String(cString: strerror(code))) }
        let fd = Glibc.open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw fail(errno) }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while true {
            let count = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if count == 0 { break }
            if count < 0 {
                if errno == EINTR { continue }
                throw fail(errno)
            }
            guard bytes.count + count <= limit else {
                throw ReadFailure(reason: "the file is larger than \(ConfigValue.text(size: limit))")
            }
            bytes += buffer[..<count]
        }
        return bytes
    }
}
