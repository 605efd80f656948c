import Glibc
import QuakeConfigValues

/// Where an HTTP listener listens (`metrics-listen`, `http-listen`): an IPv4 address and a port
/// (`127.0.0.1:9464`), or an IPv6 address in brackets and a port (`[::1]:9464`). Addresses are
/// literals, never names to resolve; port 0 takes any free port (the log says which).
public struct MetricsAddress: Sendable, Hashable, CustomStringConvertible {
    /// The IP address, without brackets.
    public var host: String
    public var port: Int

    public init(host: String, port: Int) {
        self.host = host
        self.port = port
    }

    public var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }

    /// Parses `ADDRESS:PORT` or `[IPV6-ADDRESS]:PORT`; `examplePort` is the port the error's
    /// examples show (the key's usual one).
    public init(parsing text: String, examplePort: Int = 9464) throws(ConfigValue.Problem) {
        let problem = ConfigValue.Problem(
            message:
                "'\(text)' is not an IP address and port such as 127.0.0.1:\(examplePort) or [::1]:\(examplePort) (or off)")
        let host: Substring
        let port: Substring
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]"), text[text.index(after: close)...].hasPrefix(":") else {
                throw problem
            }
            host = text[text.index(after: text.startIndex)..<close]
            port = text[text.index(close, offsetBy: 2)...]
            guard Self.isAddress(host, family: AF_INET6) else { throw problem }
        } else {
            let parts = text.split(separator: ":", omittingEmptySubsequences: false)
            guard parts.count == 2 else { throw problem }
            host = parts[0]
            port = parts[1]
            guard Self.isAddress(host, family: AF_INET) else { throw problem }
        }
        guard !port.isEmpty, port.allSatisfy(\.isASCII), port.allSatisfy(\.isNumber), port.count <= 5,
            let number = Int(port), number <= 65535
        else {
            throw ConfigValue.Problem(message: "'\(text)': the port must be a number from 0 to 65535")
        }
        self.init(host: String(host), port: number)
    }

    private static func isAddress(_ text: Substring, family: Int32) -> Bool {
        var buffer = [UInt8](repeating: 0, count: 16)
        return inet_pton(family, String(text), &buffer) == 1
    }
}
