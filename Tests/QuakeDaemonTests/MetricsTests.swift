import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import QuakeProtocol
import QuakeStore
import QuakeTestSupport
import Testing
import Varlink

/// The metrics of a real quaked, read through `io.quaked.Metrics`, `quakectl metrics` and a real
/// HTTP client on the `metrics-listen` listener, after real pulls, calls and subscriptions; and
/// promtool on every text.
extension EndToEnd {
    @Suite("metrics", .serialized)
    struct MetricsTests {
        static let day = Fixtures.usgs("abruzzi__earthquake-viz__all_day.geojson")
        static let week = Fixtures.usgs("abruzzi__earthquake-viz__all_week.geojson")
        static let small = Fixtures.usgs("rodu__quakemap__all_day.geojson")

        @Test(
            "pulls by result, changes by kind, tokens, subscribers, a named client's lag and calls have the values they must"
        )
        func seriesHaveTheirValues() async throws {
            try await FeedTestServer.withServer { server in
                try await withTemporaryDirectory { dir in
                    let started = Date()
                    // 200, then 304 (the same document, asked for conditionally), then 500.
                    server.setResponses("/feed", [.uncachedFeed(Self.day), .uncachedFeed(Self.day), .status(500)])
                    let feed = server.url("/feed")
                    let daemon = try await DaemonHarness(
                        in: dir, ["--feed", feed, "--interval", "1h"],
                        environment: [
                            "QUAKED_METRICS_LISTEN": "127.0.0.1:0",
                            // No retry of the failed pull while the test counts pulls.
                            "QUAKED_RETRY_INITIAL_DELAY": "1h", "QUAKED_RETRY_MAX_DELAY": "1h",
                        ])
                    try await waitUntil(timeout: .seconds(20)) { try await daemon.getStatus().headToken == 1 }

                    // Before anything else: one imported pull, every result of the feed at zero.
                    // (A pull is counted just after its waiters hear of it: wait for it.)
                    var metrics = try await Self.metrics(daemon)
                    try await waitUntil(timeout: .seconds(10)) {
                        metrics = try await Self.metrics(daemon)
                        return metrics.value("quaked_pulls_total", ["feed": feed, "result": "imported"]) == 1
                    }
                    #expect(metrics.value("quaked_pulls_total", ["feed": feed, "result": "not_modified"]) == 0)
                    #expect(metrics.value("quaked_pulls_total", ["feed": feed, "result": "failed"]) == 0)

                    let first = try await daemon.call(IOQuaked.Refresh.self, .init())
                    #expect(first.results.map(\.result) == [.notModified], "\(first)")
                    let second = try await daemon.call(IOQuaked.Refresh.self, .init())
                    #expect(second.results.map(\.result) == [.failed], "\(second)")
                    try await waitUntil(timeout: .seconds(10)) {
                        try await Self.metrics(daemon).value("quaked_pull_duration_seconds_count", ["feed": feed]) == 3
                    }

                    // A named client subscribes (at head 1), then two transactions: a delete by
                    // this daemon and an import by another process on the same file.
                    let subscriber = try UnixSocketClient(path: daemon.socketPath)
                    try subscriber.callMore(IOQuaked.Subscribe.self, .init(client: "metrics-test", heartbeatSeconds: 1))
                    #expect(try subscriber.nextReply(IOQuaked.Subscribe.self)?.event == .subscribed)
                    let id = try daemon.withStore { try $0.allQuakes().first!.id }
                    let deleted = try await daemon.result(IOQuaked.Delete.self, .init(ids: [id]))
                    #expect(deleted.error == nil, "\(deleted)")
                    #expect(try subscriber.nextReply(IOQuaked.Subscribe.self)?.event == .changed)
                    let once = try await ChildProcess.run(
                        BuiltProducts.path("quaked"),
                        ["--once", "--feed", Self.week.absoluteString, "--state-dir", daemon.stateDirectory.path])
                    #expect(once.status == 0, "\(once.stderr)")
                    #expect(try daemon.withStore { try $0.head() } == 3)
                    let unknown = try await daemon.result(IOQuaked.Get.self, .init(id: "no-such-quake"))
                    #expect(unknown.error?.name == IOQuaked.NoSuchQuake.name)
                    // A method the interface does not have: only a hand-written call can ask for it.
                    let bogus = try await daemon.call("io.quaked.Bogus")
                    #expect(bogus["error"] as? String == OrgVarlinkService.MethodNotFound.name)

                    // Changes are counted as committed, the other process's within a poll.
                    let summaries = try daemon.withStore { try $0.transactionSummaries(after: 0) }
                    let inserted = Double(summaries.map(\.inserted).reduce(0, +))
                    let updated = Double(summaries.map(\.updated).reduce(0, +))
                    let deletes = Double(summaries.map(\.deleted).reduce(0, +))
                    #expect(inserted > 0 && updated > 0 && deletes >= 1, "the history has every kind of change")
                    try await waitUntil(timeout: .seconds(10)) {
                        metrics = try await Self.metrics(daemon)
                        // Counted per transaction as each is seen: wait for the last one too.
                        return metrics.value("quaked_history_changes_total", ["kind": "update"]) == updated
                            && metrics.value("quaked_history_transactions_total", ["author": "import"]) == 2
                    }
                    #expect(metrics.value("quaked_history_changes_total", ["kind": "insert"]) == inserted)
                    #expect(metrics.value("quaked_history_changes_total", ["kind": "update"]) == updated)
                    #expect(metrics.value("quaked_history_changes_total", ["kind": "delete"]) == deletes)
                    #expect(metrics.value("quaked_history_transactions_total", ["author": "import"]) == 2)
                    #expect(metrics.value("quaked_history_transactions_total", ["author": "delete"]) == 1)
                    #expect(metrics.value("quaked_history_transactions_total", ["author": "retention"]) == 0)

                    // Pulls: one of each result; durations of three pulls, one import.
                    for (result, count) in [("imported", 1.0), ("not_modified", 1), ("failed", 1)] {
                        #expect(metrics.value("quaked_pulls_total", ["feed": feed, "result": result]) == count, "\(result)")
                    }
                    #expect(metrics.value("quaked_pull_duration_seconds_count", ["feed": feed]) == 3)
                    #expect(metrics.value("quaked_pull_duration_seconds_bucket", ["feed": feed, "le": "+Inf"]) == 3)
                    #expect(metrics.value("quaked_import_duration_seconds_count", ["feed": feed]) == 1)
                    #expect(
                        metrics.value("quaked_pull_bytes_total", ["feed": feed])
                            == Double(try Data(contentsOf: Self.day).count))
                    let lastSuccess = try #require(
                        metrics.value("quaked_feed_last_success_timestamp_seconds", ["feed": feed]))
                    #expect(lastSuccess >= started.timeIntervalSince1970 - 1 && lastSuccess <= Date().timeIntervalSince1970)
                    #expect(metrics.value("quaked_feed_consecutive_failures", ["feed": feed]) == 1)

                    // The store.
                    let count = try daemon.withStore { try $0.count() }
                    #expect(metrics.value("quaked_history_head_token") == 3)
                    #expect(metrics.value("quaked_history_oldest_token") == 0)
                    #expect(metrics.value("quaked_quakes") == Double(count))
                    #expect(metrics.value("quaked_database_bytes") ?? 0 > 100_000)
                    #expect(metrics.samples("quaked_build_info").first?.value == 1)

                    // The subscriber, and its named client two transactions behind.
                    #expect(metrics.value("quaked_subscribers") == 1)
                    #expect(metrics.value("quaked_named_clients") == 1)
                    #expect(metrics.value("quaked_client_lag_transactions", ["client": "metrics-test"]) == 2)
                    let lag = try #require(metrics.value("quaked_client_lag_seconds", ["client": "metrics-test"]))
                    #expect(lag > 0 && lag < Date().timeIntervalSince(started) + 1, "the delete's age: \(lag)")
                    let seen = try #require(
                        metrics.value("quaked_client_last_seen_timestamp_seconds", ["client": "metrics-test"]))
                    #expect(seen >= started.timeIntervalSince1970 - 1)
                    // The delete reached the subscriber: one latency measured (the other process's
                    // commit has no commit time here).
                    #expect(metrics.value("quaked_notification_latency_seconds_count") ?? 0 >= 1)
                    #expect(metrics.value("quaked_notification_latency_seconds_sum") ?? 0 > 0)

                    // Calls by method and error.
                    let calls = "quaked_varlink_calls_total"
                    #expect(metrics.value(calls, ["method": IOQuaked.Refresh.name, "error": "none"]) == 2)
                    #expect(metrics.value(calls, ["method": IOQuaked.Delete.name, "error": "none"]) == 1)
                    #expect(
                        metrics.value(calls, ["method": IOQuaked.Get.name, "error": IOQuaked.NoSuchQuake.name]) == 1)
                    let methodNotFound = OrgVarlinkService.MethodNotFound.name
                    #expect(metrics.value(calls, ["method": "unknown", "error": methodNotFound]) == 1)
                    #expect(metrics.value(calls, ["method": IOQuaked.Metrics.name, "error": "none"]) ?? 0 >= 1)

                    // The client catches up; then it goes away: its Subscribe ends with the
                    // connection, as a disconnection.
                    let ack = try await daemon.result(
                        IOQuaked.Acknowledge.self, .init(client: "metrics-test", token: 3))
                    #expect(ack.error == nil, "\(ack)")
                    metrics = try await Self.metrics(daemon)
                    #expect(metrics.value("quaked_client_lag_transactions", ["client": "metrics-test"]) == 0)
                    #expect(metrics.value("quaked_client_lag_seconds", ["client": "metrics-test"]) == 0)
                    shutdown(subscriber.fd, Int32(SHUT_RDWR))
                    // The gauge drops as the subscription ends, and the call is counted as the
                    // handler returns, a moment later: both are waited for.
                    let disconnected = ["method": IOQuaked.Subscribe.name, "error": "disconnected"]
                    try? await waitUntil(timeout: .seconds(10)) {
                        metrics = try await Self.metrics(daemon)
                        return metrics.value("quaked_subscribers") == 0 && metrics.value(calls, disconnected) != nil
                    }
                    #expect(metrics.value("quaked_subscribers") == 0)
                    #expect(metrics.value(calls, disconnected) == 1)

                    // The same through HTTP and quakectl, and promtool accepts all three texts.
                    let http = try await Self.scrape(daemon)
                    #expect(http.value("quaked_pulls_total", ["feed": feed, "result": "failed"]) == 1)
                    #expect(Set(http.types.keys) == Set(metrics.types.keys), "HTTP serves the same families")
                    let quakectl = try await ChildProcess.run(
                        BuiltProducts.path("quakectl"), ["metrics", "--socket", daemon.socketPath])
                    #expect(quakectl.status == 0, "\(quakectl.stderr)")
                    let printed = try Exposition(quakectl.stdout)
                    #expect(printed.value("quaked_history_head_token") == 3)
                    if Promtool.isInstalled {
                        for text in [metrics.text, http.text, printed.text] {
                            let check = try await Promtool.checkMetrics(text)
                            #expect(check.status == 0, "promtool check metrics: \(check.output)\n\(text)")
                        }
                    } else {
                        Issue.record("promtool is not installed: run scripts/install-deps")
                    }
                    #expect(try await daemon.stop() == 0)
                }
            }
        }

        @Test("the HTTP listener serves GET and HEAD of /metrics only: 404 elsewhere, 405 for other methods")
        func httpListener() async throws {
            try await withTemporaryDirectory { dir in
                let daemon = try await DaemonHarness(
                    in: dir, ["--feed", Self.small.absoluteString, "--interval", "1h"],
                    environment: ["QUAKED_METRICS_LISTEN": "127.0.0.1:0"])
                let base = try await Self.metricsURL(daemon)
                try await withHTTPClient(readTimeout: .seconds(30)) { client in
                    let get = try await Self.request(client, base + "?name[]=x")
                    #expect(get.status == .ok)
                    #expect(get.headers.first(name: "Content-Type") == "text/plain; version=0.0.4; charset=utf-8")
                    #expect(try Exposition(get.body).value("quaked_history_head_token") != nil)
                    let head = try await Self.request(client, base, method: .HEAD)
                    #expect(head.status == .ok)
                    #expect(head.body.isEmpty)
                    #expect(Int(head.headers.first(name: "Content-Length") ?? "") ?? 0 > 1000)
                    let elsewhere = try await Self.request(client, base.replacingOccurrences(of: "/metrics", with: "/"))
                    #expect(elsewhere.status == .notFound)
                    let other = try await Self.request(client, base + "x")
                    #expect(other.status == .notFound)
                    let post = try await Self.request(client, base, method: .POST)
                    #expect(post.status == .methodNotAllowed)
                    #expect(post.headers.first(name: "Allow") == "GET, HEAD")
                    // Keep-alive: several requests on one connection.
                    for _ in 0..<3 { #expect(try await Self.request(client, base).status == .ok) }
                }
                #expect(try await daemon.stop() == 0)
            }
        }

        @Test(
            "a malformed metrics-listen stops quaked at start-up with 78, naming the setting",
            arguments: ["localhost:9464", "127.0.0.1", "127.0.0.1:65536", "[::1]", "::1:9464", "1.2.3:80", "127.0.0.1:x"])
        func malformedAddress(value: String) async throws {
            try await withTemporaryDirectory { dir in
                let result = try await ChildProcess.run(
                    BuiltProducts.path("quaked"),
                    [
                        "--state-dir", dir.appendingPathComponent("state").path, "--socket",
                        dir.appendingPathComponent("q.sock").path, "--feed", Self.small.absoluteString,
                    ],
                    environment: ["QUAKED_METRICS_LISTEN": value], timeout: .seconds(20))
                #expect(result.status == 78, "\(result.stderr)")
                #expect(result.stderr.contains("metrics-listen (QUAKED_METRICS_LISTEN)"), "\(result.stderr)")
                #expect(result.stderr.contains(value), "\(result.stderr)")
            }
        }

        @Test("a metrics-listen address already in use stops quaked at start-up with 78, naming the setting")
        func addressInUse() async throws {
            let (port, fd) = try loopbackPort(keepOpen: true)
            defer { if let fd { close(fd) } }
            try await withTemporaryDirectory { dir in
                let result = try await ChildProcess.run(
                    BuiltProducts.path("quaked"),
                    [
                        "--state-dir", dir.appendingPathComponent("state").path, "--socket",
                        dir.appendingPathComponent("q.sock").path, "--feed", Self.small.absoluteString,
                    ],
                    environment: ["QUAKED_METRICS_LISTEN": "127.0.0.1:\(port)"], timeout: .seconds(20))
                #expect(result.status == 78, "\(result.stderr)")
                #expect(
                    result.stderr.contains("metrics-listen: cannot listen on 127.0.0.1:\(port): Address already in use"),
                    "\(result.stderr)")
                #expect(!FileManager.default.fileExists(atPath: dir.appendingPathComponent("q.sock").path))
            }
        }

        @Test("IPv6: metrics-listen = [::1]:PORT")
        func ipv6() async throws {
            guard let (port, _) = try? loopbackPort(family: AF_INET6) else {
                Issue.record("no IPv6 loopback here")
                return
            }
            try await withTemporaryDirectory { dir in
                let daemon = try await DaemonHarness(
                    in: dir, ["--feed", Self.small.absoluteString, "--interval", "1h"],
                    environment: ["QUAKED_METRICS_LISTEN": "[::1]:\(port)"])
                try await withHTTPClient(readTimeout: .seconds(30)) { client in
                    let response = try await Self.request(client, "http://[::1]:\(port)/metrics")
                    #expect(response.status == .ok)
                    #expect(try Exposition(response.body).value("quaked_subscribers") == 0)
                }
                #expect(try await daemon.stop() == 0)
            }
        }

        @Test("a reload with a bad metrics-listen is rejected and the listener keeps serving; a new address waits for a restart")
        func reload() async throws {
            try await withTemporaryDirectory { dir in
                let config = dir.appendingPathComponent("quaked.conf")
                try "metrics-listen = 127.0.0.1:0\n".write(to: config, atomically: true, encoding: .utf8)
                let daemon = try await DaemonHarness(
                    in: dir, ["--feed", Self.small.absoluteString, "--interval", "1h", "--config", config.path])
                let url = try await Self.metricsURL(daemon)
                try "metrics-listen = 127.0.0.1:99999\n".write(to: config, atomically: true, encoding: .utf8)
                let rejected = try await daemon.result(IOQuaked.Reload.self, .init())
                #expect(rejected.error?.name == IOQuaked.ReloadFailed.name, "\(rejected)")
                let reason = try rejected.error?.decode(IOQuaked.ReloadFailed.self).reason ?? ""
                #expect(reason.contains("metrics-listen"), "\(reason)")
                try "metrics-listen = 127.0.0.1:1\n".write(to: config, atomically: true, encoding: .utf8)
                let accepted = try await daemon.result(IOQuaked.Reload.self, .init())
                #expect(accepted.error == nil, "\(accepted)")
                let status = try await withHTTPClient(readTimeout: .seconds(30)) { client in
                    try await Self.request(client, url).status
                }
                #expect(status == .ok)
                #expect(daemon.process.stderr.contains("metrics-listen takes effect at the next restart"))
                #expect(try await daemon.stop() == 0)
            }
        }

        @Test("started by systemd-socket-activate with the control and metrics sockets, quaked serves both")
        func socketActivation() async throws {
            try await withSocketActivatedQuaked(fdname: "metrics", feed: Self.small) {
                port, socketPath in
                // The first scrape starts quaked.
                try await withHTTPClient(readTimeout: .seconds(30)) { client in
                    let response = try await Self.request(client, "http://127.0.0.1:\(port)/metrics")
                    #expect(response.status == .ok)
                    #expect(try Exposition(response.body).value("quaked_subscribers") == 0)
                    let elsewhere = try await Self.request(client, "http://127.0.0.1:\(port)/fdsnws/event/1/version")
                    #expect(elsewhere.status == .notFound, "the metrics socket serves no catalog")
                }
                let text = try UnixSocketClient(path: socketPath).call(IOQuaked.Metrics.self, .init()).text
                #expect(text.contains("quaked_history_head_token"), "\(text)")
            }
        }

        // MARK: Helpers

        /// Through `io.quaked.Metrics`.
        static func metrics(_ daemon: DaemonHarness) async throws -> Exposition {
            try Exposition(try await daemon.call(IOQuaked.Metrics.self, .init()).text)
        }

        /// The URL the daemon's log says the listener serves (metrics-listen with port 0).
        static func metricsURL(_ daemon: DaemonHarness) async throws -> String {
            var url: String?
            try await waitUntil(timeout: .seconds(10)) {
                let log = daemon.process.stderr
                guard let range = log.range(of: #"http://127\.0\.0\.1:[0-9]+/metrics"#, options: .regularExpression)
                else { return false }
                url = String(log[range])
                return true
            }
            return try #require(url)
        }

        /// Through the HTTP listener, with a real HTTP client.
        static func scrape(_ daemon: DaemonHarness) async throws -> Exposition {
            let url = try await metricsURL(daemon)
            return try await withHTTPClient(readTimeout: .seconds(30)) { client in
                let response = try await request(client, url)
                #expect(response.status == .ok)
                return try Exposition(response.body)
            }
        }

        static func request(_ client: HTTPClient, _ url: String, method: HTTPMethod = .GET) async throws
            -> (status: HTTPResponseStatus, headers: HTTPHeaders, body: String)
        {
            var request = HTTPClientRequest(url: url)
            request.method = method
            let response = try await client.execute(request, timeout: .seconds(30))
            let body = try await response.body.collect(upTo: 16 << 20)
            return (response.status, response.headers, String(buffer: body))
        }
    }
}
