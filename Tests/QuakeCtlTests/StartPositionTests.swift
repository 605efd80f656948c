import Foundation
import QuakeClient
import QuakeFeed
import QuakePostgres
import QuakeProtocol
import QuakeStore
import QuakeTestSupport
import Testing

/// `--since now` is a start position, for a watch with none: a watch, hook or sink killed and
/// started again with the same command line (as systemd or a script does) resumes from its
/// stored position, and delivers what changed while it was down, at least once. Only a cache
/// with no position, or one it cannot use (an expired token, another store, another filter)
/// starts at quaked's head.
extension ClientEndToEnd {
    @Suite struct StartPositionTests {
        /// Quakes below M 3 (DigestTests' choice) that a revision can lift into `--min-mag 4`.
        static func smallQuakes(_ daemon: Quaked, _ count: Int) throws -> [FeedFeature] {
            let quakes = try DigestTests.smallQuakes(daemon, count)
            try #require(quakes.count == count)
            return quakes
        }

        static func kill(_ watch: ChildProcess) async throws {
            watch.signal(SIGKILL)
            _ = try await watch.wait()
        }

        @Test func aHookStartedSinceNowAndKilledRunsForWhatEnteredWhileItWasDown() async throws {
            try await withQuaked { daemon in
                let log = daemon.directory.appendingPathComponent("exec.log")
                let hook = try ExecTests.script(in: daemon.directory, log: log)
                let quakes = try Self.smallQuakes(daemon, 2)
                let cache = daemon.directory.appendingPathComponent("alert.sqlite").path
                // The same command line each time, as quaked-hook@.service runs it.
                let arguments = ["--name", "alert", "--min-mag", "4", "--since", "now", "--exec", hook]
                let first = try WatchTests.watch(daemon, cache: cache, arguments)
                try await FilteredWatchTests.waitForCache(first, daemon, cache: cache, QuakeFilter(minMagnitude: 4))
                #expect(ExecTests.lines(log).isEmpty, "what matched before the first start is not news")
                try await ExecTests.revise(daemon, quakes[0].id, mag: 4.6, 1)
                try await waitUntil(timeout: .seconds(20)) { ExecTests.lines(log).count == 1 }
                // Delivered and committed: the cache's position is at the head. Without --batch or
                // --quiet-hours there is no outbox: the hook runs, then its transaction is committed,
                // so killed between the hook's exit and the commit, the watch rightly runs it again
                // when it restarts (at least once, quakectl(1)).
                try await FilteredWatchTests.waitForCache(first, daemon, cache: cache, QuakeFilter(minMagnitude: 4))

                // Killed (a crash, a reboot, a deploy); a quake enters the filter meanwhile.
                try await Self.kill(first)
                try await ExecTests.revise(daemon, quakes[1].id, mag: 4.8, 1)

                let second = try WatchTests.watch(daemon, cache: cache, arguments)
                defer { second.signal(SIGKILL) }
                try await FilteredWatchTests.waitForCache(second, daemon, cache: cache, QuakeFilter(minMagnitude: 4))
                try await waitUntil(timeout: .seconds(20)) { ExecTests.lines(log).count >= 2 }
                try await Task.sleep(for: .milliseconds(500))
                let runs = ExecTests.lines(log)
                #expect(runs.map { $0[0] } == ["enter", "enter"], "\(runs)")
                #expect(runs.map { $0[1] } == [quakes[0].id, quakes[1].id])
                #expect(runs[1][2] == "4.8")
                #expect(try WatchOutput(second.stdout).resets.isEmpty, "a usable position is resumed, not reset")
            }
        }

        @Test func aWatchSinceNowPrintsAfterARestartEverythingAfterItsPosition() async throws {
            try await withQuaked { daemon in
                let cache = daemon.directory.appendingPathComponent("watch.sqlite").path
                let first = try WatchTests.watch(daemon, cache: cache, ["--since", "now"])
                try await WatchTests.expectCaughtUp(first, daemon, cache: cache)
                #expect(try WatchOutput(first.stdout).changes.isEmpty, "the first start's backlog is not printed")
                let position = try daemon.withStore { try $0.head() }
                try await Self.kill(first)

                let ids = try daemon.withStore { try $0.allQuakes() }.prefix(2).map(\.id)
                #expect(try await quakectl(["delete", ids[0], "--socket", daemon.socketPath]).status == 0)
                #expect(try await quakectl(["delete", ids[1], "--socket", daemon.socketPath]).status == 0)

                let second = try WatchTests.watch(daemon, cache: cache, ["--since", "now"])
                defer { second.signal(SIGKILL) }
                try await WatchTests.expectCaughtUp(second, daemon, cache: cache)
                let printed = try WatchOutput(second.stdout).changes
                #expect(printed.sorted() == (try daemon.historyChanges(after: Int(position))).sorted())
                #expect(printed.count == 2)
            }
        }

        @Test func aWatchSinceNowWhoseTokenExpiredStartsAtTheHeadAndSaysWhy() async throws {
            try await withQuaked { daemon in
                let cache = daemon.directory.appendingPathComponent("watch.sqlite").path
                let first = try WatchTests.watch(daemon, cache: cache, ["--since", "now"])
                try await WatchTests.expectCaughtUp(first, daemon, cache: cache)
                try await Self.kill(first)
                let id = try #require(try daemon.withStore { try $0.allQuakes() }.first?.id)
                #expect(try await quakectl(["delete", id, "--socket", daemon.socketPath]).status == 0)
                try await daemon.withStoreAsync { store in
                    _ = try await store.purgeHistory(olderThan: .zero, now: Date().addingTimeInterval(60))
                }

                let second = try WatchTests.watch(daemon, cache: cache, ["--since", "now"])
                defer { second.signal(SIGKILL) }
                try await WatchTests.expectCaughtUp(second, daemon, cache: cache)
                let output = try WatchOutput(second.stdout)
                #expect(output.resets.count == 1)
                #expect(output.resets.first?.reason?.contains("has been purged") == true)
                #expect(output.changes.isEmpty)
            }
        }

        @Test func aBatchStartedSinceNowGetsWhatChangedWhileItWasDown() async throws {
            try await withQuaked { daemon in
                let rig = try DigestTests.Rig(daemon, start: "2026-11-25T12:00:00Z")
                let quakes = try Self.smallQuakes(daemon, 2)
                let arguments = ["--name", "batch", "--since", "now", "--batch", "5m"]
                let first = try rig.watch(daemon, arguments)
                try await FilteredWatchTests.waitForCache(first, daemon, cache: rig.cache, QuakeFilter())
                try await Self.kill(first)
                try await ExecTests.revise(daemon, quakes[0].id, mag: 2.9, 1)
                try await ExecTests.revise(daemon, quakes[1].id, mag: 2.8, 1)

                let second = try rig.watch(daemon, arguments)
                defer { second.signal(SIGKILL) }
                try await rig.waitForQueue(2, second)
                try rig.set("2026-11-25T12:05:00Z")
                try await waitUntil(timeout: .seconds(20)) { rig.runs.count == 1 }
                #expect(rig.runs[0][0] == "batch" && rig.runs[0][1] == "2", "\(rig.runs)")
                #expect(DigestTests.changes(try rig.stdin(1)).map(\.id) == quakes.map(\.id))
            }
        }

        @Test func quietHoursStartedSinceNowHoldWhatChangedWhileDownForTheDigest() async throws {
            try await withQuaked { daemon in
                let rig = try DigestTests.Rig(daemon, start: "2026-11-25T23:00:00Z")
                let quakes = try Self.smallQuakes(daemon, 1)
                let arguments = ["--name", "night", "--since", "now", "--quiet-hours", "22:00-07:00", "--tz", "UTC"]
                let first = try rig.watch(daemon, arguments)
                try await FilteredWatchTests.waitForCache(first, daemon, cache: rig.cache, QuakeFilter())
                try await Self.kill(first)
                try await ExecTests.revise(daemon, quakes[0].id, mag: 2.9, 1)

                let second = try rig.watch(daemon, arguments)
                defer { second.signal(SIGKILL) }
                try await rig.waitForQueue(1, second)
                #expect(rig.runs.isEmpty, "held in quiet hours")
                try rig.set("2026-11-26T07:00:00Z")
                try await waitUntil(timeout: .seconds(20)) { rig.runs.count == 1 }
                #expect(rig.runs[0][0] == "digest", "\(rig.runs)")
                #expect(DigestTests.changes(try rig.stdin(1)).map(\.id) == [quakes[0].id])
            }
        }

        @Test func aSinkKilledAndStartedAgainAppliesWhatChangedWhileItWasDown() async throws {
            try await SyncTests.withPostgres { pg in
                try await withQuaked { daemon in
                    let url = try SyncTests.database(pg, "restart")
                    let first = try SyncTests.sync(daemon, to: url)
                    try await SyncTests.expectInStep(first, daemon, url: url)
                    let position = Int(try daemon.withStore { try $0.head() })
                    try await Self.kill(first)
                    let quakes = try Self.smallQuakes(daemon, 2)
                    try await ExecTests.revise(daemon, quakes[0].id, mag: 2.9, 1)
                    try await ExecTests.revise(daemon, quakes[1].id, mag: 2.8, 1)

                    let second = try SyncTests.sync(daemon, to: url)
                    defer { second.signal(SIGKILL) }
                    try await SyncTests.expectInStep(second, daemon, url: url)
                    // One applied line per transaction after the stored position, no reset.
                    let lines = second.stdout.split(separator: "\n").compactMap {
                        try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
                    }
                    #expect(!lines.contains { $0["event"] as? String == "reset" }, "\(second.stdout)")
                    let applied = lines.filter { $0["event"] as? String == "applied" }.compactMap { $0["token"] as? Int }
                    #expect(applied == [position + 1, position + 2], "\(second.stdout)")
                }
            }
        }
    }
}
