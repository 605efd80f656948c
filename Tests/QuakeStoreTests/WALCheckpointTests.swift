import Foundation
import QuakeTestSupport
import Testing

@testable import QuakeStore

@Suite("WAL checkpoints")
struct WALCheckpointTests {
    /// What "soon" may take on a loaded machine.
    static let patience = Duration.seconds(Sanitizer.isActive ? 60 : 20)
    /// A small threshold (pages of 16 KiB), so that a few imports pass it.
    static let threshold: Int32 = 40

    @Test(
        "a commit past the WAL's threshold is announced, and later writes commit, while the checkpoint it asked for has not run"
    )
    func checkpointBesideTheWrites() async throws {
        try await withTemporaryDirectory { dir in
            let store = try QuakeStore(
                path: dir.appendingPathComponent("quakes.sqlite").path, walCheckpointPages: Self.threshold)
            defer { try? store.close() }
            // Opening wrote the schema, past the small threshold: its checkpoints first.
            try await Self.waitFor(store) { $0.requested == $0.checkpoints + $0.failures }
            let opened = store.checkpointer.counts
            let gate = DispatchSemaphore(value: 0)
            store.checkpointer.beforeEachCheckpoint { gate.wait() }
            var batch = 0
            while store.checkpointer.counts.requested == opened.requested {
                batch += 1
                try #require(batch <= 100, "100 imports never took the WAL past \(Self.threshold) pages")
                let generation = store.commitSignal.generation
                try await Self.importFeatures(batch: batch, count: 100, into: store)
                #expect(store.commitSignal.generation == generation + 1)
            }
            // The checkpoint is held at the gate. Writes go on, each committed and announced; a
            // commit that waited for the checkpoint would never return.
            for more in 1...3 {
                let generation = store.commitSignal.generation
                try await Self.importFeatures(batch: batch + more, count: 100, into: store)
                #expect(store.commitSignal.generation == generation + 1)
            }
            #expect(store.checkpointer.counts.checkpoints == opened.checkpoints)
            // One checkpoint at a time: the commits past the threshold since asked for no other.
            #expect(store.checkpointer.counts.requested == opened.requested + 1)
            store.checkpointer.beforeEachCheckpoint(nil)
            gate.signal()
            try await Self.waitFor(store) { $0.checkpoints == opened.checkpoints + 1 }
            #expect(store.checkpointer.counts.failures == 0)
            #expect(try store.allQuakes().count == (batch + 3) * 100)
        }
    }

    @Test("the WAL stays bounded: it is checkpointed and restarted as writes go on")
    func walStaysBounded() async throws {
        try await withTemporaryDirectory { dir in
            let store = try QuakeStore(
                path: dir.appendingPathComponent("quakes.sqlite").path, walCheckpointPages: Self.threshold)
            defer { try? store.close() }
            // Some ten times the threshold written (an import of 100 quakes adds about 20 pages);
            // without checkpoints the WAL would hold it all.
            for batch in 1...20 { try await Self.importFeatures(batch: batch, count: 100, into: store) }
            try await Self.waitFor(store) { $0.checkpoints >= 2 }
            let counts = store.checkpointer.counts
            #expect(counts.failures == 0)
            // At most four times the threshold (then a commit checkpoints itself), plus a commit.
            #expect(counts.largestWAL <= 4 * Self.threshold + counts.largestCommit, "\(counts)")
            #expect(counts.largestCommit < Self.threshold, "\(counts)")
            #expect(try store.allQuakes().count == 20 * 100)
        }
    }

    static func importFeatures(batch: Int, count: Int, into store: QuakeStore) async throws {
        let json = feedJSON((0..<count).map { featureJSON(id: "us\(batch)x\($0)") })
        _ = try await store.importFeed(source: "test://wal") { sink in try await sink.send(Array(json.utf8)) }
    }

    static func waitFor(_ store: QuakeStore, _ condition: (WALCheckpointer.Counts) -> Bool) async throws {
        let deadline = ContinuousClock.now + patience
        while !condition(store.checkpointer.counts) {
            try #require(ContinuousClock.now < deadline, "checkpoints: \(store.checkpointer.counts)")
            try await Task.sleep(for: .milliseconds(10))
        }
    }
}
