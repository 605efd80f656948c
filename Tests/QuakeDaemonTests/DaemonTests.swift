import Foundation
import QuakeProtocol
import QuakeStore
import QuakeTestSupport
import Testing
import Varlink

/// quaked as a long-running process against a real HTTP server on 127.0.0.1.
extension EndToEnd {
    @Suite("quaked daemon")
    struct DaemonTests {
        static let small = Fixtures.usgs("rodu__quakemap__all_day.geojson")
        static let day = Fixtures.usgs("abruzzi__earthquake-viz__all_day.geojson")
        static let week = Fixtures.usgs("abruzzi__earthquake-viz__all_week.geojson")

        @Test("scheduled pulls import; re-pulls are conditional, answered 304, and make no new token")
        func scheduledPulls() async throws {
            try await FeedTestServer.withServer { server in
                try await withTemporaryDirectory { dir in
                    server.setResponse("/feed", .uncachedFeed(Self.small))
                    let daemon = try await DaemonHarness(in: dir, ["--feed", server.url("/feed"), "--interval", "1s"])
                    try await server.waitForRequests("/feed", count: 3, timeout: .seconds(20))
                    let requests = server.requests("/feed")
                    #expect(requests[0].header("If-Modified-Since") == nil)
                    #expect(requests[1].header("If-Modified-Since") == TestResponse.defaultLastModified)
                    #expect(requests.allSatisfy { $0.header("Accept-Encoding")?.contains("gzip") == true })
                    let status = try await daemon.getStatus()
                    #expect(status.headToken == 1)
                    #expect(status.quakeCount == 151)
                    let feed = try #require(status.feeds.first)
                    #expect(feed.lastResult == .notModified)
                    #expect(feed.httpStatus == 304)
                    #expect(try await daemon.stop() == 0)
                }
            }
        }

        @Test("an ETag is sent back as If-None-Match; Cache-Control max-age spaces pulls out beyond the interval")
        func etagAndMaxAge() async throws {
            try await FeedTestServer.withServer { server in
                try await withTemporaryDirectory { dir in
                    var response = TestResponse.feed(Self.small, lastModified: nil, etag: "\"v1\"")
                    response.cacheControl = "public, max-age=2"
                    server.setResponse("/feed", response)
                    let daemon = try await DaemonHarness(in: dir, ["--feed", server.url("/feed"), "--interval", "1s"])
                    try await server.waitForRequests("/feed", count: 4, timeout: .seconds(20))
                    let requests = server.requests("/feed")
                    #expect(requests[0].header("If-None-Match") == nil)
                    #expect(requests[1].header("If-None-Match") == "\"v1\"")
                    #expect(requests[1].header("If-Modified-Since") == nil)
                    // max-age counts from when the daemon sent a request, and the server sees each
                    // one later by however long connecting took (once 0.9 s on a loaded machine),
                    // so one gap between arrivals can be short. Over three gaps only the first
                    // request's delay counts: the span is at least 6 s less that delay, where the
                    // 1 s interval (plus its 10% jitter) would make it at most 3.3 s.
                    let span = requests[3].receivedAt - requests[0].receivedAt
                    #expect(
                        span >= .milliseconds(4500),
                        "four pulls must be max-age=2 apart (6 s), not the 1 s interval: they spanned \(span)")
                    #expect(try await daemon.getStatus().headToken == 1)
                    #expect(try await daemon.stop() == 0)
                }
            }
        }

        @Test("a changed feed on the next request is merged as one new transaction")
        func changedFeedIsMerged() async throws {
            try await FeedTestServer.withServer { server in
                try await withTemporaryDirectory { dir in
                    var second = TestResponse.uncachedFeed(Self.week)
                    second.lastModified = "Sun, 23 Nov 2025 02:57:00 GMT"
                    server.setResponses("/feed", [.uncachedFeed(Self.day), second])
                    let daemon = try await DaemonHarness(in: dir, ["--feed", server.url("/feed"), "--interval", "1s"])
                    try await server.waitForRequests("/feed", count: 3, timeout: .seconds(20))
                    try await waitUntil(timeout: .seconds(10)) { try await daemon.getStatus().headToken == 2 }
                    let expected = Set(try FeedDocument(contentsOf: Self.day).ids).union(
                        try FeedDocument(contentsOf: Self.week).ids)
                    #expect(try daemon.withStore { Set(try $0.allQuakes().map(\.id)) } == expected)
                    #expect(try await daemon.stop() == 0)
                }
            }
        }

        @Test(
            "every kind of failure leaves the store untouched; the daemon backs off, honours Retry-After and recovers")
        func failuresBackOffAndRecover() async throws {
            try await FeedTestServer.withServer { server in
                try await withTemporaryDirectory { dir in
                    let size = try Data(contentsOf: Self.week).count
                    server.setResponses(
                        "/feed",
                        [
                            .uncachedFeed(Self.day),
                            .status(500), .status(500),
                            .tooManyRequests(retryAfter: "2"),
                            TestResponse.uncachedFeed(Self.week).unconditional().uncompressed().truncated(
                                afterBytes: size / 2),
                            TestResponse.uncachedFeed(Self.week).unconditional().uncompressed().stalled(
                                afterBytes: size / 2),
                            .generated(byteCount: 3 << 20),
                            .text("<html>Service Unavailable</html>"),
                            {
                                var r = TestResponse.uncachedFeed(Self.week);
                                r.lastModified = "Sun, 23 Nov 2025 02:57:00 GMT"; return r
                            }(),
                        ])
                    let daemon = try await DaemonHarness(
                        in: dir,
                        [
                            "--feed", server.url("/feed"), "--interval", "1s",
                        ],
                        environment: [
                            "QUAKED_RETRY_INITIAL_DELAY": "300ms", "QUAKED_RETRY_MAX_DELAY": "2s",
                            "QUAKED_TOTAL_TIMEOUT": "4s", "QUAKED_MAX_FEED_SIZE": "2M",
                        ])
                    try await waitUntil(timeout: .seconds(20)) { try await daemon.getStatus().headToken == 1 }
                    let afterFirst = try daemon.withStore { try StoreSnapshotText($0) }
                    #expect(afterFirst.head == 1)
                    // Through every failure, the store stays as the first import left it.
                    for count in 3...8 {
                        do {
                            try await server.waitForRequests("/feed", count: count, timeout: .seconds(30))
                        } catch {
                            Issue.record("\(error): \(daemon.process.stderr)")
                            throw error
                        }
                        #expect(try daemon.withStore { try StoreSnapshotText($0) } == afterFirst)
                        #expect(daemon.process.isRunning)
                    }
                    let feed = try #require(try await daemon.getStatus().feeds.first)
                    #expect(feed.lastResult == .failed)
                    #expect(feed.consecutiveFailures >= 6, "\(daemon.process.stderr)")
                    #expect(feed.lastError != nil)

                    // Recovery: the ninth answer is a good feed.
                    try await server.waitForRequests("/feed", count: 9, timeout: .seconds(30))
                    try await waitUntil(timeout: .seconds(10)) { try await daemon.getStatus().headToken == 2 }
                    // The feed's status follows the import's commit by a moment (the pull returns
                    // first): wait for it rather than race it.
                    try await waitUntil(timeout: .seconds(10)) {
                        let recovered = try #require(try await daemon.getStatus().feeds.first)
                        return recovered.consecutiveFailures == 0
                    }

                    // Delays grew while failing: 500, 500 (~0.3 s, ~0.6 s), then Retry-After 2 s.
                    let times = server.requests("/feed").map(\.receivedAt)
                    let gaps = zip(times.dropFirst(), times).map { $0 - $1 }
                    #expect(gaps[1] < gaps[2], "\(gaps)")
                    #expect(gaps[3] >= .milliseconds(1900), "Retry-After 2 must be honoured: \(gaps)")
                    #expect(try await daemon.stop() == 0)
                }
            }
        }

        @Test("refreshes during a pull join it: one request, one result for all")
        func refreshJoinsPull() async throws {
            try await FeedTestServer.withServer { server in
                try await withTemporaryDirectory { dir in
                    // About 1.5 s to send the feed: the scheduled first pull is still running when
                    // the refreshes arrive.
                    let size = try Data(contentsOf: Self.small).count
                    server.setResponse(
                        "/feed",
                        TestResponse.uncachedFeed(Self.small).uncompressed().slow(
                            chunkSize: size / 15, delay: .milliseconds(100)))
                    let daemon = try await DaemonHarness(in: dir, ["--feed", server.url("/feed"), "--interval", "1h"])
                    try await server.waitForRequests("/feed", count: 1)
                    let calls: [IOQuaked.Refresh.Parameters] = [.init(), .init(feed: server.url("/feed"))]
                    let replies = try await withThrowingTaskGroup(of: IOQuaked.Refresh.Reply.self) {
                        group -> [IOQuaked.Refresh.Reply] in
                        for call in calls {
                            group.addTask {
                                try await onBlockingThread {
                                    try UnixSocketClient(path: daemon.socketPath).call(
                                        IOQuaked.Refresh.self, call, timeout: .seconds(20))
                                }
                            }
                        }
                        do {
                            return try await group.reduce(into: []) { $0.append($1) }
                        } catch {
                            Issue.record("\(error): \(daemon.process.stderr)")
                            throw error
                        }
                    }
                    for reply in replies {
                        let result = try #require(reply.results.first)
                        #expect(result.result == .imported)
                        #expect(result.counts?.inserted == 151)
                    }
                    #expect(server.requestCount("/feed") == 1)
                    let unknown = try await daemon.result(IOQuaked.Refresh.self, .init(feed: "4.5_day"))
                    #expect(unknown.error?.name == IOQuaked.NoSuchFeed.name)
                    #expect(try await daemon.stop() == 0)
                }
            }
        }

        @Test("a refused connection is a failed pull, not a dead daemon")
        func connectionRefused() async throws {
            try await withTemporaryDirectory { dir in
                // Nothing listens on port 9 of 127.0.0.1.
                let daemon = try await DaemonHarness(
                    in: dir, ["--feed", "http://127.0.0.1:9/feed.geojson", "--interval", "1h"],
                    environment: ["QUAKED_RETRY_INITIAL_DELAY": "200ms", "QUAKED_CONNECT_TIMEOUT": "500ms"])
                try await waitUntil(timeout: .seconds(20)) {
                    let feed = try await daemon.getStatus().feeds.first
                    return (feed?.consecutiveFailures ?? 0) >= 2
                }
                let feed = try #require(try await daemon.getStatus().feeds.first)
                #expect(feed.lastError?.contains("127.0.0.1:9") == true)
                #expect(daemon.process.isRunning)
                #expect(try await daemon.stop() == 0)
            }
        }

        @Test("SIGTERM during a pull exits 0 within 10 s and the import rolls back")
        func sigtermMidPull() async throws {
            try await FeedTestServer.withServer { server in
                try await withTemporaryDirectory { dir in
                    let size = try Data(contentsOf: Self.week).count
                    server.setResponse(
                        "/feed", TestResponse.uncachedFeed(Self.week).uncompressed().stalled(afterBytes: size * 3 / 4))
                    let daemon = try await DaemonHarness(in: dir, ["--feed", server.url("/feed")])
                    try await server.waitForRequests("/feed", count: 1)
                    try await waitUntil(timeout: .seconds(20)) { try writeLockIsHeld(daemon.stateDirectory) }
                    let started = ContinuousClock.now
                    #expect(try await daemon.stop() == 0)
                    #expect(ContinuousClock.now - started < .seconds(10))
                    #expect(try daemon.withStore { try ($0.count(), $0.head()) } == (0, 0))
                    #expect(!FileManager.default.fileExists(atPath: daemon.socketPath))
                }
            }
        }

        @Test("a stale socket file is replaced; a socket another daemon answers on is refused")
        func staleAndLiveSockets() async throws {
            try await withTemporaryDirectory { dir in
                let feed = ["--feed", Self.small.absoluteString, "--interval", "1h"]
                // A socket file nobody listens on, as a killed daemon leaves it.
                let stale = try ChildProcess(
                    "/usr/bin/python3",
                    [
                        "-c", "import socket,sys; s=socket.socket(socket.AF_UNIX); s.bind(sys.argv[1])",
                        dir.appendingPathComponent("q.sock").path,
                    ])
                #expect(try await stale.wait() == 0)
                let first = try await DaemonHarness(in: dir, feed)
                #expect(try await first.result(OrgVarlinkService.GetInfo.self, .init()).error == nil)

                let second = try await ChildProcess.run(
                    BuiltProducts.path("quaked"),
                    ["--state-directory", dir.appendingPathComponent("state2").path, "--socket", first.socketPath] + feed)
                #expect(second.status == 1)
                #expect(second.stderr.contains("answers on"))
                #expect(first.process.isRunning)
                #expect(try await first.result(OrgVarlinkService.GetInfo.self, .init()).error == nil)
                #expect(try await first.stop() == 0)
            }
        }

        @Test("started by systemd-socket-activate, quaked serves on the passed socket")
        func socketActivation() async throws {
            try await withTemporaryDirectory { dir in
                let socketPath = dir.appendingPathComponent("activated.sock").path
                let activator = try ChildProcess(
                    "/usr/bin/systemd-socket-activate",
                    [
                        "-l", socketPath, "--fdname=varlink", BuiltProducts.path("quaked"),
                        "--state-directory", dir.appendingPathComponent("state").path,
                        // A socket path that is never bound: the passed socket must be used instead.
                        "--socket", dir.appendingPathComponent("unused.sock").path,
                        "--feed", Self.small.absoluteString, "--interval", "1h",
                    ])
                try await waitUntil(timeout: .seconds(10)) { FileManager.default.fileExists(atPath: socketPath) }
                // The first connection starts quaked.
                let client = try UnixSocketClient(path: socketPath)
                let reply = try client.call(OrgVarlinkService.GetInfo.self, .init())
                #expect(reply.product == "quaked")
                #expect(!FileManager.default.fileExists(atPath: dir.appendingPathComponent("unused.sock").path))
                activator.signal(SIGTERM)
                #expect(try await activator.wait() == 0)
            }
        }
    }
}

/// Rows, head and history of a store as comparable text.
struct StoreSnapshotText: Equatable {
    var head: HistoryToken
    var rows: [String]
    var history: [String]

    init(_ store: QuakeStore) throws {
        head = try store.head()
        rows = try store.allQuakes().map { "\($0.id) \($0.updated ?? 0) \($0.mag ?? -99)" }
        history = try store.history(after: 0, limit: 1000).transactions.map { "\($0.token) \($0.changes.count)" }
    }
}
