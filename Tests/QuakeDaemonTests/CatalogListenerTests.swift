import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import QuakeDaemon
import QuakeProtocol
import QuakeStore
import QuakeTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// `http-listen`: the key, and a real quaked serving the merged catalog (QuakeHTTP) from its
/// store, with `/metrics` on the same server, to a real HTTP client; and the metrics listener's
/// connection limit.
extension EndToEnd {
    @Suite("http-listen", .serialized)
    struct CatalogListenerTests {
        static let small = Fixtures.usgs("rodu__quakemap__all_day.geojson")

        // MARK: The key

        @Test(
            "http-listen: an address and port, IPv6 in brackets; off, none and empty are no listener",
            arguments: [("127.0.0.1:8080", "127.0.0.1:8080"), ("0.0.0.0:0", "0.0.0.0:0"), ("[::1]:8080", "[::1]:8080")])
        func parses(text: String, expected: String) throws {
            var configuration = DaemonConfiguration()
            #expect(configuration.httpListen == nil, "off by default")
            #expect(configuration.text(for: .httpListen) == ["off"])
            try configuration.apply(.httpListen, text, source: "test")
            #expect(configuration.httpListen?.description == expected)
            #expect(configuration.text(for: .httpListen) == [expected])
            for off in ["off", "none", ""] {
                var again = configuration
                try again.apply(.httpListen, off, source: "test")
                #expect(again.httpListen == nil, "'\(off)'")
            }
        }

        @Test(
            "a malformed http-listen names the key, the place and the remedy",
            arguments: ["localhost:8080", "127.0.0.1", "127.0.0.1:65536", "[::1]", "::1:8080", "1.2.3:80", "on"])
        func rejects(text: String) throws {
            var configuration = DaemonConfiguration()
            let error = try #require(throws: ConfigurationError.self) {
                try configuration.apply(.httpListen, text, source: "quaked.conf:7")
            }
            #expect("\(error)".hasPrefix("invalid configuration: http-listen (quaked.conf:7): '\(text)'"), "\(error)")
            // The remedy: what an address looks like, or the port's range.
            #expect("\(error)".contains("127.0.0.1:8080") || "\(error)".contains("0 to 65535"), "\(error)")
        }

        @Test("--http-listen and QUAKED_HTTP_LISTEN: the flag wins, and --check-config says where the value came from")
        func flagAndEnvironment() async throws {
            try await withTemporaryDirectory { dir in
                let result = try await ChildProcess.run(
                    BuiltProducts.path("quaked"),
                    [
                        "--check-config", "--state-dir", dir.appendingPathComponent("state").path,
                        "--http-listen", "127.0.0.1:8081",
                    ],
                    environment: ["QUAKED_HTTP_LISTEN": "127.0.0.1:8082"], timeout: .seconds(20))
                #expect(result.status == 0, "\(result.stderr)")
                let line = result.stdout.split(separator: "\n").first { $0.hasPrefix("http-listen = ") }
                #expect(line?.contains("127.0.0.1:8081") == true, "\(result.stdout)")
                #expect(line?.contains("--http-listen") == true, "\(result.stdout)")
                let bad = try await ChildProcess.run(
                    BuiltProducts.path("quaked"),
                    ["--check-config", "--state-dir", dir.appendingPathComponent("state").path],
                    environment: ["QUAKED_HTTP_LISTEN": "localhost:80"], timeout: .seconds(20))
                #expect(bad.status == 78, "\(bad.stderr)")
                #expect(bad.stderr.contains("http-listen (QUAKED_HTTP_LISTEN)"), "\(bad.stderr)")
            }
        }

        // MARK: A real quaked

        @Test("one port: a summary feed, an FDSN query and count, /metrics, a 304 with the ETag; quaked survives bad requests")
        func servesTheCatalogAndTheMetrics() async throws {
            try await withTemporaryDirectory { dir in
                let (feed, features) = try Self.recentFeed(in: dir)
                let daemon = try await DaemonHarness(
                    in: dir, ["--feed", feed.absoluteString, "--interval", "1h", "--http-listen", "127.0.0.1:0"])
                try await waitUntil(timeout: .seconds(20)) { try await daemon.getStatus().headToken == 1 }
                let base = try await Self.catalogURL(daemon)
                let stored = try daemon.withStore { try $0.count() }
                #expect(stored == features.count)
                // One server: the log names /metrics on the catalog's port.
                #expect(daemon.process.stderr.contains("metrics=\(base)metrics"), "\(daemon.process.stderr)")

                try await withHTTPClient(readTimeout: .seconds(30)) { client in
                    // The feed: every stored quake (the fixture moved to the last hours).
                    let feedAnswer = try await Self.request(client, base + "feeds/all_week.geojson")
                    #expect(feedAnswer.status == .ok)
                    #expect(feedAnswer.headers.first(name: "Content-Type")?.hasPrefix("application/json") == true)
                    let document = try #require(
                        try JSONSerialization.jsonObject(with: Data(feedAnswer.body.utf8)) as? [String: Any])
                    let served = try #require(document["features"] as? [[String: Any]])
                    #expect(Set(served.compactMap { $0["id"] as? String }) == Set(features.keys))
                    #expect((document["metadata"] as? [String: Any])?["count"] as? Int == features.count)
                    // A magnitude level: the fixture's own count of M2.5+.
                    let strong = features.values.filter { ($0 ?? -10) >= 2.5 }.count
                    let level = try await Self.request(client, base + "feeds/2.5_week.geojson")
                    let levelDocument = try JSONSerialization.jsonObject(with: Data(level.body.utf8)) as? [String: Any]
                    #expect((levelDocument?["features"] as? [Any])?.count == strong)

                    // Conditional GET: the same feed, unchanged, is a 304 without a body.
                    let tag = try #require(feedAnswer.headers.first(name: "ETag"))
                    let again = try await Self.request(
                        client, base + "feeds/all_week.geojson", headers: ["If-None-Match": tag])
                    #expect(again.status == .notModified)
                    #expect(again.body.isEmpty)

                    // FDSN: text format with a limit, count, and a 400 naming the parameter.
                    let text = try await Self.request(client, base + "fdsnws/event/1/query?format=text&limit=3")
                    #expect(text.status == .ok)
                    let lines = text.body.split(separator: "\n")
                    #expect(lines.first?.hasPrefix("#EventID|Time|Latitude|Longitude") == true, "\(text.body)")
                    #expect(lines.count == 4, "\(text.body)")
                    let count = try await Self.request(client, base + "fdsnws/event/1/count")
                    #expect(count.status == .ok)
                    #expect(Int(count.body.trimmingCharacters(in: .whitespacesAndNewlines)) == features.count)
                    let bad = try await Self.request(client, base + "fdsnws/event/1/query?orderby=size")
                    #expect(bad.status == .badRequest)
                    #expect(bad.body.contains("orderby=size"), "\(bad.body)")
                    let none = try await Self.request(client, base + "fdsnws/event/1/query?minmagnitude=9.9")
                    #expect(none.status == .noContent)

                    // /metrics on the same port, as the metrics listener serves it.
                    let metrics = try await Self.request(client, base + "metrics")
                    #expect(metrics.status == .ok)
                    #expect(metrics.headers.first(name: "Content-Type") == "text/plain; version=0.0.4; charset=utf-8")
                    #expect(try Exposition(metrics.body).value("quaked_history_head_token") == 1)
                    let post = try await Self.request(client, base + "metrics", method: .POST)
                    #expect(post.status == .methodNotAllowed)
                    #expect(post.headers.first(name: "Allow") == "GET, HEAD")
                }

                // A burst of bad requests, garbage and more connections than the limit at once.
                let port = try #require(Int(base.split(separator: ":").last!.dropLast()))
                var held: [TCPProbe] = []
                for i in 0..<40 {
                    let connection = try TCPProbe(port: port)
                    switch i % 4 {
                    case 0: try? connection.send("NOT HTTP AT ALL\r\n\r\n")
                    case 1: try? connection.send("GET /feeds/../../etc/passwd HTTP/1.1\r\nHost: x\r\n\r\n")
                    case 2: try? connection.send("GET /fdsnws/event/1/query?limit=-1&limit=x HTTP/1.1\r\nHost: x\r\n\r\n")
                    default: try? connection.send("DELETE /feeds/all_day.geojson HTTP/1.1\r\nHost: x\r\n\r\n")
                    }
                    held.append(connection)
                }
                // Each is answered (400, 404, 405) or closed; none takes quaked down.
                for connection in held {
                    let answer = try await connection.receive(upTo: 4096)
                    let text = String(decoding: answer, as: UTF8.self)
                    #expect(answer.isEmpty || text.hasPrefix("HTTP/1.1 4"), "\(text)")
                }
                for connection in held { connection.close() }
                #expect(daemon.process.isRunning, "\(daemon.process.stderr)")
                try await withHTTPClient(readTimeout: .seconds(30)) { client in
                    // (Once the server has seen the closes: until then a connection may be one too many.)
                    try await waitUntil(timeout: .seconds(10)) {
                        (try? await Self.request(client, base + "feeds/all_day.geojson"))?.status == .ok
                    }
                }
                #expect(try await daemon.stop() == 0)
            }
        }

        @Test("metrics-listen on another address: two listeners, /metrics on the metrics one only")
        func twoListeners() async throws {
            // Another address: a port of its own (127.0.0.1:0 for both is the same address, one server).
            let (port, _) = try loopbackPort()
            try await withTemporaryDirectory { dir in
                let daemon = try await DaemonHarness(
                    in: dir, ["--feed", Self.small.absoluteString, "--interval", "1h", "--http-listen", "127.0.0.1:0"],
                    environment: ["QUAKED_METRICS_LISTEN": "127.0.0.1:\(port)"])
                let base = try await Self.catalogURL(daemon)
                let metricsURL = try await EndToEnd.MetricsTests.metricsURL(daemon)
                #expect(metricsURL == "http://127.0.0.1:\(port)/metrics")
                #expect(!metricsURL.hasPrefix(base), "\(metricsURL) \(base)")
                try await withHTTPClient(readTimeout: .seconds(30)) { client in
                    let metrics = try await Self.request(client, metricsURL)
                    #expect(metrics.status == .ok)
                    let notHere = try await Self.request(client, base + "metrics")
                    #expect(notHere.status == .notFound)
                    let version = try await Self.request(client, base + "fdsnws/event/1/version")
                    #expect(version.body.trimmingCharacters(in: .whitespacesAndNewlines) == "1.2.0")
                }
                #expect(try await daemon.stop() == 0)
            }
        }

        @Test("an http-listen address already in use stops quaked at start-up with 78, naming the setting")
        func addressInUse() async throws {
            let (port, fd) = try loopbackPort(keepOpen: true)
            defer { if let fd { close(fd) } }
            try await withTemporaryDirectory { dir in
                let result = try await ChildProcess.run(
                    BuiltProducts.path("quaked"),
                    [
                        "--state-dir", dir.appendingPathComponent("state").path, "--socket",
                        dir.appendingPathComponent("q.sock").path, "--feed", Self.small.absoluteString,
                        "--http-listen", "127.0.0.1:\(port)",
                    ],
                    timeout: .seconds(20))
                #expect(result.status == 78, "\(result.stderr)")
                #expect(
                    result.stderr.contains("http-listen: cannot listen on 127.0.0.1:\(port): Address already in use"),
                    "\(result.stderr)")
                #expect(!FileManager.default.fileExists(atPath: dir.appendingPathComponent("q.sock").path))
            }
        }

        @Test("a reload with a new http-listen keeps the running listener and says it waits for a restart")
        func reload() async throws {
            try await withTemporaryDirectory { dir in
                let config = dir.appendingPathComponent("quaked.conf")
                try "http-listen = 127.0.0.1:0\n".write(to: config, atomically: true, encoding: .utf8)
                let daemon = try await DaemonHarness(
                    in: dir, ["--feed", Self.small.absoluteString, "--interval", "1h", "--config", config.path])
                let base = try await Self.catalogURL(daemon)
                try "http-listen = 127.0.0.1:1\n".write(to: config, atomically: true, encoding: .utf8)
                let accepted = try await daemon.result(IOQuaked.Reload.self, .init())
                #expect(accepted.error == nil, "\(accepted)")
                // The warning is logged before the reply; the log is read from a pipe, so wait for it.
                try await waitUntil(timeout: .seconds(10)) {
                    daemon.process.stderr.contains("http-listen takes effect at the next restart")
                }
                try await withHTTPClient(readTimeout: .seconds(30)) { client in
                    let version = try await Self.request(client, base + "fdsnws/event/1/version")
                    #expect(version.status == .ok)
                }
                #expect(try await daemon.stop() == 0)
            }
        }

        @Test("started by systemd-socket-activate with a socket named http, quaked serves the catalog and /metrics on it")
        func socketActivation() async throws {
            try await withSocketActivatedQuaked(fdname: "http", feed: Self.small) {
                port, socketPath in
                // The first request starts quaked.
                try await withHTTPClient(readTimeout: .seconds(30)) { client in
                    let version = try await Self.request(client, "http://127.0.0.1:\(port)/fdsnws/event/1/version")
                    #expect(version.status == .ok)
                    #expect(version.body.trimmingCharacters(in: .whitespacesAndNewlines) == "1.2.0")
                    let metrics = try await Self.request(client, "http://127.0.0.1:\(port)/metrics")
                    #expect(metrics.status == .ok)
                    #expect(try Exposition(metrics.body).value("quaked_subscribers") == 0)
                }
                // The other socket is the control socket.
                let text = try UnixSocketClient(path: socketPath).call(IOQuaked.Metrics.self, .init()).text
                #expect(text.contains("quaked_history_head_token"), "\(text)")
            }
        }

        @Test("the metrics listener closes a 33rd connection and goes on serving the 32 and quaked")
        func metricsConnectionLimit() async throws {
            try await withTemporaryDirectory { dir in
                let daemon = try await DaemonHarness(
                    in: dir, ["--feed", Self.small.absoluteString, "--interval", "1h"],
                    environment: ["QUAKED_METRICS_LISTEN": "127.0.0.1:0"])
                let url = try await EndToEnd.MetricsTests.metricsURL(daemon)
                let port = try #require(Int(url.split(separator: ":").last!.split(separator: "/").first!))
                let request = "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
                // 32 connections, each served (a keep-alive answer read): all admitted.
                var admitted: [TCPProbe] = []
                for _ in 0..<32 {
                    let connection = try TCPProbe(port: port)
                    try connection.send(request)
                    let answer = String(decoding: try await connection.receive(upTo: 64), as: UTF8.self)
                    #expect(answer.hasPrefix("HTTP/1.1 200 OK"), "\(answer)")
                    admitted.append(connection)
                }
                // The 33rd is closed at once, unanswered.
                let extra = try TCPProbe(port: port)
                try? extra.send(request)
                #expect(try await extra.receive(upTo: 64).isEmpty, "the 33rd connection was answered")
                extra.close()
                #expect(daemon.process.isRunning, "\(daemon.process.stderr)")
                // The 32 are still served.
                for connection in admitted {
                    try connection.send(request)
                    var answer: [UInt8] = []
                    // The rest of the first answer comes first (its head was read): read on to the second head.
                    while !String(decoding: answer, as: UTF8.self).contains("HTTP/1.1 200 OK") {
                        let more = try await connection.receive(upTo: 65536)
                        if more.isEmpty { break }
                        answer += more
                    }
                    #expect(String(decoding: answer, as: UTF8.self).contains("HTTP/1.1 200 OK"))
                }
                for connection in admitted { connection.close() }
                // Slots freed (once the listener has seen the closes: until then a new connection
                // may still be the one too many, closed), a new connection is served.
                try await withHTTPClient(readTimeout: .seconds(30)) { client in
                    try await waitUntil(timeout: .seconds(10)) {
                        (try? await EndToEnd.MetricsTests.request(client, url))?.status == .ok
                    }
                }
                #expect(daemon.process.isRunning, "\(daemon.process.stderr)")
                #expect(try await daemon.stop() == 0)
            }
        }

        // MARK: Helpers

        /// A real USGS feed, its times moved to end 10 minutes ago (the feeds' windows end now),
        /// as a file; with each quake's magnitude by id.
        static func recentFeed(in dir: URL) throws -> (URL, [String: Double?]) {
            var document = try #require(
                try JSONSerialization.jsonObject(with: Data(contentsOf: small)) as? [String: Any])
            var features = try #require(document["features"] as? [[String: Any]])
            let times = features.compactMap { ($0["properties"] as? [String: Any])?["time"] as? NSNumber }
            let newest = try #require(times.map(\.int64Value).max())
            let shift = Int64(Date().timeIntervalSince1970 * 1000) - 600_000 - newest
            var magnitudes: [String: Double?] = [:]
            for i in features.indices {
                var properties = try #require(features[i]["properties"] as? [String: Any])
                for key in ["time", "updated"] {
                    if let value = properties[key] as? NSNumber { properties[key] = value.int64Value + shift }
                }
                features[i]["properties"] = properties
                magnitudes[try #require(features[i]["id"] as? String)] = (properties["mag"] as? NSNumber)?.doubleValue
            }
            document["features"] = features
            let url = dir.appendingPathComponent("recent_all_day.geojson")
            try JSONSerialization.data(withJSONObject: document).write(to: url)
            return (url, magnitudes)
        }

        /// `http://127.0.0.1:PORT/`, as the start-up log line gives it.
        static func catalogURL(_ daemon: DaemonHarness) async throws -> String {
            var url: String?
            try await waitUntil(timeout: .seconds(10)) {
                let log = daemon.process.stderr
                guard let range = log.range(of: #"http=http://127\.0\.0\.1:[0-9]+/"#, options: .regularExpression)
                else { return false }
                url = String(log[range].dropFirst("http=".count))
                return true
            }
            return try #require(url)
        }

        static func request(
            _ client: HTTPClient, _ url: String, method: HTTPMethod = .GET, headers: [String: String] = [:]
        ) async throws -> (status: HTTPResponseStatus, headers: HTTPHeaders, body: String) {
            var request = HTTPClientRequest(url: url)
            request.method = method
            for (name, value) in headers { request.headers.add(name: name, value: value) }
            let response = try await client.execute(request, timeout: .seconds(30))
            let body = try await response.body.collect(upTo: 64 << 20)
            return (response.status, response.headers, String(buffer: body))
        }
    }
}
