import Foundation
import GRDB
import QuakeFeed
import QuakeTestSupport
import Testing

@testable import QuakeStore

/// Per-feed state (validators and backoff) kept across restarts, in table `feedState`.
@Suite("Feed state")
struct FeedStateTests {
    static let url = "https://example.org/feed.geojson"
    static let v1 = FeedValidators(lastModified: "Sat, 22 Nov 2025 02:57:00 GMT", etag: "\"v1\"")
    static let v2 = FeedValidators(lastModified: "Sat, 22 Nov 2025 03:00:00 GMT", etag: "\"v2\"")

    static func importDocument(
        _ json: String, into store: QuakeStore, validators: FeedValidators, now: Date = Date()
    ) async throws -> ImportReport {
        let bytes = Array(json.utf8)
        return try await store.importFeed(
            source: url, now: now, feed: ImportedFeed(url: url, validators: validators)
        ) { sink in
            try await sink.send(bytes)
        }
    }

    @Test("validators are stored with the import of their body, and survive reopening")
    func validatorsGoWithTheImport() async throws {
        try await withTemporaryDirectory { dir in
            var store = try QuakeStore(directory: dir)
            #expect(try store.feedState(url: Self.url) == nil)
            let report = try await Self.importDocument(feedJSON([featureJSON(id: "us1")]), into: store, validators: Self.v1)
            #expect(report.inserted == 1)
            #expect(try store.feedState(url: Self.url) == FeedState(validators: Self.v1))
            try store.close()
            store = try QuakeStore(directory: dir)
            defer { try? store.close() }
            #expect(try store.feedState(url: Self.url) == FeedState(validators: Self.v1))
            #expect(try store.feedState(url: "https://example.org/other.geojson") == nil)
        }
    }

    @Test("an import that fails leaves the validators of the last body imported")
    func failedImportKeepsValidators() async throws {
        try await withTemporaryDirectory { dir in
            let store = try QuakeStore(directory: dir)
            _ = try await Self.importDocument(feedJSON([featureJSON(id: "us1")]), into: store, validators: Self.v1)
            let whole = feedJSON([featureJSON(id: "us2"), featureJSON(id: "us3")])
            let cut = String(whole.prefix(whole.count / 2))
            await #expect(throws: ImportError.self) {
                _ = try await Self.importDocument(cut, into: store, validators: Self.v2)
            }
            #expect(try store.feedState(url: Self.url)?.validators == Self.v1)
            #expect(try store.allQuakes().map(\.id) == ["us1"])
            // And a producer that fails midway (a body cut short by the network).
            await #expect(throws: (any Error).self) {
                _ = try await store.importFeed(
                    source: Self.url, feed: ImportedFeed(url: Self.url, validators: Self.v2)
                ) { sink in
                    try await sink.send(Array(whole.utf8.prefix(40)))
                    throw CancellationError()
                }
            }
            #expect(try store.feedState(url: Self.url)?.validators == Self.v1)
        }
    }

    @Test("a failure records the backoff and keeps the validators; a 304 clears it")
    func backoffAndNotModified() async throws {
        try await withTemporaryDirectory { dir in
            let store = try QuakeStore(directory: dir)
            _ = try await Self.importDocument(feedJSON([featureJSON(id: "us1")]), into: store, validators: Self.v1)
            let next = Date(timeIntervalSince1970: 1_900_000_000.5)
            try await store.recordPullFailure(url: Self.url, consecutiveFailures: 3, nextAttempt: next)
            let failing = try #require(try store.feedState(url: Self.url))
            #expect(failing.validators == Self.v1)
            #expect(failing.consecutiveFailures == 3)
            #expect(failing.nextAttempt == next)
            let head = try store.head()

            try await store.recordNotModified(url: Self.url, validators: Self.v2)
            #expect(try store.feedState(url: Self.url) == FeedState(validators: Self.v2))
            // Bookkeeping of pulls: no history.
            #expect(try store.head() == head)

            // A feed that never succeeded has a backoff and no validators.
            try await store.recordPullFailure(url: "http://x.test/f", consecutiveFailures: 1, nextAttempt: next)
            #expect(
                try store.feedState(url: "http://x.test/f")
                    == FeedState(validators: FeedValidators(), consecutiveFailures: 1, nextAttempt: next))
        }
    }

    @Test("v7: a store from before feedState gains the table, its rows and history untouched")
    func upgradeFromV6() async throws {
        try await withTemporaryDirectory { dir in
            let path = dir.appendingPathComponent(QuakeStore.fileName).path
            do {
                let pool = try DatabasePool(path: path)
                try StoreSchema.migrator.migrate(pool, upTo: "v6-alias-index")
                try await pool.write { db in
                    try db.execute(
                        sql: """
                            INSERT INTO quakes (id, time, mag) VALUES ('ak1', 1000, 2.5);
                            INSERT INTO historyTransactions (author, timestamp, inserted) VALUES ('import', 1, 1);
                            INSERT INTO historyChanges (token, quakeId, kind) VALUES (1, 'ak1', 'insert');
                            """)
                }
                #expect(try await pool.read { try $0.tableExists("feedState") } == false)
                try pool.close()
            }
            let store = try QuakeStore(path: path)
            defer { try? store.close() }
            #expect(try store.feedState(url: Self.url) == nil)
            #expect(try store.quake(id: "ak1")?.mag == 2.5)
            #expect(try store.head() == 1)
            #expect(try store.checkIntegrity().isEmpty)
            try await store.recordPullFailure(url: Self.url, consecutiveFailures: 1, nextAttempt: nil)
            #expect(try store.feedState(url: Self.url)?.consecutiveFailures == 1)
        }
    }

    @Test("a pull that changes nothing writes nothing")
    func unchangedStateIsNotWritten() async throws {
        try await withTemporaryDirectory { dir in
            let store = try QuakeStore(directory: dir)
            let document = feedJSON([featureJSON(id: "us1")])
            let first = Date(timeIntervalSince1970: 1_800_000_000)
            _ = try await Self.importDocument(document, into: store, validators: Self.v1, now: first)
            _ = try await Self.importDocument(
                document, into: store, validators: Self.v1, now: first.addingTimeInterval(60))
            try await store.recordNotModified(url: Self.url, validators: Self.v1, now: first.addingTimeInterval(120))
            let queue = try DatabaseQueue(path: store.path)
            let updatedAt = try await queue.read { db in
                try Int64.fetchOne(db, sql: "SELECT updatedAt FROM feedState WHERE url = ?", arguments: [Self.url])
            }
            #expect(updatedAt == 1_800_000_000_000)
        }
    }
}
