import Foundation
import GRDB
import QuakeFeed
import QuakeModel
import QuakeTestSupport
import Testing

@testable import QuakeStore

@Suite("Persistent history")
struct HistoryTests {
    @Test("tokens strictly increase across reopen, purge and every kind of write")
    func tokensIncreaseAcrossReopen() async throws {
        try await withTemporaryDirectory { dir in
            var tokens: [HistoryToken] = []
            var store = try QuakeStore(directory: dir)
            let storeID = store.storeID
            tokens.append(try await importJSON(feedJSON([featureJSON(id: "us1")]), into: store).token!)
            try store.close()

            store = try QuakeStore(directory: dir)
            #expect(store.storeID == storeID)
            tokens.append(try await importJSON(feedJSON([featureJSON(id: "us2")]), into: store).token!)
            tokens.append(try await store.delete(ids: ["us1"]).token!)
            // Purge everything: the next token still goes on from the last one.
            try await store.purgeHistory(olderThan: .zero, now: Date().addingTimeInterval(60))
            #expect(try store.head() == tokens.last!)
            try store.close()

            store = try QuakeStore(directory: dir)
            tokens.append(try await importJSON(feedJSON([featureJSON(id: "us3")]), into: store).token!)
            #expect(tokens == tokens.sorted() && Set(tokens).count == tokens.count)
            #expect(tokens.last! > tokens[2])
            try store.close()
        }
    }

    @Test("two stores have different identities")
    func storesHaveIdentities() async throws {
        try await withTemporaryDirectory { dir in
            let a = try QuakeStore(directory: dir.appendingPathComponent("a"))
            let b = try QuakeStore(directory: dir.appendingPathComponent("b"))
            #expect(a.storeID != b.storeID)
            #expect(UUID(uuidString: a.storeID) != nil)
        }
    }

    @Test("after a purge, asking for changes after an old token is TokenExpired, never a gap")
    func purgeThenFetchAfterOldTokenExpires() async throws {
        try await withTemporaryDirectory { dir in
            let store = try QuakeStore(directory: dir)
            let day: TimeInterval = 86_400
            let now = Date()
            for (n, age) in [10.0, 9, 8, 2, 1].enumerated() {
                _ = try await importJSON(
                    feedJSON([featureJSON(id: "us\(n)")]), into: store, now: now.addingTimeInterval(-age * day))
            }
            #expect(try store.head() == 5)
            let purge = try await store.purgeHistory(olderThan: .seconds(7 * 86_400), now: now)
            #expect(purge.removed == 3)
            #expect(purge.oldestToken == 3)
            #expect(try store.oldestToken() == 3)

            for old in [0, 1, 2] as [HistoryToken] {
                #expect(throws: HistoryError.tokenExpired(after: old, oldest: 3, head: 5)) {
                    try store.history(after: old)
                }
            }
            let page = try store.history(after: 3)
            #expect(page.transactions.map(\.token) == [4, 5])
            #expect(throws: HistoryError.tokenAhead(after: 6, head: 5)) { try store.history(after: 6) }
            // Purged history is gone, but the rows are not.
            #expect(try store.count() == 5)
        }
    }

    @Test("a purge never removes history a named client still needs")
    func purgeKeepsWhatClientsNeed() async throws {
        try await withTemporaryDirectory { dir in
            let store = try QuakeStore(directory: dir)
            let old = Date().addingTimeInterval(-30 * 86_400)
            for n in 0..<4 {
                _ = try await importJSON(feedJSON([featureJSON(id: "us\(n)")]), into: store, now: old)
            }
            let purge = try await store.purgeHistory(olderThan: .seconds(86_400), keepingAfter: 2)
            #expect(purge.oldestToken == 2)
            #expect(try store.history(after: 2).transactions.map(\.token) == [3, 4])
        }
    }

    @Test("history after every token returns exactly the later transactions, paged")
    func historyAfterEveryToken() async throws {
        try await withTemporaryDirectory { dir in
            let store = try QuakeStore(directory: dir)
            for n in 0..<7 {
                _ = try await importJSON(feedJSON([featureJSON(id: "us\(n)")]), into: store)
            }
            for after in 0...7 as ClosedRange<HistoryToken> {
                var tokens: [HistoryToken] = []
                var cursor = after
                while true {
                    let page = try store.history(after: cursor, limit: 2)
                    tokens += page.transactions.map(\.token)
                    cursor = page.nextAfter
                    #expect(page.head == 7)
                    if !page.hasMore { break }
                }
                #expect(tokens == Array(stride(from: after + 1, through: 7, by: 1)))
            }
        }
    }

    @Test("delete by id is one transaction with tombstones; the next pull brings the event back")
    func deleteByUser() async throws {
        try await withTemporaryDirectory { dir in
            let store = try QuakeStore(directory: dir)
            let fixture = Fixtures.usgs("lhayesgolding__EarthquakeData__all_hour.geojson")
            _ = try await store.importFile(fixture)
            let ids = try store.allQuakes().map(\.id)
            let victim = try #require(try store.quake(id: ids[0]))
            let report = try await store.delete(ids: [ids[0], ids[1], ids[0], "nope"])
            #expect(report.deleted == [ids[0], ids[1]])
            #expect(report.notFound == ["nope"])
            #expect(report.token == 2)
            #expect(try store.count() == ids.count - 2)
            let transaction = try #require(try store.history(after: 1).transactions.first)
            #expect(transaction.author == .delete)
            #expect(transaction.deleted == 2)
            let tombstone = try #require(transaction.changes.first { $0.quakeId == victim.id })
            #expect(tombstone.reason == .deletedByUser)
            #expect(tombstone.tombstone == Tombstone(of: victim))
            // What a filter needs to judge the delete (filtered readers are sent it only if they had it).
            #expect(tombstone.tombstone?.lat == victim.lat && tombstone.tombstone?.type == victim.type)

            #expect(try await store.delete(ids: ["nope"]).token == nil)
            // The feed still carries the event: the next import inserts it again.
            let again = try await store.importFile(fixture)
            #expect(again.inserted == 2)
            #expect(try store.count() == ids.count)
        }
    }

    @Test("event retention deletes expired quakes with reason expired")
    func retention() async throws {
        try await withTemporaryDirectory { dir in
            let store = try QuakeStore(directory: dir)
            let now = Date()
            let ms = Int64(now.timeIntervalSince1970 * 1000)
            _ = try await importJSON(
                feedJSON([
                    featureJSON(id: "us1", time: ms - 40 * 86_400_000, updated: ms),
                    featureJSON(id: "us2", time: ms - 1 * 86_400_000, updated: ms),
                ]), into: store)
            let token = try await store.applyRetention(maxAge: .seconds(30 * 86_400), now: now)
            #expect(token == 2)
            #expect(try store.allQuakes().map(\.id) == ["us2"])
            let change = try #require(try store.history(after: 1).transactions.first?.changes.first)
            #expect(change.reason == .expired)
            #expect(change.quakeId == "us1")
            #expect(try await store.applyRetention(maxAge: .seconds(30 * 86_400), now: now) == nil)
        }
    }

    @Test("the column mapping matches the schema and round-trips every field")
    func columnsMatchSchema() async throws {
        try await withTemporaryDirectory { dir in
            let store = try QuakeStore(directory: dir)
            let names = try await store.pool.read { db in try db.columns(in: "quakes").map(\.name) }
            // feedHash came with v3; agency and contributors, the last fields, with v15.
            #expect(names == QuakeColumns.names.dropLast(2) + ["feedHash", "agency", "contributors"])
            #expect(QuakeColumns.names.suffix(2) == ["agency", "contributors"])
            var q = FeedFeature(id: "xx1", time: 1_000)
            q.mag = 2.5099999999999998
            q.place = "‘Ohonua, Tonga"
            q.updated = 2
            q.tz = 3
            q.url = "u"
            q.detail = "d"
            q.felt = 4
            q.cdi = 5.5
            q.mmi = 6.5
            q.alert = "green"
            q.status = "reviewed"
            q.tsunami = 1
            q.sig = 7
            q.net = "xx"
            q.code = "1"
            q.ids = ",xx1,"
            q.sources = ",xx,"
            q.types = ",origin,"
            q.nst = 8
            q.dmin = 9.5
            q.rms = 10.5
            q.gap = 11.5
            q.magType = "mb_Lg"
            q.type = "ice quake"
            q.title = "t"
            q.lon = -12.5
            q.lat = 13.5
            q.depth = -0.5
            q.agency = "EMSC"
            q.contributors = Contributor.json([
                Contributor(source: "emsc", agency: "EMSC", id: "20231114_01", time: 1_000, lat: 13.5, lon: -12.5, preferred: true)
            ])
            let values = QuakeColumns.values(of: q)
            #expect(Set(values.map(\.description)).count == values.count)  // all distinct: no field bound twice
            try await store.pool.write { db in
                try db.execute(
                    sql: "INSERT INTO quakes (\(QuakeColumns.list)) VALUES (\(QuakeColumns.placeholders))",
                    arguments: StatementArguments(values))
            }
            #expect(try store.quake(id: "xx1") == q)
        }
    }
}
