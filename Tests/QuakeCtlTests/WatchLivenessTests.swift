import Foundation
import Glibc
@testable import QuakeClient
import QuakeFeed
import QuakeProtocol
import QuakeStore
import QuakeTestSupport
import Testing

/// The rules of ``WatchHealth``, on their own clock.
@Suite struct WatchHealthTests {
    let start = ContinuousClock.now

    @Test func quietQuakedIsAStallAfterThreeHeartbeatsAndFiveSeconds() {
        let health = WatchHealth(heartbeatSeconds: 1)
        health.sessionStarted(now: start)
        health.heard(head: 5, now: start)
        health.atHead(5, now: start)
        #expect(health.stall(now: start + .seconds(8)) == nil)
        #expect(health.stall(now: start + .seconds(9)) == .silent(.seconds(9)))
        health.heard(head: 5, now: start + .seconds(9))
        #expect(health.stall(now: start + .seconds(10)) == nil, "a heartbeat is life")
    }

    @Test func aPositionBehindAMovingHeadIsAStallOnlyWhenItStandsStill() {
        let health = WatchHealth(heartbeatSeconds: 1)
        health.sessionStarted(now: start)
        health.atHead(5, now: start)
        for second in 1...20 { health.heard(head: 5 + second, now: start + .seconds(second)) }
        #expect(health.stall(now: start + .seconds(8)) == nil)
        #expect(health.stall(now: start + .seconds(9)) == .noProgress(.seconds(9), position: 5, head: 25))
        health.moved(to: 6, now: start + .seconds(10))
        #expect(health.stall(now: start + .seconds(11)) == nil, "a moving position is progress")
    }

    @Test func idleAtTheHeadIsHealthyForAsLongAsHeartbeatsCome() {
        let health = WatchHealth(heartbeatSeconds: 1)
        health.sessionStarted(now: start)
        health.atHead(5, now: start)
        for second in 1...60 { health.heard(head: 5, now: start + .seconds(second)) }
        #expect(health.isHealthy(now: start + .seconds(61)))
    }

    @Test func aDeliveryPausesTheStallClockAndRetryingIsHealthy() {
        let health = WatchHealth(heartbeatSeconds: 1)
        health.sessionStarted(now: start)
        health.atHead(5, now: start)
        health.heard(head: 6, now: start)
        health.delivering(true, now: start)
        #expect(health.stall(now: start + .seconds(30)) == nil, "--exec's command has its own timeout")
        health.delivering(false, now: start + .seconds(30))
        health.heard(head: 6, now: start + .seconds(30))
        #expect(health.stall(now: start + .seconds(38)) == nil)
        #expect(health.stall(now: start + .seconds(40)) != nil)
        health.sessionEnded()
        #expect(health.isHealthy(now: start + .seconds(100)), "between sessions the watch is retrying, not wedged")
    }
}

/// Long-lived clients against a quaked that stops answering: a SIGSTOPped daemon, a socket that
/// accepts and never answers, and systemd's watchdog for `watch` and `sync`.
extension ClientEndToEnd {
    @Suite struct WatchLivenessTests {
        /// A listening Unix socket that never accepts: connections succeed (the kernel queues
        /// them) and nothing is ever answered.
        final class BlackHole: @unchecked Sendable {
            let fd: Int32
            init(path: String) throws {
                fd = try boundUnixSocket(path, type: Int32(SOCK_STREAM.rawValue))
                guard listen(fd, 64) == 0 else { throw TestFailure("listen \(path): errno \(errno)") }
            }
            deinit { close(fd) }
        }

        /// A datagram socket standing in for systemd's NOTIFY_SOCKET: what quakectl sends.
        final class NotifySocket: @unchecked Sendable {
            let path: String
            let fd: Int32
            private let lock = NSLock()
            private var received: [(ContinuousClock.Instant, String)] = []
            private var open = true

            init(path: String) throws {
                self.path = path
                fd = try boundUnixSocket(path, type: Int32(SOCK_DGRAM.rawValue))
                Thread.detachNewThread { [self] in
                    var buffer = [UInt8](repeating: 0, count: 4096)
                    while lock.withLock({ open }) {
                        var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
                        guard poll(&poller, 1, 100) > 0 else { continue }
                        let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
                        if n > 0 {
                            let text = String(decoding: buffer[..<n], as: UTF8.self)
                            lock.withLock { received.append((.now, text)) }
                        }
                    }
                }
            }

            func stop() {
                lock.withLock { open = false }
            }

            deinit { close(fd) }

            var messages: [(at: ContinuousClock.Instant, text: String)] { lock.withLock { received } }

            func watchdogs(since: ContinuousClock.Instant) -> [ContinuousClock.Instant] {
                messages.filter { $0.at >= since && $0.text.contains("WATCHDOG=1") }.map(\.at)
            }
        }

        @Test func aSIGSTOPpedQuakedIsLeftSaidOnceAndCaughtUpWhenItContinues() async throws {
            try await withQuaked { daemon in
                let cache = daemon.directory.appendingPathComponent("watch.sqlite").path
                let watch = try WatchTests.watch(daemon, cache: cache)
                defer { watch.signal(SIGKILL) }
                try await WatchTests.expectCaughtUp(watch, daemon, cache: cache)
                let start = try daemon.withStore { try $0.head() }
                let pid = try #require(daemon.process?.pid)

                kill(pid, SIGSTOP)
                // The store changes while quaked is stopped (quaked --once writes it).
                _ = try await daemon.importOnce(TestFeeds.week)
                // With --heartbeat 1, quaked may be silent for 3 heartbeats and 5 s.
                try await waitUntil(timeout: .seconds(20)) { watch.stderr.contains("no reply or heartbeat from quaked") }
                try await Task.sleep(for: .seconds(10))  // more silent sessions: still said once
                kill(pid, SIGCONT)
                let resumed = ContinuousClock.now
                try await WatchTests.expectCaughtUp(watch, daemon, cache: cache)
                let recovery = ContinuousClock.now - resumed
                #expect(recovery < .seconds(15), "caught up \(recovery) after SIGCONT")

                let stalls = watch.stderr.components(separatedBy: "no reply or heartbeat from quaked").count - 1
                #expect(stalls == 1, "said once per outage: \(watch.stderr)")
                #expect(watch.stderr.contains("reconnected"))
                let printed = try WatchOutput(watch.stdout).changes
                #expect(printed.count == Set(printed).count, "a change was printed twice")
                #expect(printed.sorted() == (try daemon.historyChanges(after: Int(start))).sorted())
                #expect(printed.count > 100)
            }
        }

        @Test func aSocketThatAcceptsAndNeverAnswersIsLeftAndQuakedFoundWhenItIsBack() async throws {
            try await withQuaked { daemon in
                let cache = daemon.directory.appendingPathComponent("watch.sqlite").path
                let first = try WatchTests.watch(daemon, cache: cache)
                try await WatchTests.expectCaughtUp(first, daemon, cache: cache)
                first.signal(SIGKILL)
                _ = try await first.wait()
                let start = try daemon.withStore { try $0.head() }
                try await daemon.stop()
                _ = try await daemon.importOnce(TestFeeds.week)

                var hole: BlackHole? = try BlackHole(path: daemon.socketPath)
                let watch = try WatchTests.watch(daemon, cache: cache)
                defer { watch.signal(SIGKILL) }
                try await waitUntil(timeout: .seconds(20)) { watch.stderr.contains("no reply or heartbeat from quaked") }
                #expect(watch.isRunning)
                hole = nil
                unlink(daemon.socketPath)
                try await daemon.start()
                let back = ContinuousClock.now
                try await WatchTests.expectCaughtUp(watch, daemon, cache: cache)
                #expect(ContinuousClock.now - back < .seconds(15))
                _ = hole
                let printed = try WatchOutput(watch.stdout).changes
                #expect(printed.count == Set(printed).count, "a change was printed twice")
                #expect(printed.sorted() == (try daemon.historyChanges(after: Int(start))).sorted())
            }
        }

        @Test func underSystemdAWatchSaysReadyAndKeepsTheWatchdogFedWhileIdleAtTheHead() async throws {
            try await withQuaked { daemon in
                let notify = try NotifySocket(path: daemon.directory.appendingPathComponent("notify").path)
                defer { notify.stop() }
                let cache = daemon.directory.appendingPathComponent("watch.sqlite").path
                let watch = try startQuakectl(
                    ["watch", "--json", "--heartbeat", "1", "--socket", daemon.socketPath, "--cache", cache],
                    environment: ["NOTIFY_SOCKET": notify.path, "WATCHDOG_USEC": "1000000"])
                defer { watch.signal(SIGKILL) }
                try await WatchTests.expectCaughtUp(watch, daemon, cache: cache)
                let since = ContinuousClock.now
                try await Task.sleep(for: .seconds(4))
                #expect(notify.messages.first?.text == "READY=1")
                // Every half WATCHDOG_USEC: about 8 in 4 s.
                let pings = notify.watchdogs(since: since)
                #expect(pings.count >= 5, "\(notify.messages.map(\.text))")
                watch.signal(SIGTERM)
                #expect(try await watch.wait() == 0)
                try await Task.sleep(for: .milliseconds(300))
                #expect(notify.messages.contains { $0.text == "STOPPING=1" })
            }
        }

        @Test func aSinkWedgedOnASIGSTOPpedPostgresStopsFeedingTheWatchdogAndRecovers() async throws {
            try await SyncTests.withPostgres { pg in
                try await withQuaked { daemon in
                    let url = try SyncTests.database(pg, "wedge")
                    let notify = try NotifySocket(path: daemon.directory.appendingPathComponent("notify").path)
                    defer { notify.stop() }
                    let sync = try SyncTests.sync(
                        daemon, to: url, environment: ["NOTIFY_SOCKET": notify.path, "WATCHDOG_USEC": "1000000"])
                    defer { sync.signal(SIGKILL) }
                    try await SyncTests.expectInStep(sync, daemon, url: url)
                    #expect(!notify.watchdogs(since: .now - .seconds(60)).isEmpty, "fed while in step")

                    try pg.pause()
                    let paused = ContinuousClock.now
                    let small = try #require(try daemon.withStore { try $0.allQuakes() }.first { ($0.mag ?? 9) < 3 })
                    try await ExecTests.revise(daemon, small.id, mag: 2.9, 1)
                    // With --heartbeat 2 the cache may stand behind the head for 11 s; then the
                    // watchdog goes hungry (systemd would restart the sink).
                    try await Task.sleep(for: .seconds(16))
                    let lastPing = notify.watchdogs(since: paused).last ?? paused
                    #expect(ContinuousClock.now - lastPing > .seconds(3), "still fed while wedged")
                    #expect(lastPing - paused < .seconds(14))

                    try pg.resume()
                    let resumed = ContinuousClock.now
                    try await SyncTests.expectInStep(sync, daemon, url: url, timeout: .seconds(30))
                    #expect(ContinuousClock.now - resumed < .seconds(30))
                    try await Task.sleep(for: .seconds(2))
                    #expect(!notify.watchdogs(since: resumed).isEmpty, "fed again once in step")
                    let applied = sync.stdout.split(separator: "\n").compactMap {
                        try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
                    }.filter { $0["event"] as? String == "applied" }.compactMap { $0["token"] as? Int }
                    #expect(applied.count == Set(applied).count, "a transaction was applied twice: \(sync.stdout)")
                }
            }
        }
    }
}
