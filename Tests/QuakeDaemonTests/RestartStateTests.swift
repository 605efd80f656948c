import Foundation
import QuakeProtocol
import QuakeStore
import QuakeTestSupport
import Testing

/// What a feed's pulls leave in the store outlives the daemon: validators and backoff.
extension EndToEnd {
    @Suite("feed state across restarts")
    struct RestartStateTests {
        static let small = Fixtures.usgs("rodu__quakemap__all_day.geojson")

        static func feedStatus(_ daemon: DaemonHarness) async throws -> IOQuaked.FeedStatus {
            try #require(try await daemon.getStatus().feeds.first)
        }

        static var nowMs: Int { Int(Date().timeIntervalSince1970 * 1000) }

        @Test("the first pull after a restart is conditional and answered 304")
        func validatorsSurviveRestart() async throws {
            try await FeedTestServer.withServer { server in
                try await withTemporaryDirectory { dir in
                    server.setResponse("/feed", .uncachedFeed(Self.small).withETag("\"v1\""))
                    let arguments = ["--feed", server.url("/feed"), "--interval", "1h"]
                    var daemon = try await DaemonHarness(in: dir, arguments)
                    try await server.waitForRequests("/feed", count: 1, timeout: .seconds(20))
                    try await waitUntil(timeout: .seconds(20)) {
                        try await Self.feedStatus(daemon).lastResult == .imported
                    }
                    #expect(server.requests("/feed")[0].header("If-None-Match") == nil)
                    #expect(try await daemon.stop() == 0)
                    let stored = try daemon.withStore { try $0.feedState(url: server.url("/feed")) }
                    #expect(stored?.validators.etag == "\"v1\"")
                    #expect(stored?.validators.lastModified == TestResponse.defaultLastModified)

                    daemon = try await DaemonHarness(in: dir, arguments)
                    try await server.waitForRequests("/feed", count: 2, timeout: .seconds(20))
                    let again = server.requests("/feed")[1]
                    #expect(again.header("If-None-Match") == "\"v1\"")
                    #expect(again.header("If-Modified-Since") == TestResponse.defaultLastModified)
                    try await waitUntil(timeout: .seconds(20)) {
                        try await Self.feedStatus(daemon).lastResult == .notModified
                    }
                    #expect(try await Self.feedStatus(daemon).httpStatus == 304)
                    let status = try await daemon.getStatus()
                    #expect(status.headToken == 1)
                    #expect(status.quakeCount == 151)
                    #expect(try await daemon.stop() == 0)
                }
            }
        }

        @Test("a server that said Retry-After: 120 is not asked again after a restart; a refresh still pulls")
        func backoffSurvivesRestart() async throws {
            try await FeedTestServer.withServer { server in
                try await withTemporaryDirectory { dir in
                    server.setResponse("/feed", .serviceUnavailable(retryAfter: "120"))
                    let arguments = ["--feed", server.url("/feed"), "--interval", "1s"]
                    var daemon = try await DaemonHarness(in: dir, arguments)
                    try await server.waitForRequests("/feed", count: 1, timeout: .seconds(20))
                    try await waitUntil(timeout: .seconds(20)) {
                        try await Self.feedStatus(daemon).consecutiveFailures == 1
                    }
                    #expect(try await daemon.stop() == 0)
                    let saved = try #require(try daemon.withStore { try $0.feedState(url: server.url("/feed")) })
                    #expect(saved.consecutiveFailures == 1)
                    let wait = try #require(saved.nextAttempt).timeIntervalSinceNow
                    #expect(wait > 100 && wait <= 120, "the saved next attempt is \(wait) s away")

                    daemon = try await DaemonHarness(in: dir, arguments)
                    let feed = try await Self.feedStatus(daemon)
                    #expect(feed.consecutiveFailures == 1)
                    let nextPull = try #require(feed.nextPull)
                    #expect(nextPull > Self.nowMs + 90_000, "the restarted daemon plans to pull at \(nextPull)")
                    // Without the saved backoff, the restarted daemon pulls at once and then every
                    // second (the interval): give it time to show.
                    try await Task.sleep(for: .seconds(2))
                    #expect(server.requestCount("/feed") == 1, "the server was asked again after the restart")

                    // An explicit refresh is not held back.
                    server.setResponse("/feed", .uncachedFeed(Self.small))
                    let refresh = try await daemon.result(IOQuaked.Refresh.self, .init())
                    #expect(refresh.error == nil, "\(refresh)")
                    #expect(server.requestCount("/feed") >= 2)
                    #expect(try await Self.feedStatus(daemon).consecutiveFailures == 0)
                    #expect(try await daemon.stop() == 0)
                    let cleared = try daemon.withStore { try $0.feedState(url: server.url("/feed")) }
                    #expect(cleared?.consecutiveFailures == 0 && cleared?.nextAttempt == nil)
                }
            }
        }

        @Test(
            "Retry-After is honoured up to retry-after-max, in seconds and as an HTTP date",
            arguments: ["864000", "date"])
        func retryAfterIsCapped(form: String) async throws {
            try await FeedTestServer.withServer { server in
                try await withTemporaryDirectory { dir in
                    let value: String
                    if form == "date" {
                        let formatter = DateFormatter()
                        formatter.locale = Locale(identifier: "en_US_POSIX")
                        formatter.timeZone = TimeZone(identifier: "GMT")
                        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
                        value = formatter.string(from: Date().addingTimeInterval(10 * 86_400))
                    } else {
                        value = form
                    }
                    server.setResponse("/feed", .tooManyRequests(retryAfter: value))
                    let daemon = try await DaemonHarness(
                        in: dir, ["--feed", server.url("/feed"), "--interval", "1s"],
                        environment: ["QUAKED_RETRY_AFTER_MAX": "5m"])
                    try await server.waitForRequests("/feed", count: 1, timeout: .seconds(20))
                    try await waitUntil(timeout: .seconds(20)) {
                        let feed = try await Self.feedStatus(daemon)
                        return feed.consecutiveFailures == 1 && feed.nextPull != nil
                    }
                    let nextPull = try #require(try await Self.feedStatus(daemon).nextPull)
                    let away = Double(nextPull - Self.nowMs) / 1000
                    // 5 minutes, not 10 days; and not the first backoff (10 s) either.
                    #expect(away > 240 && away <= 300, "the next pull is \(away) s away")
                    let saved = try daemon.withStore { try $0.feedState(url: server.url("/feed")) }
                    let savedAway = try #require(saved?.nextAttempt).timeIntervalSinceNow
                    #expect(savedAway > 240 && savedAway <= 300)
                    #expect(try await daemon.stop() == 0)
                }
            }
        }
    }
}

extension TestResponse {
    /// A copy with an `ETag`.
    func withETag(_ etag: String) -> TestResponse {
        var copy = self
        copy.etag = etag
        return copy
    }
}
