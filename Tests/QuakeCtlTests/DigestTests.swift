import Foundation
import QuakeClient
import QuakeFeed
import QuakeTestSupport
import Testing

@testable import QuakeCtl

/// `watch --exec --batch` and `--quiet-hours`: a real daemon, real quakectl processes and a real
/// command, with the watch's clock read from a file the test moves (`QUAKECTL_CLOCK_FILE`).
extension ClientEndToEnd {
    @Suite struct DigestTests {
        /// The fake clock and the command's records: a line per run in `log`
        /// (delivery|count|first token|last token|QUAKE_ID), and each run's stdin in run-N.json.
        struct Rig {
            let directory: URL
            let clock: URL
            let log: URL
            let hook: String
            let cache: String

            init(_ daemon: Quaked, start: String, extra: String = "") throws {
                directory = daemon.directory
                clock = directory.appendingPathComponent("clock")
                log = directory.appendingPathComponent("digest.log")
                cache = directory.appendingPathComponent("digest.sqlite").path
                let hookURL = directory.appendingPathComponent("digest-hook.sh")
                let count = directory.appendingPathComponent("runs").path
                try """
                #!/bin/sh
                \(extra)
                n=$(( $(cat '\(count)' 2>/dev/null || echo 0) + 1 ))
                echo "$n" > '\(count)'
                cat > '\(directory.path)/run-'"$n"'.json'
                printf '%s|%s|%s|%s|%s\\n' "$QUAKED_DELIVERY" "$QUAKED_COUNT" "$QUAKED_FIRST_TOKEN" "$QUAKED_TOKEN" "$QUAKE_ID" >> '\(log.path)'
                """.write(to: hookURL, atomically: true, encoding: .utf8)
                chmod(hookURL.path, 0o755)
                hook = hookURL.path
                try set(start)
            }

            /// Sets the watch's clock to an ISO 8601 UTC time.
            func set(_ time: String) throws {
                let date = try #require(ISO8601DateFormatter().date(from: time))
                try String(Int64(date.timeIntervalSince1970 * 1000)).write(to: clock, atomically: true, encoding: .utf8)
            }

            func watch(_ daemon: Quaked, _ extra: [String]) throws -> ChildProcess {
                try startQuakectl(
                    ["watch", "--json", "--heartbeat", "1", "--socket", daemon.socketPath, "--cache", cache, "--exec", hook]
                        + extra,
                    environment: ["QUAKECTL_CLOCK_FILE": clock.path])
            }

            var runs: [[String]] {
                ((try? String(contentsOf: log, encoding: .utf8)) ?? "").split(separator: "\n").map {
                    $0.split(separator: "|", omittingEmptySubsequences: false).map(String.init)
                }
            }

            /// Run n's stdin, parsed: an array of watch lines, or one line.
            func stdin(_ n: Int) throws -> Any {
                try JSONSerialization.jsonObject(with: Data(contentsOf: directory.appendingPathComponent("run-\(n).json")))
            }

            func outbox() throws -> (count: Int, position: Int?, token: Int?) {
                let cache = try QuakeCache(path: self.cache)
                defer { try? cache.close() }
                return (try cache.outboxCount(), try cache.deliveryPosition(), try cache.position()?.token)
            }

            /// Waits until the watch has queued `count` changes (the cache applied them).
            func waitForQueue(_ count: Int, _ watch: ChildProcess) async throws {
                try await waitUntil(timeout: .seconds(30)) {
                    guard watch.isRunning else { throw TestFailure("watch exited: \(watch.stderr)") }
                    return try outbox().count == count
                }
            }
        }

        static func smallQuakes(_ daemon: Quaked, _ count: Int) throws -> [FeedFeature] {
            Array(try daemon.withStore { try $0.allQuakes() }.filter { ($0.mag ?? 9) < 3 }.prefix(count))
        }

        static func changes(_ stdin: Any) -> [(kind: String, id: String, token: Int)] {
            ((stdin as? [[String: Any]]) ?? []).map { line in
                let change = line["change"] as? [String: Any]
                return (change?["kind"] as? String ?? "", change?["quakeId"] as? String ?? "", line["token"] as? Int ?? -1)
            }
        }

        @Test func aBatchRunsTheCommandOncePerWindowWithEveryChangeAsAnArray() async throws {
            try await withQuaked { daemon in
                let rig = try Rig(daemon, start: "2026-11-25T12:00:00Z")
                let quakes = try Self.smallQuakes(daemon, 2)
                let watch = try rig.watch(daemon, ["--batch", "5m"])
                defer { watch.signal(SIGKILL) }
                try await FilteredWatchTests.waitForCache(watch, daemon, cache: rig.cache, QuakeFilter())
                let start = try #require(try rig.outbox().token)

                try await ExecTests.revise(daemon, quakes[0].id, mag: 2.9, 1)
                try await ExecTests.revise(daemon, quakes[1].id, mag: 2.8, 1)
                try await rig.waitForQueue(2, watch)
                #expect(try rig.outbox().position == start, "the position waits before the queued batch")
                try rig.set("2026-11-25T12:04:59Z")
                try await Task.sleep(for: .milliseconds(500))
                #expect(rig.runs.isEmpty, "nothing runs before the window has passed")

                try rig.set("2026-11-25T12:05:00Z")
                try await waitUntil(timeout: .seconds(20)) { rig.runs.count == 1 }
                let run = rig.runs[0]
                #expect(run[0] == "batch" && run[1] == "2", "\(run)")
                #expect(run[2] == String(start + 1) && run[3] == String(start + 2), "first and last token: \(run)")
                #expect(run[4] == "", "QUAKE_ID is for single changes")
                let changes = Self.changes(try rig.stdin(1))
                #expect(changes.map(\.id) == quakes.map(\.id))
                #expect(changes.map(\.kind) == ["update", "update"])
                #expect(changes.map(\.token) == [start + 1, start + 2])
                try await waitUntil(timeout: .seconds(10)) { try rig.outbox().count == 0 }
                #expect(try rig.outbox().position == start + 2)

                // The next change opens a new window, by its own time.
                try rig.set("2026-11-25T13:00:00Z")
                try await ExecTests.revise(daemon, quakes[0].id, mag: 2.7, 2)
                try await rig.waitForQueue(1, watch)
                try rig.set("2026-11-25T13:04:00Z")
                try await Task.sleep(for: .milliseconds(300))
                #expect(rig.runs.count == 1)
                try rig.set("2026-11-25T13:05:00Z")
                try await waitUntil(timeout: .seconds(20)) { rig.runs.count == 2 }
                #expect(rig.runs[1][0] == "batch" && rig.runs[1][1] == "1")
                #expect(Self.changes(try rig.stdin(2)).map(\.id) == [quakes[0].id])
            }
        }

        @Test func aBatchQueuedBeforeAKillIsDeliveredOnceAfterTheRestart() async throws {
            try await withQuaked { daemon in
                let rig = try Rig(daemon, start: "2026-11-25T12:00:00Z")
                let quakes = try Self.smallQuakes(daemon, 2)
                var watch = try rig.watch(daemon, ["--batch", "5m"])
                try await FilteredWatchTests.waitForCache(watch, daemon, cache: rig.cache, QuakeFilter())
                try await ExecTests.revise(daemon, quakes[0].id, mag: 2.9, 1)
                try await ExecTests.revise(daemon, quakes[1].id, mag: 2.8, 1)
                try await rig.waitForQueue(2, watch)
                watch.signal(SIGKILL)
                _ = try await watch.wait()

                // Down past the window's end: the batch runs as soon as the watch is back, once.
                try rig.set("2026-11-25T12:30:00Z")
                watch = try rig.watch(daemon, ["--batch", "5m"])
                defer { watch.signal(SIGKILL) }
                try await waitUntil(timeout: .seconds(20)) { rig.runs.count == 1 }
                #expect(rig.runs[0][0] == "batch" && rig.runs[0][1] == "2")
                #expect(Self.changes(try rig.stdin(1)).map(\.id) == quakes.map(\.id))
                try await waitUntil(timeout: .seconds(10)) { try rig.outbox().count == 0 }
                try await Task.sleep(for: .milliseconds(500))
                #expect(rig.runs.count == 1, "delivered once")
                #expect(watch.stderr.contains("2 changes queued by an earlier watch"), "\(watch.stderr)")
            }
        }

        @Test func aStopSignalDuringABatchRunLetsItFinishAndEmptiesTheQueue() async throws {
            try await withQuaked { daemon in
                let rig = try Rig(daemon, start: "2026-11-25T12:00:00Z", extra: "touch '\(daemon.directory.path)/started'; sleep 1")
                let quakes = try Self.smallQuakes(daemon, 1)
                let watch = try rig.watch(daemon, ["--batch", "1m"])
                defer { watch.signal(SIGKILL) }
                try await FilteredWatchTests.waitForCache(watch, daemon, cache: rig.cache, QuakeFilter())
                try await ExecTests.revise(daemon, quakes[0].id, mag: 2.9, 1)
                try await rig.waitForQueue(1, watch)
                try rig.set("2026-11-25T12:01:00Z")
                let started = daemon.directory.appendingPathComponent("started")
                try await waitUntil(timeout: .seconds(20)) { FileManager.default.fileExists(atPath: started.path) }
                watch.signal(SIGTERM)
                #expect(try await watch.wait() == 0, "\(watch.stderr)")
                #expect(rig.runs.count == 1, "the run finished")
                #expect(try rig.outbox().count == 0, "and left the queue")
            }
        }

        @Test func quietHoursHoldAllButTheOverrideAcrossARestartAndDigestAtTheEnd() async throws {
            try await withQuaked { daemon in
                let rig = try Rig(daemon, start: "2026-11-25T23:00:00Z")
                let quakes = try Self.smallQuakes(daemon, 2)
                let flags = ["--quiet-hours", "22:00-07:00", "--quiet-min-mag", "6", "--tz", "UTC"]
                var watch = try rig.watch(daemon, flags)
                try await FilteredWatchTests.waitForCache(watch, daemon, cache: rig.cache, QuakeFilter())
                let start = try #require(try rig.outbox().token)

                try await ExecTests.revise(daemon, quakes[0].id, mag: 2.9, 1)  // held
                try await ExecTests.revise(daemon, quakes[1].id, mag: 6.4, 1)  // the override
                try await waitUntil(timeout: .seconds(20)) { rig.runs.count == 1 }
                #expect(rig.runs[0][0] == "change" && rig.runs[0][1] == "1" && rig.runs[0][4] == quakes[1].id)
                let single = try #require(try rig.stdin(1) as? [String: Any])
                #expect((single["change"] as? [String: Any])?["quakeId"] as? String == quakes[1].id)
                try await rig.waitForQueue(1, watch)
                #expect(try rig.outbox().position == start, "the position waits before the held change")

                // A stop and a start in quiet hours: still held.
                watch.signal(SIGTERM)
                #expect(try await watch.wait() == 0)
                try rig.set("2026-11-26T03:00:00Z")
                watch = try rig.watch(daemon, flags)
                defer { watch.signal(SIGKILL) }
                try await FilteredWatchTests.waitForCache(watch, daemon, cache: rig.cache, QuakeFilter())
                try await Task.sleep(for: .milliseconds(500))
                #expect(rig.runs.count == 1, "nothing more in quiet hours: \(rig.runs)")

                // The end of quiet hours: one digest of what was held.
                try rig.set("2026-11-26T07:00:00Z")
                try await waitUntil(timeout: .seconds(20)) { rig.runs.count == 2 }
                #expect(rig.runs[1][0] == "digest" && rig.runs[1][1] == "1", "\(rig.runs[1])")
                #expect(Self.changes(try rig.stdin(2)).map(\.id) == [quakes[0].id])
                try await waitUntil(timeout: .seconds(10)) { try rig.outbox().count == 0 }
                #expect(try rig.outbox().position == start + 2)

                // Outside quiet hours each change runs at once, on its own.
                try await ExecTests.revise(daemon, quakes[0].id, mag: 2.5, 2)
                try await waitUntil(timeout: .seconds(20)) { rig.runs.count == 3 }
                #expect(rig.runs[2][0] == "change" && rig.runs[2][4] == quakes[0].id)
            }
        }

        @Test func whatAnEarlierRunHeldIsDeliveredByAWatchWithoutTheFlags() async throws {
            try await withQuaked { daemon in
                let rig = try Rig(daemon, start: "2026-11-25T23:00:00Z")
                let quakes = try Self.smallQuakes(daemon, 1)
                var watch = try rig.watch(daemon, ["--quiet-hours", "22:00-07:00", "--tz", "UTC"])
                try await FilteredWatchTests.waitForCache(watch, daemon, cache: rig.cache, QuakeFilter())
                try await ExecTests.revise(daemon, quakes[0].id, mag: 2.9, 1)
                try await rig.waitForQueue(1, watch)
                watch.signal(SIGTERM)
                #expect(try await watch.wait() == 0)
                #expect(rig.runs.isEmpty)

                watch = try rig.watch(daemon, [])
                defer { watch.signal(SIGKILL) }
                try await waitUntil(timeout: .seconds(20)) { rig.runs.count == 1 }
                #expect(rig.runs[0][0] == "digest" && rig.runs[0][1] == "1")
                try await waitUntil(timeout: .seconds(10)) { try rig.outbox().count == 0 }
            }
        }

        /// The example hook configuration's FILTER and DELIVERY, split on spaces as systemd splits
        /// `$FILTER $DELIVERY` in quaked-hook@.service, are accepted by watch, which keeps its
        /// cache with that filter and goes on running.
        @Test func theExampleHookConfigurationWorksAsTheUnitPassesIt() async throws {
            let conf = try String(
                contentsOf: Fixtures.packageRoot.appendingPathComponent("packaging/examples/hook.conf"), encoding: .utf8)
            func words(_ key: String) throws -> [String] {
                let line = try #require(conf.split(separator: "\n").first { $0.hasPrefix("\(key)=") })
                return line.dropFirst(key.count + 1).split(separator: " ").map(String.init)
            }
            let filter = try words("FILTER")
            let delivery = try words("DELIVERY")
            #expect(delivery.contains("--quiet-hours"))
            try await withQuaked { daemon in
                let rig = try Rig(daemon, start: "2026-11-25T23:00:00Z")
                let watch = try rig.watch(daemon, filter + delivery + ["--tz", "UTC"])
                defer { watch.signal(SIGKILL) }
                let quakeFilter = try FilterOptions.parse(filter).filter(sinceIsFilter: true)
                try await waitUntil(timeout: .seconds(30)) {
                    guard watch.isRunning else { throw TestFailure("watch exited: \(watch.stderr)") }
                    let cache = try QuakeCache(path: rig.cache)
                    defer { try? cache.close() }
                    return try cache.position()?.filter == quakeFilter?.key
                }
                #expect(watch.isRunning, "\(watch.stderr)")
            }
        }

        @Test(arguments: [
            (["--batch", "5m"], "--batch"),
            (["--quiet-hours", "22:00-07:00"], "--quiet-hours"),
            (["--exec", "true", "--batch", "0s"], "--batch"),
            (["--exec", "true", "--batch", "soon"], "--batch"),
            (["--exec", "true", "--quiet-hours", "22-07"], "--quiet-hours"),
            (["--exec", "true", "--quiet-hours", "22:00-22:00"], "--quiet-hours"),
            (["--exec", "true", "--quiet-hours", "24:00-07:00"], "--quiet-hours"),
            (["--exec", "true", "--quiet-min-mag", "6"], "--quiet-min-mag"),
            (["--exec", "true", "--quiet-hours", "22:00-07:00", "--quiet-min-mag", "nan"], "--quiet-min-mag"),
        ])
        func badDigestFlagsAreRefusedNamingTheFlag(arguments: [String], flag: String) async throws {
            let result = try await quakectl(["watch", "--socket", "/nonexistent/quaked.sock"] + arguments)
            #expect(result.status == 64, "\(arguments): \(result.stderr)")
            #expect(result.stderr.contains(flag), "\(arguments): \(result.stderr)")
        }
    }
}

@Suite struct QuietHoursTests {
    static let utc = TimeZone(identifier: "UTC")!

    static func ms(_ time: String) throws -> Int64 {
        Int64(try #require(ISO8601DateFormatter().date(from: time)).timeIntervalSince1970 * 1000)
    }

    @Test func parsing() {
        #expect(QuietHours(parsing: "22:00-07:00") == QuietHours(start: 1320, end: 420))
        #expect(QuietHours(parsing: "9:30-17:00") == QuietHours(start: 570, end: 1020))
        #expect(QuietHours(parsing: "00:00-23:59")?.description == "00:00-23:59")
        for bad in ["", "22:00", "22:00-", "22-07", "22:00-07:00-08:00", "24:00-07:00", "22:60-07:00", "22:00-22:00", "２２:00-07:00", "-1:00-07:00"] {
            #expect(QuietHours(parsing: bad) == nil, "\(bad)")
        }
    }

    @Test func spansAcrossMidnightIncludeTheStartMinuteAndNotTheEnd() throws {
        let quiet = QuietHours(start: 22 * 60, end: 7 * 60)
        #expect(!quiet.contains(try Self.ms("2026-11-25T21:59:59Z"), in: Self.utc))
        #expect(quiet.contains(try Self.ms("2026-11-25T22:00:00Z"), in: Self.utc))
        #expect(quiet.contains(try Self.ms("2026-11-26T03:00:00Z"), in: Self.utc))
        #expect(quiet.contains(try Self.ms("2026-11-26T06:59:59Z"), in: Self.utc))
        #expect(!quiet.contains(try Self.ms("2026-11-26T07:00:00Z"), in: Self.utc))
        #expect(quiet.end(after: try Self.ms("2026-11-25T23:00:00Z"), in: Self.utc) == (try Self.ms("2026-11-26T07:00:00Z")))
        #expect(quiet.end(after: try Self.ms("2026-11-26T03:00:00Z"), in: Self.utc) == (try Self.ms("2026-11-26T07:00:00Z")))
        let day = QuietHours(start: 9 * 60, end: 17 * 60)
        #expect(!day.contains(try Self.ms("2026-11-25T08:59:00Z"), in: Self.utc))
        #expect(day.contains(try Self.ms("2026-11-25T09:00:00Z"), in: Self.utc))
        #expect(!day.contains(try Self.ms("2026-11-25T17:00:00Z"), in: Self.utc))
    }

    @Test func theLocalClockDecidesAcrossDaylightSavingTime() throws {
        let tokyo = TimeZone(identifier: "Asia/Tokyo")!
        let berlin = TimeZone(identifier: "Europe/Berlin")!
        let quiet = QuietHours(start: 22 * 60, end: 7 * 60)
        // 14:00 UTC is 23:00 in Tokyo: quiet there, not in UTC.
        #expect(quiet.contains(try Self.ms("2026-11-25T14:00:00Z"), in: tokyo))
        #expect(!quiet.contains(try Self.ms("2026-11-25T14:00:00Z"), in: Self.utc))
        #expect(quiet.end(after: try Self.ms("2026-11-25T14:00:00Z"), in: tokyo) == (try Self.ms("2026-11-25T22:00:00Z")))
        // Berlin in summer is UTC+2, in winter UTC+1: 07:00 local is 05:00 or 06:00 UTC.
        #expect(quiet.end(after: try Self.ms("2026-07-01T00:00:00Z"), in: berlin) == (try Self.ms("2026-07-01T05:00:00Z")))
        #expect(quiet.end(after: try Self.ms("2026-01-01T00:00:00Z"), in: berlin) == (try Self.ms("2026-01-01T06:00:00Z")))
        // The night clocks go forward (29 March 2026, 02:00 → 03:00): quiet 01:00-02:30 ends at
        // the first instant after 02:30 that exists, 03:00 CEST.
        let short = QuietHours(start: 60, end: 150)
        #expect(short.contains(try Self.ms("2026-03-29T00:30:00Z"), in: berlin))  // 01:30 CET
        #expect(!short.contains(try Self.ms("2026-03-29T01:00:00Z"), in: berlin))  // 03:00 CEST
        #expect(short.end(after: try Self.ms("2026-03-29T00:30:00Z"), in: berlin) == (try Self.ms("2026-03-29T01:00:00Z")))
    }

    @Test func thePlanHoldsBelowTheOverrideAndDigestsWhenQuietEnds() throws {
        let plan = OutboxPlan(
            batchMilliseconds: 300_000, quietHours: QuietHours(start: 22 * 60, end: 7 * 60), quietMinMagnitude: 6,
            timeZone: Self.utc)
        let night = try Self.ms("2026-11-25T23:00:00Z")
        let morning = try Self.ms("2026-11-26T07:00:00Z")
        #expect(plan.holds(magnitude: 4, at: night))
        #expect(plan.holds(magnitude: nil, at: night), "no magnitude: not above the override")
        #expect(!plan.holds(magnitude: 6, at: night))
        #expect(!plan.holds(magnitude: 4, at: morning))
        func entry(_ token: Int, held: Bool, at: Int64) -> OutboxEntry {
            OutboxEntry(seq: Int64(token), storeId: "s", token: token, queuedAt: at, held: held, mag: nil, line: "{}", environment: [:])
        }
        let held = entry(1, held: true, at: night)
        let loud = entry(2, held: false, at: night)
        #expect(plan.decide([held, loud], now: night) == .wait(until: night + 300_000))
        #expect(plan.decide([held, loud], now: night + 300_000) == .deliver(.init(kind: .batch, entries: [loud])))
        #expect(plan.decide([held], now: night + 300_000) == .wait(until: morning))
        #expect(plan.decide([held, loud], now: morning) == .deliver(.init(kind: .digest, entries: [held, loud])))
        #expect(plan.decide([], now: morning) == .wait(until: nil))
    }
}
