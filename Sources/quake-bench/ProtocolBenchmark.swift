import ArgumentParser
import Foundation
import QuakeClient
import QuakeProtocol
import Varlink
import QuakeStore
import QuakeTestSupport

#if canImport(Glibc)
    import Glibc
#endif

/// FetchHistory catch-up throughput, fan-out latency (commit to receipt at 1, 100 and 1,000
/// subscribers) and `quakectl watch` applying a catch-up to its cache, against real quaked and
/// quakectl processes; each figure beside a peer measured in the same run.
struct ProtocolBenchmark: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "protocol",
        abstract: "FetchHistory catch-up, notification fan-out latency and quakectl watch's cache apply.")

    @Option(help: "History changes for the catch-up measurements.")
    var changes = 100_000

    @Option(
        help: "Notifications measured per subscriber count (after one warm-up round): 1 to \(ProtocolBenchmark.maxRounds).")
    var rounds = 50

    @Flag(help: "Print one JSON object with the figures (progress goes to stderr).")
    var json = false

    @Option(help: "Keep the working directory (store, caches) here, for profiling.")
    var keep: String?

    @Option(
        help: ArgumentHelp(
            "Runs of quakectl watch's catch-up and of its peer, alternated; the ratio is their median.",
            discussion: "One run of each lasts well under a second, so a single pair scatters with the machine's load."))
    var applyRuns = 5

    func validate() throws {
        guard applyRuns >= 1 else { throw ValidationError("--apply-runs must be at least 1 (got \(applyRuns)).") }
        guard (1...Self.maxRounds).contains(rounds) else {
            throw ValidationError(
                "--rounds must be 1 to \(Self.maxRounds) (got \(rounds)): each round, and the warm-up, deletes one of the "
                    + "store's \(Self.quakeCount) quakes for each of the \(Self.subscriberCounts.count) subscriber counts.")
        }
    }

    /// The quakes in the benchmark's store: each round of history writes all of them.
    static let quakeCount = 1000
    /// The fan-out's subscriber counts.
    static let subscriberCounts = [1, 100, 1000]
    /// As many rounds as the store has quakes to delete: one a round (and one for the warm-up)
    /// for each subscriber count.
    static var maxRounds: Int { quakeCount / subscriberCounts.count - 1 }

    /// What --json prints.
    struct Figures: Encodable {
        struct CatchUp: Encodable {
            var changes: Int
            var seconds: Double
            var changesPerSecond: Double
            var peerChangesPerSecond: Double
            /// The same history through a filter (minMagnitude 3: about half the quakes, with
            /// enters and leaves as magnitudes cross it): history changes covered per second, the
            /// changes sent, and the ratio to the unfiltered throughput.
            var filteredChangesPerSecond: Double
            var filteredChangesSent: Int
            var filteredRatio: Double
        }
        struct FanOut: Encodable {
            var subscribers: Int
            var p50Ms: Double
            var p99Ms: Double
            /// quaked's own share, from its `quaked_notification_latency_seconds` (sum / count over
            /// the measured rounds): the mean time from the commit until every subscriber had been
            /// offered the change (its frame handed to the socket, or left in its slot).
            var daemonMeanMs: Double
        }
        struct ClientApply: Encodable {
            var changes: Int
            /// The `quakectl watch` process catching up; since it resumes from the cache's
            /// position, it also formats and prints every change (into a pipe). The median of
            /// `--apply-runs` runs, as is the peer's figure.
            var seconds: Double
            var changesPerSecond: Double
            var peerChangesPerSecond: Double
            /// Each run's `quakectl watch` changes/s over the peer's rows/s of the run beside it
            /// (the two alternated), and their median: the figure the goal of 0.5 is read from.
            var ratios: [Double]
            var medianRatio: Double
            /// The apply path alone: the Watcher and its ``QuakeCache`` in the benchmark's process
            /// (FetchHistory, decoding, each page committed with its position), nothing printed.
            var applySeconds: Double
            var applyChangesPerSecond: Double
            /// The floor under both: the same pages fetched and decoded by QuakeClient, not applied,
            /// each asked for once the one before is decoded.
            var decodeChangesPerSecond: Double
        }
        var catchup: CatchUp
        var fanout: [FanOut]
        var clientApply: ClientApply
    }

    /// Progress and the human-readable report: stdout, or stderr with --json.
    func say(_ text: String) {
        if json {
            FileHandle.standardError.write(Data((text + "\n").utf8))
        } else {
            print(text)
        }
    }

    func run() async throws {
        var limit = rlimit()
        getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        limit.rlim_cur = limit.rlim_max
        setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)

        let work =
            keep.map { URL(fileURLWithPath: $0) }
            ?? URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("quake-bench-protocol-\(getpid())")
        try? FileManager.default.removeItem(at: work)
        try FileManager.default.createDirectory(at: work, withIntermediateDirectories: true)
        defer { if keep == nil { try? FileManager.default.removeItem(at: work) } }
        let state = work.appendingPathComponent("state")

        // History: `changes` changes in transactions of 1,000 (one insert round, then updates).
        say("writing \(changes) history changes …")
        let perRound = Self.quakeCount
        let store = try QuakeStore(directory: state)
        for round in 0..<max(1, changes / perRound) {
            let json = Self.feed(round: round, count: perRound)
            _ = try await store.importFeed(source: "bench://round\(round)") { sink in
                try await sink.send(Array(json.utf8))
            }
        }
        try store.close()

        let quaked = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
            .deletingLastPathComponent()
            .appendingPathComponent("quaked").path
        guard FileManager.default.isExecutableFile(atPath: quaked) else {
            throw ValidationError("build quaked next to quake-bench first: swift build -c release")
        }
        let socket = work.appendingPathComponent("q.sock").path
        let daemon = try ChildProcess(
            quaked,
            [
                "--state-directory", state.path, "--socket", socket, "--feed", "file:///nonexistent.geojson", "--interval",
                "1h",
                "--log-level", "error",
            ])
        defer { daemon.signal(SIGTERM) }
        let deadline = ContinuousClock.now + .seconds(20)
        while !UnixSocketClient.canConnect(socket) {
            guard ContinuousClock.now < deadline else { throw ValidationError("quaked did not start") }
            try await Task.sleep(for: .milliseconds(50))
        }

        let catchUp = try catchUp(socket: socket, state: state)
        say("")
        let apply = try await clientApply(socket: socket, quakectl: URL(fileURLWithPath: quaked).deletingLastPathComponent().appendingPathComponent("quakectl").path, work: work)
        say("")
        let fanOut = try fanOut(socket: socket)
        if json {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys]
            print(String(decoding: try encoder.encode(Figures(catchup: catchUp, fanout: fanOut, clientApply: apply)), as: UTF8.self))
        }
    }

    /// A feed of `count` features whose content depends on `round`, so every round updates every row.
    static func feed(round: Int, count: Int) -> String {
        var features: [String] = []
        features.reserveCapacity(count)
        for i in 0..<count {
            let mag = Double((i * 7 + round * 13) % 60) / 10
            features.append(
                #"{"type":"Feature","properties":{"mag":\#(mag),"place":"\#(i) km N of Benchtown","time":\#(1_700_000_000_000 + i * 1000),"updated":\#(1_700_000_000_000 + round * 60_000),"status":"automatic","tsunami":0,"sig":\#(i % 1000),"net":"bn","code":"\#(i)","ids":",bn\#(i),","type":"earthquake","title":"M \#(mag) - bench"},"geometry":{"type":"Point","coordinates":[\#(Double(i % 360) - 180),\#(Double(i % 180) - 90),10]},"id":"bn\#(i)"}"#
            )
        }
        return #"{"type":"FeatureCollection","metadata":{"count":\#(count)},"features":["#
            + features.joined(separator: ",") + "]}"
    }

    /// Pages through the whole history with FetchHistory (with `filter`, a JSON Filter, if
    /// given): the changes received and the time taken.
    private func fetchAll(socket: String, filter: String?) throws -> (changes: Int, seconds: Double) {
        let client = try UnixSocketClient(path: socket)
        var after = 0
        var received = 0
        let started = ContinuousClock.now
        let filterMember = filter.map { #","filter":"# + $0 } ?? ""
        // The reply text is scanned, not parsed into objects: the figure is the daemon's
        // (reading history, encoding it, writing it), not this client's JSON parser.
        while true {
            try client.send(
                #"{"method":"\#(IOQuaked.FetchHistory.name)","parameters":{"after":\#(after),"limit":1000,"maxChanges":10000\#(filterMember)}}"#
            )
            // An error reply begins with its "error" member.
            guard let reply = try client.receiveBytes(timeout: .seconds(60)), !reply.starts(with: #"{"error""#.utf8)
            else {
                throw ValidationError("FetchHistory failed")
            }
            received += Self.occurrences(of: #""kind":"#, in: reply)
            // The page's scalars come after the long "transactions" array (quaked writes them once
            // the page is read): look for them at the end.
            let tail = String(decoding: reply.suffix(400), as: UTF8.self)
            guard let next = Int(Self.field("nextAfter", in: tail) ?? "") else {
                throw ValidationError("FetchHistory reply without nextAfter")
            }
            after = next
            if Self.field("hasMore", in: tail) != "true" { break }
        }
        return (received, (ContinuousClock.now - started).inSeconds)
    }

    private func catchUp(socket: String, state: URL) throws -> Figures.CatchUp {
        let (received, quaked) = try fetchAll(socket: socket, filter: nil)
        let filtered = try fetchAll(socket: socket, filter: #"{"minMagnitude":3.0}"#)
        let filteredRate = Double(received) / filtered.seconds

        // Peer: the same changes read straight from the database file with Python's sqlite3.
        let script = """
            import sqlite3, sys, time, json
            t = time.monotonic()
            db = sqlite3.connect("file:" + sys.argv[1] + "?mode=ro", uri=True)
            rows = db.execute("SELECT c.token, c.quakeId, c.kind, c.fields, q.* FROM historyChanges c LEFT JOIN quakes q ON q.id = c.quakeId ORDER BY c.token, c.quakeId").fetchall()
            print(json.dumps({"changes": len(rows), "seconds": time.monotonic() - t}))
            """
        let peer = try ChildProcessRun.python(script, arguments: [state.appendingPathComponent("quakes.sqlite").path])
        say("catch-up: FetchHistory of \(received) changes")
        say(
            String(
                format: "  quaked FetchHistory (paged, JSON over the socket): %.2f s, %.0f changes/s", quaked,
                Double(received) / quaked))
        say(
            String(
                format: "  peer: python sqlite3 reading the same rows from the file: %.2f s, %.0f changes/s",
                peer.seconds, Double(peer.changes) / peer.seconds))
        say(
            String(
                format: "  ratio (quaked / peer throughput): %.2f",
                (Double(received) / quaked) / (Double(peer.changes) / peer.seconds)))
        say(
            String(
                format:
                    "  filtered (minMagnitude 3): %.2f s, %.0f history changes/s, %d changes sent; %.2f of the unfiltered throughput",
                filtered.seconds, filteredRate, filtered.changes, filteredRate / (Double(received) / quaked)))
        return Figures.CatchUp(
            changes: received, seconds: quaked, changesPerSecond: Double(received) / quaked,
            peerChangesPerSecond: Double(peer.changes) / peer.seconds, filteredChangesPerSecond: filteredRate,
            filteredChangesSent: filtered.changes, filteredRatio: filteredRate / (Double(received) / quaked))
    }

    /// The catch-up into `watch`'s cache: a cache empty at token 0 of the store catches up through
    /// every change with FetchHistory, applying each page to the cache, timed until the
    /// cache's position reaches the head. Measured twice: the Watcher with its ``QuakeCache`` in
    /// this process, printing nothing (the apply path: fetching, decoding, applying, committing),
    /// and a `quakectl watch` process, which since it resumes from the cache's position also
    /// formats and prints every change (into a pipe). Peer: Python's sqlite3 writing the same
    /// number of rows (id, time, mag, JSON) into a table of the same shape, in one transaction.
    private func clientApply(socket: String, quakectl: String, work: URL) async throws -> Figures.ClientApply {
        let state = work.appendingPathComponent("state")
        let store = try QuakeStore(directory: state)
        let (storeID, head) = (store.storeID, try store.head())
        let changeCount = try store.history(after: 0, limit: 100_000).transactions.reduce(0) { $0 + $1.changes.count }
        try store.close()

        func emptyCache(_ name: String) throws -> (path: String, cache: QuakeCache) {
            let path = work.appendingPathComponent(name).path
            let cache = try QuakeCache(path: path)
            try cache.beginReset()
            try cache.finishReset(storeId: storeID, token: 0)
            return (path, cache)
        }

        // The apply path: the Watcher in this process, its handler doing nothing.
        let (_, cache) = try emptyCache("apply-cache.sqlite")
        var options = Watcher.Options(socketPath: socket)
        options.sinceNow = true
        let watcher = Watcher(options: options, cache: cache)
        let stop = WatchStop()
        var started = ContinuousClock.now
        let running = Task { try await watcher.run(stop: stop) { _ in } }
        while try cache.position()?.token != Int(head) {
            guard ContinuousClock.now - started < .seconds(300) else { throw ValidationError("the watcher took too long") }
            try await Task.sleep(for: .milliseconds(5))
        }
        let seconds = (ContinuousClock.now - started).inSeconds
        await stop.request()
        try await running.value
        try cache.close()

        // The floor under both: the same pages fetched and decoded by QuakeClient, not applied, in
        // one FetchHistory call made with more as the Watcher makes it (quaked reads and writes
        // page n + 1 while page n is decoded here).
        let connection = try await QuakedConnection.connect(to: socket)
        started = ContinuousClock.now
        // The sequence ends with the page that has hasMore false.
        for try await _ in try await connection.fetchHistoryPages(
            storeId: storeID, after: 0, limit: options.pageLimit, maxChanges: Watcher.pageChanges)
        {}
        let decodeSeconds = (ContinuousClock.now - started).inSeconds
        await connection.close()

        // quakectl watch, printing every change, and its peer, alternated --apply-runs times:
        // each run lasts well under a second, so one pair alone scatters with the machine's load.
        let script = """
            import sqlite3, sys, time, json, os
            n = int(sys.argv[2])
            rows = [("q%d" % i, 1700000000000 + i, 1.5, json.dumps({"id": "q%d" % i, "time": 1700000000000 + i, "mag": 1.5, "place": "%d km N of Benchtown" % i})) for i in range(n)]
            db = sqlite3.connect(sys.argv[1])
            db.execute("PRAGMA journal_mode=WAL"); db.execute("PRAGMA synchronous=NORMAL")
            db.execute("CREATE TABLE quakes (id TEXT PRIMARY KEY NOT NULL, time INTEGER NOT NULL, mag REAL, quake TEXT NOT NULL) WITHOUT ROWID")
            db.execute("CREATE INDEX quakes_time ON quakes(time)")
            t = time.monotonic()
            with db:
                db.executemany("INSERT OR REPLACE INTO quakes VALUES (?, ?, ?, ?)", rows)
            print(json.dumps({"changes": n, "seconds": time.monotonic() - t}))
            """
        var watchRuns: [Double] = []
        var peerRuns: [Double] = []
        for run in 0..<applyRuns {
            let (path, watchCache) = try emptyCache("watch-cache-\(run).sqlite")
            started = ContinuousClock.now
            let watch = try ChildProcess(quakectl, ["watch", "--since", "now", "--cache", path, "--socket", socket])
            defer { watch.signal(SIGTERM) }
            while try watchCache.position()?.token != Int(head) {
                guard watch.isRunning else { throw ValidationError("quakectl watch exited: \(watch.stderr)") }
                guard ContinuousClock.now - started < .seconds(300) else { throw ValidationError("watch took too long") }
                try await Task.sleep(for: .milliseconds(5))
            }
            watchRuns.append((ContinuousClock.now - started).inSeconds)
            try watchCache.close()
            // Gone before its peer runs (it exits 0 on SIGTERM).
            watch.signal(SIGTERM)
            try await watch.wait(timeout: .seconds(30))
            let peerPath = work.appendingPathComponent("peer-cache-\(run).sqlite").path
            let peer = try ChildProcessRun.python(script, arguments: [peerPath, "\(changeCount)"])
            peerRuns.append(Double(peer.changes) / peer.seconds)
        }
        let ratios = zip(watchRuns, peerRuns).map { Double(changeCount) / $0 / $1 }
        let medianRatio = Self.percentile(ratios, 0.5)
        let watchSeconds = Self.percentile(watchRuns, 0.5)
        let peerRate = Self.percentile(peerRuns, 0.5)
        say("client apply: catching up \(changeCount) changes into watch's cache")
        say(
            String(
                format: "  Watcher + QuakeCache (fetch, decode, apply; nothing printed): %.2f s, %.0f changes/s",
                seconds, Double(changeCount) / seconds))
        say(
            String(
                format: "  FetchHistory fetched and decoded by QuakeClient, not applied: %.2f s, %.0f changes/s",
                decodeSeconds, Double(changeCount) / decodeSeconds))
        say(
            String(
                format: "  quakectl watch (also printing every change): %.2f s, %.0f changes/s (median of %d runs)",
                watchSeconds, Double(changeCount) / watchSeconds, watchRuns.count))
        say(
            String(
                format:
                    "  peer: python sqlite3 writing as many rows in one transaction: %.0f rows/s (median; runs alternated with the watch's)",
                peerRate))
        say(
            "  quakectl watch / peer, each run: "
                + ratios.map { String(format: "%.2f", $0) }.joined(separator: " "))
        say(
            String(
                format: "  ratio to the peer: apply %.2f, quakectl watch %.2f (median of the runs' ratios)",
                Double(changeCount) / seconds / peerRate, medianRatio))
        return Figures.ClientApply(
            changes: changeCount, seconds: watchSeconds, changesPerSecond: Double(changeCount) / watchSeconds,
            peerChangesPerSecond: peerRate, ratios: ratios, medianRatio: medianRatio, applySeconds: seconds, applyChangesPerSecond: Double(changeCount) / seconds,
            decodeChangesPerSecond: Double(changeCount) / decodeSeconds)
    }

    private func fanOut(socket: String) throws -> [Figures.FanOut] {
        // Peer: a plain request/reply round trip on the same socket.
        let rpc = try UnixSocketClient(path: socket)
        var roundTrips: [Double] = []
        for _ in 0..<200 {
            let t = ContinuousClock.now
            _ = try rpc.call(OrgVarlinkService.GetInfo.name)
            roundTrips.append((ContinuousClock.now - t).inSeconds * 1000)
        }
        let rtt = Self.percentile(roundTrips, 0.5)
        say(String(format: "fan-out: commit to receipt (peer: GetInfo round trip p50 %.3f ms)", rtt))
        say("  subscribers      p50 ms      p99 ms   p50 / round trip   quaked's share (mean ms)")
        var figures: [Figures.FanOut] = []
        var deleteIndex = 0
        for count in Self.subscriberCounts {
            var subscribers: [UnixSocketClient] = []
            for _ in 0..<count {
                let client = try UnixSocketClient(path: socket)
                try client.send(
                    #"{"method":"\#(IOQuaked.Subscribe.name)","parameters":{"heartbeatSeconds":3600},"more":true}"#)
                _ = try client.receive()
                subscribers.append(client)
            }
            var latencies: [Double] = []
            var daemonBefore = (sum: 0.0, count: 0.0)
            for round in 0...rounds {
                // The first round warms up the new connections; it is not counted.
                if round == 1 { daemonBefore = try Self.notificationLatency(rpc) }
                let started = ContinuousClock.now
                // One committed transaction: delete one quake. Its reply is read after the
                // notifications: a round waiting for it first would see none of them until it
                // came, and a reply written after the fan-out (its connection's loop writes
                // subscribers' frames too) would date every receipt of the round at its own.
                try rpc.send(#"{"method":"\#(IOQuaked.Delete.name)","parameters":{"ids":["bn\#(deleteIndex)"]}}"#)
                deleteIndex += 1
                let measured = try Self.waitForAll(subscribers, since: started)
                guard let reply = try rpc.receive(), !reply.contains(#""error""#) else {
                    throw ValidationError("Delete of bn\(deleteIndex - 1) failed")
                }
                if round > 0 { latencies += measured }
            }
            let daemonAfter = try Self.notificationLatency(rpc)
            let daemonMean = (daemonAfter.sum - daemonBefore.sum) / max(1, daemonAfter.count - daemonBefore.count) * 1000
            say(
                String(
                    format: "  %11d %11.3f %11.3f %14.1fx %20.3f", count, Self.percentile(latencies, 0.5),
                    Self.percentile(latencies, 0.99), Self.percentile(latencies, 0.5) / rtt, daemonMean))
            figures.append(
                .init(
                    subscribers: count, p50Ms: Self.percentile(latencies, 0.5), p99Ms: Self.percentile(latencies, 0.99),
                    daemonMeanMs: daemonMean))
        }
        return figures
    }

    /// Milliseconds from `since` until each subscriber's "changed" reply became readable.
    static func waitForAll(_ subscribers: [UnixSocketClient], since: ContinuousClock.Instant) throws -> [Double] {
        try PushBenchmark.waitForAll(subscribers, since: since, timeout: 10_000).0
    }

    /// quaked's `quaked_notification_latency_seconds` sum and count now.
    static func notificationLatency(_ rpc: UnixSocketClient) throws -> (sum: Double, count: Double) {
        let reply = try rpc.call(IOQuaked.Metrics.name)
        let text = (reply["parameters"] as? [String: Any])?["text"] as? String ?? ""
        var sum = 0.0
        var count = 0.0
        for line in text.split(separator: "\n") where line.hasPrefix("quaked_notification_latency_seconds_") {
            let parts = line.split(separator: " ")
            guard parts.count >= 2, let value = Double(parts[1]) else { continue }
            if parts[0] == "quaked_notification_latency_seconds_sum" { sum = value }
            if parts[0] == "quaked_notification_latency_seconds_count" { count = value }
        }
        return (sum, count)
    }

    /// The raw value of a top-level scalar field in a reply (`"name":value`).
    static func field(_ name: String, in text: String) -> String? {
        guard let range = text.range(of: "\"\(name)\":") else { return nil }
        return String(text[range.upperBound...].prefix { $0 != "," && $0 != "}" })
    }

    /// Occurrences of an ASCII pattern in a reply's bytes, found with memchr and memcmp: the
    /// figure is meant to be the daemon's, so the client's own scan must cost next to nothing.
    static func occurrences(of pattern: String, in bytes: [UInt8]) -> Int {
        let needle = Array(pattern.utf8)
        var count = 0
        var offset = 0
        while let at = firstOffset(of: needle, in: bytes, from: offset) {
            count += 1
            offset = at + needle.count
        }
        return count
    }

    /// Where `needle` first starts in `bytes` at or after `start`, found with memchr and memcmp.
    static func firstOffset(of needle: [UInt8], in bytes: [UInt8], from start: Int = 0) -> Int? {
        bytes.withUnsafeBytes { haystack -> Int? in
            guard let base = haystack.baseAddress, let first = needle.first else { return nil }
            var offset = start
            while haystack.count - offset >= needle.count,
                let found = memchr(base + offset, Int32(first), haystack.count - offset - needle.count + 1)
            {
                let at = base.distance(to: UnsafeRawPointer(found))
                if memcmp(found, needle, needle.count) == 0 { return at }
                offset = at + 1
            }
            return nil
        }
    }

    static func percentile(_ values: [Double], _ p: Double) -> Double {
        let sorted = values.sorted()
        guard !sorted.isEmpty else { return .nan }
        return sorted[min(sorted.count - 1, Int((Double(sorted.count - 1) * p).rounded()))]
    }

}

/// Runs a Python snippet that prints {"changes": N, "seconds": S}.
enum ChildProcessRun {
    static func python(_ script: String, arguments: [String]) throws -> (changes: Int, seconds: Double) {
        let run = try MeasuredProcess.run(["python3", "-c", script] + arguments)
        let object = try JSONSerialization.jsonObject(with: Data(run.stdout.utf8)) as? [String: Any] ?? [:]
        return (object["changes"] as? Int ?? 0, object["seconds"] as? Double ?? .nan)
    }
}
