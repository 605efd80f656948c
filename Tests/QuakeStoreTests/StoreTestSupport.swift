import Foundation
import QuakeFeed
import QuakeTestSupport
import Testing

@testable import QuakeStore

/// Imports an in-memory document (a JSON string) as one feed.
func importJSON(_ json: String, into store: QuakeStore, source: String = "test://inline", now: Date = Date())
    async throws
    -> ImportReport
{
    let bytes = Array(json.utf8)
    return try await store.importFeed(source: source, now: now) { sink in
        // Small chunks so tokens straddle chunk boundaries.
        var offset = 0
        while offset < bytes.count {
            let end = min(offset + 97, bytes.count)
            try await sink.send(Array(bytes[offset..<end]))
            offset = end
        }
    }
}

/// A feature object in feed form; only what the tests vary is a parameter.
func featureJSON(
    id: String, time: Int64 = 1_700_000_000_000, updated: Int64 = 1_700_000_100_000, mag: String = "4.1",
    place: String = "\"10 km N of Somewhere\"", ids: String? = nil, code: String? = nil, status: String = "reviewed"
) -> String {
    let code = code ?? String(id.dropFirst(2))
    return """
        {"type":"Feature","properties":{"mag":\(mag),"place":\(place),"time":\(time),"updated":\(updated),\
        "tz":null,"url":"https://example.org/\(id)","detail":null,"felt":null,"cdi":null,"mmi":null,"alert":null,\
        "status":"\(status)","tsunami":0,"sig":271,"net":"\(id.prefix(2))","code":"\(code)",\
        "ids":"\(ids ?? ",\(id),")","sources":",\(id.prefix(2)),","types":",origin,","nst":12,"dmin":0.1,\
        "rms":0.2,"gap":80,"magType":"ml","type":"earthquake","title":"M \(mag) - test"},\
        "geometry":{"type":"Point","coordinates":[-117.5,35.25,7.5]},"id":"\(id)"}
        """
}

func feedJSON(_ features: [String]) -> String {
    """
    {"type":"FeatureCollection","metadata":{"generated":1700000200000,"count":\(features.count)},\
    "features":[\(features.joined(separator: ","))]}
    """
}

/// Everything a reader can observe of a store: rows, head and history. Equal snapshots mean an
/// operation left the store exactly as it was.
struct StoreSnapshot: Equatable {
    var quakes: [FeedFeature]
    var head: HistoryToken
    var oldest: HistoryToken
    var history: [HistoryTransaction]

    init(_ store: QuakeStore) throws {
        quakes = try store.allQuakes()
        head = try store.head()
        oldest = try store.oldestToken()
        history = try store.history(after: oldest, limit: 10_000).transactions
    }
}

/// Runs each test of a suite (or a test) with ``OwnThreadExecutor/servers`` as its task executor
/// preference: for tests that time how promptly something happens in the process ("announced at
/// once"), as a daemon's own executor would see it. On Swift's global executor, shared with every
/// test running at once, a task waited up to 15 s to start while CPU-bound tests held its two
/// threads (a clean-clone CI rehearsal, 2026-11-29), longer than any such test waits.
struct TimelyTrait: SuiteTrait, TestTrait, TestScoping {
    var isRecursive: Bool { true }

    func provideScope(
        for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void
    ) async throws {
        try await withTaskExecutorPreference(OwnThreadExecutor.servers) { try await function() }
    }
}

extension Trait where Self == TimelyTrait {
    /// See ``TimelyTrait``.
    static var timely: Self { TimelyTrait() }
}
