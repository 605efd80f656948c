import Foundation
import QuakeClient
import QuakeProtocol
import QuakeTestSupport
import Testing

/// A cache written by a newer quakectl, whose quakes carry fields this build's interface does
/// not declare, is read after a downgrade: cached quakes are decoded as replies are, unknown
/// members skipped (docs/protocol.md, "Compatibility").
@Suite struct CacheDowngradeTests {
    @Test func aCachedQuakeWithFieldsThisBuildDoesNotKnowIsRead() async throws {
        try await withTemporaryDirectory { dir in
            let path = dir.appendingPathComponent("cache.sqlite").path
            let cache = try QuakeCache(path: path)
            var quake = IOQuaked.Quake(id: "emsc1", time: 1_799_999_000_000)
            quake.mag = 4.2
            try cache.beginReset()
            try cache.stage([quake])
            #expect(try cache.finishReset(storeId: "s", token: 1) == 1)
            try cache.close()

            // What a newer quakectl would have written: two members unknown here, one nested.
            let sql = """
                UPDATE quakes SET quake = json_set(quake, '$.agencyOfTheFuture', 'EMSC',
                    '$.contributorsOfTheFuture', json('[{"source":"emsc","id":"x","nested":{"a":[1,2]}}]'))
                """
            let result = try await ChildProcess.run("/usr/bin/sqlite3", [path, sql])
            try #require(result.status == 0, "sqlite3: \(result.stderr)")

            let reopened = try QuakeCache(path: path)
            let read = try #require(try reopened.quake(id: "emsc1"))
            #expect(read.id == "emsc1" && read.mag == 4.2 && read.time == quake.time)
            #expect(try reopened.allQuakes().map(\.id) == ["emsc1"])
        }
    }

    /// A cache written before quakes had `agency` and `contributors` still opens and reads, and
    /// takes a quake with them from then on, typed, a contributor's unknown member skipped.
    @Test func aCacheWrittenBeforeContributorsOpensAndTakesThem() async throws {
        try await withTemporaryDirectory { dir in
            let path = dir.appendingPathComponent("cache.sqlite").path
            let cache = try QuakeCache(path: path)
            try cache.beginReset()
            try cache.stage([IOQuaked.Quake(id: "us1", time: 1_700_000_000_000)])
            #expect(try cache.finishReset(storeId: "s", token: 1) == 1)
            try cache.close()
            // The quake exactly as an older quakectl wrote it: members up to depth only.
            let old = #"{"id":"us1","mag":4.1,"place":"10 km N of Somewhere","time":1700000000000,"net":"us","sources":",us,","depth":7.5}"#
            let result = try await ChildProcess.run("/usr/bin/sqlite3", [path, "UPDATE quakes SET quake = '\(old)'"])
            try #require(result.status == 0, "sqlite3: \(result.stderr)")

            let reopened = try QuakeCache(path: path)
            let read = try #require(try reopened.quake(id: "us1"))
            #expect(read.mag == 4.1 && read.depth == 7.5 && read.agency == nil && read.contributors == nil)

            var joined = read
            joined.agency = "US"
            joined.contributors = [
                IOQuaked.Contributor(source: "usgs", agency: "US", id: "us1", time: 1_700_000_000_000, lat: 35.25, lon: -117.5, preferred: true),
                IOQuaked.Contributor(source: "emsc", agency: "EMSC", id: "e1", time: 1_700_000_003_000, lat: 35.34, lon: -117.5, mag: 4, preferred: false),
            ]
            let transaction = IOQuaked.Transaction(
                token: 2, author: .import, timestamp: 1, source: "source emsc", inserted: 0, updated: 1, deleted: 0,
                changes: [IOQuaked.Change(quakeId: "us1", kind: .update, quake: joined)])
            #expect(try reopened.apply(transaction, storeId: "s"))
            #expect(try reopened.quake(id: "us1") == joined)
            try reopened.close()

            // A newer quakectl's contributor, with a member this one does not know: skipped.
            let newer = "UPDATE quakes SET quake = json_set(quake, '$.contributors[1].confidence', 0.9)"
            let update = try await ChildProcess.run("/usr/bin/sqlite3", [path, newer])
            try #require(update.status == 0, "sqlite3: \(update.stderr)")
            let again = try QuakeCache(path: path)
            #expect(try again.quake(id: "us1") == joined)
        }
    }
}
