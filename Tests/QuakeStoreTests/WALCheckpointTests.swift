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

    @Test("after one write far past the threshold, the WAL file shrinks back to the threshold's size once the WAL restarts")
    func walFileShrinksBack() async throws {
        try await withTemporaryDirectory { dir in
            let path = dir.appendingPathComponent("quakes.sqlite").path
            let store = try QuakeStore(path: path, walCheckpointPages: Self.threshold)
            defer { try? store.close() }
            let limit = Int(Self.threshold) * QuakeStore.pageSize
            // One import of 5,000 quakes, one commit of some 350 pages: nine times the threshold.
            try await Self.importFeatures(batch: 1, count: 5000, into: store)
            let largest = try Self.walBytes(path)
            try #require(largest > 4 * limit, "the big import wrote only \(largest) bytes of WAL")
            // Once that commit's checkpoints have copied the WAL into the database, the next
            // write restarts the WAL from its start, and its commit cuts the file. (Later small
            // commits grow the restarted WAL again, so its smallest size counts.)
            var size = largest
            for batch in 2...4 {
                try await Self.waitUntilIdle(store)
                try await Self.importFeatures(batch: batch, count: 10, into: store)
                size = min(size, try Self.walBytes(path))
            }
            #expect(size <= limit, "the WAL file was never smaller than \(size) bytes after \(largest), against a limit of \(limit)")
            #expect(store.checkpointer.counts.failures == 0)
            #expect(try store.allQuakes().count == 5000 + 3 * 10)
        }
    }

    /// Waits until no checkpoint beside the writes is queued or running.
    static func waitUntilIdle(_ store: QuakeStore) async throws {
        let deadline = ContinuousClock.now + patience
        while store.checkpointer.isCheckpointing {
            try #require(ContinuousClock.now < deadline, "checkpoints: \(store.checkpointer.counts)")
            try await Task.sleep(for: .milliseconds(10))
        }
    }

    /// The size of the WAL file beside the database at `path`.
    static func walBytes(_ path: String) throws -> Int {
        let attributes = try FileManager.default.attributesOfItem(atPath: path + "-wal")
        return (attributes[.size] as? NSNumber)?.intValue ?? 0
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
