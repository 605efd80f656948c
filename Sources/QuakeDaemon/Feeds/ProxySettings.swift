import AsyncHTTPClient
import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// The HTTP proxies quaked pulls through, from the environment, as curl reads it.
///
/// - `https://` feeds: `https_proxy`, else `HTTPS_PROXY`, else `all_proxy`, else `ALL_PROXY`.
/// - `http://` feeds: `http_proxy`, else `HTTP_PROXY`, else `all_proxy`, else `ALL_PROXY`. curl
///   ignores upper-case `HTTP_PROXY` because a CGI program gets a request's `Proxy:` header as
///   that variable (httpoxy); quaked is never run as CGI, so it takes both, lower case first.
/// - The first of these that is set decides; set but empty means no proxy.
/// - `no_proxy`, else `NO_PROXY`: hosts reached directly (``NoProxy``).
///
/// A proxy is `http://[user[:password]@]host[:port]` (`http://` may be left out; the port
/// defaults to 1080, as in curl). The user and password, percent-decoded, become the proxy's
/// Basic authorization; they are never shown: ``ProxyServer/description`` hides the password.
/// As curl does, `https` pulls go through a `CONNECT` tunnel (AsyncHTTPClient's proxy support)
/// and `http` pulls to the proxy in absolute form (``ProxyForwarding``).
public struct ProxySettings: Sendable, Hashable {
    /// For `http://` feeds.
    public var http: ProxyServer?
    /// For `https://` feeds.
    public var https: ProxyServer?
    /// Hosts reached without a proxy.
    public var noProxy: NoProxy

    public init(http: ProxyServer? = nil, https: ProxyServer? = nil, noProxy: NoProxy = NoProxy()) {
        self.http = http
        self.https = https
        self.noProxy = noProxy
    }

    static let httpVariables = ["http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY"]
    static let httpsVariables = ["https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"]
    static let noProxyVariables = ["no_proxy", "NO_PROXY"]

    /// Reads the proxies from `environment`. Throws ``ConfigurationError`` naming the variable
    /// whose proxy URL is malformed (its password hidden).
    public init(environment: [String: String]) throws {
        func first(_ names: [String]) -> (name: String, value: String)? {
            for name in names {
                if let value = environment[name] { return (name, value) }
            }
            return nil
        }
        func server(_ names: [String]) throws -> ProxyServer? {
            guard let (name, value) = first(names) else { return nil }
            let trimmed = value.trimmingCharacters(in: .whitespaces)
            if trimmed.isEmpty { return nil }
            return try ProxyServer(parsing: trimmed, variable: name)
        }
        http = try server(Self.httpVariables)
        https = try server(Self.httpsVariables)
        if let (name, value) = first(Self.noProxyVariables) {
            noProxy = NoProxy(value, variable: name)
        } else {
            noProxy = NoProxy()
        }
    }

    /// Whether any proxy is set.
    public var isEmpty: Bool { http == nil && https == nil }

    /// The proxy a request to `url` goes through, or nil to connect directly.
    public func proxy(for url: URL) -> ProxyServer? {
        let server: ProxyServer?
        switch url.scheme?.lowercased() {
        case "https": server = https
        case "http": server = http
        default: return nil
        }
        guard let server, let host = url.host else { return nil }
        let port = url.port ?? (url.scheme?.lowercased() == "https" ? 443 : 80)
        return noProxy.matches(host: host, port: port) ? nil : server
    }

    /// One line for the log: which proxy serves which scheme, and the exceptions; passwords hidden.
    public var summary: String {
        var parts: [String] = []
        if let https { parts.append("https via \(https) (\(https.variable))") }
        if let http { parts.append("http via \(http) (\(http.variable))") }
        if !noProxy.text.isEmpty { parts.append("\(noProxy.variable ?? "no_proxy")=\(noProxy.text)") }
        return parts.isEmpty ? "none" : parts.joined(separator: ", ")
    }
}

/// One HTTP proxy server. Every way of printing it (`description`, `debugDescription`, `dump`)
/// hides the password.
public struct ProxyServer: Sendable, Hashable, CustomStringConvertible, CustomDebugStringConvertible,
    CustomReflectable
{
    public var host: String
    public var port: Int
    public var username: String?
    public var password: String?
    /// The environment variable it came from (`HTTPS_PROXY`).
    public var variable: String

    /// Parses `http://[user[:password]@]host[:port][/]`; `http://` may be left out.
    public init(parsing text: String, variable: String) throws {
        self.variable = variable
        func fail(_ problem: String) -> ConfigurationError {
            ConfigurationError(
                key: variable, source: "environment",
                problem: "'\(Self.redact(text))' is not a proxy URL (http://[user:password@]host[:port]): \(problem)")
        }
        let full = text.contains("://") ? text : "http://" + text
        guard let components = URLComponents(string: full) else { throw fail("it does not parse as a URL") }
        let scheme = components.scheme?.lowercased() ?? ""
        guard scheme == "http" else {
            throw fail("quaked supports http:// proxies only, not \(scheme)://")
        }
        guard let host = components.host, !host.isEmpty else { throw fail("it names no host") }
        if let port = components.port {
            guard (1...65535).contains(port) else { throw fail("the port \(port) is out of range") }
            self.port = port
        } else {
            guard !Self.authority(of: full).hasSuffix(":") else { throw fail("the port is empty") }
            self.port = 1080
        }
        guard components.path.isEmpty || components.path == "/" else {
            throw fail("a proxy URL has no path")
        }
        guard components.query == nil, components.fragment == nil else {
            throw fail("a proxy URL has no query or fragment")
        }
        self.host = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
        username = components.percentEncodedUser.map { $0.removingPercentEncoding ?? $0 }
        password = components.percentEncodedPassword.map { $0.removingPercentEncoding ?? $0 }
    }

    /// `http://user:***@host:port`: never the password.
    public var description: String {
        let user = username.map { name in (password == nil ? name : name + ":***") + "@" } ?? ""
        let shownHost = host.contains(":") ? "[\(host)]" : host
        return "http://\(user)\(shownHost):\(port)"
    }

    public var debugDescription: String { "ProxyServer(\(description), from \(variable))" }

    public var customMirror: Mirror {
        Mirror(self, children: ["url": description, "variable": variable], displayStyle: .struct)
    }

    /// AsyncHTTPClient's configuration of this proxy, with Basic authorization from the user info.
    var clientProxy: HTTPClient.Configuration.Proxy {
        let authorization = username.map { HTTPClient.Authorization.basic(username: $0, password: password ?? "") }
        return .server(host: host, port: port, authorization: authorization)
    }

    /// The `[userinfo@]host[:port]` part of a URL's text.
    static func authorityWithUserInfo(of text: String) -> Substring {
        let start = text.range(of: "://")?.upperBound ?? text.startIndex
        let end = text[start...].firstIndex(where: { $0 == "/" || $0 == "?" || $0 == "#" }) ?? text.endIndex
        return text[start..<end]
    }

    /// The `host[:port]` part of a URL's text.
    static func authority(of text: String) -> Substring {
        let authority = authorityWithUserInfo(of: text)
        guard let at = authority.lastIndex(of: "@") else { return authority }
        return authority[authority.index(after: at)...]
    }

    /// `text` with the password of its user info replaced by `***`, whether or not it parses:
    /// `http://user:secret@host` → `http://user:***@host`, `user:secret@host:1` → `user:***@host:1`.
    /// Errs on the side of hiding: everything from the first `:` after the scheme to the last `@`
    /// goes, so a password with `/`, `@` or `#` in it never shows either.
    public static func redact(_ text: String) -> String {
        let start = text.range(of: "://")?.upperBound ?? text.startIndex
        guard let at = text[start...].lastIndex(of: "@"),
            let colon = text[start..<at].firstIndex(of: ":")
        else { return text }
        return String(text[..<colon]) + ":***" + String(text[at...])
    }
}

/// Hosts reached without a proxy (`no_proxy`/`NO_PROXY`), as curl reads them, plus ports.
///
/// A list separated by commas or spaces:
/// - `*` alone: every host.
/// - a host or domain, `example.org` or `.example.org` (the leading dot, or `*.`, is optional):
///   that host and every host under it (`www.example.org`, not `notexample.org`); case and a
///   trailing dot do not matter;
/// - an IP address, `192.0.2.1` or `::1` (`[::1]` too), or a CIDR range, `10.0.0.0/8`,
///   `fd00::/8`: hosts given as an address in it. As in curl, names and addresses are not
///   resolved: `localhost` does not cover `127.0.0.1`;
/// - any of these with `:port` (`example.org:8080`, `[::1]:8080`): only that port (curl itself
///   has no ports here; Go's net/http does).
/// Entries that are none of these never match.
public struct NoProxy: Sendable, Hashable {
    enum Pattern: Sendable, Hashable {
        /// Lower case, without leading or trailing dots.
        case domain(String)
        /// Address bytes (4 or 16) and prefix length.
        case network([UInt8], prefix: Int)
    }
    struct Entry: Sendable, Hashable {
        var pattern: Pattern
        var port: Int?
    }

    /// The value as given.
    public private(set) var text = ""
    /// The variable it came from.
    public private(set) var variable: String?
    var matchesAll = false
    var entries: [Entry] = []
    /// Entries that are not understood (they never match).
    public private(set) var ignored: [String] = []

    public init() {}

    public init(_ text: String, variable: String? = nil) {
        self.text = text
        self.variable = variable
        let tokens = text.split(whereSeparator: { $0 == "," || $0 == " " || $0 == "\t" }).map(String.init)
        for token in tokens {
            if token == "*" {
                matchesAll = true
            } else if let entry = Self.entry(token) {
                entries.append(entry)
            } else {
                ignored.append(token)
            }
        }
    }

    static func entry(_ token: String) -> Entry? {
        var host = Substring(token)
        var port: Int?
        if host.hasPrefix("[") {
            // [v6] or [v6]:port
            guard let close = host.firstIndex(of: "]") else { return nil }
            let rest = host[host.index(after: close)...]
            if !rest.isEmpty {
                guard rest.hasPrefix(":"), let p = Int(rest.dropFirst()), (1...65535).contains(p) else { return nil }
                port = p
            }
            host = host[host.index(after: host.startIndex)..<close]
        } else if host.filter({ $0 == ":" }).count == 1, let colon = host.firstIndex(of: ":") {
            guard let p = Int(host[host.index(after: colon)...]), (1...65535).contains(p) else { return nil }
            port = p
            host = host[..<colon]
        }
        if let network = network(String(host)) { return Entry(pattern: network, port: port) }
        if host.contains(":") || host.contains("/") { return nil }  // an address or range that did not parse
        if host.hasPrefix("*.") { host = host.dropFirst() }
        while host.hasPrefix(".") { host = host.dropFirst() }
        while host.hasSuffix(".") { host = host.dropLast() }
        guard !host.isEmpty, !host.contains("*") else { return nil }
        return Entry(pattern: .domain(host.lowercased()), port: port)
    }

    /// `192.0.2.1`, `10.0.0.0/8`, `::1`, `fd00::/8`.
    static func network(_ text: String) -> Pattern? {
        let parts = text.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
        guard let bytes = address(String(parts[0])) else { return nil }
        var prefix = bytes.count * 8
        if parts.count == 2 {
            guard let bits = Int(parts[1]), (0...bytes.count * 8).contains(bits) else { return nil }
            prefix = bits
        }
        return .network(bytes, prefix: prefix)
    }

    /// The bytes of an IPv4 (4) or IPv6 (16) address in text.
    static func address(_ text: String) -> [UInt8]? {
        var v4 = in_addr()
        if inet_pton(AF_INET, text, &v4) == 1 {
            return withUnsafeBytes(of: &v4) { Array($0) }
        }
        var v6 = in6_addr()
        if inet_pton(AF_INET6, text, &v6) == 1 {
            return withUnsafeBytes(of: &v6) { Array($0) }
        }
        return nil
    }

    /// Whether a request to `host` (a name, or an address with or without brackets) on `port`
    /// goes without a proxy.
    public func matches(host: String, port: Int) -> Bool {
        if matchesAll { return true }
        if entries.isEmpty { return false }
        var name = Substring(host)
        if name.hasPrefix("[") && name.hasSuffix("]") { name = name.dropFirst().dropLast() }
        let address = Self.address(String(name))
        if address == nil {
            while name.hasSuffix(".") { name = name.dropLast() }
        }
        let lowered = name.lowercased()
        for entry in entries {
            if let wanted = entry.port, wanted != port { continue }
            switch entry.pattern {
            case .domain(let domain):
                guard address == nil else { continue }
                if lowered == domain || lowered.hasSuffix("." + domain) { return true }
            case .network(let network, let prefix):
                guard let address, address.count == network.count else { continue }
                if Self.prefix(of: address, equals: network, bits: prefix) { return true }
            }
        }
        return false
    }

    static func prefix(of address: [UInt8], equals network: [UInt8], bits: Int) -> Bool {
        var remaining = bits
        for i in address.indices where remaining > 0 {
            let take = min(remaining, 8)
            let mask = UInt8(truncatingIfNeeded: 0xFF << (8 - take))
            if address[i] & mask != network[i] & mask { return false }
            remaining -= take
        }
        return true
    }
}
