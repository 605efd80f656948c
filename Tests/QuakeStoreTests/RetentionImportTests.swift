import Foundation
import QuakeFeed
import QuakeTestSupport
import Testing

@testable import QuakeStore

/// Event retention at import: features older than the retention are skipped as `expired`, so a
/// feed window longer than the retention makes no churn of inserts and retention deletes.
@Suite("Event retention at import")
struct RetentionImportTests {
    static let day: Int64 = 86_400_000
    static let now = Date(timeIntervalSince1970: 1_800_000_000)
    static var nowMs: Int64 { Int64(now.timeIntervalSince1970 * 1000) }
    /// A 30-day retention.
    static let retention: Duration = .seconds(30 * 86_400)
    static var cutoff: Date { now.addingTimeInterval(-30 * 86_400) }

    /// A feed with `fresh` features of the last day and the old ones given (ages in days).
    static func feed(fresh: Int, oldAges: [Int64], updated: Int64 = 0) -> String {
        var features: [String] = []
        for n in 0..<fresh {
            features.append(featureJSON(id: "us\(n)", time: nowMs - day + Int64(n), updated: nowMs + updated))
        }
        for (n, age) in oldAges.enumerated() {
            features.append(featureJSON(id: "ak\(n)", time: nowMs - age * day, updated: nowMs + updated))
        }
        return feedJSON(features)
    }

    static func importFeed(_ json: String, into store: QuakeStore, retention: Bool = true) async throws
        -> ImportReport
    {
        let bytes = Array(json.utf8)
        return try await store.importFeed(
            source: "test://retention", now: now, expiringBefore: retention ? cutoff : nil
        ) { sink in
            var offset = 0
            while offset < bytes.count {
                let end = min(offset + 997, bytes.count)
                try await sink.send(Array(bytes[offset..<end]))
                offset = end
            }
        }
    }

    @Test("features older than the retention are skipped as expired, the others imported")
    func oldFeaturesAreSkipped() async throws {
        try await withTemporaryDirectory { dir in
            let store = try QuakeStore(directory: dir)
            let report = try await Self.importFeed(Self.feed(fresh: 3, oldAges: [31, 45]), into: store)
            #expect(report.features == 5)
            #expect(report.inserted == 3)
            #expect(report.skipped == ["expired": 2])
            #expect(report.expired == 2 && report.skippedTotal == 2)
            #expect(try store.allQuakes().map(\.id).sorted() == ["us0", "us1", "us2"])
            // The report's JSON names the reason.
            let json = String(decoding: try JSONEncoder().encode(report), as: UTF8.self)
            #expect(json.contains("\"expired\":2"))
            // Without retention, the same document stores all five.
            try await withTemporaryDirectory { other in
                let all = try QuakeStore(directory: other)
                let report = try await Self.importFeed(Self.feed(fresh: 3, oldAges: [31, 45]), into: all, retention: false)
                #expect(report.inserted == 5 && report.skipped.isEmpty)
            }
        }
    }

    @Test("repeated pull and retention cycles with nothing new leave the head where it is")
    func noChurnAcrossCycles() async throws {
        try await withTemporaryDirectory { dir in
            let store = try QuakeStore(directory: dir)
            // Stored before the retention was set: two quakes older than it.
            let document = Self.feed(fresh: 40, oldAges: [31, 60])
            let first = try await Self.importFeed(document, into: store, retention: false)
            #expect(first.inserted == 42)
            let expired = try #require(try await store.applyRetention(maxAge: Self.retention, now: Self.now))
            #expect(try store.count() == 40)
            let head = try store.head()
            #expect(head == expired)
            let before = try StoreSnapshot(store)
            for _ in 0..<3 {
                let again = try await Self.importFeed(document, into: store)
                #expect(again.token == nil, "the re-import wrote history: \(again)")
                #expect(again.expired == 2 && again.inserted == 0 && again.unchanged == 40)
                #expect(try await store.applyRetention(maxAge: Self.retention, now: Self.now) == nil)
                #expect(try store.head() == head)
            }
            #expect(try StoreSnapshot(store) == before)
            // The expired quakes left once, through the retention pass.
            let deletes = try store.history(after: 0, limit: 100).transactions.flatMap(\.changes)
                .filter { $0.kind == .delete }
            #expect(deletes.map(\.quakeId).sorted() == ["ak0", "ak1"])
            #expect(deletes.allSatisfy { $0.reason == .expired })
        }
    }

    @Test("a stored quake that has expired is neither updated nor counted unchanged, and not brought back")
    func storedExpiredQuakeIsLeftToRetention() async throws {
        try await withTemporaryDirectory { dir in
            let store = try QuakeStore(directory: dir)
            // Many unchanged features first, so that the import stops decoding them and reaches
            // the expired one by its stored hash alone.
            let document = Self.feed(fresh: 60, oldAges: [31])
            _ = try await Self.importFeed(document, into: store, retention: false)
            let stored = try #require(try store.quake(id: "ak0"))
            let head = try store.head()

            let same = try await Self.importFeed(document, into: store)
            #expect(same.token == nil)
            #expect(same.expired == 1 && same.unchanged == 60)
            #expect(same.unchangedByHash >= 50, "the re-import decoded features it need not have")

            // A newer version of it is left out too: the row stays as it was until retention.
            let newer = try await Self.importFeed(Self.feed(fresh: 60, oldAges: [31], updated: 1000), into: store)
            #expect(newer.expired == 1 && newer.updated == 60)
            #expect(try store.quake(id: "ak0") == stored)
            #expect(try store.head() == head + 1)

            let token = try #require(try await store.applyRetention(maxAge: Self.retention, now: Self.now))
            #expect(try store.quake(id: "ak0") == nil)
            let again = try await Self.importFeed(document, into: store)
            #expect(try store.quake(id: "ak0") == nil)
            #expect(again.expired == 1)
            #expect(try store.head() == token)
        }
    }

    @Test("a feature exactly at the cutoff is kept; one a millisecond older is expired")
    func cutoffIsExclusive() async throws {
        try await withTemporaryDirectory { dir in
            let store = try QuakeStore(directory: dir)
            let cutoffMs = Int64(Self.cutoff.timeIntervalSince1970 * 1000)
            let report = try await Self.importFeed(
                feedJSON([featureJSON(id: "us1", time: cutoffMs), featureJSON(id: "us2", time: cutoffMs - 1)]),
                into: store)
            #expect(report.inserted == 1 && report.expired == 1)
            #expect(try store.allQuakes().map(\.id) == ["us1"])
            // The retention pass agrees: it deletes nothing the import kept.
            #expect(try await store.applyRetention(maxAge: Self.retention, now: Self.now) == nil)
        }
    }
}
