import Foundation
import GRDB
import QuakeAssociation
import QuakeFeed
import QuakeModel
import QuakeTestSupport
import Testing

@testable import QuakeStore

/// The USGS feed as the source `usgs` (association mode): its imports go through `usgsReports`
/// and the associator, on real store files.
@Suite("USGS as a source")
struct UsgsSourceTests {
    /// After the features' `updated` (1_700_000_100_000 and later), so that tombstones are recent.
    static let nowMs: Int64 = 1_700_000_200_000
    static let now = Date(timeIntervalSince1970: Double(nowMs) / 1000)
    static let association = AssociationConfiguration(sourceOrder: ["usgs", "emsc"])
    /// featureJSON's quake: 35.25 N, 117.5 W, 7.5 km deep.
    static let t0: Int64 = 1_700_000_000_000

    /// EMSC's solution of featureJSON's quake, 3 s later and about 10 km away.
    static func emsc(
        _ id: String = "20231114_0000001", time: Int64 = t0 + 3_000, lat: Double = 35.34, updated: Int64 = t0 + 50_000
    ) -> SourceItem {
        .report(
            SourceReport(
                source: "emsc", id: id, agency: "EMSC", time: time, latitude: lat, longitude: -117.5, depth: 10,
                magnitude: 4.0, magnitudeType: "mb", place: "SOUTHERN CALIFORNIA", updated: updated))
    }

    @discardableResult
    static func importSource(
        _ items: [SourceItem], into store: QuakeStore, name: String = "emsc", expiringBefore: Date? = nil
    ) async throws -> SourceImportReport {
        let report = try await store.importSource(
            name, items: items, position: nil, query: nil, association: association, now: now,
            expiringBefore: expiringBefore)
        let problems = try store.checkIntegrity()
        #expect(problems.isEmpty, "\(problems)")
        return report
    }

    @discardableResult
    static func importFeed(_ json: String, into store: QuakeStore) async throws -> ImportReport {
        let bytes = Array(json.utf8)
        let report = try await store.importFeed(source: "test://usgs", now: now, association: association) { sink in
            try await sink.send(bytes)
        }
        let problems = try store.checkIntegrity()
        #expect(problems.isEmpty, "\(problems)")
        return report
    }

    @discardableResult
    static func importCatalog(_ json: String, into store: QuakeStore) async throws -> ImportReport {
        let bytes = Array(json.utf8)
        return try await store.importCatalogWindow(source: "test://catalog", now: now, association: association) {
            sink in try await sink.send(bytes)
        }
    }

    /// Each transaction's changes, as (id, kind, reason, supersededBy), for comparing histories.
    static func changes(_ store: QuakeStore, after token: HistoryToken = 0) throws -> [[String]] {
        try store.history(after: token, limit: 10_000).transactions.map { transaction in
            transaction.changes.map {
                "\($0.quakeId) \($0.kind.rawValue) \($0.reason?.rawValue ?? "-") \($0.supersededBy ?? "-")"
            }.sorted()
        }
    }

    static func count(_ store: QuakeStore, _ table: String) async throws -> Int {
        try await store.pool.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM \(table)") ?? 0 }
    }

    static let documents: [String] = [
        feedJSON([
            featureJSON(id: "us1000aaaa", time: t0),
            featureJSON(id: "us1000bbbb", time: t0 + 3_600_000),
            featureJSON(id: "us1000cccc", time: t0 + 7_200_000),
        ]),
        feedJSON([
            // aaaa revised, bbbb superseded under a new id, cccc as it was
            featureJSON(id: "us1000aaaa", time: t0, updated: 1_700_000_150_000, mag: "4.4"),
            featureJSON(
                id: "us1000dddd", time: t0 + 3_600_000, updated: 1_700_000_150_000, ids: ",us1000dddd,us1000bbbb,"),
            featureJSON(id: "us1000cccc", time: t0 + 7_200_000),
        ]),
    ]
    /// The catalog deleting cccc.
    static let deletion = feedJSON([
        featureJSON(id: "us1000cccc", time: t0 + 7_200_000, updated: 1_700_000_160_000, status: "deleted")
    ])

    /// Rows without `agency` and `contributors`, which only association mode sets.
    static func withoutContributors(_ rows: [FeedFeature]) -> [FeedFeature] {
        rows.map { row in
            var row = row
            row.agency = nil
            row.contributors = nil
            return row
        }
    }

    /// Each USGS row (`us...`) of a store whose only source for them is the USGS feed has its own
    /// usgs report as its one contributor, and the feed's network (in capitals) as its agency.
    static func expectOwnContributors(_ store: QuakeStore) throws {
        for row in try store.allQuakes() where row.id.hasPrefix("us") {
            let report = try #require(QuakeStore.usgsReport(from: row))
            #expect(row.agency == row.net?.uppercased())
            #expect(row.contributors == Contributor.json([Contributor(report, preferred: true)]), "\(row.id)")
        }
    }

    @Test("association mode with only the USGS feed: the rows and history kinds of plain mode")
    func onlyUsgsLikePlainMode() async throws {
        try await withTemporaryDirectory { dir in
            let plain = try QuakeStore(path: dir.appendingPathComponent("plain.sqlite").path)
            let associated = try QuakeStore(path: dir.appendingPathComponent("associated.sqlite").path)
            // An empty run of a source enters association mode and changes no row.
            try await Self.importSource([], into: associated)
            #expect(try associated.isAssociationMode())
            #expect(try !plain.isAssociationMode())
            #expect(try associated.head() == 0)
            for document in Self.documents {
                let p = try await Self.importFeed(document, into: plain)
                let a = try await Self.importFeed(document, into: associated)
                #expect(try plain.allQuakes() == Self.withoutContributors(associated.allQuakes()))
                try Self.expectOwnContributors(associated)
                #expect((p.inserted, p.updated, p.superseded, p.deleted) == (a.inserted, a.updated, a.superseded, a.deleted))
            }
            let p = try await Self.importCatalog(Self.deletion, into: plain)
            let a = try await Self.importCatalog(Self.deletion, into: associated)
            #expect(p.deleted == 1 && a.deleted == 1)
            #expect(try plain.allQuakes() == Self.withoutContributors(associated.allQuakes()))
            // Plain mode: neither field, in any row.
            #expect(try plain.allQuakes().allSatisfy { $0.agency == nil && $0.contributors == nil })
            #expect(try associated.allQuakes().map(\.id).sorted() == ["us1000aaaa", "us1000dddd"])
            #expect(try Self.changes(plain) == Self.changes(associated))
            #expect(try associated.reports(ofEvent: "us1000dddd").map(\.id) == ["us1000dddd"])
            #expect(try await Self.count(associated, "usgsReports") == 2)
            let usgsWithContributors = try await associated.pool.read { db in
                try Int.fetchOne(db, sql: "SELECT count(*) FROM usgsReports WHERE agency IS NOT NULL OR contributors IS NOT NULL")
            }
            #expect(usgsWithContributors == 0, "usgsReports keep the feed's rows: neither field")
            #expect(try await Self.count(plain, "usgsReports") == 0)
            #expect(try associated.checkIntegrity().isEmpty)
        }
    }

    @Test("EMSC first, then the USGS feed 3 s and 10 km away: one row under EMSC's id, an update with the USGS fields")
    func emscFirstThenUsgs() async throws {
        try await withTemporaryDirectory { dir in
            let store = try QuakeStore(directory: dir)
            let first = try await Self.importSource([Self.emsc()], into: store)
            #expect(first.created == 1)
            let report = try await Self.importFeed(feedJSON([featureJSON(id: "us1000aaaa")]), into: store)
            #expect(report.inserted == 0 && report.updated == 1)
            let rows = try store.allQuakes()
            #expect(rows.map(\.id) == ["20231114_0000001"])
            let row = try #require(rows.first)
            #expect(row.url == "https://example.org/us1000aaaa")
            #expect(row.sig == 271 && row.nst == 12 && row.types == ",origin,")
            // usgs is preferred (source order, and reviewed): its solution and names.
            #expect(row.lat == 35.25 && row.mag == 4.1 && row.net == "us" && row.sources == ",us,emsc,")
            let kinds = try Self.changes(store).map { $0.map { $0.split(separator: " ")[1] } }
            #expect(kinds == [["insert"], ["update"]])
            #expect(try store.reports(ofEvent: "20231114_0000001").map(\.source).sorted() == ["emsc", "usgs"])

            // A second USGS document that changes felt: an update of the same row.
            let felt = featureJSON(id: "us1000aaaa", updated: 1_700_000_150_000)
                .replacingOccurrences(of: "\"felt\":null", with: "\"felt\":12")
            try await Self.importFeed(feedJSON([felt]), into: store)
            #expect(try store.allQuakes().map(\.id) == ["20231114_0000001"])
            #expect(try store.quake(id: "20231114_0000001")?.felt == 12)
        }
    }

    @Test("the USGS feed first, then EMSC: one row under the USGS id, an update")
    func usgsFirstThenEmsc() async throws {
        try await withTemporaryDirectory { dir in
            let store = try QuakeStore(directory: dir)
            try await Self.importFeed(feedJSON([featureJSON(id: "us1000aaaa")]), into: store)
            #expect(try !store.isAssociationMode())
            let before = try #require(try store.quake(id: "us1000aaaa"))
            let report = try await Self.importSource([Self.emsc()], into: store)
            #expect(report.created == 0 && report.updated == 1 && report.deleted == 0)
            let rows = try store.allQuakes()
            #expect(rows.map(\.id) == ["us1000aaaa"])
            // usgs stays preferred: the other agency joins the sources, its id the ids (after the feed's).
            var expected = before
            expected.sources = ",us,emsc,"
            expected.ids = ",us1000aaaa,20231114_0000001,"
            // And, association mode, the agency (the USGS report's: the feed's net, in capitals)
            // and every report as a contributor, usgs (preferred) first.
            expected.agency = "US"
            let contributors = try #require(rows.first?.contributors.flatMap { Contributor.decode(json: $0) })
            #expect(contributors.map(\.source) == ["usgs", "emsc"])
            #expect(contributors.map(\.preferred) == [true, false])
            #expect(contributors.map(\.id) == ["us1000aaaa", "20231114_0000001"])
            #expect(contributors[0].status == "reviewed" && contributors[1].status == nil)
            #expect(contributors[1].lat == 35.34 && contributors[1].magType == "mb" && contributors[1].agency == "EMSC")
            expected.contributors = rows.first?.contributors
            #expect(rows.first == expected)
            // The USGS row as the feed gave it keeps neither.
            let usgsRow = try await store.pool.read { db in try QuakeStore.usgsReportRow(db, id: "us1000aaaa") }
            #expect(usgsRow?.agency == nil && usgsRow?.contributors == nil)
            let kinds = try Self.changes(store).map { $0.map { $0.split(separator: " ")[1] } }
            #expect(kinds == [["insert"], ["update"]])
        }
    }

    @Test("the USGS feed supersedes an alias in association mode: the event follows, no duplicate row")
    func usgsSupersedesAlias() async throws {
        try await withTemporaryDirectory { dir in
            let store = try QuakeStore(directory: dir)
            try await Self.importSource([Self.emsc()], into: store)
            try await Self.importFeed(feedJSON([featureJSON(id: "us1000aaaa")]), into: store)
            // The USGS renames the event: ci1 supersedes us1000aaaa.
            let report = try await Self.importFeed(
                feedJSON([featureJSON(id: "ci12345678", updated: 1_700_000_150_000, ids: ",ci12345678,us1000aaaa,")]),
                into: store)
            #expect(report.inserted == 0 && report.deleted == 0 && report.superseded == 0)
            let rows = try store.allQuakes()
            #expect(rows.map(\.id) == ["20231114_0000001"])
            #expect(rows.first?.net == "ci" && rows.first?.ids == ",ci12345678,us1000aaaa,20231114_0000001,")
            #expect(try store.reports(ofEvent: "20231114_0000001").map(\.id).sorted() == ["20231114_0000001", "ci12345678"])
            // And a USGS-only event renamed: superseded as in plain mode.
            try await Self.importFeed(feedJSON([featureJSON(id: "us1000bbbb", time: Self.t0 + 3_600_000)]), into: store)
            let renamed = try await Self.importFeed(
                feedJSON([
                    featureJSON(
                        id: "nc7777", time: Self.t0 + 3_600_000, updated: 1_700_000_150_000, ids: ",nc7777,us1000bbbb,")
                ]),
                into: store)
            #expect(renamed.inserted == 1 && renamed.superseded == 1)
            #expect(try store.allQuakes().map(\.id).sorted() == ["20231114_0000001", "nc7777"])
            let last = try #require(try Self.changes(store).last)
            #expect(last == ["nc7777 insert - -", "us1000bbbb delete superseded nc7777"])
        }
    }

    @Test("a USGS row deleted upstream retracts the usgs report; the EMSC report keeps the event")
    func upstreamDeletionRetracts() async throws {
        try await withTemporaryDirectory { dir in
            let store = try QuakeStore(directory: dir)
            try await Self.importSource([Self.emsc()], into: store)
            try await Self.importFeed(feedJSON([featureJSON(id: "us1000aaaa")]), into: store)
            #expect(try store.quake(id: "20231114_0000001")?.felt == nil)
            let report = try await Self.importCatalog(
                feedJSON([featureJSON(id: "us1000aaaa", updated: 1_700_000_150_000, status: "deleted")]), into: store)
            #expect(report.updated == 1 && report.deleted == 0)
            #expect(try store.checkIntegrity().isEmpty)
            let row = try #require(try store.quake(id: "20231114_0000001"))
            #expect(row.net == "emsc" && row.url == nil && row.lat == 35.34)
            #expect(try store.reports(ofEvent: "20231114_0000001").map(\.source) == ["emsc"])
            #expect(try await Self.count(store, "usgsReports") == 0)
            // A lagging copy of the summary feed does not bring the usgs report back.
            try await Self.importFeed(feedJSON([featureJSON(id: "us1000aaaa")]), into: store)
            #expect(try store.reports(ofEvent: "20231114_0000001").map(\.source) == ["emsc"])
        }
    }

    @Test("bootstrap: a plain-mode store's rows become usgs reports, all rows kept, each gaining its contributors in one update")
    func bootstrap() async throws {
        try await withTemporaryDirectory { dir in
            let store = try QuakeStore(directory: dir)
            let features = (0..<50).map { i in
                featureJSON(id: "us\(1000 + i)", time: Self.t0 - Int64(i) * 600_000, ids: i == 3 ? ",us1003,ak3," : nil)
            }
            try await Self.importFeed(feedJSON(features), into: store)
            let before = try StoreSnapshot(store)
            // A far-away EMSC quake: a new event beside them.
            let report = try await Self.importSource([Self.emsc(lat: -10)], into: store)
            // Each USGS row gains its agency and contributors (clients follow, as for any change):
            // 50 updates in the import's one transaction.
            #expect(report.created == 1 && report.updated == 50 && report.deleted == 0)
            #expect(try store.checkIntegrity().isEmpty)
            #expect(try store.head() == before.head + 1)
            let rows = try store.allQuakes().filter { $0.id.hasPrefix("us") }
            #expect(Self.withoutContributors(rows) == before.quakes)
            try Self.expectOwnContributors(store)
            let updates = try store.history(after: before.head).transactions.flatMap(\.changes).filter { $0.kind == .update }
            #expect(updates.count == 50)
            #expect(updates.allSatisfy { Set(($0.fields ?? []).map(\.field)) == ["agency", "contributors"] })
            #expect(try await Self.count(store, "usgsReports") == 50)
            #expect(try await Self.count(store, "usgsReportAliases") == 1)
            #expect(try await Self.count(store, "reports") == 51)
            #expect(try store.reports(ofEvent: "us1003").first?.links == ["ak3"])
            // The next feed import of the same document changes nothing.
            let again = try await Self.importFeed(feedJSON(features), into: store)
            #expect(again.token == nil && again.unchanged == 50)
            #expect(try store.head() == before.head + 1)
            // checkIntegrity sees a USGS row without its report, and a usgs report without its row.
            try await store.pool.write { db in
                try db.execute(sql: "DELETE FROM reports WHERE source = 'usgs' AND id = 'us1001'")
                try db.execute(sql: "DELETE FROM usgsReports WHERE id = 'us1002'")
            }
            let problems = try store.checkIntegrity().joined(separator: "\n")
            #expect(problems.contains("USGS row us1001 has no usgs report"), "\(problems)")
            #expect(problems.contains("usgs report us1002 has no USGS row"), "\(problems)")
        }
    }

    @Test("retention in association mode removes the reports with the event; a stale report does not bring it back")
    func retention() async throws {
        try await withTemporaryDirectory { dir in
            let store = try QuakeStore(directory: dir)
            try await Self.importSource([Self.emsc()], into: store)
            try await Self.importFeed(feedJSON([featureJSON(id: "us1000aaaa")]), into: store)
            // Retention at a week after the quake, keeping 1 day.
            let later = Date(timeIntervalSince1970: Double(Self.t0) / 1000 + 7 * 86_400)
            let token = try await store.applyRetention(maxAge: .seconds(86_400), now: later)
            #expect(token != nil)
            #expect(try store.count() == 0)
            #expect(try store.checkIntegrity().isEmpty)
            for table in ["reports", "sourceEvents", "usgsReports", "usgsReportAliases"] {
                #expect(try await Self.count(store, table) == 0, "\(table)")
            }
            let expiring = Date(timeIntervalSince1970: Double(Self.t0) / 1000 + 6 * 86_400)
            let stale = try await Self.importSource([Self.emsc()], into: store, expiringBefore: expiring)
            #expect(stale.ignored == 1 && stale.token == nil)
            let feed = try await store.importFeed(source: "test://usgs", now: later, expiringBefore: expiring) { sink in
                try await sink.send(Array(feedJSON([featureJSON(id: "us1000aaaa")]).utf8))
            }
            #expect(feed.token == nil && feed.skipped[ImportReport.expiredReason] == 1)
            #expect(try store.count() == 0)
        }
    }

    @Test("delete in association mode removes the event's reports with tombstones: an older copy stays out")
    func deleteByUser() async throws {
        try await withTemporaryDirectory { dir in
            let store = try QuakeStore(directory: dir)
            try await Self.importSource([Self.emsc()], into: store)
            try await Self.importFeed(feedJSON([featureJSON(id: "us1000aaaa")]), into: store)
            let deleted = try await store.delete(ids: ["20231114_0000001"], now: Self.now)
            #expect(deleted.deleted == ["20231114_0000001"])
            #expect(try store.checkIntegrity().isEmpty)
            #expect(try await Self.count(store, "reports") == 0)
            #expect(try await Self.count(store, "usgsReports") == 0)
            try await Self.importSource([Self.emsc()], into: store)
            try await Self.importFeed(feedJSON([featureJSON(id: "us1000aaaa")]), into: store)
            #expect(try store.count() == 0)
            // A newer version is the event again.
            try await Self.importFeed(feedJSON([featureJSON(id: "us1000aaaa", updated: 1_700_000_190_000)]), into: store)
            #expect(try store.allQuakes().map(\.id) == ["us1000aaaa"])
        }
    }

    @Test("rollback: a failing USGS import in association mode leaves tables and rows as they were")
    func rollback() async throws {
        try await withTemporaryDirectory { dir in
            let store = try QuakeStore(directory: dir)
            try await Self.importSource([Self.emsc()], into: store)
            try await Self.importFeed(feedJSON([featureJSON(id: "us1000aaaa")]), into: store)
            func tables() async throws -> [String] {
                try await SourceImportTests.sourceTables(store)
                    + store.pool.read { db in
                        try Row.fetchAll(db, sql: "SELECT * FROM usgsReports ORDER BY id").map { "\($0)" }
                            + Row.fetchAll(db, sql: "SELECT * FROM usgsReportAliases ORDER BY 1, 2").map { "\($0)" }
                    }
            }
            let snapshot = try StoreSnapshot(store)
            let before = try await tables()

            let changed = feedJSON([
                featureJSON(id: "us1000aaaa", updated: 1_700_000_150_000, mag: "5.0"),
                featureJSON(id: "us1000eeee", time: Self.t0 + 9_000_000),
            ])
            // Failing after everything was written, just before the commit.
            store.sourceImportSettings.failNextImportBeforeCommit = true
            await #expect(throws: (any Error).self) { try await Self.importFeed(changed, into: store) }
            // Failing in the document.
            await #expect(throws: ImportError.self) {
                try await store.importFeed(source: "test://usgs", now: Self.now, association: Self.association) { sink in
                    try await sink.send(Array(changed.utf8))
                    throw CancellationError()
                }
            }
            #expect(try StoreSnapshot(store) == snapshot)
            #expect(try await tables() == before)
            // And the import then goes through.
            let ok = try await Self.importFeed(changed, into: store)
            #expect(ok.inserted == 1 && ok.updated == 1)
        }
    }
}
