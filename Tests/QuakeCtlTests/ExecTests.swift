import Foundation
import QuakeClient
import QuakeFeed
import QuakeProtocol
import QuakeStore
import QuakeTestSupport
import Testing
import Varlink

/// `watch --exec`: a real daemon, real quakectl processes and real commands (shell scripts that
/// log what they were given, fail, hang or get killed on purpose).
extension ClientEndToEnd {
    @Suite struct ExecTests {
        /// A script that appends one line per run to `log`: the kind, id and magnitude from the
        /// environment, then the change's JSON from stdin. `extra` runs first (to fail or sleep).
        static func script(in dir: URL, log: URL, extra: String = "") throws -> String {
            let url = dir.appendingPathComponent("hook-\(UUID().uuidString.prefix(8)).sh")
            try """
            #!/bin/sh
            \(extra)
            read -r line
            printf '%s|%s|%s|%s|%s|%s|%s\\n' "$QUAKE_KIND" "$QUAKE_ID" "$QUAKE_MAG" "$QUAKE_TIME" "$QUAKED_TOKEN" "$QUAKED_STORE" "$line" >> '\(log.path)'
            """.write(to: url, atomically: true, encoding: .utf8)
            chmod(url.path, 0o755)
            return url.path
        }

        static func lines(_ log: URL) -> [[String]] {
            ((try? String(contentsOf: log, encoding: .utf8)) ?? "").split(separator: "\n").map {
                $0.split(separator: "|", maxSplits: 6, omittingEmptySubsequences: false).map(String.init)
            }
        }

        static func revise(_ daemon: Quaked, _ id: String, mag: Double, _ revision: Int) async throws {
            _ = try await daemon.importOnce(
                try FilteredWatchTests.revision(of: id, mag: mag, revision: revision, in: daemon.directory))
        }

        static func smallQuake(_ daemon: Quaked) throws -> FeedFeature {
            try #require(try daemon.withStore { try $0.allQuakes() }.first { ($0.mag ?? 9) < 3 })
        }

        @Test func theCommandGetsEachChangeOnStdinAndInItsEnvironment() async throws {
            try await withQuaked { daemon in
                let log = daemon.directory.appendingPathComponent("exec.log")
                let hook = try Self.script(in: daemon.directory, log: log)
                let small = try Self.smallQuake(daemon)
                let cache = daemon.directory.appendingPathComponent("exec.sqlite").path
                let watch = try WatchTests.watch(daemon, cache: cache, ["--min-mag", "4", "--exec", hook, "--name", "hook-test"])
                defer { watch.signal(SIGKILL) }
                try await FilteredWatchTests.waitForCache(watch, daemon, cache: cache, QuakeFilter(minMagnitude: 4))
                #expect(Self.lines(log).isEmpty, "the starting snapshot is not delivered")

                try await Self.revise(daemon, small.id, mag: 4.6, 1)
                try await Self.revise(daemon, small.id, mag: 3.1, 2)
                try await waitUntil(timeout: .seconds(20)) { Self.lines(log).count == 2 }
                let runs = Self.lines(log)
                let storeId = try daemon.withStore { $0.storeID }
                #expect(runs.map { $0[0] } == ["enter", "leave"])
                #expect(runs.allSatisfy { $0[1] == small.id && $0[5] == storeId })
                #expect(runs[0][2] == "4.6" && runs[1][2] == "3.1")
                #expect(runs[0][3].hasSuffix("Z") && runs[0][3].hasPrefix("20"), "QUAKE_TIME is ISO 8601 UTC: \(runs[0][3])")
                let json = try JSONSerialization.jsonObject(with: Data(runs[0][6].utf8)) as? [String: Any]
                let change = json?["change"] as? [String: Any]
                #expect(change?["kind"] as? String == "enter")
                #expect((change?["quake"] as? [String: Any])?["id"] as? String == small.id)
                #expect(json?["token"] as? Int == Int(runs[0][4]))
            }
        }

        @Test func aFailingCommandIsRetriedAndStatusShowsTheError() async throws {
            try await withQuaked { daemon in
                let log = daemon.directory.appendingPathComponent("exec.log")
                let counter = daemon.directory.appendingPathComponent("attempts")
                // Fails its first three runs, then succeeds.
                let hook = try Self.script(
                    in: daemon.directory, log: log,
                    extra: """
                        echo x >> '\(counter.path)'
                        [ "$(wc -l < '\(counter.path)')" -gt 3 ] || { echo "hook: not yet" >&2; exit 3; }
                        """)
                let small = try Self.smallQuake(daemon)
                let cache = daemon.directory.appendingPathComponent("exec.sqlite").path
                let watch = try WatchTests.watch(daemon, cache: cache, ["--exec", hook, "--name", "flaky"])
                defer { watch.signal(SIGKILL) }
                try await FilteredWatchTests.waitForCache(watch, daemon, cache: cache, QuakeFilter())
                let before = try #require(try QuakeCache(path: cache).position()?.token)
                try await Self.revise(daemon, small.id, mag: 2.9, 1)

                // While it fails: the cache does not move, and quaked shows the error.
                try await waitUntil(timeout: .seconds(20)) {
                    (try? String(contentsOf: counter, encoding: .utf8))?.split(separator: "\n").count ?? 0 >= 2
                }
                #expect(try QuakeCache(path: cache).position()?.token == before)
                let failing = try await quakectl(["status", "--socket", daemon.socketPath])
                #expect(failing.stdout.contains("flaky"))
                #expect(failing.stdout.contains("last error"), "\(failing.stdout)")
                #expect(failing.stdout.contains("exited with status 3"))

                // Then it succeeds once, the cache moves on, and the error is cleared.
                try await waitUntil(timeout: .seconds(30)) { Self.lines(log).count == 1 }
                try await FilteredWatchTests.waitForCache(watch, daemon, cache: cache, QuakeFilter())
                #expect(watch.stderr.contains("--exec failed for update \(small.id)"))
                #expect(watch.stderr.contains("retrying in"))
                try await waitUntil(timeout: .seconds(10)) {
                    let status = try UnixSocketClient(path: daemon.socketPath).call(IOQuaked.GetStatus.self, .init())
                    let flaky = status.clients.first { $0.name == "flaky" }
                    return flaky != nil && flaky?.lastError == nil
                }
                #expect(Self.lines(log).count == 1, "delivered once it succeeded, not again")
            }
        }

        @Test func aHangingCommandIsStoppedAfterTheTimeoutAndRetried() async throws {
            try await withQuaked { daemon in
                let log = daemon.directory.appendingPathComponent("exec.log")
                let counter = daemon.directory.appendingPathComponent("attempts")
                let hook = try Self.script(
                    in: daemon.directory, log: log,
                    extra: """
                        echo x >> '\(counter.path)'
                        [ "$(wc -l < '\(counter.path)')" -gt 1 ] || exec sleep 60
                        """)
                let small = try Self.smallQuake(daemon)
                let cache = daemon.directory.appendingPathComponent("exec.sqlite").path
                let watch = try WatchTests.watch(daemon, cache: cache, ["--exec", hook, "--exec-timeout", "500ms"])
                defer { watch.signal(SIGKILL) }
                try await FilteredWatchTests.waitForCache(watch, daemon, cache: cache, QuakeFilter())
                try await Self.revise(daemon, small.id, mag: 2.8, 1)
                try await waitUntil(timeout: .seconds(30)) { Self.lines(log).count == 1 }
                #expect(watch.stderr.contains("timed out after"))
            }
        }

        @Test func aStopSignalLetsTheRunningCommandFinishAndCommitsIt() async throws {
            try await withQuaked { daemon in
                let log = daemon.directory.appendingPathComponent("exec.log")
                let started = daemon.directory.appendingPathComponent("started")
                let hook = try Self.script(in: daemon.directory, log: log, extra: "echo $$ > '\(started.path)'; sleep 1")
                let small = try Self.smallQuake(daemon)
                let cache = daemon.directory.appendingPathComponent("exec.sqlite").path
                let watch = try WatchTests.watch(daemon, cache: cache, ["--exec", hook, "--name", "stopper"])
                try await FilteredWatchTests.waitForCache(watch, daemon, cache: cache, QuakeFilter())
                try await Self.revise(daemon, small.id, mag: 2.7, 1)
                try await waitUntil(timeout: .seconds(20)) { FileManager.default.fileExists(atPath: started.path) }
                watch.signal(SIGTERM)
                #expect(try await watch.wait(timeout: .seconds(20)) == 0)
                #expect(Self.lines(log).count == 1, "the command ran to its end")
                let head = try daemon.withStore { try $0.head() }
                #expect(try QuakeCache(path: cache).position()?.token == Int(head), "and the change was committed")

                // A kill -9 in the middle of a run (of quakectl and its command, as when systemd
                // stops the unit's cgroup, or the machine goes down): the change comes again.
                try FileManager.default.removeItem(at: started)
                let slow = try Self.script(in: daemon.directory, log: log, extra: "echo $$ > '\(started.path)'; sleep 10")
                let second = try WatchTests.watch(daemon, cache: cache, ["--exec", slow, "--name", "stopper"])
                try await Self.revise(daemon, small.id, mag: 2.6, 2)
                try await waitUntil(timeout: .seconds(20)) {
                    ((try? String(contentsOf: started, encoding: .utf8)) ?? "").hasSuffix("\n")
                }
                second.signal(SIGKILL)
                let hookPID = try #require(Int32(try String(contentsOf: started, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)))
                kill(hookPID, SIGKILL)
                // (Before waiting: the command holds quakectl's stderr open.)
                _ = try await second.wait()
                #expect(Self.lines(log).count == 1, "\(Self.lines(log)) \(second.stderr)")
                let third = try WatchTests.watch(daemon, cache: cache, ["--exec", hook, "--name", "stopper"])
                defer { third.signal(SIGKILL) }
                try await waitUntil(timeout: .seconds(20)) { Self.lines(log).count == 2 }
                try await FilteredWatchTests.waitForCache(third, daemon, cache: cache, QuakeFilter())
                #expect(Self.lines(log).last?[2] == "2.6")
            }
        }
    }
}
