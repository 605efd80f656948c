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

    /// A report as the source model check writes them: `time` after T0 (two hours before now),
    /// `age` before now as its `updated`.
    static func modelReport(
        _ source: String, _ id: String, _ time: Int64, _ lat: Double, _ lon: Double, mag: Double = 4,
        age: Int64, reviewed: Bool = false, links: [String] = []
    ) -> SourceItem {
        .report(
            SourceReport(
                source: source, id: id, agency: source.uppercased(), time: S.nowMs - 7_200_000 + time, latitude: lat,
                longitude: lon, depth: 10, magnitude: mag, magnitudeType: "ML", place: "REGION",
                evaluationStatus: reviewed ? .reviewed : .preliminary, updated: S.nowMs - age, links: links))
    }

    /// From a model check case (source case 8 of seed 20261127): a report revised so that it
    /// leaves its event by link, in the run that brings a report of its own source beside that
    /// event, which then takes its place. Whether the run is applied whole or a slice at a
    /// time, the grouping is the same and each event is one quake row (its id may differ: see
    /// docs/design/agencies.md, "a run applied in slices").
    @Test(
        "a member leaving its event by link is replaced by a report of its source beside it, whatever the slices",
        arguments: [1, 2, QuakeStore.defaultSourceImportSliceItems])
    func leavingMemberIsReplaced(sliceItems: Int) async throws {
        try await withTemporaryDirectory { dir in
            let store = try QuakeStore(directory: dir)
            defer { try? store.close() }
            store.sourceImportSliceItems = sliceItems
            let configuration = AssociationConfiguration(sourceOrder: ["emsc", "geonet", "ingv"])
            func run(_ name: String, _ items: [SourceItem]) async throws {
                _ = try await S.importChecked(name, items, into: store, association: configuration)
            }
            try await run(
                "ingv",
                [
                    Self.modelReport(
                        "ingv", "ingv0", 5_892, 44.134, 10.878, mag: 3.8, age: 86_377_000, reviewed: true, links: ["geonet0"])
                ])
            try await run(
                "geonet", [Self.modelReport("geonet", "geonet0", 4_050, 44.561, 10.831, mag: 3.8, age: 86_357_000, reviewed: true)])
            #expect(try store.reports(ofEvent: "ingv0").map(\.id).sorted() == ["geonet0", "ingv0"])
            try await run(
                "ingv",
                [
                    Self.modelReport("ingv", "ingv3", 845, 44.515, 10.821, mag: 2.8, age: 86_348_000, reviewed: true),
                    Self.modelReport("ingv", "ingv0", -4_390, 44.176, 11.064, mag: 3.3, age: 86_343_000, links: ["emsc0"]),
                ])
            // ingv0 no longer links geonet0; ingv3 is nearer it than ingv0 is.
            let events = try await store.pool.read { db in
                try String.fetchAll(db, sql: "SELECT DISTINCT event FROM reports")
            }
            let stored = try Set(events.map { Set(try store.reports(ofEvent: $0).map(\.id)) })
            #expect(stored == [["geonet0", "ingv3"], ["ingv0"]])
            #expect(try Set(store.allQuakes().map(\.id)) == Set(events), "each event is its quake row")
        }
    }

    /// The model check's counterexample (source case 17 of seed 777, its run applied two items
    /// at a time): the first slice merges GeoNet's event into EMSC's by a link, the second
    /// retracts EMSC's report and what is left joins another event. Clients are told where the
    /// first event went in the end, a quake that exists.
    @Test(
        "a run applied in slices tells clients the survivor of a supersede, not an event a later slice removed",
        arguments: [1, 2, QuakeStore.defaultSourceImportSliceItems])
    func supersedeNamesTheSurvivor(sliceItems: Int) async throws {
        try await withTemporaryDirectory { dir in
            let store = try QuakeStore(directory: dir)
            defer { try? store.close() }
            store.sourceImportSliceItems = sliceItems
            let configuration = AssociationConfiguration(sourceOrder: ["emsc", "geonet"])
            func run(_ name: String, _ items: [SourceItem]) async throws {
                _ = try await S.importChecked(name, items, into: store, association: configuration)
            }
            try await run("emsc", [Self.modelReport("emsc", "emsc2", 1_200_366, 43.285, 0.103, age: 86_334_000)])
            try await run("geonet", [Self.modelReport("geonet", "geonet2", 1_197_830, 42.61, 1.677, age: 86_329_000)])
            try await run(
                "emsc",
                [
                    Self.modelReport("emsc", "emsc2b", 1_209_981, 42.826, 1.876, age: 86_325_000),
                    Self.modelReport("emsc", "emsc2", 1_201_559, 42.695, 1.42, age: 86_321_000, links: ["geonet2"]),
                    .retraction(source: "emsc", id: "emsc2", updated: S.nowMs - 86_313_000),
                ])
            let rows = try Set(store.allQuakes().map(\.id))
            let last = try S.lastTransaction(store)
            for change in last.changes where change.reason == .superseded {
                let survivor = try #require(change.supersededBy)
                #expect(rows.contains(survivor), "\(change.quakeId) is superseded by \(survivor): rows \(rows)")
            }
            // GeoNet's report is in one event with EMSC's other report, whatever the slices (its
            // id may be either's), and that event is the one row.
            #expect(rows.count == 1)
            let event = try #require(rows.first)
            #expect(try store.reports(ofEvent: event).map(\.id).sorted() == ["emsc2b", "geonet2"])
        }
    }
}
