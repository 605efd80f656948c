import Foundation
import GRDB
import QuakeAssociation
import QuakeModel
import QuakeTestSupport
import Testing

@testable import QuakeStore

/// A source import restores only the part of the association its items touch (the connected
/// components of the candidate graph), from the tables, in its own transaction.
@Suite("Association parts")
struct AssociationPartTests {
    typealias T = SourceImportTests
    static let association = AssociationConfiguration(sourceOrder: ["ingv", "emsc", "gfz"])

    /// `count` INGV reports an hour apart, none within the windows of another.
    static func distantReports(_ count: Int) -> [SourceItem] {
        (0..<count).map { i in
            T.report("ingv", "ingv\(i)", time: T.t0 - Int64(i) * 3_600_000, lat: 30 + Double(i % 20), lon: Double(i % 50))
        }
    }

    @Test("an import into a store of many distant reports loads only the components its items touch")
    func loadsOnlyTheNeighbourhood() async throws {
        try await withTemporaryDirectory { dir in
            let store = try QuakeStore(directory: dir)
            // The first import under a configuration restores the whole store (empty here).
            try await T.importChecked("ingv", Self.distantReports(300), into: store, association: Self.association)
            #expect(store.sourceImportState.lastRestoredWhole)
            #expect(try store.allQuakes().count == 300)

            // EMSC's solution of ingv150's quake: only ingv150 is read.
            let near = T.report("emsc", "emsc150", time: T.t0 - 150 * 3_600_000 + 4_000, lat: 30 + 10.1, lon: 0)
            let joined = try await T.importChecked("emsc", [near], into: store, association: Self.association)
            #expect(joined.updated == 1 && joined.created == 0)
            #expect(!store.sourceImportState.lastRestoredWhole)
            #expect(store.sourceImportState.lastLoadedReports == 1)
            #expect(try store.reports(ofEvent: "ingv150").map(\.id).sorted() == ["emsc150", "ingv150"])

            // Its revision: the report itself and its event's other member.
            let revised = T.report(
                "emsc", "emsc150", time: T.t0 - 150 * 3_600_000 + 3_000, lat: 30 + 10.1, lon: 0, mag: 4.4,
                updated: T.nowMs - 30_000)
            try await T.importChecked("emsc", [revised], into: store, association: Self.association)
            #expect(store.sourceImportState.lastLoadedReports == 2)

            // A report far from all, whose links name ingv7: the component through the link.
            let linked = SourceItem.report(
                SourceReport(
                    source: "gfz", id: "gfz7", agency: "GFZ", time: T.t0 + 86_400_000, latitude: -40, longitude: 170,
                    depth: 10, magnitude: 5, magnitudeType: "mb", place: "far", updated: T.nowMs - 60_000,
                    links: ["ingv7"]))
            let linkedReport = try await T.importChecked("gfz", [linked], into: store, association: Self.association)
            #expect(linkedReport.updated == 1)
            #expect(store.sourceImportState.lastLoadedReports == 1)
            #expect(try store.reports(ofEvent: "ingv7").map(\.id).sorted() == ["gfz7", "ingv7"])
            // ... and from the other side: a revision of ingv7 reads gfz7 through reportLinks.
            let ingv7 = T.report("ingv", "ingv7", time: T.t0 - 7 * 3_600_000, lat: 37, lon: 7, mag: 4.0, updated: T.nowMs)
            try await T.importChecked("ingv", [ingv7], into: store, association: Self.association)
            #expect(store.sourceImportState.lastLoadedReports == 2)

            // Another configuration regroups the whole store once, then parts again.
            let other = AssociationConfiguration(sourceOrder: ["emsc", "ingv", "gfz"])
            let reordered = try await T.importChecked("ingv", [], into: store, association: other)
            #expect(store.sourceImportState.lastRestoredWhole)
            #expect(store.sourceImportState.lastLoadedReports == 302)
            #expect(reordered.updated == 1, "ingv150's event now prefers EMSC's report")
            try await T.importChecked("ingv", [], into: store, association: other)
            #expect(!store.sourceImportState.lastRestoredWhole)
            #expect(store.sourceImportState.lastLoadedReports == 0)
        }
    }

    @Test("a new event in a part does not take the id of an event outside it, and its row leaves that id out")
    func idsOutsideThePart() async throws {
        try await withTemporaryDirectory { dir in
            let store = try QuakeStore(directory: dir)
            let config = Self.association
            var reference = Associator(configuration: config)
            let x1 = T.report("ingv", "x1")
            let e1 = T.report("emsc", "e1", time: T.t0 + 5_000, lat: 42.18, updated: T.nowMs - 120_000)
            let retraction = SourceItem.retraction(source: "ingv", id: "x1", updated: T.nowMs)
            // Far from event x1, with the id its founding report had.
            let namesake = T.report("gfz", "x1", time: T.t0 - 36_000_000, lat: -20, lon: 100)
            for (source, items) in [("ingv", [x1]), ("emsc", [e1]), ("ingv", [retraction]), ("gfz", [namesake])] {
                _ = reference.apply(items)
                try await T.importChecked(source, items, into: store, association: config)
            }
            #expect(store.sourceImportState.lastLoadedReports == 0)
            #expect(reference.event(containing: ReportKey(source: "gfz", id: "x1"))?.id == "gfz:x1")
            #expect(try store.reports(ofEvent: "x1").map(\.id) == ["e1"])
            #expect(try store.reports(ofEvent: "gfz:x1").map(\.id) == ["x1"])
            // x1 is another event's id: the new row's ids leave it out.
            #expect(try store.quake(id: "gfz:x1")?.ids == nil)
            let stored = try store.allQuakes().map(\.id).sorted()
            #expect(stored == reference.events.map(\.id).sorted())
        }
    }
}
