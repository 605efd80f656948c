import Foundation
import GRDB
import QuakeFeed
import QuakeModel
import QuakeTestSupport
import Testing

@testable import QuakeStore

/// The re-import fast path: features found unchanged by the hash of their bytes (`feedHash`),
/// undecoded, and everything that must still take the long way.
@Suite("Re-import by feature hash")
struct ReimportTests {
    /// `count` distinct features, in feed form.
    static func features(_ count: Int, prefix: String = "zz") -> [String] {
        (0..<count).map {
            featureJSON(id: "\(prefix)\(String(format: "%05d", $0))", time: 1_700_000_000_000 + Int64($0))
        }
    }

    @Test("a re-import finds every stored feature by its hash, with nothing written")
    func reimportByHash() async throws {
        try await withTemporaryDirectory { dir in
            let store = try QuakeStore(directory: dir)
            let fixture = Fixtures.usgs("tylerhill122__leaflet-usgs__all_week.geojson")
            let first = try await store.importFile(fixture)
            let before = try StoreSnapshot(store)
            let again = try await store.importFile(fixture)
            // Features listing other ids always take the long way (an alias may be back).
            var withAliases = 0
            var parser = FeedParser()
            try parser.consume(Array(try Data(contentsOf: fixture))) { item in
                if case .feature(let f, _) = item, !f.otherIDs.isEmpty { withAliases += 1 }
            }
            #expect(withAliases > 0)
            #expect(again.unchanged == first.inserted)
            #expect(again.unchangedByHash == first.inserted - withAliases)
            #expect(again.token == nil)
            #expect(try StoreSnapshot(store) == before)
        }
    }

    @Test("the same values in other bytes are unchanged, and their hash is remembered without history")
    func sameValuesOtherBytes() async throws {
        try await withTemporaryDirectory { dir in
            let store = try QuakeStore(directory: dir)
            let plain = Self.features(40)
            _ = try await importJSON(feedJSON(plain), into: store)
            let before = try StoreSnapshot(store)
            // Same members, other spacing: other bytes, same values.
            let spaced = plain.map { $0.replacingOccurrences(of: "\",\"", with: "\", \"") }
            let second = try await importJSON(feedJSON(spaced), into: store)
            #expect(second.unchanged == 40)
            #expect(second.unchangedByHash == 0)
            #expect(second.token == nil)
            #expect(try StoreSnapshot(store) == before)
            let third = try await importJSON(feedJSON(spaced), into: store)
            #expect(third.unchangedByHash == 40)
        }
    }

    @Test("a changed feature deep in a re-import is decoded and updated; the rest stay unchanged")
    func changedFeatureInAReimport() async throws {
        try await withTemporaryDirectory { dir in
            let store = try QuakeStore(directory: dir)
            var features = Self.features(60)
            _ = try await importJSON(feedJSON(features), into: store)
            features[50] = featureJSON(
                id: "zz00050", time: 1_700_000_000_050, updated: 1_700_000_200_000, mag: "5.2")
            let report = try await importJSON(feedJSON(features), into: store)
            #expect(report.updated == 1)
            #expect(report.unchanged == 59)
            #expect(report.unchangedByHash == 59)
            let token = try #require(report.token)
            let change = try #require(try store.history(after: token - 1).transactions.first?.changes.first)
            #expect(change.quakeId == "zz00050")
            #expect(change.kind == .update)
            #expect(change.fields?.contains(FieldChange(field: "mag", old: .real(4.1), new: .real(5.2))) == true)
            #expect(try store.quake(id: "zz00050")?.mag == 5.2)
            // The new bytes are what the row is now recognised by.
            #expect(try await importJSON(feedJSON(features), into: store).unchangedByHash == 60)
        }
    }

    @Test("an invalid feature deep in a re-import is still skipped with its reason")
    func invalidFeatureInAReimport() async throws {
        try await withTemporaryDirectory { dir in
            let store = try QuakeStore(directory: dir)
            var features = Self.features(60)
            _ = try await importJSON(feedJSON(features), into: store)
            features.append(#"{"type":"Feature","properties":{"time":"yesterday"},"id":"zz99999"}"#)
            features.append(#"{"type":"Feature","properties":{"time":5,"mag":"big"},"id":"zz99998"}"#)
            let report = try await importJSON(feedJSON(features), into: store)
            #expect(report.unchanged == 60)
            #expect(report.skipped == ["missing-time": 1, "invalid-field": 1])
            #expect(report.token == nil)
        }
    }

    @Test("rows written before feedHash existed are compared field by field, then hashed")
    func rowsWithoutHash() async throws {
        try await withTemporaryDirectory { dir in
            let store = try QuakeStore(directory: dir)
            let feed = feedJSON(Self.features(30))
            _ = try await importJSON(feed, into: store)
            try await store.pool.write { db in try db.execute(sql: "UPDATE quakes SET feedHash = NULL") }
            let before = try StoreSnapshot(store)
            let report = try await importJSON(feed, into: store)
            #expect(report.unchanged == 30)
            #expect(report.unchangedByHash == 0)
            #expect(report.token == nil)
            #expect(try StoreSnapshot(store) == before)
            let unhashed = try await store.pool.read { db in
                try Int.fetchOne(db, sql: "SELECT count(*) FROM quakes WHERE feedHash IS NULL")
            }
            #expect(unhashed == 0)
            #expect(try await importJSON(feed, into: store).unchangedByHash == 30)
        }
    }

    @Test("a feature that lists other ids is never taken as unchanged by its hash alone")
    func aliasesTakeTheLongWay() async throws {
        try await withTemporaryDirectory { dir in
            let store = try QuakeStore(directory: dir)
            let old = featureJSON(id: "ak0001", updated: 1_700_000_000_000)
            let new = featureJSON(id: "us0001", updated: 1_700_000_500_000, ids: ",ak0001,us0001,")
            // Many features first, so the producer has stopped decoding when `new` comes.
            let withAlias = feedJSON(Self.features(40) + [new])
            _ = try await importJSON(feedJSON([old]), into: store)
            #expect(try await importJSON(withAlias, into: store).superseded == 1)
            // A lagging feed brings the old id back: the alias index knows it as us0001's, so it
            // is a stale copy, not a new event.
            let lagging = try await importJSON(feedJSON([old]), into: store)
            #expect(lagging.stale == 1)
            #expect(lagging.token == nil)
            let again = try await importJSON(withAlias, into: store)
            #expect(again.superseded == 0)
            #expect(again.unchanged == 41)
            #expect(again.token == nil)
            #expect(try store.quake(id: "ak0001") == nil)
        }
    }

    @Test("the first import into an empty table leaves its indexes as they were, also when it fails")
    func indexesSurviveTheFirstImport() async throws {
        try await withTemporaryDirectory { dir in
            let store = try QuakeStore(directory: dir)
            func indexes() async throws -> [String] {
                try await store.pool.read { db in
                    try String.fetchAll(
                        db,
                        sql: """
                            SELECT sql FROM sqlite_schema WHERE type = 'index' AND tbl_name = 'quakes'
                            AND sql IS NOT NULL ORDER BY name
                            """)
                }
            }
            let original = try await indexes()
            #expect(original.count == 2)
            let truncated = String(feedJSON(Self.features(20)).dropLast(30))
            await #expect(throws: ImportError.self) { try await importJSON(truncated, into: store) }
            #expect(try await indexes() == original)
            #expect(try store.allQuakes().isEmpty)
            _ = try await importJSON(feedJSON(Self.features(20)), into: store)
            #expect(try await indexes() == original)
            let plan = try await store.pool.read { db in
                try Row.fetchAll(db, sql: "EXPLAIN QUERY PLAN SELECT id FROM quakes ORDER BY time DESC LIMIT 5")
                    .map { $0["detail"] as String }.joined()
            }
            #expect(plan.contains("quakes_time"))
        }
    }

    @Test("a transaction's counts equal its change rows, however changes coalesce")
    func countsMatchChangeRows() async throws {
        try await withTemporaryDirectory { dir in
            let store = try QuakeStore(directory: dir)
            let a = featureJSON(id: "ak0001", updated: 1_700_000_000_000)
            let aNewer = featureJSON(id: "ak0001", updated: 1_700_000_100_000, mag: "3.3")
            let aNewest = featureJSON(id: "ak0001", updated: 1_700_000_200_000, mag: "4.1")
            let b = featureJSON(id: "us0001", updated: 1_700_000_500_000, ids: ",ak0001,us0001,")
            let c = featureJSON(id: "nc0001")
            let feeds = [
                [a, aNewer, c],  // insert then update: one insert
                [aNewer, aNewest, aNewer],  // update, then back (stale)
                [aNewer, b, a],  // update then superseded delete, then an older copy comes back
            ]
            for feed in feeds {
                let report = try await importJSON(feedJSON(feed), into: store)
                guard let token = report.token else { continue }
                let rows = try store.pool.read { db in
                    try Row.fetchAll(
                        db, sql: "SELECT kind, count(*) AS n FROM historyChanges WHERE token = ? GROUP BY kind",
                        arguments: [token])
                }
                var counted: [String: Int] = [:]
                for row in rows { counted[row["kind"]] = row["n"] }
                let transaction = try #require(try store.history(after: token - 1).transactions.first)
                #expect(transaction.inserted == counted["insert", default: 0])
                #expect(transaction.updated == counted["update", default: 0])
                #expect(transaction.deleted == counted["delete", default: 0])
            }
        }
    }
}

@Suite("Schema migrations")
struct MigrationTests {
    @Test("a store made before feedHash and the new history CHECK keeps its rows and history")
    func upgradeFromV2() async throws {
        try await withTemporaryDirectory { dir in
            let path = dir.appendingPathComponent(QuakeStore.fileName).path
            do {
                let pool = try DatabasePool(path: path)
                try StoreSchema.migrator.migrate(pool, upTo: "v2-clients")
                try await pool.write { db in
                    try db.execute(
                        sql: """
                            INSERT INTO quakes (id, time, mag) VALUES ('ak1', 1000, 2.5);
                            INSERT INTO historyTransactions (author, timestamp, inserted) VALUES ('import', 1, 1);
                            INSERT INTO historyChanges (token, quakeId, kind) VALUES (1, 'ak1', 'insert');
                            INSERT INTO historyTransactions (author, timestamp, deleted) VALUES ('delete', 2, 1);
                            INSERT INTO historyChanges (token, quakeId, kind, tombstone, reason)
                                VALUES (2, 'ak0', 'delete', '{"id":"ak0","time":5}', 'deleted');
                            """)
                }
                try pool.close()
            }
            let store = try QuakeStore(path: path)
            let page = try store.history(after: 0)
            #expect(page.transactions.map(\.token) == [1, 2])
            #expect(page.transactions[0].changes.map(\.quakeId) == ["ak1"])
            #expect(page.transactions[1].changes.first?.tombstone?.id == "ak0")
            try await store.pool.write { db in
                let sql = try String.fetchOne(db, sql: "SELECT sql FROM sqlite_schema WHERE name = 'historyChanges'")
                #expect(sql?.contains(" IN (") == false)
                // The CHECK still holds, and the cascade trigger still works.
                #expect(throws: DatabaseError.self) {
                    try db.execute(sql: "INSERT INTO historyChanges (token, quakeId, kind) VALUES (1, 'x', 'upsert')")
                }
                try db.execute(sql: "DELETE FROM historyTransactions WHERE token = 1")
                #expect(try Int.fetchOne(db, sql: "SELECT count(*) FROM historyChanges WHERE token = 1") == 0)
                // feedHash (v3) after the columns of v1; v15's agency and contributors after it.
                #expect(try db.columns(in: "quakes").map(\.name).suffix(3) == ["feedHash", "agency", "contributors"])
                #expect(try String.fetchOne(db, sql: "PRAGMA integrity_check") == "ok")
            }
            // The old row has no hash: a feed with it is compared field by field.
            #expect(try store.quake(id: "ak1")?.mag == 2.5)
        }
    }
}

extension MigrationTests {
    @Test("v5: stored field values become typed FieldValue objects, number texts kept exactly, nulls left out")
    func upgradeFieldValues() async throws {
        try await withTemporaryDirectory { dir in
            let path = dir.appendingPathComponent(QuakeStore.fileName).path
            do {
                let pool = try DatabasePool(path: path)
                try StoreSchema.migrator.migrate(pool, upTo: "v4-history-kind-check")
                try await pool.write { db in
                    try db.execute(
                        sql: """
                            INSERT INTO historyTransactions (author, timestamp, updated) VALUES ('import', 1, 1);
                            INSERT INTO historyChanges (token, quakeId, kind, fields) VALUES (1, 'ak1', 'update',
                                '[{"field":"mag","new":3,"old":2.4500000000000002},{"field":"updated","new":20,"old":10},{"field":"felt","new":5,"old":null},{"field":"status","new":"reviewed","old":"automatic"},{"field":"alert","new":null,"old":"green"}]');
                            """)
                }
                try pool.close()
            }
            let store = try QuakeStore(path: path)
            let stored = try await store.pool.read { db in
                try String.fetchOne(db, sql: "SELECT fields FROM historyChanges WHERE token = 1")
            }
            let fields = try JSONSerialization.jsonObject(with: Data(try #require(stored).utf8)) as? [[String: Any]]
            let byName = Dictionary(uniqueKeysWithValues: (fields ?? []).map { ($0["field"] as? String ?? "", $0) })
            // The column's type decides the member: mag is REAL (float, even for 3), felt INTEGER.
            #expect((byName["mag"]?["new"] as? [String: Any])?.keys.sorted() == ["float"])
            #expect(stored?.contains(#"{"float":2.4500000000000002}"#) == true, "the number's text is kept")
            #expect((byName["updated"]?["old"] as? [String: Any])?["int"] as? Int == 10)
            #expect(byName["felt"]?["old"] == nil, "a null old value is left out")
            #expect((byName["felt"]?["new"] as? [String: Any])?["int"] as? Int == 5)
            #expect((byName["status"]?["old"] as? [String: Any])?["string"] as? String == "automatic")
            #expect(byName["alert"]?["new"] == nil)
            // And the store reads it back as typed values.
            let change = try #require(try store.history(after: 0).transactions.first?.changes.first)
            #expect(
                change.fields == [
                    FieldChange(field: "mag", old: .real(2.4500000000000002), new: .real(3)),
                    FieldChange(field: "updated", old: .integer(10), new: .integer(20)),
                    FieldChange(field: "felt", old: .null, new: .integer(5)),
                    FieldChange(field: "status", old: .text("automatic"), new: .text("reviewed")),
                    FieldChange(field: "alert", old: .text("green"), new: .null),
                ])
        }
    }
}

@Suite("History of a first import")
struct FirstImportHistoryTests {
    /// Changes of one transaction as (quake id, kind), sorted.
    static func changes(_ store: QuakeStore, _ token: HistoryToken) throws -> [String] {
        let transaction = try #require(try store.history(after: token - 1).transactions.first)
        #expect(transaction.token == token)
        #expect(transaction.inserted == transaction.changes.filter { $0.kind == .insert }.count)
        #expect(transaction.updated == transaction.changes.filter { $0.kind == .update }.count)
        #expect(transaction.deleted == transaction.changes.filter { $0.kind == .delete }.count)
        return transaction.changes.map { "\($0.quakeId) \($0.kind.rawValue)" }.sorted()
    }

    @Test("into an empty table it is one insert per row left, as change by change elsewhere")
    func sameHistoryEitherWay() async throws {
        let feed = feedJSON([
            featureJSON(id: "ak0001", updated: 1_700_000_000_000),
            featureJSON(id: "ak0001", updated: 1_700_000_100_000, mag: "3.3"),  // update: still an insert
            featureJSON(id: "nc0001"),
            featureJSON(id: "us0001", updated: 1_700_000_500_000, ids: ",nc0001,us0001,"),  // supersedes nc0001
            #"{"type":"Feature","properties":{"time":null},"id":"xx0001"}"#,  // skipped
        ])
        try await withTemporaryDirectory { dir in
            // Empty table: the history comes from the table at the end.
            let empty = try QuakeStore(directory: dir.appendingPathComponent("empty"))
            let first = try await importJSON(feed, into: empty)
            // Counted from the transaction: nc0001 came and went, ak0001's update is in its insert.
            #expect(first.inserted == 2 && first.updated == 0 && first.superseded == 0)
            #expect(try Self.changes(empty, try #require(first.token)) == ["ak0001 insert", "us0001 insert"])
            #expect(try empty.quake(id: "ak0001")?.mag == 3.3)

            // Not empty: change by change, coalesced.
            let used = try QuakeStore(directory: dir.appendingPathComponent("used"))
            _ = try await importJSON(feedJSON([featureJSON(id: "zz0001")]), into: used)
            let second = try await importJSON(feed, into: used)
            #expect(try Self.changes(used, try #require(second.token)) == ["ak0001 insert", "us0001 insert"])
        }
    }

    @Test("a first import that stores nothing makes no token")
    func nothingStoredNoToken() async throws {
        try await withTemporaryDirectory { dir in
            let store = try QuakeStore(directory: dir)
            let report = try await importJSON(
                feedJSON([#"{"type":"Feature","properties":{"time":"x"},"id":"xx0001"}"#]), into: store)
            #expect(report.token == nil)
            #expect(try store.head() == 0)
            #expect(try store.history(after: 0).transactions.isEmpty)
        }
    }
}

@Suite("Import across chunk boundaries")
struct ChunkBoundaryTests {
    /// Imports `bytes` in chunks of random sizes (from a seeded generator) up to `maxChunk`.
    static func importChunked(_ bytes: [UInt8], into store: QuakeStore, seed: UInt64, maxChunk: Int, now: Date)
        async throws -> ImportReport
    {
        try await store.importFeed(source: "test://chunks", now: now) { sink in
            var rng = SeededRandom(seed: seed)
            var offset = 0
            while offset < bytes.count {
                let end = min(bytes.count, offset + 1 + Int(rng.next() % UInt64(maxChunk)))
                try await sink.send(Array(bytes[offset..<end]))
                offset = end
            }
        }
    }

    @Test("any chunking stores the same rows and history as one chunk", arguments: Fixtures.usgsFeeds)
    func chunkingDoesNotMatter(fixture: URL) async throws {
        let bytes = try Array(Data(contentsOf: fixture))
        let now = Date(timeIntervalSince1970: 1_700_000_000)
        try await withTemporaryDirectory { dir in
            let whole = try QuakeStore(directory: dir.appendingPathComponent("whole"))
            let reference = try await Self.importChunked(
                bytes, into: whole, seed: 0, maxChunk: bytes.count + 1, now: now)
            let expected = try StoreSnapshot(whole)
            for (seed, maxChunk) in [(1, 997), (2, 65_000)] as [(UInt64, Int)] {
                let store = try QuakeStore(directory: dir.appendingPathComponent("chunks-\(seed)"))
                let first = try await Self.importChunked(bytes, into: store, seed: seed, maxChunk: maxChunk, now: now)
                #expect(first.inserted == reference.inserted)
                #expect(try StoreSnapshot(store) == expected)
                let again = try await Self.importChunked(
                    bytes, into: store, seed: seed + 10, maxChunk: maxChunk, now: now)
                #expect(again.token == nil)
                #expect(again.unchanged + again.stale + again.skippedTotal == again.features)
                #expect(try StoreSnapshot(store) == expected)
            }
        }
    }

    @Test("a top-level member after features, cut by chunk boundaries, leaves every feature intact")
    func memberAfterFeatures() async throws {
        let features = (0..<6).map {
            featureJSON(id: "ak\(String(format: "%04d", $0))", place: "\"Place number \($0)\"")
        }
        let bbox = (0..<40).map { String(format: "%.6f", Double($0) * 1.234567) }.joined(separator: ",")
        let document = """
            {"type":"FeatureCollection","features":[\(features.joined(separator: ","))],"bbox":[\(bbox)],\
            "note":"\(String(repeating: "x", count: 300))"}
            """
        var expected: [FeedFeature] = []
        var parser = FeedParser()
        try parser.consume(Array(document.utf8)) { item in
            if case .feature(let feature, _) = item { expected.append(feature) }
        }
        try parser.finish()
        #expect(expected.count == 6)
        try await withTemporaryDirectory { dir in
            // One chunk with every feature whole and the last member cut, then the rest.
            let bytes = Array(document.utf8)
            let cut = bytes.count - 100
            let split = try QuakeStore(directory: dir.appendingPathComponent("split"))
            for _ in 0..<2 {  // first import (records), then a re-import (undecoded)
                _ = try await split.importFeed(source: "test://split") { sink in
                    try await sink.send(Array(bytes[..<cut]))
                    try await sink.send(Array(bytes[cut...]))
                }
                #expect(try split.allQuakes().sorted { $0.id < $1.id } == expected)
            }

            // First import (records) and a re-import (undecoded), both in 97-byte chunks.
            let store = try QuakeStore(directory: dir)
            #expect(try await importJSON(document, into: store).inserted == 6)
            #expect(try store.allQuakes().sorted { $0.id < $1.id } == expected)
            #expect(try await importJSON(document, into: store).unchanged == 6)
            // And into a store that is not empty, so the features are applied one by one.
            let other = try QuakeStore(directory: dir.appendingPathComponent("other"))
            _ = try await importJSON(feedJSON([featureJSON(id: "zz0001")]), into: other)
            #expect(try await importJSON(document, into: other).inserted == 6)
            #expect(try other.allQuakes().filter { $0.id != "zz0001" }.sorted { $0.id < $1.id } == expected)
        }
    }
}

