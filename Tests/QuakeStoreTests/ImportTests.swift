import Foundation
import QuakeFeed
import QuakeTestSupport
import Testing

@testable import QuakeStore

@Suite("Feed import")
struct ImportTests {
    @Test("every fixture stores exactly its distinct ids", arguments: Fixtures.usgsFeeds)
    func everyFixtureStoresItsDistinctIDs(fixture: URL) async throws {
        try await withTemporaryDirectory { dir in
            let store = try QuakeStore(directory: dir)
            let expected = Set(try FeedDocument(contentsOf: fixture).ids)
            let report = try await store.importFile(fixture)
            #expect(report.inserted == expected.count)
            #expect(report.skippedTotal == 0)
            #expect(report.token == 1)
            #expect(Set(try store.allQuakes().map(\.id)) == expected)
            let page = try store.history(after: 0)
            #expect(page.transactions.count == 1)
            #expect(page.transactions[0].inserted == expected.count)
            #expect(Set(page.transactions[0].changes.map(\.quakeId)) == expected)
            #expect(page.transactions[0].changes.allSatisfy { $0.kind == .insert && $0.quake != nil })
        }
    }

    @Test("ok2023slzu and tx2023slzu share a code and stay two rows")
    func sameCodeDifferentEvents() async throws {
        try await withTemporaryDirectory { dir in
            let store = try QuakeStore(directory: dir)
            _ = try await store.importFile(Fixtures.usgs("johbry17__USGS-Earthquake-Map__all_week.geojson"))
            let ok = try #require(try store.quake(id: "ok2023slzu"))
            let tx = try #require(try store.quake(id: "tx2023slzu"))
            #expect(ok.code == "2023slzu")
            #expect(tx.code == "2023slzu")
            #expect(ok.net == "ok")
            #expect(tx.net == "tx")
            #expect(ok.time != tx.time)
        }
    }

    @Test("re-importing the same file changes nothing and creates no token")
    func reimportIsANoOp() async throws {
        try await withTemporaryDirectory { dir in
            let store = try QuakeStore(directory: dir)
            let fixture = Fixtures.usgs("tylerhill122__leaflet-usgs__all_week.geojson")
            let first = try await store.importFile(fixture)
            let before = try StoreSnapshot(store)
            let second = try await store.importFile(fixture)
            #expect(second.token == nil)
            #expect(second.unchanged == first.inserted)
            #expect(second.inserted == 0 && second.updated == 0 && second.superseded == 0)
            #expect(try StoreSnapshot(store) == before)
        }
    }

    @Test("an all_day then an all_week of the same moment merge")
    func overlappingFeedsMerge() async throws {
        try await withTemporaryDirectory { dir in
            let store = try QuakeStore(directory: dir)
            let dayURL = Fixtures.usgs("abruzzi__earthquake-viz__all_day.geojson")
            let weekURL = Fixtures.usgs("abruzzi__earthquake-viz__all_week.geojson")
            let day = try FeedDocument(contentsOf: dayURL)
            let week = try FeedDocument(contentsOf: weekURL)
            let dayContent = day.contentByID
            let weekContent = week.contentByID
            let common = Set(dayContent.keys).intersection(weekContent.keys)
            let changed = common.filter { dayContent[$0] != weekContent[$0] }
            let weekOnly = Set(weekContent.keys).subtracting(common)

            _ = try await store.importFile(dayURL)
            let report = try await store.importFile(weekURL)
            #expect(!changed.isEmpty && !weekOnly.isEmpty)
            #expect(report.updated == changed.count)
            #expect(report.unchanged == common.count - changed.count)
            #expect(report.inserted == weekOnly.count)
            #expect(report.stale == 0)
            let stored = try store.allQuakes()
            #expect(Set(stored.map(\.id)) == Set(dayContent.keys).union(weekContent.keys))
            // Updated rows hold the week's version.
            let weekUpdated = week.updatedByID
            for quake in stored where changed.contains(quake.id) {
                #expect(quake.updated == weekUpdated[quake.id]!)
            }
            let transaction = try #require(try store.history(after: 1).transactions.first)
            #expect(transaction.token == 2)
            #expect(transaction.updated == changed.count)
            #expect(transaction.inserted == weekOnly.count)
            let updates = transaction.changes.filter { $0.kind == .update }
            #expect(Set(updates.map(\.quakeId)) == changed)
            #expect(updates.allSatisfy { !($0.fields ?? []).isEmpty })
            #expect(updates.allSatisfy { $0.fields!.contains { $0.field == "updated" } })
        }
    }

    @Test("status is stored in lower case; null magnitude and place are kept")
    func normalisationAndNulls() async throws {
        try await withTemporaryDirectory { dir in
            let store = try QuakeStore(directory: dir)
            _ = try await store.importFile(Fixtures.usgs("abruzzi__earthquake-viz__all_day.geojson"))
            let statuses = Set(try store.allQuakes().compactMap(\.status))
            #expect(statuses == ["automatic", "reviewed"])

            let report = try await importJSON(
                feedJSON([
                    featureJSON(id: "us1", mag: "null", place: "null"), featureJSON(id: "us2", status: "REVIEWED"),
                ]),
                into: store)
            #expect(report.inserted == 2)
            let unknown = try #require(try store.quake(id: "us1"))
            #expect(unknown.mag == nil)
            #expect(unknown.place == nil)
            #expect(try store.quake(id: "us2")?.status == "reviewed")
        }
    }

    @Test("a newer version overwrites the row and history names the changed fields")
    func updateRecordsChangedFields() async throws {
        try await withTemporaryDirectory { dir in
            let store = try QuakeStore(directory: dir)
            _ = try await importJSON(feedJSON([featureJSON(id: "ci1", updated: 100, mag: "4.1")]), into: store)
            let report = try await importJSON(
                feedJSON([featureJSON(id: "ci1", updated: 200, mag: "3.9")]), into: store)
            #expect(report.updated == 1)
            #expect(report.token == 2)
            #expect(try store.quake(id: "ci1")?.mag == 3.9)
            let change = try #require(try store.history(after: 1).transactions.first?.changes.first)
            #expect(change.kind == .update)
            #expect(change.quake?.mag == 3.9)
            let fields = Dictionary(uniqueKeysWithValues: (change.fields ?? []).map { ($0.field, $0) })
            #expect(Set(fields.keys) == ["mag", "updated", "title"])
            #expect(fields["mag"]?.old == .real(4.1))
            #expect(fields["mag"]?.new == .real(3.9))
            #expect(fields["updated"]?.old == .integer(100))
            #expect(fields["updated"]?.new == .integer(200))
        }
    }

    @Test("an older version is stale and ignored; the same updated with a change still updates")
    func staleVersionsAreIgnored() async throws {
        try await withTemporaryDirectory { dir in
            let store = try QuakeStore(directory: dir)
            _ = try await importJSON(feedJSON([featureJSON(id: "ci1", updated: 200, mag: "4.1")]), into: store)
            let before = try StoreSnapshot(store)
            let stale = try await importJSON(feedJSON([featureJSON(id: "ci1", updated: 100, mag: "5.0")]), into: store)
            #expect(stale.stale == 1)
            #expect(stale.token == nil)
            #expect(try StoreSnapshot(store) == before)

            let sameTime = try await importJSON(
                feedJSON([featureJSON(id: "ci1", updated: 200, mag: "4.2")]), into: store)
            #expect(sameTime.updated == 1)
            #expect(try store.quake(id: "ci1")?.mag == 4.2)
        }
    }

    @Test("features without an id or an integer time are skipped and counted by reason")
    func skippedFeaturesAreCounted() async throws {
        try await withTemporaryDirectory { dir in
            let store = try QuakeStore(directory: dir)
            let good = featureJSON(id: "us1")
            let noID = good.replacingOccurrences(of: ",\"id\":\"us1\"}", with: "}")
            let numericID = good.replacingOccurrences(of: "\"id\":\"us1\"", with: "\"id\":17")
            let floatTime = featureJSON(id: "us2").replacingOccurrences(
                of: "\"time\":1700000000000", with: "\"time\":1700000000000.5")
            let noTime = featureJSON(id: "us3").replacingOccurrences(of: "\"time\":1700000000000,", with: "")
            let report = try await importJSON(feedJSON([good, noID, numericID, floatTime, noTime, "42"]), into: store)
            #expect(report.inserted == 1)
            #expect(report.features == 6)
            #expect(report.skipped == ["missing-id": 2, "missing-time": 2, "not-an-object": 1])
            #expect(try store.allQuakes().map(\.id) == ["us1"])
        }
    }

    @Test("a feature that lists a stored id in ids supersedes that row")
    func aliasesSupersedeOlderIDs() async throws {
        try await withTemporaryDirectory { dir in
            let store = try QuakeStore(directory: dir)
            _ = try await importJSON(feedJSON([featureJSON(id: "us1", updated: 100)]), into: store)
            let report = try await importJSON(
                feedJSON([featureJSON(id: "ci2", updated: 200, ids: ",ci2,us1,")]), into: store)
            #expect(report.superseded == 1)
            #expect(report.inserted == 1)
            #expect(try store.allQuakes().map(\.id) == ["ci2"])
            let transaction = try #require(try store.history(after: 1).transactions.first)
            #expect(transaction.deleted == 1)
            #expect(transaction.inserted == 1)
            let delete = try #require(transaction.changes.first { $0.kind == .delete })
            #expect(delete.quakeId == "us1")
            #expect(delete.reason == .superseded)
            #expect(delete.supersededBy == "ci2")
            #expect(delete.tombstone?.code == "1")
            #expect(delete.tombstone?.time == 1_700_000_000_000)
        }
    }

    @Test("an incoming feature older than the row it would supersede is stale")
    func olderAliasIsStale() async throws {
        try await withTemporaryDirectory { dir in
            let store = try QuakeStore(directory: dir)
            _ = try await importJSON(feedJSON([featureJSON(id: "ci2", updated: 300, ids: ",ci2,us1,")]), into: store)
            let before = try StoreSnapshot(store)
            // A lagging copy still lists the event under its previous preferred id.
            let report = try await importJSON(
                feedJSON([featureJSON(id: "us1", updated: 100, ids: ",us1,ci2,")]), into: store)
            #expect(report.stale == 1)
            #expect(try StoreSnapshot(store) == before)
        }
    }

    @Test("real data: a later feed that lists earlier ids supersedes them")
    func realAliases() async throws {
        try await withTemporaryDirectory { dir in
            let store = try QuakeStore(directory: dir)
            // July 2019, then a December 2019 query whose features list July's ids as aliases.
            let firstURL = Fixtures.usgs("CsabaConsulting__DataScienceBootcampHomework__2.5_month.geojson")
            let secondURL = Fixtures.usgs("heltond__earthquakes__query.geojson")
            let first = try FeedDocument(contentsOf: firstURL)
            let second = try FeedDocument(contentsOf: secondURL)
            let firstIDs = Set(first.ids)
            let firstUpdated = first.updatedByID
            let secondUpdated = second.updatedByID
            // Oracle: ids of the first feed that a newer feature of the second lists under another id.
            var expectedSuperseded = Set<String>()
            var expectedStale = Set<String>()
            for (id, aliases) in second.aliasesByID {
                let hits = aliases.filter { firstIDs.contains($0) }
                guard !hits.isEmpty else { continue }
                if hits.contains(where: { firstUpdated[$0]! > secondUpdated[id]! }) {
                    expectedStale.insert(id)
                } else {
                    expectedSuperseded.formUnion(hits)
                }
            }
            #expect(!expectedSuperseded.isEmpty)
            _ = try await store.importFile(firstURL)
            let report = try await store.importFile(secondURL)
            #expect(report.superseded == expectedSuperseded.count)
            let stored = Set(try store.allQuakes().map(\.id))
            #expect(stored.isDisjoint(with: expectedSuperseded))
            #expect(stored.isSuperset(of: Set(second.ids).subtracting(expectedStale)))
        }
    }

    @Test("a quake changed twice in one feed is one change row")
    func changesCoalesceWithinATransaction() async throws {
        try await withTemporaryDirectory { dir in
            let store = try QuakeStore(directory: dir)
            let report = try await importJSON(
                feedJSON([
                    featureJSON(id: "us1", updated: 100, mag: "4.0"), featureJSON(id: "us1", updated: 200, mag: "4.5"),
                ]),
                into: store)
            // The report counts what the transaction holds: one insert.
            #expect(report.inserted == 1 && report.updated == 0)
            let transaction = try #require(try store.history(after: 0).transactions.first)
            #expect(transaction.changes.count == 1)
            #expect(transaction.changes[0].kind == .insert)
            #expect(transaction.inserted == 1 && transaction.updated == 0)
            #expect(transaction.changes[0].quake?.mag == 4.5)
        }
    }
}
