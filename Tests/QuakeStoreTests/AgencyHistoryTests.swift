import Foundation
import GRDB
import QuakeAssociation
import QuakeFeed
import QuakeModel
import QuakeTestSupport
import Testing

@testable import QuakeStore

/// Filtered history with agency conditions: a second agency joining an event is an enter for a
/// reader filtered by that agency, judged by the event's agencies at each change.
@Suite("Agency filters on history")
struct AgencyHistoryTests {
    typealias S = SourceImportTests

    @Test func aSecondAgencyJoiningIsAnEnterForItsReaders() async throws {
        try await withTemporaryDirectory { dir in
            let store = try QuakeStore(directory: dir)
            defer { try? store.close() }
            let first = try #require(try await S.importChecked("emsc", [S.emsc1], into: store).token)
            let row = try #require(try store.allQuakes().first)
            #expect(row.sources == ",emsc,")
            let second = try #require(try await S.importChecked("ingv", [S.ingv1], into: store).token)
            let joined = try #require(try store.quake(id: row.id))
            #expect(joined.sources?.split(separator: ",").sorted() == ["emsc", "ingv"])

            let ingv = QuakeFilter(agencies: ["INGV"])
            // From before the second report: the event enters.
            let after = try store.history(after: first, filter: ingv)
            #expect(after.transactions.map(\.token) == [second])
            #expect(after.transactions.first?.changes.map(\.kind) == [.enter])
            #expect(after.transactions.first?.changes.first?.quakeId == row.id)
            // From the start: the insert was not INGV's (judged by the agencies it had then), so
            // nothing at the first token and the same enter.
            let all = try store.history(after: 0, filter: ingv)
            #expect(all.transactions.map(\.token) == [second])
            #expect(all.transactions.first?.changes.map(\.kind) == [.enter])
            // EMSC's readers had the quake all along: an insert, then an update.
            let emsc = try store.history(after: 0, filter: QuakeFilter(agencies: ["emsc"]))
            #expect(emsc.transactions.flatMap(\.changes).map(\.kind) == [.insert, .update])
            // Two agencies at least: the same enter.
            let two = try store.history(after: 0, filter: QuakeFilter(minAgencies: 2))
            #expect(two.transactions.flatMap(\.changes).map(\.kind) == [.enter])
            #expect(try store.sendsChanges(after: first, filter: ingv))
            #expect(!(try store.sendsChanges(after: second, filter: ingv)))
        }
    }

    @Test func aDeleteKeepsTheAgenciesInItsTombstone() async throws {
        try await withTemporaryDirectory { dir in
            let store = try QuakeStore(directory: dir)
            defer { try? store.close() }
            try await S.importChecked("emsc", [S.emsc1], into: store)
            try await S.importChecked("ingv", [S.ingv1], into: store)
            let row = try #require(try store.allQuakes().first)
            _ = try await store.delete(ids: [row.id])
            let changes = try store.history(after: 0, filter: QuakeFilter(agencies: ["ingv"]))
                .transactions.flatMap(\.changes)
            #expect(changes.map(\.kind) == [.enter, .delete])
            let tombstone = try #require(changes.last?.tombstone)
            #expect(tombstone.sources == row.sources)
            #expect(tombstone.image.sources == row.sources)
            // A reader of another agency was never sent the quake, nor its delete.
            #expect(try store.history(after: 0, filter: QuakeFilter(agencies: ["gfz"])).transactions.isEmpty)
        }
    }

    @Test func anOldTombstoneWithoutSourcesDecodesAsNil() throws {
        let json = #"{"id":"us1","mag":4.5,"time":1,"lat":1,"lon":2}"#
        let tombstone = try JSONDecoder().decode(Tombstone.self, from: Data(json.utf8))
        #expect(tombstone.sources == nil)
        #expect(!QuakeFilter(minAgencies: 1).matches(tombstone.image))
    }
}

extension MigrationTests {
    @Test("v13: history made before atSources gets it, and agency-filtered history judges by it")
    func upgradeHistorySources() async throws {
        try await withTemporaryDirectory { dir in
            let path = dir.appendingPathComponent(QuakeStore.fileName).path
            do {
                let pool = try DatabasePool(path: path)
                try StoreSchema.migrator.migrate(pool, upTo: "v12-usgs-reports")
                try await pool.write { db in
                    // q1: EMSC's, then INGV's too (token 2, an update of sources alone, its atOld
                    // NULL as v8's columns leave it); q2 deleted with its agencies in the tombstone
                    // (token 3); q3 deleted before tombstones kept them (token 4).
                    try db.execute(
                        sql: """
                            INSERT INTO quakes (id, time, mag, sources) VALUES ('q1', 1000, 4.0, ',emsc,ingv,');
                            INSERT INTO historyTransactions (author, timestamp, inserted) VALUES ('import', 1, 1);
                            INSERT INTO historyChanges (token, quakeId, kind, atMag, atTime) VALUES (1, 'q1', 'insert', 4.0, 1000);
                            INSERT INTO historyTransactions (author, timestamp, updated) VALUES ('import', 2, 1);
                            INSERT INTO historyChanges (token, quakeId, kind, fields, atMag, atTime) VALUES (2, 'q1', 'update',
                                '[{"field":"sources","old":{"string":",emsc,"},"new":{"string":",emsc,ingv,"}}]', 4.0, 1000);
                            INSERT INTO historyTransactions (author, timestamp, deleted) VALUES ('delete', 3, 1);
                            INSERT INTO historyChanges (token, quakeId, kind, tombstone, reason, atMag, atTime)
                                VALUES (3, 'q2', 'delete', '{"id":"q2","time":5,"mag":4,"sources":",ingv,"}', 'deleted', 4, 5);
                            INSERT INTO historyTransactions (author, timestamp, deleted) VALUES ('delete', 4, 1);
                            INSERT INTO historyChanges (token, quakeId, kind, tombstone, reason, atMag, atTime)
                                VALUES (4, 'q3', 'delete', '{"id":"q3","time":6,"mag":4}', 'deleted', 4, 6);
                            """)
                }
                try pool.close()
            }
            let store = try QuakeStore(path: path)
            defer { try? store.close() }
            let stored = try store.pool.read { db in
                try Row.fetchAll(db, sql: "SELECT token, atSources, atOld FROM historyChanges ORDER BY token")
            }
            #expect(stored.map { $0["atSources"] as String? } == [",emsc,ingv,", ",emsc,ingv,", ",ingv,", nil])
            #expect((stored[1]["atOld"] as String?)?.contains(#""sources":{"string":",emsc,"}"#) == true)

            func kinds(_ filter: QuakeFilter) throws -> [String] {
                try store.history(after: 0, filter: filter).transactions.flatMap { t in
                    t.changes.map { "\(t.token):\($0.kind)" }
                }
            }
            // INGV joined q1 at token 2: an enter (exact, from the update's old value); q2's
            // delete was INGV's; q3's tombstone has no agencies: unknown, so the delete is sent.
            let ingv = try kinds(QuakeFilter(agencies: ["ingv"]))
            #expect(ingv.contains("2:enter"))
            #expect(ingv.contains("3:delete"))
            #expect(ingv.contains("4:delete"))
            // EMSC had q1 all along; q2 was not EMSC's; q3 unknown: sent.
            #expect(try kinds(QuakeFilter(agencies: ["emsc"])) == ["1:insert", "2:update", "4:delete"])
            #expect(try kinds(QuakeFilter(minAgencies: 2)).contains("2:enter"))
        }
    }
}

extension AgencyHistoryTests {
    @Test func aReaderCatchingUpFromTheStartOverManyTransactionsHoldsExactlyTheAgencysQuakes() async throws {
        try await withTemporaryDirectory { dir in
            let store = try QuakeStore(directory: dir)
            defer { try? store.close() }
            // Eight EMSC quakes, a transaction each; INGV joins the even ones, a transaction each;
            // then two of them are deleted (one INGV's, one not).
            for i in 0..<8 {
                let time = S.t0 - Int64(i) * 600_000
                let lat = 30.0 + 3 * Double(i)
                try await S.importChecked("emsc", [S.report("emsc", "emsc\(i)", time: time, lat: lat)], into: store)
            }
            for i in stride(from: 0, to: 8, by: 2) {
                let time = S.t0 - Int64(i) * 600_000
                let lat = 30.0 + 3 * Double(i)
                try await S.importChecked("ingv", [S.report("ingv", "ingv\(i)", time: time, lat: lat)], into: store)
            }
            let quakes = try store.allQuakes().sorted { $0.time < $1.time }
            #expect(quakes.count == 8)
            _ = try await store.delete(ids: [quakes[0].id])
            _ = try await store.delete(ids: [quakes[1].id])

            let filter = QuakeFilter(agencies: ["ingv"])
            var held: Set<String> = []
            var token: HistoryToken = 0
            var sent: [ChangeKind] = []
            while true {
                let page = try store.history(after: token, limit: 1, filter: filter)
                for change in page.transactions.flatMap(\.changes) {
                    sent.append(change.kind)
                    switch change.kind {
                    case .insert, .enter: #expect(held.insert(change.quakeId).inserted)
                    case .update: #expect(held.contains(change.quakeId))
                    case .delete, .leave: #expect(held.remove(change.quakeId) != nil)
                    }
                }
                token = page.nextAfter
                if !page.hasMore { break }
            }
            let ingv = Set(try store.allQuakes().filter { filter.matches(QuakeImage($0)) }.map(\.id))
            #expect(ingv.count == 3)
            #expect(held == ingv)
            // Judged by the agencies at each change: four enters, no inserts, one delete.
            #expect(sent.filter { $0 == .enter }.count == 4)
            #expect(!sent.contains(.insert))
            #expect(sent.filter { $0 == .delete }.count == 1)
            // One page from the start sends the same.
            let whole = try store.history(after: 0, limit: 1000, filter: filter).transactions.flatMap(\.changes)
            #expect(whole.map(\.kind) == sent)
        }
    }
}
