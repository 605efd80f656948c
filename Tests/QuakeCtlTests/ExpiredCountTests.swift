import Foundation
import QuakeProtocol
import QuakeTestSupport
import Testing

/// Features left out as older than event-retention show in `quakectl status` and `refresh --json`.
extension ClientEndToEnd {
    @Suite struct ExpiredCountTests {
        @Test func expiredFeaturesAreCountedNotStored() async throws {
            try await withTemporaryDirectory { config in
                // The fixture's events are from 2025: an hour's retention leaves every one out.
                let file = config.appendingPathComponent("quaked.conf")
                try "event-retention = 1h\n".write(to: file, atomically: true, encoding: .utf8)
                try await withQuaked(arguments: ["--config", file.path]) { daemon in
                    let refreshed = try await quakectl(["refresh", "--json", "--socket", daemon.socketPath])
                    #expect(refreshed.status == 0, "\(refreshed.stderr)")
                    let reply = try JSONDecoder().decode(IOQuaked.Refresh.Reply.self, from: Data(refreshed.stdout.utf8))
                    let counts = try #require(reply.results.first?.counts)
                    #expect(counts.expired > 100)
                    #expect(counts.skipped >= counts.expired)
                    #expect(counts.inserted == 0 && counts.unchanged == 0)
                    #expect(try daemon.withStore { try $0.count() } == 0)

                    let text = try await quakectl(["status", "--socket", daemon.socketPath])
                    #expect(text.stdout.contains("+0 new, 0 updated, 0 unchanged, \(counts.expired) expired"), "\(text.stdout)")
                    let plain = try await quakectl(["refresh", "--socket", daemon.socketPath])
                    #expect(plain.stdout == "no changes\n")
                }
            }
        }
    }
}
