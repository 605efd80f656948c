import Foundation
import QuakeProtocol
import QuakeTestSupport
import Testing

/// A failed pull as GetStatus, `quakectl status` and the log show it: its kind, HTTP status and
/// Retry-After as fields of their own, beside the text.
extension EndToEnd {
    @Suite("failures with structure")
    struct FailureStatusTests {
        static var nowMs: Int { Int(Date().timeIntervalSince1970 * 1000) }

        static func feedStatus(_ daemon: DaemonHarness) async throws -> IOQuaked.FeedStatus {
            try #require(try await daemon.getStatus().feeds.first)
        }

        @Test("a 503 with Retry-After: its kind, status and Retry-After are fields in GetStatus, quakectl status and the log")
        func serviceUnavailableWithRetryAfter() async throws {
            try await FeedTestServer.withServer { server in
                try await withTemporaryDirectory { dir in
                    server.setResponse("/feed", .serviceUnavailable(retryAfter: "120"))
                    let daemon = try await DaemonHarness(in: dir, ["--feed", server.url("/feed"), "--interval", "1s"])
                    try await waitUntil(timeout: .seconds(20)) {
                        try await Self.feedStatus(daemon).consecutiveFailures == 1
                    }
                    let pulledBy = Self.nowMs
                    let feed = try await Self.feedStatus(daemon)
                    #expect(feed.lastResult == .failed)
                    #expect(feed.errorKind == "http-status")
                    #expect(feed.httpStatus == 503)
                    let retryAfter = try #require(feed.retryAfter)
                    #expect(
                        retryAfter > pulledBy + 100_000 && retryAfter <= pulledBy + 121_000,
                        "Retry-After 120 is \(retryAfter - pulledBy) ms away")
                    #expect((feed.nextPull ?? 0) >= retryAfter - 1000, "the next pull honours Retry-After")
                    let text = try #require(feed.lastError)
                    #expect(text.contains("503 Service Unavailable") && text.hasSuffix("the store is unchanged"), "\(text)")

                    let quakectl = BuiltProducts.path("quakectl")
                    let json = try await ChildProcess.run(quakectl, ["status", "--json", "--socket", daemon.socketPath])
                    #expect(json.status == 0, "\(json.stderr)")
                    let object = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any])
                    let shown = try #require((object["feeds"] as? [[String: Any]])?.first)
                    #expect(shown["errorKind"] as? String == "http-status")
                    #expect(shown["retryAfter"] as? Int == retryAfter)
                    let plain = try await ChildProcess.run(quakectl, ["status", "--socket", daemon.socketPath])
                    #expect(plain.stdout.contains(": failed (HTTP 503, "), "\(plain.stdout)")
                    #expect(plain.stdout.contains("(Retry-After)"), "\(plain.stdout)")

                    let logged = try #require(
                        daemon.process.stderr.split(separator: "\n").first { $0.contains("pull failed") })
                    #expect(logged.contains("error.kind=http-status"), "\(logged)")
                    #expect(logged.contains("http.status=503"), "\(logged)")
                    #expect(logged.contains("retry.after="), "\(logged)")
                    #expect(try await daemon.stop() == 0)
                }
            }
        }

        @Test("a pull that gets no answer is a transport failure without an HTTP status")
        func transportFailure() async throws {
            try await withTemporaryDirectory { dir in
                // Nothing listens on port 9 of 127.0.0.1 (discard): the connection is refused (and
                // retried by the HTTP client until the connect timeout).
                let daemon = try await DaemonHarness(
                    in: dir, ["--feed", "http://127.0.0.1:9/feed", "--interval", "1h"],
                    environment: ["QUAKED_CONNECT_TIMEOUT": "1s"])
                try await waitUntil(timeout: .seconds(20)) {
                    try await Self.feedStatus(daemon).consecutiveFailures == 1
                }
                let feed = try await Self.feedStatus(daemon)
                #expect(feed.errorKind == "transport")
                #expect(feed.httpStatus == nil)
                #expect(feed.retryAfter == nil)
                #expect(feed.lastError?.contains("127.0.0.1:9") == true)
                let plain = try await ChildProcess.run(
                    BuiltProducts.path("quakectl"), ["status", "--socket", daemon.socketPath])
                #expect(plain.stdout.contains(": failed (transport, "), "\(plain.stdout)")
                #expect(try await daemon.stop() == 0)
            }
        }
    }
}
