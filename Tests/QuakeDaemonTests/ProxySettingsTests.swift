import Foundation
import Testing

@testable import QuakeDaemon

/// The proxy environment as curl reads it, and the Retry-After cap.
@Suite("Proxy settings and Retry-After")
struct ProxySettingsTests {
    static let https = URL(string: "https://earthquake.usgs.gov/feed.geojson")!
    static let http = URL(string: "http://feeds.example.org/feed.geojson")!

    @Test("each scheme's variables in curl's order, lower case first; set but empty means none")
    func precedence() throws {
        func proxies(_ environment: [String: String]) throws -> (http: String?, https: String?) {
            let settings = try ProxySettings(environment: environment)
            return (settings.proxy(for: Self.http)?.host, settings.proxy(for: Self.https)?.host)
        }
        #expect(try proxies([:]) == (nil, nil))
        #expect(try proxies(["https_proxy": "a", "HTTPS_PROXY": "b", "all_proxy": "c"]) == ("c", "a"))
        #expect(try proxies(["HTTPS_PROXY": "b", "ALL_PROXY": "d"]) == ("d", "b"))
        #expect(try proxies(["http_proxy": "a", "HTTP_PROXY": "b"]) == ("a", nil))
        // Unlike curl, upper-case HTTP_PROXY counts (quaked never runs as CGI).
        #expect(try proxies(["HTTP_PROXY": "b"]) == ("b", nil))
        #expect(try proxies(["all_proxy": "c", "ALL_PROXY": "d"]) == ("c", "c"))
        #expect(try proxies(["https_proxy": "", "HTTPS_PROXY": "b", "all_proxy": "c"]) == ("c", nil))
        // No proxy for file feeds.
        let settings = try ProxySettings(environment: ["all_proxy": "c"])
        #expect(settings.proxy(for: URL(fileURLWithPath: "/tmp/feed.geojson")) == nil)
    }

    @Test("a proxy URL: scheme optional, port 1080 by default, credentials percent-decoded")
    func parsing() throws {
        let bare = try ProxyServer(parsing: "proxy.example:3128", variable: "https_proxy")
        #expect(bare.host == "proxy.example" && bare.port == 3128 && bare.username == nil)
        let noPort = try ProxyServer(parsing: "http://proxy.example/", variable: "https_proxy")
        #expect(noPort.port == 1080)
        let credentials = try ProxyServer(parsing: "http://us%40er:p%3As%2Fs@proxy.example:8080", variable: "x")
        #expect(credentials.username == "us@er" && credentials.password == "p:s/s")
        #expect(credentials.description == "http://us@er:***@proxy.example:8080")
        #expect(!credentials.description.contains("p:s/s"))
        // However the configuration is printed.
        var dumped = ""
        dump(try ProxySettings(environment: ["https_proxy": "http://u:p%3As%2Fs@h:1"]), to: &dumped)
        let printed = "\(try ProxySettings(environment: ["https_proxy": "http://u:p%3As%2Fs@h:1"]))"
        for text in [dumped, printed, String(reflecting: credentials)] {
            #expect(!text.contains("p:s/s") && !text.contains("p%3As"), "\(text)")
        }
        let v6 = try ProxyServer(parsing: "http://[::1]:3128", variable: "x")
        #expect(v6.host == "::1" && v6.port == 3128 && v6.description == "http://[::1]:3128")
        let userOnly = try ProxyServer(parsing: "http://user@proxy.example:1", variable: "x")
        #expect(userOnly.username == "user" && userOnly.password == nil)
        #expect(userOnly.clientProxy.authorization?.headerValue == "Basic dXNlcjo=")
        #expect(
            credentials.clientProxy.authorization?.headerValue
                == "Basic " + Data("us@er:p:s/s".utf8).base64EncodedString())
    }

    @Test(
        "a malformed proxy is a configuration error naming the variable, never showing the password",
        arguments: [
            "https://user:hunter2@proxy.example:443", "socks5://user:hunter2@proxy.example",
            "http://user:hunter2@proxy.example:99999", "http://user:hunter2@proxy.example:port",
            "http://user:hunter2@", "http://user:hunter2@proxy.example:3128/path",
            "http://user:hunter2@proxy.example:",
        ])
    func malformed(value: String) throws {
        let loader = ConfigurationLoader(environment: ["HTTPS_PROXY": value], defaults: .init(environment: [:]))
        do {
            _ = try loader.load()
            Issue.record("\(value) was accepted")
        } catch let error as ConfigurationError {
            #expect(error.key == "HTTPS_PROXY")
            #expect(error.source == "environment")
            #expect(!error.description.contains("hunter2"), "\(error)")
            #expect(error.description.contains("user:***"), "\(error)")
        }
    }

    @Test("redaction hides the password however the URL is written")
    func redaction() {
        #expect(ProxyServer.redact("http://u:pw@h:1") == "http://u:***@h:1")
        #expect(ProxyServer.redact("u:pw@h:1") == "u:***@h:1")
        #expect(ProxyServer.redact("http://u:p/w@h") == "http://u:***@h")
        #expect(ProxyServer.redact("http://u:p@w@h") == "http://u:***@h")
        #expect(ProxyServer.redact("http://h:1") == "http://h:1")
        #expect(ProxyServer.redact("http://u@h:1") == "http://u@h:1")
    }

    @Test("no_proxy: *, hosts and domains, addresses and ranges, ports")
    func noProxy() {
        func match(_ list: String, _ host: String, _ port: Int = 443) -> Bool {
            NoProxy(list).matches(host: host, port: port)
        }
        #expect(match("*", "anything.example"))
        #expect(!match("", "example.org"))
        for entry in ["example.org", ".example.org", "*.example.org", "EXAMPLE.org.", " other.test , example.org"] {
            #expect(match(entry, "example.org"), "\(entry)")
            #expect(match(entry, "www.Example.ORG."), "\(entry)")
            #expect(!match(entry, "notexample.org"), "\(entry)")
            #expect(!match(entry, "example.org.evil.test"), "\(entry)")
        }
        #expect(match("192.168.0.0/16", "192.168.3.4"))
        #expect(!match("192.168.0.0/16", "192.169.0.1"))
        #expect(match("10.1.2.3", "10.1.2.3") && !match("10.1.2.3", "10.1.2.4"))
        #expect(match("0.0.0.0/0", "203.0.113.9"))
        #expect(match("::1", "[::1]") && match("[::1]", "::1"))
        #expect(match("fd00::/8", "fd12:3456::1") && !match("fd00::/8", "fe80::1"))
        // Not resolved: a name covers no address and an address no name.
        #expect(!match("localhost", "127.0.0.1"))
        #expect(!match("127.0.0.1", "localhost"))
        // Ports.
        #expect(match("example.org:8080", "example.org", 8080) && !match("example.org:8080", "example.org", 80))
        #expect(match("[::1]:8080", "::1", 8080) && !match("[::1]:8080", "::1", 443))
        #expect(match("10.0.0.0/8:3128", "10.9.9.9", 3128))
        // What is not understood never matches, and is reported.
        let odd = NoProxy("10.0.0.0/33,exa*mple.org,host:port,example.org")
        #expect(odd.ignored == ["10.0.0.0/33", "exa*mple.org", "host:port"])
        #expect(odd.matches(host: "example.org", port: 443))
    }

    @Test("no_proxy over NO_PROXY; a matching host goes direct, with the scheme's default port")
    func noProxyRouting() throws {
        let settings = try ProxySettings(environment: [
            "https_proxy": "proxy:3128", "http_proxy": "proxy:3128", "no_proxy": "usgs.gov:443",
            "NO_PROXY": "example.org",
        ])
        #expect(settings.proxy(for: Self.https) == nil)
        #expect(settings.proxy(for: URL(string: "https://earthquake.usgs.gov:8443/f")!) != nil)
        #expect(settings.proxy(for: Self.http) != nil)
        #expect(settings.summary.contains("no_proxy=usgs.gov:443"))
    }

    @Test("Retry-After is honoured up to retry-after-max, in seconds and as an HTTP date")
    func retryAfterCap() throws {
        var policy = RetryPolicy(interval: .seconds(60), initialDelay: .seconds(10), maxDelay: .seconds(900))
        policy.retryAfterMax = .seconds(3600)
        #expect(policy.delayAfterFailure(1, retryAfter: .seconds(864_000), jitter: 0.5) == .seconds(3600))
        #expect(policy.delayAfterFailure(1, retryAfter: .seconds(120), jitter: 0.5) == .seconds(120))
        #expect(policy.delayAfterFailure(1, retryAfter: nil, jitter: 0.5) == .seconds(10))
        // Both forms of the header.
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        let seconds = FeedPuller.retryAfter(["Retry-After": "864000"], now: now)
        #expect(seconds == now.addingTimeInterval(864_000))
        let date = FeedPuller.retryAfter(["Retry-After": "Mon, 25 Jan 2027 08:26:40 GMT"], now: now)
        #expect(date == Date(timeIntervalSince1970: 1_800_865_600))
        // The key.
        var configuration = DaemonConfiguration()
        #expect(configuration.retryAfterMax == .seconds(3600))
        try configuration.apply(.retryAfterMax, "10m", source: "test")
        #expect(configuration.retryAfterMax == .seconds(600))
        #expect(throws: ConfigurationError.self) { try configuration.apply(.retryAfterMax, "0", source: "test") }
        #expect(FeedScheduler.Plan(configuration).policy.retryAfterMax == .seconds(600))
    }
}
