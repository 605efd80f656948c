import Foundation
import GRDB
import QuakeStore
import QuakeTestSupport
import Testing

/// `quaked --once` as a real process.
extension EndToEnd {
    @Suite("quaked --once")
    struct OnceTests {
        let quaked = BuiltProducts.path("quaked")

        @Test("--check: ok on a sound store, each problem on its own line and exit 1 otherwise")
        func integrityCheck() async throws {
            try await withTemporaryDirectory { dir in
                let missing = try await ChildProcess.run(quaked, ["--check", "--state-directory", dir.path])
                #expect(missing.status == 1)
                #expect(missing.stderr.contains("no store to check"), "\(missing.stderr)")
                #expect(!FileManager.default.fileExists(atPath: dir.appendingPathComponent(QuakeStore.fileName).path))

                let fixture = Fixtures.usgs("rodu__quakemap__all_day.geojson")
                let once = try await ChildProcess.run(
                    quaked, ["--once", "--feed", fixture.absoluteString, "--state-directory", dir.path])
                #expect(once.status == 0, "\(once.stderr)")
                let sound = try await ChildProcess.run(quaked, ["--check", "--state-directory", dir.path])
                #expect(sound.status == 0, "\(sound.stderr)")
                #expect(sound.stdout == "ok\n")

                // A row removed behind history's back, as a hand edit would.
                let queue = try DatabaseQueue(path: dir.appendingPathComponent(QuakeStore.fileName).path)
                let victim = try await queue.write { db in
                    let id = try String.fetchOne(db, sql: "SELECT id FROM quakes ORDER BY id LIMIT 1")!
                    try db.execute(sql: "DELETE FROM quakes WHERE id = ?", arguments: [id])
                    return id
                }
                try queue.close()
                let broken = try await ChildProcess.run(quaked, ["--check", "--state-directory", dir.path])
                #expect(broken.status == 1)
                #expect(
                    broken.stdout == "history's last change to quake \(victim) (token 1) is an insert, but it is not stored\n",
                    "\(broken.stdout)")
            }
        }

        @Test("imports a file feed and prints one JSON object")
        func importsFileFeed() async throws {
            try await withTemporaryDirectory { dir in
                let fixture = Fixtures.usgs("rodu__quakemap__all_day.geojson")
                let result = try await ChildProcess.run(
                    quaked, ["--once", "--feed", fixture.absoluteString, "--state-directory", dir.path, "--json"])
                #expect(result.status == 0, "\(result.stderr)")
                let object = try #require(
                    try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any])
                let expected = try FeedDocument(contentsOf: fixture).ids.count
                #expect(object["inserted"] as? Int == expected)
                #expect(object["token"] as? Int == 1)
                #expect(object["bytes"] as? Int == (try Data(contentsOf: fixture)).count)
                for key in ["updated", "unchanged", "stale", "superseded", "skipped", "store", "durationMs"] {
                    #expect(object[key] != nil, "missing \(key)")
                }
                let store = try QuakeStore(directory: dir)
                #expect(object["store"] as? String == store.storeID)
                #expect(try store.count() == expected)
            }
        }

        @Test("pulls over HTTP; a failing pull exits non-zero with one line and leaves the store unchanged")
        func httpPullAndFailure() async throws {
            try await FeedTestServer.withServer { server in
                try await withTemporaryDirectory { dir in
                    let fixture = Fixtures.usgs("rodu__quakemap__all_day.geojson")
                    server.setResponse("/good.geojson", .feed(fixture))
                    server.setResponse("/bad.geojson", .feed(fixture).truncated(afterBytes: 50_000))
                    server.setResponse("/down.geojson", .status(500))
                    let ok = try await ChildProcess.run(
                        quaked, ["--once", "--feed", server.url("/good.geojson"), "--state-directory", dir.path, "--json"])
                    #expect(ok.status == 0, "\(ok.stderr)")
                    #expect(server.requests("/good.geojson").first?.header("Accept-Encoding")?.contains("gzip") == true)
                    let store = try QuakeStore(directory: dir)
                    let count = try store.count()
                    #expect(count == 151)

                    for path in ["/bad.geojson", "/down.geojson"] {
                        let failed = try await ChildProcess.run(
                            quaked, ["--once", "--feed", server.url(path), "--state-directory", dir.path, "--json"])
                        #expect(failed.status == 1)
                        #expect(failed.stdout.isEmpty)
                        let lines = failed.stderr.split(separator: "\n")
                        #expect(lines.count == 1, "\(failed.stderr)")
                        #expect(failed.stderr.contains("unchanged"))
                        #expect(try store.count() == count)
                        #expect(try store.head() == 1)
                    }
                }
            }
        }

        @Test("pulls through the daemon's scheduler: conditional with the stored validators, and a failure saves no backoff")
        func conditionalAndNoBackoff() async throws {
            try await FeedTestServer.withServer { server in
                try await withTemporaryDirectory { dir in
                    let fixture = Fixtures.usgs("rodu__quakemap__all_day.geojson")
                    server.setResponse("/feed", .feed(fixture))
                    let arguments = ["--once", "--feed", server.url("/feed"), "--state-directory", dir.path]
                    let first = try await ChildProcess.run(quaked, arguments)
                    #expect(first.status == 0, "\(first.stderr)")
                    #expect(first.stdout.contains("151 features: +151 new"), "\(first.stdout)")
                    let again = try await ChildProcess.run(quaked, arguments + ["--json"])
                    #expect(again.status == 0, "\(again.stderr)")
                    #expect(server.requests("/feed").last?.header("If-Modified-Since") == TestResponse.defaultLastModified)
                    let object = try #require(
                        try JSONSerialization.jsonObject(with: Data(again.stdout.utf8)) as? [String: Any])
                    #expect(object["httpStatus"] as? Int == 304)
                    #expect(object["notModified"] as? Bool == true)

                    server.setResponse("/feed", .serviceUnavailable(retryAfter: "120"))
                    let failed = try await ChildProcess.run(quaked, arguments)
                    #expect(failed.status == 1)
                    #expect(failed.stderr.contains("503 Service Unavailable"), "\(failed.stderr)")
                    let store = try QuakeStore(directory: dir)
                    defer { try? store.close() }
                    let state = try #require(try store.feedState(url: server.url("/feed")))
                    #expect(state.consecutiveFailures == 0 && state.nextAttempt == nil, "no backoff saved: \(state)")
                }
            }
        }

        @Test("a bad feed is a configuration error (exit 78) naming the key")
        func badFeedArgument() async throws {
            let result = try await ChildProcess.run(
                quaked, ["--once", "--feed", "ftp://example.org/x", "--state-directory", "/nonexistent"])
            #expect(result.status == 78)
            #expect(result.stderr.contains("feed (--feed)"))
            #expect(result.stderr.contains("not a feed"))
        }

        @Test("SIGKILL in the middle of a large import leaves the previous contents and history")
        func killMidImport() async throws {
            try await FeedTestServer.withServer { server in
                try await withTemporaryDirectory { dir in
                    // The previous contents: one real feed.
                    let seed = try await ChildProcess.run(
                        quaked,
                        [
                            "--once", "--feed", Fixtures.usgs("rodu__quakemap__all_day.geojson").absoluteString,
                            "--state-directory", dir.path,
                        ])
                    #expect(seed.status == 0, "\(seed.stderr)")
                    let before = try snapshot(dir)

                    // A large feed that stops after 90%: the import is mid-transaction when killed.
                    let big = Fixtures.usgs("heltond__earthquakes__query.geojson")
                    let size = try Data(contentsOf: big).count
                    server.setResponse(
                        "/big.geojson", TestResponse.feed(big).uncompressed().stalled(afterBytes: size * 9 / 10))
                    let child = try ChildProcess(
                        quaked, ["--once", "--feed", server.url("/big.geojson"), "--state-directory", dir.path])
                    try await server.waitForRequests("/big.geojson", count: 1)
                    // Wait until the importer holds SQLite's write lock: it has written rows inside its
                    // open transaction and now waits for the rest of the body.
                    try await waitUntil(timeout: .seconds(20)) { try writeLockIsHeld(dir) }
                    try await Task.sleep(for: .milliseconds(200))
                    child.signal(SIGKILL)
                    #expect(try await child.wait() == 128 + SIGKILL)

                    #expect(try snapshot(dir) == before)
                    // And the store takes the next import normally.
                    let again = try await ChildProcess.run(
                        quaked, ["--once", "--feed", big.absoluteString, "--state-directory", dir.path, "--json"])
                    #expect(again.status == 0, "\(again.stderr)")
                    #expect(try QuakeStore(directory: dir).head() == 2)
                }
            }
        }

        private func snapshot(_ dir: URL) throws -> [String] {
            let store = try QuakeStore(directory: dir)
            defer { try? store.close() }
            let page = try store.history(after: 0, limit: 1000)
            return try store.allQuakes().map { "\($0.id) \($0.updated ?? 0) \($0.mag ?? -99)" }
                + page.transactions.map { "t\($0.token) \($0.inserted) \($0.changes.count)" } + [
                    "head \(try store.head())"
                ]
        }
    }
}

/// Whether another connection holds the store's write lock (a write transaction is open).
func writeLockIsHeld(_ dir: URL) throws -> Bool {
    var configuration = Configuration()
    configuration.busyMode = .immediateError
    let queue = try DatabaseQueue(
        path: dir.appendingPathComponent(QuakeStore.fileName).path, configuration: configuration)
    do {
        try queue.inDatabase { db in
            try db.execute(sql: "BEGIN IMMEDIATE")
            try db.execute(sql: "ROLLBACK")
        }
        return false
    } catch let error as DatabaseError where error.resultCode == .SQLITE_BUSY {
        return true
    }
}

/// Polls `condition` every 50 ms until it holds; throws after `timeout`.
func waitUntil(timeout: Duration, _ condition: () async throws -> Bool) async throws {
    let deadline = ContinuousClock.now + timeout
    while try await !condition() {
        guard ContinuousClock.now < deadline else { throw WaitTimedOut() }
        try await Task.sleep(for: .milliseconds(50))
    }
}

struct WaitTimedOut: Error {}
