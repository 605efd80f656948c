import Foundation
import QuakeFeed
import QuakeTestSupport
import Testing

@testable import QuakeStore

/// The alias rules and the history they write, each case the way it was first found.
@Suite("Aliases and history that replays")
struct AliasTests {
    /// Imports `json` and checks what every import must keep: the store passes its integrity check,
    /// and the report's counts are the transaction's.
    @discardableResult
    static func importChecked(_ json: String, into store: QuakeStore) async throws -> ImportReport {
        let report = try await importJSON(json, into: store)
        #expect(try store.checkIntegrity() == [])
        if let token = report.token {
            let transaction = try #require(try store.history(after: token - 1).transactions.first)
            #expect(transaction.token == token)
            #expect(report.inserted == transaction.inserted)
            #expect(report.updated == transaction.updated)
            #expect(report.superseded == transaction.changes.filter { $0.reason == .superseded }.count)
        } else {
            #expect(report.inserted == 0 && report.updated == 0 && report.superseded == 0)
        }
        #expect(try store.head() == (try store.history(after: 0, limit: 10_000).transactions.last?.token ?? 0))
        return report
    }

    @Test("a stored id superseded, brought back and superseded again in one document leaves through a delete")
    func supersededTwiceInOneDocument() async throws {
        try await withTemporaryDirectory { dir in
            let store = try QuakeStore(directory: dir)
            try await Self.importChecked(feedJSON([featureJSON(id: "us1", updated: 100), featureJSON(id: "us9")]), into: store)
            // ci2 supersedes us1; a newer us1 (naming nobody) supersedes ci2 and comes back; nc3
            // supersedes us1 again. us1 was stored before: its change must be a delete. At the
            // end ci2 is judged again: it and nc3 only share us1, so it stands as its own event.
            let report = try await Self.importChecked(
                feedJSON([
                    featureJSON(id: "ci2", updated: 200, ids: ",ci2,us1,"),
                    featureJSON(id: "us1", updated: 300),
                    featureJSON(id: "nc3", updated: 400, ids: ",nc3,us1,"),
                ]),
                into: store)
            #expect(try store.allQuakes().map(\.id).sorted() == ["ci2", "nc3", "us9"])
            let transaction = try #require(try store.history(after: 1).transactions.first)
            let kinds = Dictionary(uniqueKeysWithValues: transaction.changes.map { ($0.quakeId, $0.kind) })
            #expect(kinds == ["us1": .delete, "ci2": .insert, "nc3": .insert])
            #expect(report.inserted == 2 && report.superseded == 1)
        }
    }

    @Test("a stored quake superseded and brought back in one document is an update, or nothing")
    func supersededAndBack() async throws {
        try await withTemporaryDirectory { dir in
            let store = try QuakeStore(directory: dir)
            try await Self.importChecked(feedJSON([featureJSON(id: "us1", updated: 100, mag: "4.0")]), into: store)
            try await Self.importChecked(
                feedJSON([
                    featureJSON(id: "ci2", updated: 200, ids: ",ci2,us1,"),
                    featureJSON(id: "us1", updated: 300, mag: "4.4"),
                ]),
                into: store)
            let transaction = try #require(try store.history(after: 1).transactions.first)
            #expect(transaction.changes.count == 1)
            let change = try #require(transaction.changes.first)
            #expect(change.quakeId == "us1" && change.kind == .update)
            #expect(Set(change.fields?.map(\.field) ?? []) == ["mag", "updated", "title"])
        }
    }

    @Test("two new ids listing one stored id: the first supersedes it, the other stands as its own event")
    func twoFeaturesClaimOneID() async throws {
        try await withTemporaryDirectory { dir in
            let store = try QuakeStore(directory: dir)
            try await Self.importChecked(feedJSON([featureJSON(id: "us1", updated: 100)]), into: store)
            let document = feedJSON([
                featureJSON(id: "ci2", updated: 200, ids: ",ci2,us1,"),
                featureJSON(id: "nc3", updated: 250, ids: ",nc3,us1,"),
            ])
            let report = try await Self.importChecked(document, into: store)
            #expect(report.superseded == 1 && report.inserted == 2)
            #expect(try store.allQuakes().map(\.id).sorted() == ["ci2", "nc3"])
            let delete = try #require(try store.history(after: 1).transactions.first?.changes.first { $0.kind == .delete })
            #expect(delete.quakeId == "us1" && delete.supersededBy == "ci2")
            // Again: nothing changes.
            #expect(try await Self.importChecked(document, into: store).token == nil)
            // A lagging us1 is a stale copy of both.
            let before = try StoreSnapshot(store)
            let lagging = try await Self.importChecked(feedJSON([featureJSON(id: "us1", updated: 150)]), into: store)
            #expect(lagging.stale == 1)
            #expect(try StoreSnapshot(store) == before)
        }
    }

    @Test("a copy under an id a stored row lists is that row's event: stale, or newer and superseding it")
    func reverseDirection() async throws {
        try await withTemporaryDirectory { dir in
            let store = try QuakeStore(directory: dir)
            try await Self.importChecked(feedJSON([featureJSON(id: "ci2", updated: 200, ids: ",ci2,us1,")]), into: store)
            let before = try StoreSnapshot(store)
            // Older, or as old: a lagging copy.
            for updated: Int64 in [100, 200] {
                let report = try await Self.importChecked(feedJSON([featureJSON(id: "us1", updated: updated)]), into: store)
                #expect(report.stale == 1 && report.token == nil)
                #expect(try StoreSnapshot(store) == before)
            }
            // Newer: the event under its new preferred id.
            let report = try await Self.importChecked(feedJSON([featureJSON(id: "us1", updated: 300)]), into: store)
            #expect(report.superseded == 1 && report.inserted == 1)
            #expect(try store.allQuakes().map(\.id) == ["us1"])
        }
    }

    @Test("a newer version of an id that loses to another id's row takes its own older row with it")
    func loserTakesItsOwnRow() async throws {
        try await withTemporaryDirectory { dir in
            let store = try QuakeStore(directory: dir)
            try await Self.importChecked(
                feedJSON([featureJSON(id: "us1", updated: 100), featureJSON(id: "ci2", updated: 500)]), into: store)
            // us1 now says it is ci2's event, and ci2 is newer: us1's row is a second copy of ci2.
            let report = try await Self.importChecked(
                feedJSON([featureJSON(id: "us1", updated: 200, ids: ",us1,ci2,")]), into: store)
            #expect(report.stale == 1 && report.superseded == 1)
            #expect(try store.allQuakes().map(\.id) == ["ci2"])
            let delete = try #require(try store.history(after: 1).transactions.first?.changes.first)
            #expect(delete.quakeId == "us1" && delete.kind == .delete && delete.supersededBy == "ci2")
        }
    }

    @Test("between versions under two ids: newer updated, then more ids listed, then the greater id")
    func versionOrder() {
        func version(_ id: String, _ updated: Int64?, _ ids: String) -> FeedFeature {
            var f = FeedFeature(id: id, time: 1)
            f.updated = updated
            f.ids = ids
            return f
        }
        let x = version("us1", 100, ",us1,")
        let y = version("ci2", 100, ",ci2,us1,")
        #expect(FeedImport.supersedes(y, x) && !FeedImport.supersedes(x, y))
        let older = version("ci2", 99, ",ci2,us1,")
        #expect(FeedImport.supersedes(x, older) && !FeedImport.supersedes(older, x))
        let undated = version("ci2", nil, ",ci2,us1,")
        #expect(FeedImport.supersedes(x, undated))
        let a = version("aa1", 100, ",aa1,")
        #expect(FeedImport.supersedes(x, a) && !FeedImport.supersedes(a, x))
    }

    @Test("nothing changed: no token is used up, and the head stays a transaction's")
    func noPhantomToken() async throws {
        try await withTemporaryDirectory { dir in
            let store = try QuakeStore(directory: dir)
            // A stale alias feature (ci2 lists the stored us1 and is older) in an imported feed...
            try await Self.importChecked(feedJSON([featureJSON(id: "us1", updated: 300), featureJSON(id: "us5")]), into: store)
            let feed = [featureJSON(id: "us1", updated: 300), featureJSON(id: "ci2", updated: 100, ids: ",ci2,us1,")]
            try await Self.importChecked(feedJSON(feed), into: store)
            let before = try StoreSnapshot(store)
            // ...and it comes back with more stale features, and with changes that cancel out:
            // nc7 inserted, then superseded by a newer id listed later in the same document.
            let report = try await Self.importChecked(
                feedJSON(
                    feed + [
                        featureJSON(id: "nc3", updated: 50, ids: ",nc3,us1,"),
                        featureJSON(id: "us5", updated: 1_700_000_100_000, mag: "5.0"),
                        featureJSON(id: "us5", updated: 1_700_000_100_000, mag: "4.1"),
                    ]),
                into: store)
            #expect(report.token == nil)
            #expect(report.inserted == 0 && report.updated == 0 && report.superseded == 0)
            #expect(try StoreSnapshot(store) == before)
            // The next transaction takes the next token.
            let next = try await Self.importChecked(feedJSON([featureJSON(id: "us8")]), into: store)
            #expect(next.token == before.head + 1)
        }
    }

    @Test("a feature whose ids names one other id only still takes the long way")
    func singleOtherID() async throws {
        try await withTemporaryDirectory { dir in
            let store = try QuakeStore(directory: dir)
            try await Self.importChecked(feedJSON([featureJSON(id: "us1", updated: 100)]), into: store)
            let report = try await Self.importChecked(
                feedJSON([featureJSON(id: "ci2", updated: 200, ids: ",us1,")]), into: store)
            #expect(report.superseded == 1)
            #expect(try store.allQuakes().map(\.id) == ["ci2"])
            var id = "ci2"
            var ids = ",us1,"
            let listsOthers = id.withUTF8 { id in
                ids.withUTF8 { FeedFeature.idsListOthers(UnsafeRawBufferPointer($0), id: UnsafeRawBufferPointer(id)) }
            }
            #expect(listsOthers)
            #expect(!FeedFeature.idsListOthers(",ci2,,ci2,", id: "ci2"))
            #expect(FeedFeature.idsListOthers("us1", id: "ci2"))
        }
    }

    @Test("deleting a row takes its aliases out of the index")
    func deleteClearsAliases() async throws {
        try await withTemporaryDirectory { dir in
            let store = try QuakeStore(directory: dir)
            try await Self.importChecked(feedJSON([featureJSON(id: "ci2", updated: 200, ids: ",ci2,us1,")]), into: store)
            _ = try await store.delete(ids: ["ci2"])
            #expect(try store.checkIntegrity() == [])
            // With ci2 gone, us1 is a new event again.
            let report = try await Self.importChecked(feedJSON([featureJSON(id: "us1", updated: 100)]), into: store)
            #expect(report.inserted == 1)
        }
    }

    @Test("the integrity check finds what is wrong")
    func integrityCheckFindsProblems() async throws {
        try await withTemporaryDirectory { dir in
            let store = try QuakeStore(directory: dir)
            try await Self.importChecked(feedJSON([featureJSON(id: "us1"), featureJSON(id: "ci2", ids: ",ci2,nc3,")]), into: store)
            try await store.pool.write { db in
                try db.execute(sql: "DELETE FROM quakes WHERE id = 'us1'")  // no history
                try db.execute(sql: "INSERT INTO quakeAliases VALUES ('zz9', 'ci2')")
                try db.execute(sql: "UPDATE historyTransactions SET inserted = 7")
                try db.execute(sql: "UPDATE sqlite_sequence SET seq = 9 WHERE name = 'historyTransactions'")
            }
            let problems = try store.checkIntegrity()
            #expect(problems.contains("head token 9 is not the newest transaction, 1"))
            #expect(problems.contains("transaction 1 counts 7/0/0 inserted/updated/deleted, its changes are 2/0/0"))
            #expect(problems.contains { $0.contains("us1") && $0.contains("not stored") })
            #expect(problems.contains("alias zz9 points to quake ci2, which does not list it"))
        }
    }
}
