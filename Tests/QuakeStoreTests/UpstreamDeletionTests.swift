import Foundation
import QuakeFeed
import QuakeTestSupport
import Testing

@testable import QuakeStore

/// Features whose status is `deleted` (an FDSN query with includedeleted=true), and backfill
/// windows imported with their job's cursor.
@Suite("Upstream deletions and backfill windows")
struct UpstreamDeletionTests {
    @Test("a deleted feature removes its stored event with reason deleted-upstream, once")
    func deletionRemovesTheRow() async throws {
        try await withTemporaryDirectory { dir in
            let store = try QuakeStore(directory: dir)
            try await AliasTests.importChecked(
                feedJSON([featureJSON(id: "us1", updated: 100), featureJSON(id: "us2", updated: 100)]), into: store)
            let deletion = feedJSON([featureJSON(id: "us1", updated: 200, status: "deleted")])
            let report = try await AliasTests.importChecked(deletion, into: store)
            #expect(report.deleted == 1)
            #expect(try store.allQuakes().map(\.id) == ["us2"])
            let transaction = try #require(try store.history(after: 1).transactions.first)
            #expect(transaction.deleted == 1)
            #expect(transaction.changes.map(\.quakeId) == ["us1"])
            #expect(transaction.changes.first?.reason == .deletedUpstream)
            #expect(transaction.changes.first?.tombstone?.id == "us1")
            // The same document again changes nothing: the deletion is known, the row gone.
            let again = try await AliasTests.importChecked(deletion, into: store)
            #expect(again.token == nil)
            #expect(again.skipped[ImportReport.deletedReason] == 1)
            #expect(try store.checkIntegrity() == [])
        }
    }

    @Test("a lagging copy of a deleted event is skipped; a newer version brings it back")
    func laggingCopySkipped() async throws {
        try await withTemporaryDirectory { dir in
            let store = try QuakeStore(directory: dir)
            let original = feedJSON([featureJSON(id: "us1", updated: 100), featureJSON(id: "us2", updated: 100)])
            try await AliasTests.importChecked(original, into: store)
            try await AliasTests.importChecked(
                feedJSON([featureJSON(id: "us1", updated: 200, status: "deleted")]), into: store)
            // A summary feed's stale copy still carries us1 as it was.
            let stale = try await AliasTests.importChecked(original, into: store)
            #expect(stale.token == nil)
            #expect(stale.skipped[ImportReport.deletedReason] == 1)
            #expect(try store.quake(id: "us1") == nil)
            // Upstream reinstated the event: a version newer than the deletion is imported.
            let back = try await AliasTests.importChecked(
                feedJSON([featureJSON(id: "us1", updated: 300, mag: "4.4")]), into: store)
            #expect(back.inserted == 1)
            #expect(try store.quake(id: "us1")?.mag == 4.4)
            // And the deletion is forgotten: the older copy is now merely stale.
            let older = try await AliasTests.importChecked(original, into: store)
            #expect(older.stale == 1 && older.skipped.isEmpty)
        }
    }

    @Test("a deletion of an event stored under another id removes that row too")
    func deletionReachesAliases() async throws {
        try await withTemporaryDirectory { dir in
            let store = try QuakeStore(directory: dir)
            try await AliasTests.importChecked(
                feedJSON([featureJSON(id: "ci7", updated: 100), featureJSON(id: "us2", updated: 100)]), into: store)
            // The USGS deleted us9, which lists ci7: the event stored as ci7 goes.
            let report = try await AliasTests.importChecked(
                feedJSON([featureJSON(id: "us9", updated: 200, ids: ",us9,ci7,", status: "deleted")]), into: store)
            #expect(report.deleted == 1)
            #expect(try store.allQuakes().map(\.id) == ["us2"])
            // A later copy of ci7 no newer than the deletion stays out.
            let copy = try await AliasTests.importChecked(feedJSON([featureJSON(id: "ci7", updated: 150)]), into: store)
            #expect(copy.token == nil && copy.skipped[ImportReport.deletedReason] == 1)
        }
    }

    @Test("a deletion older than the stored version is stale and removes nothing")
    func staleDeletion() async throws {
        try await withTemporaryDirectory { dir in
            let store = try QuakeStore(directory: dir)
            try await AliasTests.importChecked(feedJSON([featureJSON(id: "us1", updated: 500)]), into: store)
            let report = try await AliasTests.importChecked(
                feedJSON([featureJSON(id: "us1", updated: 200, status: "deleted")]), into: store)
            #expect(report.token == nil && report.stale == 1)
            #expect(try store.quake(id: "us1") != nil)
            // Nothing remembered: a copy at 500 is unchanged, not skipped.
            let copy = try await AliasTests.importChecked(feedJSON([featureJSON(id: "us1", updated: 500)]), into: store)
            #expect(copy.unchanged == 1 && copy.skipped.isEmpty)
        }
    }

    @Test("a deletion in a first import into an empty store leaves nothing and is remembered")
    func deletionIntoEmptyStore() async throws {
        try await withTemporaryDirectory { dir in
            let store = try QuakeStore(directory: dir)
            let report = try await AliasTests.importChecked(
                feedJSON([
                    featureJSON(id: "us1", updated: 100), featureJSON(id: "us2", updated: 100),
                    featureJSON(id: "us1", updated: 200, status: "deleted"),
                ]),
                into: store)
            #expect(try store.allQuakes().map(\.id) == ["us2"])
            #expect(report.inserted == 1)
            let copy = try await AliasTests.importChecked(feedJSON([featureJSON(id: "us1", updated: 100)]), into: store)
            #expect(copy.token == nil && copy.skipped[ImportReport.deletedReason] == 1)
        }
    }

    @Test("retention forgets deletions of expired events")
    func retentionForgets() async throws {
        try await withTemporaryDirectory { dir in
            let store = try QuakeStore(directory: dir)
            try await AliasTests.importChecked(
                feedJSON([featureJSON(id: "us1", time: 1_000, updated: 200, status: "deleted")]), into: store)
            let remembered = try await AliasTests.importChecked(
                feedJSON([featureJSON(id: "us1", time: 1_000, updated: 100)]), into: store)
            #expect(remembered.skipped[ImportReport.deletedReason] == 1)
            try await store.applyRetention(maxAge: .seconds(86_400))
            let forgotten = try await AliasTests.importChecked(
                feedJSON([featureJSON(id: "us1", time: 1_000, updated: 100)]), into: store)
            #expect(forgotten.inserted == 1)
        }
    }

    @Test("a backfill window moves its job's cursor in the import's transaction; a failed one moves nothing")
    func backfillWindowCursor() async throws {
        try await withTemporaryDirectory { dir in
            let store = try QuakeStore(directory: dir)
            let job = try await store.createBackfillJob(
                catalog: "http://127.0.0.1:1/fdsnws/event/1/", start: 0, end: 10_000, minMagnitude: 2.5,
                region: .box(minLat: 30, maxLat: 40, minLon: 170, maxLon: -170), span: 10_000)
            #expect(job.state == .queued && job.cursor == 0 && job.windowsDone == 0)
            #expect(job.region == .box(minLat: 30, maxLat: 40, minLon: 170, maxLon: -170))
            let body = Array(feedJSON([featureJSON(id: "us1"), featureJSON(id: "us2")]).utf8)
            let report = try await store.importBackfillWindow(
                job: job.id, windowEnd: 4_000, span: 4_000, source: "http://x/query?a=1"
            ) { try await $0.send(body) }
            #expect(report.inserted == 2)
            var after = try #require(try store.backfillJob(id: job.id))
            #expect(after.cursor == 4_000 && after.span == 4_000 && after.windowsDone == 1)
            #expect(after.eventsFetched == 2 && after.eventsImported == 2 && after.lastToken == report.token)
            let transaction = try #require(try store.history(after: 0).transactions.first)
            #expect(transaction.author == .backfill && transaction.source == "http://x/query?a=1")
            // A window whose body breaks off rolls back with the cursor where it was.
            await #expect(throws: ImportError.self) {
                _ = try await store.importBackfillWindow(job: job.id, windowEnd: 8_000, span: 4_000, source: "http://x/q") {
                    try await $0.send(Array(feedJSON([featureJSON(id: "us3")]).utf8.dropLast(10)))
                }
            }
            after = try #require(try store.backfillJob(id: job.id))
            #expect(after.cursor == 4_000 && after.windowsDone == 1)
            #expect(try store.quake(id: "us3") == nil)
            // The same window again: unchanged features, no new token, the cursor moves on.
            let again = try await store.importBackfillWindow(
                job: job.id, windowEnd: 8_000, span: 4_000, source: "http://x/q"
            ) { try await $0.send(body) }
            #expect(again.token == nil && again.unchanged == 2)
            after = try #require(try store.backfillJob(id: job.id))
            #expect(after.cursor == 8_000 && after.windowsDone == 2 && after.eventsImported == 2)
            #expect(try await store.setBackfillState(id: job.id, .done))
            #expect(try await !store.setBackfillState(id: job.id, .failed, error: "late"))
            #expect(try store.backfillJob(id: job.id)?.state == .done)
            #expect(try store.unfinishedBackfillJobs().isEmpty)
        }
    }
}
