import Foundation
import GRDB
import QuakeAssociation
import QuakeModel
import QuakeTestSupport
import Testing

@testable import QuakeStore

/// A source import restores its associator from the part of the store its items touch (the whole
/// connected components of their reports), and from the whole store only when the stored events
/// were grouped under another configuration. Whether the grouping it writes is right is the
/// model checks' (SourceModelCheck, PushModelCheck): they compare the store with a model after
/// every step. These check that the part is a part, and the link index it reads.
@Suite("Association parts")
struct AssociationPartTests {
    typealias S = SourceImportTests

    static func report(
        _ source: String, _ id: String, time: Int64, lat: Double = 42.0, lon: Double = 13.0, mag: Double = 4.2,
        links: [String] = []
    ) -> SourceItem {
        .report(
            SourceReport(
                source: source, id: id, agency: source.uppercased(), time: time, latitude: lat, longitude: lon,
                depth: 10, magnitude: mag, magnitudeType: "ML", place: "CENTRAL ITALY", updated: S.nowMs - 60_000,
                links: links))
    }

    /// INGV report `i`'s origin time: an hour apart, so that each is a component of its own.
    static func hour(_ i: Int) -> Int64 { S.t0 - Int64(i) * 3_600_000 }

    @Test("an import restores only the components its items touch; another configuration, the whole store once")
    func partsOnly() async throws {
        try await withTemporaryDirectory { dir in
            let store = try QuakeStore(directory: dir)
            defer { try? store.close() }
            func restored() -> SourceImportSettings.Restore? { store.sourceImportSettings.lastRestore }

            // The first import: no configuration is recorded, so the whole (empty) store.
            try await S.importChecked("ingv", (0..<100).map { Self.report("ingv", "ingv\($0)", time: Self.hour($0)) }, into: store)
            #expect(restored() == .init(reports: 0, wholeStore: true))

            // EMSC's report of INGV's 50th quake: that report alone is read, and they associate.
            try await S.importChecked("emsc", [Self.report("emsc", "e50", time: Self.hour(50) + 3_000, lat: 42.1)], into: store)
            #expect(restored() == .init(reports: 1, wholeStore: false))
            #expect(try store.quake(id: "ingv50")?.sources == ",emsc,ingv,")

            // A report near no other: nothing is read.
            try await S.importChecked("emsc", [Self.report("emsc", "far", time: Self.hour(50), lat: -40, lon: 100)], into: store)
            #expect(restored() == .init(reports: 0, wholeStore: false))

            // A revision of INGV's 50th: its component, both reports of the event.
            try await S.importChecked("ingv", [Self.report("ingv", "ingv50", time: Self.hour(50), mag: 4.4)], into: store)
            #expect(restored() == .init(reports: 2, wholeStore: false))

            // An id link to a report far away in time and space: the linked report is read
            // (through reportLinks one way, the id index the other), and joins the event.
            try await S.importChecked(
                "emsc", [Self.report("emsc", "e7", time: S.t0 + 86_400_000, lat: -40, lon: 100, links: ["ingv7"])],
                into: store)
            #expect(restored() == .init(reports: 1, wholeStore: false))
            #expect(try store.quake(id: "ingv7")?.sources == ",emsc,ingv,")
            // ...and a revision of the linked report reads the one linking it.
            try await S.importChecked("ingv", [Self.report("ingv", "ingv7", time: Self.hour(7), mag: 3.9)], into: store)
            #expect(restored() == .init(reports: 2, wholeStore: false))

            // Another configuration: the whole store, regrouped once under it; then parts again.
            let wider = AssociationConfiguration(associateTimeMilliseconds: 30_000, sourceOrder: ["ingv", "emsc"])
            try await S.importChecked("ingv", [Self.report("ingv", "ingv0", time: Self.hour(0), mag: 5.0)], into: store, association: wider)
            #expect(restored() == .init(reports: 103, wholeStore: true))
            try await S.importChecked("ingv", [Self.report("ingv", "ingv0", time: Self.hour(0), mag: 5.1)], into: store, association: wider)
            #expect(restored() == .init(reports: 1, wholeStore: false))
            // Nothing held in memory between imports: a reopened store reads the same part.
            try store.close()
            let reopened = try QuakeStore(directory: dir)
            defer { try? reopened.close() }
            try await S.importChecked("ingv", [Self.report("ingv", "ingv50", time: Self.hour(50), mag: 4.5)], into: reopened, association: wider)
            #expect(reopened.sourceImportSettings.lastRestore == .init(reports: 2, wholeStore: false))
        }
    }

    /// reportLinks as the imports keep it, and as it should be: each report's links but its own
    /// id and empty ones.
    static func links(_ store: QuakeStore) async throws -> (kept: [String], expected: [String]) {
        try await store.pool.read { db in
            let kept = try Row.fetchAll(db, sql: "SELECT link, source, id FROM reportLinks ORDER BY 1, 2, 3")
                .map { "\($0[0] as String) \($0[1] as String):\($0[2] as String)" }
            let expected = try Row.fetchAll(
                db,
                sql: """
                    SELECT DISTINCT l.value, r.source, r.id FROM reports r, json_each(r.links) l
                    WHERE l.value <> '' AND l.value <> r.id ORDER BY 1, 2, 3
                    """
            ).map { "\($0[0] as String) \($0[1] as String):\($0[2] as String)" }
            return (kept, expected)
        }
    }

    @Test("reportLinks follows the reports' links through revisions, replacements and retractions")
    func linkIndex() async throws {
        try await withTemporaryDirectory { dir in
            let store = try QuakeStore(directory: dir)
            defer { try? store.close() }
            let t = S.t0
            try await S.importChecked(
                "usgs-fdsn",
                [
                    Self.report("usgs-fdsn", "us1", time: t, links: ["us1", "", "ci9", "nc4", "ci9"]),
                    Self.report("usgs-fdsn", "us2", time: t + 7_200_000, links: ["ak3"]),
                ], into: store)
            var links = try await Self.links(store)
            #expect(links.kept == ["ak3 usgs-fdsn:us2", "ci9 usgs-fdsn:us1", "nc4 usgs-fdsn:us1"])
            #expect(links.kept == links.expected)

            // A revision with other links replaces them; one without any drops them.
            try await S.importChecked(
                "usgs-fdsn",
                [
                    Self.report("usgs-fdsn", "us1", time: t, mag: 4.3, links: ["nc4", "hv5"]),
                    Self.report("usgs-fdsn", "us2", time: t + 7_200_000, mag: 4.3),
                ], into: store)
            links = try await Self.links(store)
            #expect(links.kept == ["hv5 usgs-fdsn:us1", "nc4 usgs-fdsn:us1"])
            #expect(links.kept == links.expected)

            // A retraction removes the report and its links.
            try await S.importChecked("usgs-fdsn", [.retraction(source: "usgs-fdsn", id: "us1", updated: S.nowMs)], into: store)
            links = try await Self.links(store)
            #expect(links.kept == [])
            #expect(links.kept == links.expected)
        }
    }

    @Test("v17 indexes the links of the reports stored before it, and the next import regroups the whole store")
    func upgrade() async throws {
        try await withTemporaryDirectory { dir in
            let path = dir.appendingPathComponent(QuakeStore.fileName).path
            do {
                let pool = try DatabasePool(path: path)
                try StoreSchema.migrator.migrate(pool, upTo: "v16-history-quake-index")
                try await pool.write { db in
                    try db.execute(
                        sql: """
                            INSERT INTO reports (source, id, time, latitude, longitude, links, event)
                                VALUES ('usgs-fdsn', 'us1', 1000, 1, 2, '["us1","ci9","","nc4"]', 'us1'),
                                       ('emsc', 'e1', 2000, 1, 2, '[]', 'us1');
                            INSERT INTO sourceEvents (id, created, preferredSource, preferredId) VALUES ('us1', 1, 'usgs-fdsn', 'us1');
                            UPDATE associationState SET associated = 1, lastCreated = 1;
                            """)
                }
                try pool.close()
            }
            let store = try QuakeStore(path: path)
            defer { try? store.close() }
            let links = try await Self.links(store)
            #expect(links.kept == ["ci9 usgs-fdsn:us1", "nc4 usgs-fdsn:us1"])
            #expect(links.kept == links.expected)
            let configuration = try await store.pool.read { db in
                try String.fetchOne(db, sql: "SELECT configuration FROM associationState")
            }
            #expect(configuration == nil)
            _ = try await store.importSource(
                "emsc", items: [Self.report("emsc", "e2", time: S.t0, lat: -40)], position: nil, query: nil,
                association: S.association, now: S.now)
            #expect(store.sourceImportSettings.lastRestore == .init(reports: 2, wholeStore: true))
            let recorded = try await store.pool.read { db in
                try String.fetchOne(db, sql: "SELECT configuration FROM associationState")
            }
            #expect(recorded == S.association.fingerprint)
        }
    }
}
