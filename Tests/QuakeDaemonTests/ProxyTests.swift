import Foundation
import QuakeProtocol
import QuakeStore
import QuakeTestSupport
import Testing

/// quaked pulling through a real proxy on 127.0.0.1 (``ForwardingProxy``), as the environment says.
extension EndToEnd {
    @Suite("pulls through a proxy")
    struct ProxyTests {
        static let small = Fixtures.usgs("rodu__quakemap__all_day.geojson")
        static let password = "s3cret-Pw"
        static let authorization = "Basic " + Data("quake:\(password)".utf8).base64EncodedString()

        static func feedStatus(_ daemon: DaemonHarness) async throws -> IOQuaked.FeedStatus {
            try #require(try await daemon.getStatus().feeds.first)
        }

        /// GetStatus's reply as JSON text.
        static func text(_ status: IOQuaked.GetStatus.Reply) -> String {
            String(decoding: status.jsonBytes, as: UTF8.self)
        }

        @Test(
            "an http feed goes to the proxy in absolute form with its credentials; the password is shown nowhere",
            arguments: ["http_proxy", "HTTP_PROXY", "all_proxy"])
        func throughTheProxy(variable: String) async throws {
            try await FeedTestServer.withServer { server in
                try await ForwardingProxy.withProxy(requiredAuthorization: Self.authorization) { proxy in
                    try await withTemporaryDirectory { dir in
                        server.setResponse("/feed", .uncachedFeed(Self.small))
                        let daemon = try await DaemonHarness(
                            in: dir, ["--feed", server.url("/feed"), "--interval", "1s"],
                            environment: [variable: proxy.url(user: "quake", password: Self.password)])
                        // The second pull is conditional and answered 304, through the proxy too.
                        try await server.waitForRequests("/feed", count: 2, timeout: .seconds(20))
                        try await waitUntil(timeout: .seconds(20)) {
                            try await Self.feedStatus(daemon).lastResult == .notModified
                        }
                        let seen = try #require(proxy.requests.first)
                        #expect(seen.method == "GET")
                        #expect(seen.target == server.url("/feed"))
                        #expect(seen.header("Host") == "127.0.0.1:\(server.port)")
                        #expect(seen.header("Proxy-Authorization") == Self.authorization)
                        #expect(proxy.requests.dropFirst().first?.header("If-Modified-Since") != nil)
                        // The server got it from the proxy, gzip accepted, without the credentials.
                        let request = try #require(server.requests("/feed").first)
                        #expect(request.header("Proxy-Authorization") == nil)
                        #expect(request.header("Accept-Encoding")?.contains("gzip") == true)
                        let status = try await daemon.getStatus()
                        #expect(status.quakeCount == 151)
                        #expect(!Self.text(status).contains(Self.password))
                        #expect(try await daemon.stop() == 0)
                        // The start-up log names the proxy, the password hidden.
                        #expect(daemon.process.stderr.contains("quake:***@127.0.0.1:\(proxy.port)"))
                        #expect(!daemon.process.stderr.contains(Self.password))
                    }
                }
            }
        }

        @Test("a host that no_proxy names is reached directly", arguments: ["127.0.0.1", "127.0.0.0/8", "NO_PROXY=*"])
        func noProxyBypasses(entry: String) async throws {
            try await FeedTestServer.withServer { server in
                try await ForwardingProxy.withProxy { proxy in
                    try await withTemporaryDirectory { dir in
                        server.setResponse("/feed", .uncachedFeed(Self.small))
                        var environment = ["http_proxy": proxy.url()]
                        if entry.hasPrefix("NO_PROXY=") {
                            environment["NO_PROXY"] = String(entry.dropFirst("NO_PROXY=".count))
                        } else {
                            environment["no_proxy"] = "example.org, \(entry)"
                        }
                        let daemon = try await DaemonHarness(
                            in: dir, ["--feed", server.url("/feed"), "--interval", "1h"], environment: environment)
                        try await waitUntil(timeout: .seconds(20)) {
                            try await Self.feedStatus(daemon).lastResult == .imported
                        }
                        #expect(server.requestCount("/feed") == 1)
                        #expect(proxy.requests.isEmpty, "the proxy saw \(proxy.requests.map(\.target))")
                        #expect(try await daemon.stop() == 0)
                    }
                }
            }
        }

        @Test("no_proxy for another port of the host still goes through the proxy")
        func noProxyPortMustMatch() async throws {
            try await FeedTestServer.withServer { server in
                try await ForwardingProxy.withProxy { proxy in
                    try await withTemporaryDirectory { dir in
                        server.setResponse("/feed", .uncachedFeed(Self.small))
                        let otherPort = server.port == 1 ? 2 : 1
                        let result = try await ChildProcess.run(
                            BuiltProducts.path("quaked"),
                            ["--once", "--feed", server.url("/feed"), "--state-dir", dir.path],
                            environment: ["http_proxy": proxy.url(), "no_proxy": "127.0.0.1:\(otherPort)"])
                        #expect(result.status == 0, "\(result.stderr)")
                        #expect(proxy.requests.map(\.target) == [server.url("/feed")])
                    }
                }
            }
        }

        @Test("a redirect through the proxy is followed through it, each hop routed again")
        func redirectThroughTheProxy() async throws {
            try await FeedTestServer.withServer { server in
                try await ForwardingProxy.withProxy { proxy in
                    try await withTemporaryDirectory { dir in
                        server.setResponse("/old", TestResponse(status: 301, headers: [("Location", "/feed")]))
                        server.setResponse("/feed", .uncachedFeed(Self.small))
                        let result = try await ChildProcess.run(
                            BuiltProducts.path("quaked"),
                            ["--once", "--feed", server.url("/old"), "--state-dir", dir.path],
                            environment: ["http_proxy": proxy.url()])
                        #expect(result.status == 0, "\(result.stderr)")
                        #expect(proxy.requests.map(\.target) == [server.url("/old"), server.url("/feed")])
                        #expect(try QuakeStore(directory: dir).count() == 151)
                    }
                }
            }
        }

        @Test("a body that stalls through the proxy fails at the total timeout and leaves the store as it was")
        func stallThroughTheProxy() async throws {
            try await FeedTestServer.withServer { server in
                try await ForwardingProxy.withProxy { proxy in
                    try await withTemporaryDirectory { dir in
                        server.setResponse(
                            "/feed", TestResponse.uncachedFeed(Self.small).uncompressed().stalled(afterBytes: 20_000))
                        let result = try await ChildProcess.run(
                            BuiltProducts.path("quaked"),
                            ["--once", "--feed", server.url("/feed"), "--state-dir", dir.path],
                            environment: ["http_proxy": proxy.url(), "QUAKED_TOTAL_TIMEOUT": "2s"], timeout: .seconds(30))
                        #expect(result.status == 1)
                        #expect(result.stderr.contains("total timeout"), "\(result.stderr)")
                        #expect(proxy.requests.count == 1)
                        let store = try QuakeStore(directory: dir)
                        #expect(try store.count() == 0 && store.head() == 0)
                        #expect(try store.feedState(url: server.url("/feed")) == nil)
                    }
                }
            }
        }

        @Test("an https feed goes through HTTPS_PROXY, not http_proxy; failures name the proxy without its password")
        func httpsThroughTheProxy() async throws {
            try await FeedTestServer.withServer { server in
                try await ForwardingProxy.withProxy { httpsProxy in
                    try await ForwardingProxy.withProxy { httpProxy in
                        try await withTemporaryDirectory { dir in
                            // The tunnel reaches a plain-HTTP server, so TLS fails after the CONNECT.
                            let feed = "https://127.0.0.1:\(server.port)/feed"
                            let result = try await ChildProcess.run(
                                BuiltProducts.path("quaked"), ["--once", "--feed", feed, "--state-dir", dir.path],
                                environment: [
                                    "HTTPS_PROXY": httpsProxy.url(user: "quake", password: Self.password),
                                    "http_proxy": httpProxy.url(),
                                ])
                            #expect(result.status == 1)
                            let seen = try #require(httpsProxy.requests.first)
                            #expect(seen.method == "CONNECT" && seen.target == "127.0.0.1:\(server.port)")
                            #expect(seen.header("Proxy-Authorization") == Self.authorization)
                            #expect(httpProxy.requests.isEmpty)
                            #expect(result.stderr.contains("through the proxy http://quake:***@127.0.0.1:\(httpsProxy.port)"))
                            #expect(!result.stderr.contains(Self.password) && !result.stdout.contains(Self.password))
                        }
                    }
                }
            }
        }

        @Test("credentials the proxy refuses fail the pull with a 407, shown without the password")
        func refusedCredentials() async throws {
            try await FeedTestServer.withServer { server in
                try await ForwardingProxy.withProxy(requiredAuthorization: Self.authorization) { proxy in
                    try await withTemporaryDirectory { dir in
                        server.setResponse("/feed", .uncachedFeed(Self.small))
                        let daemon = try await DaemonHarness(
                            in: dir, ["--feed", server.url("/feed"), "--interval", "1h"],
                            environment: ["http_proxy": proxy.url(user: "quake", password: "wrong-\(Self.password)")])
                        try await waitUntil(timeout: .seconds(20)) {
                            try await Self.feedStatus(daemon).lastResult == .failed
                        }
                        let feed = try await Self.feedStatus(daemon)
                        let error = try #require(feed.lastError)
                        #expect(error.contains("407"), "\(error)")
                        #expect(error.contains("quake:***@"), "\(error)")
                        #expect(!Self.text(try await daemon.getStatus()).contains(Self.password))
                        #expect(server.requestCount("/feed") == 0)
                        #expect(try await daemon.stop() == 0)
                        #expect(!daemon.process.stderr.contains(Self.password))
                    }
                }
            }
        }

        @Test("a malformed proxy URL stops quaked with exit 78, naming the variable and hiding the password")
        func malformedProxy() async throws {
            try await withTemporaryDirectory { dir in
                for (variable, value) in [
                    ("HTTPS_PROXY", "http://quake:\(Self.password)@proxy.example:notaport"),
                    ("http_proxy", "socks5://quake:\(Self.password)@proxy.example:1080"),
                ] {
                    let result = try await ChildProcess.run(
                        BuiltProducts.path("quaked"),
                        ["--socket", dir.appendingPathComponent("q.sock").path, "--state-dir", dir.path],
                        environment: [variable: value])
                    #expect(result.status == 78, "\(result.stderr)")
                    #expect(result.stderr.contains(variable), "\(result.stderr)")
                    #expect(result.stderr.contains("quake:***@"), "\(result.stderr)")
                    #expect(!result.stderr.contains(Self.password) && !result.stdout.contains(Self.password))
                }
                // A good proxy in the environment shows up nowhere in --check's output.
                try QuakeStore(directory: dir).close()
                let check = try await ChildProcess.run(
                    BuiltProducts.path("quaked"), ["--check", "--state-dir", dir.path],
                    environment: ["https_proxy": "http://quake:\(Self.password)@127.0.0.1:9"])
                #expect(check.status == 0, "\(check.stderr)")
                #expect(!(check.stdout + check.stderr).contains(Self.password))
            }
        }
    }
}
