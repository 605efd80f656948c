import Foundation
import QuakeAssociation
import QuakeModel
import QuakeTestSupport
import Testing

@testable import QuakeStore

/// The association's counts (`associationState`: joined, new, merged, split) as source imports
/// keep them, in the import's transaction.
@Suite("Association counts")
struct AssociationCountsTests {
    static let t0: Int64 = 1_741_132_800_000
    static let association = AssociationConfiguration()

    static func report(
        _ source: String, _ id: String, time: Int64, lat: Double, lon: Double, updated: Int64, links: [String] = []
    ) -> SourceItem {
        .report(
            SourceReport(
                source: source, id: id, time: time, latitude: lat, longitude: lon, magnitude: 4.2,
                evaluationMode: .automatic, updated: updated, links: links))
    }

    static func counts(_ store: QuakeStore) throws -> (joined: Int64, new: Int64, merged: Int64, split: Int64) {
        let counts = try #require(try store.associationCounts())
        return (counts.joined, counts.created, counts.merged, counts.split)
    }

    @Test("two sources, one quake: joined 1, new 1; a revision that no longer matches splits; an id link merges")
    func joinSplitMerge() async throws {
        try await withTemporaryDirectory { dir in
            let store = try QuakeStore(directory: dir)
            defer { try? store.close() }
            #expect(try store.associationCounts() == nil, "before any source import: no association")
            func run(_ source: String, _ items: [SourceItem]) async throws -> SourceImportReport {
                try await store.importSource(
                    source, items: items, position: nil, query: nil, association: Self.association,
                    now: Date(timeIntervalSince1970: 1_741_140_000))
            }

            // alpha reports a quake: a new event.
            _ = try await run("alpha", [Self.report("alpha", "a1", time: Self.t0, lat: 42.5, lon: 13.25, updated: 1)])
            #expect(try Self.counts(store) == (0, 1, 0, 0))
            // beta reports it 5 s and 20 km off: it joins alpha's event.
            _ = try await run(
                "beta", [Self.report("beta", "b1", time: Self.t0 + 5000, lat: 42.68, lon: 13.25, updated: 1)])
            #expect(try Self.counts(store) == (1, 1, 0, 0))
            var all = try #require(try store.associationCounts())
            #expect(all.events == 1 && all.reports == 2)
            // The same copy again changes nothing.
            _ = try await run(
                "beta", [Self.report("beta", "b1", time: Self.t0 + 5000, lat: 42.68, lon: 13.25, updated: 1)])
            #expect(try Self.counts(store) == (1, 1, 0, 0))

            // beta revises its solution 500 km away: the event splits, beta's report founds a new one.
            _ = try await run(
                "beta", [Self.report("beta", "b1", time: Self.t0 + 5000, lat: 47.0, lon: 13.25, updated: 2)])
            #expect(try Self.counts(store) == (1, 2, 0, 1))
            #expect(try store.allQuakes().count == 2)

            // Two more quakes far apart, one each; then beta's revision names alpha's id: an id link
            // merges them, beta's event is deleted as superseded, its report joins alpha's event.
            _ = try await run("alpha", [Self.report("alpha", "a2", time: Self.t0 + 3_600_000, lat: -20, lon: 170, updated: 1)])
            _ = try await run("beta", [Self.report("beta", "b2", time: Self.t0 + 7_200_000, lat: 10, lon: 10, updated: 1)])
            #expect(try Self.counts(store) == (1, 4, 0, 1))
            let merged = try await run(
                "beta",
                [Self.report("beta", "b2", time: Self.t0 + 7_200_000, lat: 10, lon: 10, updated: 2, links: ["a2"])])
            #expect(merged.superseded == 1)
            #expect(try Self.counts(store) == (2, 4, 1, 1))
            all = try #require(try store.associationCounts())
            #expect(all.events == 3 && all.reports == 4)
            #expect(try store.allQuakes().count == 3)

            // A failed import counts nothing (its transaction rolls back).
            store.sourceImportSettings.failNextImportBeforeCommit = true
            await #expect(throws: (any Error).self) {
                _ = try await run(
                    "beta", [Self.report("beta", "b3", time: Self.t0, lat: 42.5, lon: 13.3, updated: 1)])
            }
            #expect(try Self.counts(store) == (2, 4, 1, 1))
            // Kept across a reopen.
            try store.close()
            let reopened = try QuakeStore(directory: dir)
            defer { try? reopened.close() }
            #expect(try Self.counts(reopened) == (2, 4, 1, 1))
            #expect(try reopened.checkIntegrity() == [])
        }
    }
}
