import Foundation
import GRDB
import QuakeAssociation
import QuakeFeed
import QuakeModel
import QuakeTestSupport
import Testing

@testable import QuakeStore

/// `importSource`: reports of several sources associated into events in the import's
/// transaction, each changed event a quake row with history, on real store files.
@Suite("Source imports")
struct SourceImportTests {
    /// Fixed, so that rows made with `now` compare equal across stores and tombstones are recent.
    static let now = Date(timeIntervalSince1970: 1_800_000_000)
    static let nowMs: Int64 = 1_800_000_000_000
    /// An origin time an hour before `now`.
    static let t0: Int64 = nowMs - 3_600_000
    /// INGV preferred over EMSC (sources in configuration order), the default windows.
    static let association = AssociationConfiguration(sourceOrder: ["ingv", "emsc"])

    static func report(
        _ source: String, _ id: String, agency: String? = nil, time: Int64 = t0, lat: Double = 42.0,
        lon: Double = 13.0, mag: Double? = 4.2, place: String? = "CENTRAL ITALY", updated: Int64? = nowMs - 60_000
    ) -> SourceItem {
        .report(
            SourceReport(
                source: source, id: id, agency: agency ?? source.uppercased(), time: time, latitude: lat,
                longitude: lon, depth: 10, magnitude: mag, magnitudeType: "ML", place: place, updated: updated))
    }

    /// INGV's solution, and EMSC's of the same quake 5 s later and 20 km north.
    static let ingv1 = report("ingv", "ingv1")
    static let emsc1 = report("emsc", "emsc1", time: t0 + 5_000, lat: 42.18, updated: nowMs - 120_000)

    /// Imports and checks the report against the transaction's history and the store's integrity.
    @discardableResult
    static func importChecked(
        _ name: String, _ items: [SourceItem], into store: QuakeStore, position: Int64? = nil, query: String? = nil,
        association: AssociationConfiguration = association
    ) async throws -> SourceImportReport {
        let report = try await store.importSource(
            name, items: items, position: position, query: query, association: association, now: now)
        #expect(report.items == items.count)
        #expect(report.applied + report.ignored == items.count)
        let problems = try store.checkIntegrity()
        #expect(problems.isEmpty, "\(problems)")
        if let token = report.token {
            let transaction = try #require(try store.history(after: token - 1).transactions.first)
            #expect(transaction.token == token)
            #expect(transaction.author == .import)
            #expect(transaction.source == query ?? "source \(name)")
            #expect(report.created == transaction.inserted)
            #expect(report.updated == transaction.updated)
            #expect(report.deleted == transaction.deleted)
            #expect(report.superseded == transaction.changes.filter { $0.reason == .superseded }.count)
        } else {
            #expect(report.created == 0 && report.updated == 0 && report.deleted == 0)
        }
        return report
    }

    static func lastTransaction(_ store: QuakeStore) throws -> HistoryTransaction {
        try #require(try store.history(after: 0, limit: 10_000).transactions.last)
    }

    /// The tables a source import writes besides the quakes, as text, for comparisons.
    static func sourceTables(_ store: QuakeStore) async throws -> [String] {
        try await store.pool.read { db in
            var lines: [String] = []
            for table in ["reports", "sourceEvents", "reportTombstones", "sources", "associationState"] {
                for row in try Row.fetchAll(db, sql: "SELECT * FROM \(table) ORDER BY 1, 2") {
                    lines.append("\(table) \(row)")
                }
            }
            return lines
        }
    }

    @Test("two sources' reports of one quake, 5 s and 20 km apart, are one quake row: inserted, then updated")
    func twoSourcesOneQuake() async throws {
        try await withTemporaryDirectory { dir in
            let store = try QuakeStore(directory: dir)
            let first = try await Self.importChecked("ingv", [Self.ingv1], into: store)
            #expect(first.created == 1 && first.applied == 1)
            let second = try await Self.importChecked("emsc", [Self.emsc1], into: store)
            #expect(second.created == 0 && second.updated == 1 && second.applied == 1)

            #expect(try store.allQuakes().map(\.id) == ["ingv1"])
            let quake = try #require(try store.quake(id: "ingv1"))
            #expect(quake.ids == ",emsc1,ingv1,")
            #expect(quake.sources == ",emsc,ingv,")
            #expect(quake.net == "ingv" && quake.code == "ingv1")
            #expect(quake.time == Self.t0 && quake.lat == 42.0 && quake.lon == 13.0 && quake.depth == 10)
            #expect(quake.title == "M 4.2 - CENTRAL ITALY")
            #expect(quake.status == "automatic" && quake.type == "earthquake")
            #expect(quake.updated == Self.nowMs - 60_000, "the newest of the members'")
            #expect(quake.url == nil && quake.felt == nil)

            let history = try store.history(after: 0).transactions
            #expect(history.map { $0.changes.map(\.kind) } == [[.insert], [.update]])
            let fields = Set(history[1].changes[0].fields?.map(\.field) ?? [])
            #expect(fields == ["ids", "sources", "contributors"], "the preferred report stays INGV's")

            let reports = try store.reports(ofEvent: "ingv1")
            #expect(reports.map(\.id) == ["ingv1", "emsc1"])
            #expect(reports.last?.latitude == 42.18 && reports.last?.agency == "EMSC")
            #expect(try store.reports(ofEvent: "emsc1").isEmpty)
        }
    }

    @Test("the preferred report gives the row: a reviewed report from the later source takes over")
    func preferredReportGivesTheRow() async throws {
        try await withTemporaryDirectory { dir in
            let store = try QuakeStore(directory: dir)
            try await Self.importChecked("ingv", [Self.ingv1, Self.emsc1], into: store)
            var reviewed = SourceReport(
                source: "emsc", id: "emsc1", agency: "EMSC", time: Self.t0 + 5_000, latitude: 42.18, longitude: 13,
                magnitude: 4.46, place: "ITALY", evaluationMode: .manual, updated: Self.nowMs - 10_000)
            reviewed.links = ["x1"]
            let report = try await Self.importChecked("emsc", [.report(reviewed)], into: store)
            #expect(report.updated == 1)
            let quake = try #require(try store.quake(id: "ingv1"))
            #expect(quake.net == "emsc" && quake.code == "emsc1" && quake.status == "reviewed")
            #expect(quake.title == "M 4.5 - ITALY" && quake.mag == 4.46 && quake.lat == 42.18)
            #expect(quake.depth == nil && quake.updated == Self.nowMs - 10_000)
            let reports = try store.reports(ofEvent: "ingv1")
            #expect(reports.map(\.id) == ["emsc1", "ingv1"])
            #expect(reports.first == reviewed, "every field and the links round-trip")
        }
    }

    @Test("one source's two quakes 5 s apart stay two rows")
    func oneSourceTwoQuakes() async throws {
        try await withTemporaryDirectory { dir in
            let store = try QuakeStore(directory: dir)
            let report = try await Self.importChecked(
                "ingv", [Self.ingv1, Self.report("ingv", "ingv2", time: Self.t0 + 5_000)], into: store)
            #expect(report.created == 2)
            let ids = try store.allQuakes().map(\.id).sorted()
            #expect(ids == ["ingv1", "ingv2"])
            #expect(try store.reports(ofEvent: "ingv2").map(\.id) == ["ingv2"])
        }
    }

    @Test("a revision out of the windows splits the event (an insert); back in, the two merge (superseded)")
    func splitAndMerge() async throws {
        try await withTemporaryDirectory { dir in
            let store = try QuakeStore(directory: dir)
            try await Self.importChecked("ingv", [Self.ingv1], into: store)
            try await Self.importChecked("emsc", [Self.emsc1], into: store)

            let away = Self.report("emsc", "emsc1", time: Self.t0 + 60_000, lat: 42.18, updated: Self.nowMs - 50_000)
            let split = try await Self.importChecked("emsc", [away], into: store)
            #expect(split.created == 1 && split.updated == 1 && split.deleted == 0)
            // Which part keeps the old id is the Associator's rule; each report is in its own row.
            let rows = try store.allQuakes()
            #expect(rows.count == 2)
            let members = try rows.map { try store.reports(ofEvent: $0.id).map(\.id) }
            #expect(Set(members) == [["emsc1"], ["ingv1"]])
            #expect(rows.first { $0.code == "emsc1" }?.time == Self.t0 + 60_000)
            // No row's ids claims another row's id.
            for row in rows { #expect(!row.otherIDs.contains { id in rows.contains { $0.id == id } }) }
            let inserted = try #require(try Self.lastTransaction(store).changes.first { $0.kind == .insert })
            #expect(rows.contains { $0.id == inserted.quakeId })
            for row in rows { #expect(try store.reports(ofEvent: row.id).map(\.id) == [row.code]) }

            let back = Self.report("emsc", "emsc1", time: Self.t0 + 5_000, lat: 42.18, updated: Self.nowMs - 40_000)
            let merge = try await Self.importChecked("emsc", [back], into: store)
            #expect(merge.deleted == 1 && merge.superseded == 1 && merge.updated == 1 && merge.created == 0)
            let merged = try #require(try store.allQuakes().first)
            #expect(try store.allQuakes().count == 1 && merged.ids == ",emsc1,ingv1,")
            let transaction = try Self.lastTransaction(store)
            let deletion = try #require(transaction.changes.first { $0.kind == .delete })
            #expect(deletion.reason == .superseded && deletion.supersededBy == merged.id)
            #expect(rows.map(\.id).contains(deletion.quakeId) && deletion.quakeId != merged.id)
            #expect(transaction.changes.first { $0.kind == .update }?.quakeId == merged.id)
            #expect(try store.reports(ofEvent: merged.id).map(\.id) == ["ingv1", "emsc1"])
            #expect(try store.reports(ofEvent: deletion.quakeId).isEmpty)
        }
    }

    @Test(
        "retractions: a report leaves its event; the last one deletes the row (deleted-upstream); older copies are ignored"
    )
    func retractions() async throws {
        try await withTemporaryDirectory { dir in
            let store = try QuakeStore(directory: dir)
            try await Self.importChecked("ingv", [Self.ingv1, Self.emsc1], into: store)

            let gone = try await Self.importChecked(
                "emsc", [.retraction(source: "emsc", id: "emsc1", updated: Self.nowMs - 30_000)], into: store)
            #expect(gone.applied == 1 && gone.updated == 1)
            #expect(try store.reports(ofEvent: "ingv1").map(\.id) == ["ingv1"])
            #expect(try store.quake(id: "ingv1")?.ids == ",ingv1,")

            let last = try await Self.importChecked(
                "ingv", [.retraction(source: "ingv", id: "ingv1", updated: Self.nowMs - 30_000)], into: store)
            #expect(last.applied == 1 && last.deleted == 1 && last.superseded == 0)
            #expect(try store.allQuakes().isEmpty)
            let deletion = try #require(try Self.lastTransaction(store).changes.first)
            #expect(deletion.kind == .delete && deletion.reason == .deletedUpstream && deletion.supersededBy == nil)
            #expect(deletion.tombstone?.id == "ingv1")

            // A slow mirror's copy from before the retraction, and a retraction of nothing.
            let stale = try await Self.importChecked(
                "ingv", [Self.ingv1, .retraction(source: "ingv", id: "never", updated: 5)], into: store)
            #expect(stale.token == nil && stale.applied == 0 && stale.ignored == 2)
            #expect(try store.allQuakes().isEmpty)
            #expect(try store.sourceStates().first { $0.name == "ingv" }?.reportCount == 0)

            // The agency brought it back: newer than the retraction.
            let revived = try await Self.importChecked(
                "ingv", [Self.report("ingv", "ingv1", updated: Self.nowMs - 20_000)], into: store)
            #expect(revived.applied == 1 && revived.created == 1)
            #expect(try store.allQuakes().map(\.id) == ["ingv1"])
        }
    }

    @Test("a row's ids never name another row; when that row goes, the id comes back")
    func idsNeverNameAnotherRow() async throws {
        try await withTemporaryDirectory { dir in
            let store = try QuakeStore(directory: dir)
            let gfz1 = Self.report("gfz", "gfz1", time: Self.t0 + 3_000, lat: 42.1, updated: Self.nowMs - 110_000)
            try await Self.importChecked("ingv", [Self.ingv1, Self.emsc1, gfz1], into: store)
            #expect(try store.allQuakes().map(\.id) == ["ingv1"])
            // INGV's report leaves: the part with two of the event's three reports keeps the id
            // ingv1 (the largest overlap), so INGV's report is in a new row, named ingv:ingv1.
            let away = Self.report("ingv", "ingv1", time: Self.t0 + 60_000, lat: 42.0, updated: Self.nowMs - 50_000)
            try await Self.importChecked("ingv", [away], into: store)
            let holder = try #require(try store.allQuakes().first { $0.code == "ingv1" })
            #expect(holder.id == "ingv:ingv1")
            #expect(holder.ids == nil, "ingv1 is another row's id")
            let other = try #require(try store.quake(id: "ingv1"))
            #expect(other.ids == ",emsc1,gfz1,")

            // That row goes: the holder's ids name INGV's report again, in the same transaction.
            let gone = try await Self.importChecked(
                "emsc",
                [
                    .retraction(source: "emsc", id: "emsc1", updated: Self.nowMs - 30_000),
                    .retraction(source: "gfz", id: "gfz1", updated: Self.nowMs - 30_000),
                ], into: store)
            #expect(gone.deleted == 1 && gone.updated == 1)
            #expect(try store.quake(id: holder.id)?.ids == ",ingv1,")
            #expect(try store.allQuakes().count == 1)
        }
    }

    @Test("one run naming a report several times: each item counted in order, the net change published")
    func sameKeyTwiceInOneRun() async throws {
        try await withTemporaryDirectory { dir in
            let store = try QuakeStore(directory: dir)
            let revised = Self.report("ingv", "ingv1", mag: 4.6, updated: Self.nowMs - 10_000)
            let older = Self.report("ingv", "ingv1", mag: 3.0, updated: Self.nowMs - 90_000)
            let report = try await Self.importChecked("ingv", [Self.ingv1, revised, older], into: store)
            #expect(report.applied == 2 && report.ignored == 1 && report.created == 1)
            #expect(try store.quake(id: "ingv1")?.mag == 4.6)
            #expect(try store.history(after: 0).transactions.map { $0.changes.map(\.kind) } == [[.insert]])

            // Reported and retracted in one run: nothing published, the retraction remembered.
            let brief = Self.report("ingv", "ingv9", time: Self.t0 + 900_000, lat: 38, lon: 15)
            let retraction = SourceItem.retraction(source: "ingv", id: "ingv9", updated: Self.nowMs - 30_000)
            let both = try await Self.importChecked("ingv", [brief, retraction], into: store)
            #expect(both.applied == 2 && both.token == nil)
            #expect(try store.quake(id: "ingv9") == nil)
            let stale = try await Self.importChecked("ingv", [brief], into: store)
            #expect(stale.ignored == 1 && stale.token == nil)
        }
    }

    @Test("checkIntegrity finds reports, events and tombstones that disagree")
    func integrityOfSourceTables() async throws {
        try await withTemporaryDirectory { dir in
            let store = try QuakeStore(directory: dir)
            try await Self.importChecked("ingv", [Self.ingv1, Self.emsc1], into: store)
            try await store.pool.write { db in
                try db.execute(
                    sql: """
                        UPDATE reports SET event = 'lost' WHERE source = 'emsc';
                        INSERT INTO sourceEvents (id, created, preferredSource, preferredId) VALUES ('empty', 9, 'x', 'y');
                        UPDATE sourceEvents SET preferredSource = 'emsc', preferredId = 'emsc1' WHERE id = 'ingv1';
                        INSERT INTO reportTombstones (source, id, updated) VALUES ('ingv', 'ingv1', 5);
                        """)
            }
            #expect(
                try store.checkIntegrity() == [
                    "report emsc:emsc1 is in event lost, which is not stored",
                    "event empty has no reports",
                    "event ingv1's preferred report is not one of its reports",
                    "report ingv:ingv1 has a retraction tombstone",
                ])
        }
    }

    @Test("a stale or unchanged copy is ignored, with no history")
    func staleCopyIgnored() async throws {
        try await withTemporaryDirectory { dir in
            let store = try QuakeStore(directory: dir)
            try await Self.importChecked("ingv", [Self.ingv1], into: store)
            let head = try store.head()
            let older = Self.report("ingv", "ingv1", mag: 5.0, updated: Self.nowMs - 90_000)
            let stale = try await Self.importChecked("ingv", [older, Self.ingv1], into: store)
            #expect(stale.token == nil && stale.applied == 0 && stale.ignored == 2)
            #expect(try store.head() == head)
            #expect(try store.quake(id: "ingv1")?.mag == 4.2)
            #expect(try store.reports(ofEvent: "ingv1").first?.magnitude == 4.2)
        }
    }

    @Test("reopened, the store adopts its events: the same items change nothing, new ones join the stored events")
    func reopenAdoptsStoredEvents() async throws {
        try await withTemporaryDirectory { dir in
            let path = dir.appendingPathComponent(QuakeStore.fileName).path
            let ingv2 = Self.report("ingv", "ingv2", time: Self.t0 + 600_000, lat: 40, lon: 15)
            let items = [Self.ingv1, Self.emsc1, ingv2]
            do {
                let store = try QuakeStore(path: path)
                let report = try await Self.importChecked("ingv", items, into: store)
                #expect(report.created == 2)
                try store.close()
            }
            let store = try QuakeStore(path: path)
            let rows = try store.allQuakes()
            let again = try await Self.importChecked("ingv", items, into: store)
            #expect(again.token == nil && again.ignored == 3)
            #expect(try store.allQuakes() == rows)
            // A new report near ingv2 joins its event, under its id.
            let emsc2 = Self.report("emsc", "emsc2", time: Self.t0 + 601_000, lat: 40.004, lon: 15)
            let joined = try await Self.importChecked("emsc", [emsc2], into: store)
            #expect(joined.updated == 1 && joined.created == 0)
            #expect(try store.quake(id: "ingv2")?.ids == ",emsc2,ingv2,")
            try store.close()

            // Other windows: 20 km apart no longer associate, 0.5 km still do. The regroup is
            // published in the next import's transaction, even one with no items.
            let narrow = AssociationConfiguration(associateDistanceKm: 1, sourceOrder: ["ingv", "emsc"])
            let reopened = try QuakeStore(path: path)
            let regrouped = try await Self.importChecked("ingv", [], into: reopened, association: narrow)
            #expect(regrouped.created == 1 && regrouped.updated == 1 && regrouped.deleted == 0)
            let members = try reopened.allQuakes().map { try reopened.reports(ofEvent: $0.id).map(\.id).sorted() }
            #expect(Set(members) == [["emsc1"], ["ingv1"], ["emsc2", "ingv2"]])
            // Under the same configuration again, nothing more changes.
            let settled = try await Self.importChecked("ingv", items, into: reopened, association: narrow)
            #expect(settled.token == nil)
            // And back to the default windows: they merge again, in this same store value.
            let merged = try await Self.importChecked("ingv", [], into: reopened)
            #expect(merged.deleted == 1 && merged.superseded == 1 && merged.updated == 1)
            #expect(Set(try reopened.allQuakes().compactMap(\.ids)) == [",emsc1,ingv1,", ",emsc2,ingv2,"])
        }
    }

    @Test("two store values on one file: each sees the other's imports (the generation)")
    func twoWritersOneFile() async throws {
        try await withTemporaryDirectory { dir in
            let path = dir.appendingPathComponent(QuakeStore.fileName).path
            let a = try QuakeStore(path: path)
            let b = try QuakeStore(path: path)
            try await Self.importChecked("ingv", [Self.ingv1], into: a)
            let joined = try await Self.importChecked("emsc", [Self.emsc1], into: b)
            #expect(joined.updated == 1)
            // a's associator in memory predates b's import: it must not take emsc1 for new.
            let again = try await Self.importChecked("emsc", [Self.emsc1], into: a)
            #expect(again.token == nil && again.applied == 0 && again.ignored == 1)
            let retracted = try await Self.importChecked(
                "emsc", [.retraction(source: "emsc", id: "emsc1", updated: Self.nowMs)], into: a)
            #expect(retracted.applied == 1 && retracted.updated == 1)
            #expect(try b.quake(id: "ingv1")?.ids == ",ingv1,")
        }
    }

    @Test("an import that fails before it commits leaves the tables and the rows as they were")
    func failedImportRollsBack() async throws {
        try await withTemporaryDirectory { dir in
            let store = try QuakeStore(directory: dir)
            try await Self.importChecked("ingv", [Self.ingv1], into: store, position: 1_000)
            let before = try StoreSnapshot(store)
            let tablesBefore = try await Self.sourceTables(store)
            store.sourceImportSettings.failNextImportBeforeCommit = true
            await #expect(throws: InjectedSourceImportFailure.self) {
                try await store.importSource(
                    "emsc", items: [Self.emsc1], position: 2_000, query: nil, association: Self.association,
                    now: Self.now)
            }
            #expect(try StoreSnapshot(store) == before)
            #expect(try await Self.sourceTables(store) == tablesBefore)
            #expect(try store.sourcePosition("emsc") == nil)

            // The next import behaves as if the failed one had never run.
            let report = try await Self.importChecked("emsc", [Self.emsc1], into: store, position: 2_000)
            #expect(report.applied == 1 && report.updated == 1)

            let control = try QuakeStore(directory: dir.appendingPathComponent("control"))
            try await Self.importChecked("ingv", [Self.ingv1], into: control, position: 1_000)
            try await Self.importChecked("emsc", [Self.emsc1], into: control, position: 2_000)
            #expect(try store.allQuakes() == control.allQuakes())
            #expect(try await Self.sourceTables(store) == Self.sourceTables(control))
        }
    }

    @Test("sources keep their position, last run and last error")
    func sourceStates() async throws {
        try await withTemporaryDirectory { dir in
            let store = try QuakeStore(directory: dir)
            #expect(try store.sourceStates().isEmpty)
            #expect(try store.sourcePosition("ingv") == nil)
            let query = "https://webservices.ingv.it/fdsnws/event/1/query?updatedafter=x"
            try await Self.importChecked("ingv", [Self.ingv1], into: store, position: 1_000, query: query)
            #expect(try store.sourcePosition("ingv") == 1_000)

            let later = Self.now.addingTimeInterval(60)
            try await store.recordSourceFailure("ingv", error: "HTTP 503", now: later)
            try await store.recordSourceFailure("geonet", error: "connection refused", now: later)
            #expect(
                try store.sourceStates() == [
                    SourceState(name: "geonet", lastAttempt: Self.nowMs + 60_000, lastError: "connection refused"),
                    SourceState(
                        name: "ingv", position: 1_000, lastAttempt: Self.nowMs + 60_000, lastSuccess: Self.nowMs,
                        lastError: "HTTP 503", lastQuery: query, reportCount: 1),
                ])
            #expect(try store.sourcePosition("ingv") == 1_000)

            // A run without a position keeps the old one and clears the error.
            try await Self.importChecked("ingv", [], into: store)
            let ingv = try #require(try store.sourceStates().first { $0.name == "ingv" })
            #expect(ingv.position == 1_000 && ingv.lastError == nil && ingv.lastQuery == nil)
            #expect(ingv.lastSuccess == Self.nowMs && ingv.lastAttempt == Self.nowMs)
        }
    }

    @Test("tombstones are forgotten after 30 days: a copy older than that is taken again")
    func tombstonesPurged() async throws {
        try await withTemporaryDirectory { dir in
            let store = try QuakeStore(directory: dir)
            let month: Int64 = 31 * 24 * 3600 * 1000
            let old = Self.report("ingv", "old1", updated: Self.nowMs - month - 1_000)
            try await Self.importChecked("ingv", [old], into: store)
            try await Self.importChecked(
                "ingv", [.retraction(source: "ingv", id: "old1", updated: Self.nowMs - month)], into: store)
            #expect(try store.allQuakes().isEmpty)
            let tombstones = try await store.pool.read { db in
                try Int.fetchOne(db, sql: "SELECT count(*) FROM reportTombstones")
            }
            #expect(tombstones == 0)
            let back = try await Self.importChecked("ingv", [old], into: store)
            #expect(back.created == 1)
        }
    }

    /// EMSC's report of one quake, then INGV's (preferred: first in the source order).
    static let emscFirst = report("emsc", "20231114_01", time: t0, lat: 42.05, mag: 4.4, updated: nowMs - 120_000)
    static let ingvSecond = report("ingv", "ingv77", time: t0 + 2_000, lat: 42.0, mag: 4.2, updated: nowMs - 60_000)

    @Test("EMSC then INGV: the row's agency and contributors, and the update's typed contributors change")
    func agencyAndContributors() async throws {
        try await withTemporaryDirectory { dir in
            let store = try QuakeStore(directory: dir)
            try await Self.importChecked("emsc", [Self.emscFirst], into: store)
            let first = try #require(try store.quake(id: "20231114_01"))
            #expect(first.agency == "EMSC")
            let emsc = Contributor(
                source: "emsc", agency: "EMSC", id: "20231114_01", time: Self.t0, lat: 42.05, lon: 13, depth: 10, mag: 4.4,
                magType: "ML", updated: Self.nowMs - 120_000, preferred: true)
            #expect(first.contributors == Contributor.json([emsc]))
            #expect(
                first.contributors
                    == #"[{"source":"emsc","agency":"EMSC","id":"20231114_01","time":1799996400000,"lat":42.05,"lon":13,"depth":10,"mag":4.4,"magType":"ML","updated":1799999880000,"preferred":true}]"#,
                "compact, in the interface's order, nulls left out")

            let second = try await Self.importChecked("ingv", [Self.ingvSecond], into: store)
            #expect(second.created == 0 && second.updated == 1)
            // The event keeps the id clients have seen; INGV's solution is preferred now.
            #expect(try store.allQuakes().map(\.id) == ["20231114_01"])
            let row = try #require(try store.quake(id: "20231114_01"))
            #expect(row.agency == "INGV" && row.net == "ingv" && row.mag == 4.2)
            var unpreferred = emsc
            unpreferred.preferred = false
            let ingv = Contributor(
                source: "ingv", agency: "INGV", id: "ingv77", time: Self.t0 + 2_000, lat: 42, lon: 13, depth: 10, mag: 4.2,
                magType: "ML", updated: Self.nowMs - 60_000, preferred: true)
            let contributors = try #require(row.contributors)
            #expect(Contributor.decode(json: contributors) == [ingv, unpreferred])
            #expect(contributors == Contributor.json([ingv, unpreferred]))

            // The second agency joining is an update; its field changes carry the contributors
            // typed (the FieldValue member `contributors`), before and after.
            let transaction = try Self.lastTransaction(store)
            #expect(transaction.changes.map(\.kind) == [.update])
            let fields = try #require(transaction.changes.first?.fields)
            #expect(fields.contains(FieldChange(field: "agency", old: .text("EMSC"), new: .text("INGV"))))
            let change = try #require(fields.first { $0.field == "contributors" })
            #expect(change.old == .contributors(Contributor.json([emsc])))
            #expect(change.new == .contributors(contributors))
            // Stored in history as the interface's FieldValue: an array, never a JSON string.
            let stored = try await store.pool.read { db in
                try String.fetchOne(
                    db, sql: "SELECT fields FROM historyChanges WHERE token = ?", arguments: [transaction.token])
            }
            let json = try #require(stored)
            let parsed = try #require(try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [[String: Any]])
            let contributorsChange = try #require(parsed.first { $0["field"] as? String == "contributors" })
            let new = try #require((contributorsChange["new"] as? [String: Any])?["contributors"] as? [[String: Any]])
            #expect(new.map { $0["source"] as? String } == ["ingv", "emsc"])
            #expect((contributorsChange["old"] as? [String: Any])?["string"] == nil)

            // checkIntegrity compares each event's row with its reports.
            try await store.pool.write { db in
                try db.execute(
                    sql: "UPDATE quakes SET contributors = ? WHERE id = '20231114_01'",
                    arguments: [Contributor.json([emsc])])
            }
            let problems = try store.checkIntegrity().joined(separator: "\n")
            #expect(problems.contains("event 20231114_01's contributors are not its reports"), "\(problems)")
            try await store.pool.write { db in
                try db.execute(
                    sql: "UPDATE quakes SET contributors = ?, agency = 'EMSC' WHERE id = '20231114_01'",
                    arguments: [contributors])
            }
            let agencyProblems = try store.checkIntegrity().joined(separator: "\n")
            #expect(agencyProblems.contains("event 20231114_01's agency EMSC is not its preferred report's"), "\(agencyProblems)")
        }
    }

    @Test("plain mode keeps agency and contributors NULL, even for a feed that carries them as properties")
    func plainModeLeavesThemNull() async throws {
        try await withTemporaryDirectory { dir in
            let store = try QuakeStore(directory: dir)
            // As `quakectl export --format geojson` writes them: the feed decoder skips both.
            let exported = featureJSON(id: "us1000aaaa").replacingOccurrences(
                of: #""felt":null"#,
                with: #""felt":null,"agency":"US","contributors":[{"source":"usgs","id":"us1000aaaa","time":1,"lat":1,"lon":2,"preferred":true}]"#)
            #expect(exported.contains("contributors"))
            let report = try await importJSON(feedJSON([exported, featureJSON(id: "us1000bbbb")]), into: store)
            #expect(report.inserted == 2)
            #expect(try !store.isAssociationMode())
            let set = try await store.pool.read { db in
                try Int.fetchOne(db, sql: "SELECT count(*) FROM quakes WHERE agency IS NOT NULL OR contributors IS NOT NULL")
            }
            #expect(set == 0)
            #expect(try store.allQuakes().count == 2)
            #expect(try store.checkIntegrity().isEmpty)
            // checkIntegrity: a row that is no event has neither.
            try await store.pool.write { db in
                try db.execute(sql: "UPDATE quakes SET agency = 'US' WHERE id = 'us1000bbbb'")
            }
            #expect(try store.checkIntegrity() == ["quake us1000bbbb has an agency or contributors but no reports"])
        }
    }

    @Test("v15 fills the agency and contributors of a store already in association mode, without history")
    func migrationFillsAnAssociatedStore() async throws {
        try await withTemporaryDirectory { dir in
            let path = dir.appendingPathComponent("quakes.sqlite").path
            var expected: [FeedFeature] = []
            var head: HistoryToken = 0
            do {
                let store = try QuakeStore(path: path)
                try await Self.importChecked("emsc", [Self.emscFirst, Self.report("emsc", "far", lat: -30)], into: store)
                try await Self.importChecked("ingv", [Self.ingvSecond], into: store)
                expected = try store.allQuakes()
                #expect(expected.count == 2 && expected.allSatisfy { $0.contributors != nil && $0.agency != nil })
                head = try store.head()
                // The store as quaked wrote it before v15: no such columns, the migration not run.
                try await store.pool.write { db in
                    try db.execute(
                        sql: """
                            ALTER TABLE quakes DROP COLUMN agency;
                            ALTER TABLE quakes DROP COLUMN contributors;
                            ALTER TABLE usgsReports DROP COLUMN agency;
                            ALTER TABLE usgsReports DROP COLUMN contributors;
                            DELETE FROM grdb_migrations WHERE identifier = 'v15-contributors';
                            """)
                }
                try store.close()
            }
            let store = try QuakeStore(path: path)
            #expect(try store.allQuakes() == expected)
            #expect(try store.head() == head, "no history")
            #expect(try store.checkIntegrity().isEmpty)
        }
    }
}
