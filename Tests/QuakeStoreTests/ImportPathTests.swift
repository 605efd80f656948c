import Foundation
import GRDB
import QuakeFeed
import QuakeTestSupport
import Testing

@testable import QuakeStore

/// The import's fast paths (insert first while features are new, compare in place while they are
/// stored) must decide exactly as the general path does, whichever way a feed alternates.
@Suite("Import fast paths")
struct ImportPathTests {
    @Test("new and stored features alternating: each is inserted, unchanged or updated as it should")
    func alternatingNewAndStored() async throws {
        try await withTemporaryDirectory { dir in
            let store = try QuakeStore(directory: dir)
            _ = try await importJSON(
                feedJSON([featureJSON(id: "us1"), featureJSON(id: "us3"), featureJSON(id: "us5", mag: "3.0")]),
                into: store)
            let report = try await importJSON(
                feedJSON([
                    featureJSON(id: "us1"),  // stored, identical
                    featureJSON(id: "us2"),  // new
                    featureJSON(id: "us3"),  // stored right after a new one: the insert is tried first
                    featureJSON(id: "us4"),  // new
                    featureJSON(id: "us5", updated: 1_700_000_200_000, mag: "3.5"),  // stored, changed
                    featureJSON(id: "us6"),  // new
                    featureJSON(id: "us6", updated: 1_700_000_000_000),  // same feed, older: stale
                ]),
                into: store)
            #expect(report.inserted == 3)
            #expect(report.unchanged == 2)
            #expect(report.updated == 1)
            #expect(report.stale == 1)
            #expect(try store.count() == 6)
            let transaction = try #require(try store.history(after: 1).transactions.first)
            #expect(transaction.inserted == 3 && transaction.updated == 1 && transaction.deleted == 0)
            let update = try #require(transaction.changes.first { $0.quakeId == "us5" })
            #expect(update.kind == .update)
            #expect(update.fields?.map(\.field).sorted() == ["mag", "title", "updated"])
            #expect(try store.quake(id: "us5")?.mag == 3.5)
        }
    }

    @Test("a feature listed twice right after being inserted coalesces into one insert")
    func insertThenSameIDAgain() async throws {
        try await withTemporaryDirectory { dir in
            let store = try QuakeStore(directory: dir)
            let report = try await importJSON(
                feedJSON([
                    featureJSON(id: "us1"), featureJSON(id: "us2"),
                    featureJSON(id: "us2"),  // identical: unchanged
                    featureJSON(id: "us2", updated: 1_700_000_300_000, mag: "5.0"),
                ]),
                into: store)
            #expect(report.inserted == 2 && report.unchanged == 1 && report.updated == 0)
            let transaction = try #require(try store.history(after: 0).transactions.first)
            #expect(transaction.changes.count == 2)
            #expect(transaction.changes.allSatisfy { $0.kind == .insert })
            #expect(try store.quake(id: "us2")?.mag == 5.0)
        }
    }

    @Test("strings with U+0000 and non-ASCII text round-trip and re-import as unchanged")
    func unusualStringsRoundTrip() async throws {
        try await withTemporaryDirectory { dir in
            let store = try QuakeStore(directory: dir)
            let document = feedJSON([
                featureJSON(id: "us1", place: #""a\u0000b""#),
                featureJSON(id: "us2", place: #""São Tomé, 東京 \ud83c\udf0b""#),
                featureJSON(id: "us3", place: #""""#),
            ])
            let first = try await importJSON(document, into: store)
            #expect(first.inserted == 3)
            // Stored whole (GRDB's String decoding stops at U+0000, so look at the bytes).
            let bytes = try await store.pool.read { db in
                try Int.fetchOne(db, sql: "SELECT length(CAST(place AS BLOB)) FROM quakes WHERE id = 'us1'")
            }
            #expect(bytes == 3)
            #expect(try store.quake(id: "us2")?.place == "São Tomé, 東京 🌋")
            #expect(try store.quake(id: "us3")?.place == "")
            let again = try await importJSON(document, into: store)
            #expect(again.unchanged == 3)
            #expect(again.token == nil)
        }
    }

    @Test("purging a history transaction removes its change rows")
    func purgeRemovesChanges() async throws {
        try await withTemporaryDirectory { dir in
            let store = try QuakeStore(directory: dir)
            let old = Date(timeIntervalSince1970: 1_700_000_000)
            _ = try await importJSON(feedJSON([featureJSON(id: "us1"), featureJSON(id: "us2")]), into: store, now: old)
            _ = try await importJSON(feedJSON([featureJSON(id: "us3")]), into: store)
            try await store.purgeHistory(olderThan: .seconds(3600))
            let remaining = try await store.pool.read { db in
                try String.fetchAll(db, sql: "SELECT quakeId FROM historyChanges ORDER BY quakeId")
            }
            #expect(remaining == ["us3"])
        }
    }
}
