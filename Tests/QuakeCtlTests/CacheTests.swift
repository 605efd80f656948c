import QuakeClient
import QuakeProtocol
import Varlink
import Foundation
import QuakeFeed
import QuakeTestSupport
import Testing

@testable import QuakeCtl

@Suite struct CacheTests {
    static func quake(_ id: String, mag: Double, time: Int = 1000) -> IOQuaked.Quake {
        var q = IOQuaked.Quake(id: id, time: time)
        q.mag = mag
        q.place = "somewhere"
        return q
    }

    static func insert(_ token: Int, _ quakes: [IOQuaked.Quake]) -> IOQuaked.Transaction {
        IOQuaked.Transaction(
            token: token, author: .import, timestamp: 0, source: nil, inserted: quakes.count, updated: 0, deleted: 0,
            changes: quakes.map {
                IOQuaked.Change(
                    quakeId: $0.id, kind: .insert, fields: nil, tombstone: nil, reason: nil, supersededBy: nil,
                    quake: $0)
            })
    }

    static func delete(_ token: Int, _ id: String) -> IOQuaked.Transaction {
        IOQuaked.Transaction(
            token: token, author: .delete, timestamp: 0, source: nil, inserted: 0, updated: 0, deleted: 1,
            changes: [
                IOQuaked.Change(
                    quakeId: id, kind: .delete, fields: nil,
                    tombstone: IOQuaked.Tombstone(id: id, code: nil, mag: 1, place: nil, time: 1),
                    reason: .deletedByUser,
                    supersededBy: nil, quake: nil)
            ])
    }

    @Test func appliesTransactionsOnceAndInOrder() async throws {
        try await withTemporaryDirectory { dir in
            let cache = try QuakeCache(path: dir.appendingPathComponent("sub/cache.sqlite").path)
            #expect(try cache.position() == nil)
            // A cache never reset has no position: nothing applies.
            #expect(try cache.apply(Self.insert(1, [Self.quake("a", mag: 1)]), storeId: "S") == false)
            try cache.beginReset()
            try cache.stage([Self.quake("a", mag: 1)])
            try cache.stage([Self.quake("b", mag: 2)])
            #expect(try cache.finishReset(storeId: "S", token: 5) == 2)
            #expect(try cache.position()?.token == 5)

            // Already applied, or from another store: skipped.
            #expect(try cache.apply(Self.insert(5, [Self.quake("c", mag: 3)]), storeId: "S") == false)
            #expect(try cache.prepare(Self.insert(5, [Self.quake("c", mag: 3)]), storeId: "S") == nil)
            #expect(try cache.apply(Self.insert(6, [Self.quake("c", mag: 3)]), storeId: "T") == false)

            let six = Self.insert(6, [Self.quake("a", mag: 1.5), Self.quake("c", mag: 3)])
            let applied = try #require(try cache.prepare(six, storeId: "S"))
            #expect(applied.isEmpty, "inserts carry their quake: nothing to report from the cache")
            #expect(try cache.apply(six, storeId: "S"))
            // An update whose quake a later transaction removed: the cache says what the row was.
            let update = IOQuaked.Transaction(
                token: 7, author: .import, timestamp: 0, inserted: 0, updated: 1, deleted: 0,
                changes: [
                    IOQuaked.Change(
                        quakeId: "a", kind: .update,
                        fields: [IOQuaked.FieldChange(field: "place", old: .init(string: "somewhere"), new: .init(string: "there"))])
                ])
            let before = try #require(try cache.prepare(update, storeId: "S"))
            #expect(before["a"]?.mag == 1.5)
            #expect(before["c"] == nil)
            #expect(try cache.apply(update, storeId: "S"))
            #expect(try cache.apply(Self.delete(8, "b"), storeId: "S"))
            #expect(try cache.apply(Self.delete(8, "a"), storeId: "S") == false)
            #expect(try cache.position()?.token == 8)
            #expect(try cache.allQuakes().map(\.id) == ["a", "c"])
            #expect(try cache.quake(id: "a")?.mag == 1.5)
        }
    }

    /// Each row is written with every column bound anew: a quake that no longer has a magnitude
    /// (or type, or place) does not keep the previous row's, nor the previous quake's.
    @Test func aRewrittenRowKeepsNothingOfTheRowBefore() async throws {
        try await withTemporaryDirectory { dir in
            let cache = try QuakeCache(path: dir.appendingPathComponent("cache.sqlite").path)
            var full = Self.quake("a", mag: 4)
            full.type = "earthquake"
            (full.lat, full.lon) = (37.77, -122.42)
            try cache.beginReset()
            try cache.stage([full])
            try cache.finishReset(storeId: "S", token: 1)
            #expect(try cache.query(QuakeFilter(minMagnitude: 3)).quakes.map(\.id) == ["a"])
            let bare = IOQuaked.Quake(id: "a", time: 2000)
            let second = IOQuaked.Quake(id: "b", time: 3000)
            #expect(try cache.apply(Self.insert(2, [bare, second]), storeId: "S"))
            #expect(try cache.quake(id: "a") == bare)
            #expect(try cache.quake(id: "b") == second)
            #expect(try cache.query(QuakeFilter(minMagnitude: 3)).quakes.isEmpty)
            #expect(try cache.query(QuakeFilter(since: 1500)).quakes.map(\.id) == ["b", "a"])
            #expect(try cache.position()?.token == 2)
        }
    }

    @Test func aResetReplacesEverythingAtOnce() async throws {
        try await withTemporaryDirectory { dir in
            let cache = try QuakeCache(path: dir.appendingPathComponent("cache.sqlite").path)
            try cache.beginReset()
            try cache.stage([Self.quake("a", mag: 1), Self.quake("b", mag: 2)])
            try cache.finishReset(storeId: "S", token: 3)
            // An interrupted reset (staged, never finished) leaves the old rows in place...
            try cache.beginReset()
            try cache.stage([Self.quake("z", mag: 9)])
            #expect(try cache.allQuakes().map(\.id) == ["a", "b"])
            #expect(try cache.position()?.storeId == "S")
            // ...and the next reset starts clean.
            try cache.beginReset()
            try cache.stage([Self.quake("x", mag: 1)])
            try cache.finishReset(storeId: "T", token: 1)
            #expect(try cache.allQuakes().map(\.id) == ["x"])
            #expect(try cache.position()?.storeId == "T")
            #expect(try cache.position()?.token == 1)
        }
    }

    @Test func queriesFilterLikeTheDaemon() async throws {
        try await withTemporaryDirectory { dir in
            let cache = try QuakeCache(path: dir.appendingPathComponent("cache.sqlite").path)
            var sf = Self.quake("sf", mag: 3, time: 300)
            (sf.lat, sf.lon) = (37.77, -122.42)
            var la = Self.quake("la", mag: 5, time: 200)
            (la.lat, la.lon) = (34.05, -118.24)
            let small = Self.quake("small", mag: 0.5, time: 100)
            try cache.beginReset()
            try cache.stage([sf, la, small])
            try cache.finishReset(storeId: "S", token: 1)
            #expect(try cache.query(QuakeFilter()).quakes.map(\.id) == ["sf", "la", "small"])
            #expect(try cache.query(QuakeFilter(minMagnitude: 3)).quakes.map(\.id) == ["sf", "la"])
            #expect(try cache.query(QuakeFilter(since: 150)).quakes.map(\.id) == ["sf", "la"])
            let near = try cache.query(QuakeFilter(region: .circle(lat: 37.8, lon: -122.3, radiusKm: 50)))
            #expect(near.quakes.map(\.id) == ["sf"])
            let limited = try cache.query(QuakeFilter(), limit: 1)
            #expect(limited.quakes.map(\.id) == ["sf"])
            #expect(limited.total == 3)
        }
    }
}
