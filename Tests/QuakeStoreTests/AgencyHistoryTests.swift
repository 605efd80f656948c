import Foundation
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
