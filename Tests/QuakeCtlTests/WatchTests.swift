import QuakeClient
import QuakeProtocol
import Varlink
import Foundation
import QuakeCtl
import QuakeStore
import QuakeTestSupport
import Testing

/// `watch` with a real daemon, real processes and a real cache file.
extension ClientEndToEnd {
    @Suite struct WatchTests {
        static func watch(_ daemon: Quaked, cache: String, _ extra: [String] = []) throws -> ChildProcess {
            try startQuakectl(
                ["watch", "--json", "--heartbeat", "1", "--socket", daemon.socketPath, "--cache", cache] + extra)
        }

        /// Waits until the watcher's cache is at the store's head, then checks rows and token agree.
        static func expectCaughtUp(_ watch: ChildProcess, _ daemon: Quaked, cache path: String) async throws {
            let (storeId, head) = try daemon.withStore { ($0.storeID, try $0.head()) }
            try await waitUntil(timeout: .seconds(30)) {
                guard watch.isRunning else { throw TestFailure("watch exited: \(watch.stderr)") }
                let cache = try QuakeCache(path: path)
                defer { try? cache.close() }
                let position = try cache.position()
                return position?.storeId == storeId && position?.token == Int(head)
            }
            let cache = try QuakeCache(path: path)
            defer { try? cache.close() }
            #expect(byID(try cache.allQuakes()) == byID(try daemon.withStore { try $0.allQuakes() }.map(wire)))
        }

        @Test func restartWithChangesWhileDownPrintsEachChangeOnce() async throws {
            try await withQuaked { daemon in
                let cache = daemon.directory.appendingPathComponent("cache/watch.sqlite").path
                let watch = try Self.watch(daemon, cache: cache)
                defer { watch.signal(SIGKILL) }
                try await Self.expectCaughtUp(watch, daemon, cache: cache)
                let start = try daemon.withStore { try $0.head() }

                // A change while it runs...
                let ids = try daemon.withStore { try $0.allQuakes() }.prefix(3).map(\.id)
                #expect(try await quakectl(["delete", ids[0], "--socket", daemon.socketPath]).status == 0)
                try await Self.expectCaughtUp(watch, daemon, cache: cache)

                // ...then the daemon stops, and the store changes while it is down.
                try await daemon.stop()
                try await Task.sleep(for: .milliseconds(500))
                _ = try await daemon.importOnce(TestFeeds.week)
                _ = try await daemon.withStoreAsync { try await $0.delete(ids: [ids[1], ids[2]]) }
                try await daemon.start()  // pulls the day feed again: re-inserts ids[0]
                try await Self.expectCaughtUp(watch, daemon, cache: cache)

                let output = try WatchOutput(watch.stdout)
                #expect(output.resets.count == 1)
                #expect(output.resets.first?.reason == "new cache")
                let printed = output.changes
                let expected = try daemon.historyChanges(after: Int(start))
                #expect(printed.count == Set(printed).count, "a change was printed twice")
                #expect(printed.sorted() == expected.sorted())
                #expect(printed.count > 100)
                #expect(watch.stderr.contains("Retrying; the cache is kept."))
                #expect(watch.stderr.contains("reconnected"))
            }
        }

        @Test func anExpiredTokenLeadsToAReset() async throws {
            try await withQuaked { daemon in
                let cache = daemon.directory.appendingPathComponent("watch.sqlite").path
                let first = try Self.watch(daemon, cache: cache)
                try await Self.expectCaughtUp(first, daemon, cache: cache)
                first.signal(SIGTERM)
                _ = try await first.wait()

                let id = try #require(try daemon.withStore { try $0.allQuakes() }.first?.id)
                #expect(try await quakectl(["delete", id, "--socket", daemon.socketPath]).status == 0)
                try await daemon.withStoreAsync { store in
                    _ = try await store.purgeHistory(olderThan: .zero, now: Date().addingTimeInterval(60))
                }

                let second = try Self.watch(daemon, cache: cache)
                defer { second.signal(SIGKILL) }
                try await Self.expectCaughtUp(second, daemon, cache: cache)
                let output = try WatchOutput(second.stdout)
                #expect(output.resets.count == 1)
                #expect(output.resets.first?.reason?.contains("has been purged") == true)
                #expect(output.changes.isEmpty)
            }
        }

        @Test func aReplacedStoreLeadsToAReset() async throws {
            try await withQuaked { daemon in
                let cache = daemon.directory.appendingPathComponent("watch.sqlite").path
                let watch = try Self.watch(daemon, cache: cache, ["--name", "desk"])
                defer { watch.signal(SIGKILL) }
                try await Self.expectCaughtUp(watch, daemon, cache: cache)
                let oldStore = try daemon.withStore { $0.storeID }

                try await daemon.stop()
                try FileManager.default.removeItem(at: daemon.stateDirectory)
                try await daemon.start()
                let newStore = try daemon.withStore { $0.storeID }
                #expect(newStore != oldStore)
                try await Self.expectCaughtUp(watch, daemon, cache: cache)
                let output = try WatchOutput(watch.stdout)
                #expect(output.resets.map(\.storeId) == [oldStore, newStore])
                #expect(output.resets.last?.reason == "quaked now serves another store")
            }
        }

        @Test func aKilledWatchResumesWithoutLossOrRepeats() async throws {
            try await withQuaked { daemon in
                let cache = daemon.directory.appendingPathComponent("watch.sqlite").path
                let first = try Self.watch(daemon, cache: cache, ["--since", "now"])
                try await Self.expectCaughtUp(first, daemon, cache: cache)
                let start = try daemon.withStore { try $0.head() }
                let ids = try daemon.withStore { try $0.allQuakes() }.map(\.id)

                // Changes while it runs, a SIGKILL in the middle of a big import, changes while it is dead.
                #expect(try await quakectl(["delete", ids[0], ids[1], "--socket", daemon.socketPath]).status == 0)
                try await Self.expectCaughtUp(first, daemon, cache: cache)
                async let imported = daemon.importOnce(TestFeeds.week)
                try await Task.sleep(for: .milliseconds(150))
                first.signal(SIGKILL)
                _ = try await first.wait()
                _ = try await imported
                #expect(try await quakectl(["delete", ids[2], "--socket", daemon.socketPath]).status == 0)

                let second = try Self.watch(daemon, cache: cache)
                defer { second.signal(SIGKILL) }
                try await Self.expectCaughtUp(second, daemon, cache: cache)

                let before = try WatchOutput(first.stdout)
                let after = try WatchOutput(second.stdout)
                #expect(after.resets.isEmpty)
                let printed = before.changes + after.changes
                #expect(printed.count == Set(printed).count, "a change was printed twice")
                #expect(printed.sorted() == (try daemon.historyChanges(after: Int(start))).sorted())
            }
        }
    }
}
