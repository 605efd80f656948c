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
}
