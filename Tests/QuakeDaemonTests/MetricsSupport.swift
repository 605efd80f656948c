import Foundation
import QuakeTestSupport
import Testing

/// Prometheus text as a test reads it: every sample by name and labels, and the families the
/// `# TYPE` lines declare. Strict enough to fail on a malformed line (promtool checks the rest).
struct Exposition: CustomStringConvertible {
    struct Sample {
        var name: String
        var labels: [String: String]
        var value: Double
    }

    let text: String
    private(set) var samples: [Sample] = []
    /// Family name → type (`counter`, `gauge`, `histogram`).
    private(set) var types: [String: String] = [:]

    struct Malformed: Error, CustomStringConvertible {
        var line: String
        var description: String { "not a sample line: \(line)" }
    }

    init(_ text: String) throws {
        self.text = text
        for line in text.split(separator: "\n") {
            if line.hasPrefix("# TYPE ") {
                let words = line.split(separator: " ")
                if words.count == 4 { types[String(words[2])] = String(words[3]) }
                continue
            }
            if line.hasPrefix("#") { continue }
            samples.append(try Self.sample(line))
        }
    }

    var description: String { text }

    /// The value of the one sample with exactly these labels, if there is one.
    func value(_ name: String, _ labels: [String: String] = [:]) -> Double? {
        samples.first { $0.name == name && $0.labels == labels }?.value
    }

    /// The samples of one name.
    func samples(_ name: String) -> [Sample] { samples.filter { $0.name == name } }

    private static func sample(_ line: Substring) throws -> Sample {
        var rest = line[...]
        let name = rest.prefix { $0.isLetter || $0.isNumber || $0 == "_" || $0 == ":" }
        rest = rest.dropFirst(name.count)
        var labels: [String: String] = [:]
        if rest.first == "{" {
            rest = rest.dropFirst()
            while rest.first != "}" {
                let key = rest.prefix { $0 != "=" }
                rest = rest.dropFirst(key.count)
                guard rest.hasPrefix("=\"") else { throw Malformed(line: String(line)) }
                rest = rest.dropFirst(2)
                var value = ""
                while let c = rest.first, c != "\"" {
                    rest = rest.dropFirst()
                    if c == "\\", let escaped = rest.first {
                        rest = rest.dropFirst()
                        value.append(escaped == "n" ? "\n" : escaped)
                    } else {
                        value.append(c)
                    }
                }
                guard rest.first == "\"" else { throw Malformed(line: String(line)) }
                rest = rest.dropFirst()
                labels[String(key)] = value
                if rest.first == "," { rest = rest.dropFirst() }
                guard !rest.isEmpty else { throw Malformed(line: String(line)) }
            }
            rest = rest.dropFirst()
        }
        guard rest.first == " ", let value = Double(rest.dropFirst().split(separator: " ").first ?? "") else {
            throw Malformed(line: String(line))
        }
        return Sample(name: String(name), labels: labels, value: value)
    }
}

/// Debian's promtool (package prometheus; scripts/install-deps installs it).
enum Promtool {
    static let path = "/usr/bin/promtool"
    static var isInstalled: Bool { FileManager.default.isExecutableFile(atPath: path) }

    /// `promtool check metrics` on `text` (it reads standard input): its status and what it said.
    /// It fails on malformed text and on lint problems (a missing HELP, a counter without
    /// `_total`, a non-base unit, ...).
    static func checkMetrics(_ text: String) async throws -> (status: Int32, output: String) {
        try await withTemporaryDirectory { dir in
            let file = dir.appendingPathComponent("metrics.txt")
            try Data(text.utf8).write(to: file)
            let result = try await ChildProcess.run("/bin/sh", ["-c", "exec \"$0\" check metrics < \"$1\"", path, file.path])
            return (result.status, result.stdout + result.stderr)
        }
    }

    static func checkRules(_ file: String) async throws -> (status: Int32, output: String) {
        let result = try await ChildProcess.run(path, ["check", "rules", file])
        return (result.status, result.stdout + result.stderr)
    }
}

/// A TCP port on 127.0.0.1 nobody listens on now (bound to port 0 and closed again). Or, with
/// `keepOpen`, the descriptor of a socket listening on it.
func loopbackPort(family: Int32 = AF_INET, keepOpen: Bool = false) throws -> (port: Int, fd: Int32?) {
    let fd = socket(family, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { throw POSIXError(.init(rawValue: errno) ?? .EIO) }
    var one: Int32 = 1
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
    var storage = sockaddr_storage()
    var length: socklen_t
    if family == AF_INET6 {
        var address = sockaddr_in6()
        address.sin6_family = sa_family_t(AF_INET6)
        address.sin6_addr = in6addr_loopback
        length = socklen_t(MemoryLayout<sockaddr_in6>.size)
        withUnsafeMutableBytes(of: &storage) { $0.copyBytes(from: withUnsafeBytes(of: address) { Array($0) }) }
    } else {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        length = socklen_t(MemoryLayout<sockaddr_in>.size)
        withUnsafeMutableBytes(of: &storage) { $0.copyBytes(from: withUnsafeBytes(of: address) { Array($0) }) }
    }
    let bound = withUnsafePointer(to: &storage) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) }
    }
    guard bound == 0, listen(fd, 8) == 0 else {
        let code = errno
        close(fd)
        throw POSIXError(.init(rawValue: code) ?? .EIO)
    }
    var actual = sockaddr_storage()
    var actualLength = socklen_t(MemoryLayout<sockaddr_storage>.size)
    _ = withUnsafeMutablePointer(to: &actual) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &actualLength) }
    }
    let port = withUnsafeBytes(of: actual) { raw -> Int in
        // sin_port and sin6_port are both at offset 2, in network byte order.
        Int(UInt16(raw[2]) << 8 | UInt16(raw[3]))
    }
    if keepOpen { return (port, fd) }
    close(fd)
    return (port, nil)
}

/// quaked started by `systemd-socket-activate` with two sockets: a TCP port on 127.0.0.1 named
/// `fdname` and the control socket named `varlink`. The first connection to either starts it.
/// `body` gets the port and the control socket's path; afterwards quaked must have served the
/// control socket passed in (not its own `--socket`) and must stop cleanly on SIGTERM.
func withSocketActivatedQuaked(
    fdname: String, feed: URL, _ body: (_ port: Int, _ controlSocket: String) async throws -> Void
) async throws {
    try await withTemporaryDirectory { dir in
        let socketPath = dir.appendingPathComponent("activated.sock").path
        let (port, _) = try loopbackPort()
        let activator = try ChildProcess(
            "/usr/bin/systemd-socket-activate",
            [
                "-l", "127.0.0.1:\(port)", "-l", socketPath, "--fdname=\(fdname):varlink",
                BuiltProducts.path("quaked"), "--state-dir", dir.appendingPathComponent("state").path,
                "--socket", dir.appendingPathComponent("unused.sock").path,
                "--feed", feed.absoluteString, "--interval", "1h",
            ])
        try await waitUntil(timeout: .seconds(10)) { FileManager.default.fileExists(atPath: socketPath) }
        try await body(port, socketPath)
        #expect(!FileManager.default.fileExists(atPath: dir.appendingPathComponent("unused.sock").path))
        activator.signal(SIGTERM)
        #expect(try await activator.wait() == 0)
    }
}
