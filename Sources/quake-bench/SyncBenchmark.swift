import ArgumentParser
import Foundation
import QuakeClient
import QuakePostgres
import QuakeProtocol
import QuakeTestSupport

#if canImport(Glibc)
    import Glibc
#endif

/// `quakectl sync` into a real PostgreSQL with PostGIS (started here, fsync on), against psql's
/// `\copy` of the same rows into a table of the same shape (the peer: what PostgreSQL itself
/// takes). Prints, per round:
/// - the first load of a store of `--features` quakes: from quakectl's start to the reset's
///   commit (connecting, creating the table, the snapshot from quaked, COPY, the commit), rows/s
///   (goal: at least 50,000), and the peer's time;
/// - live transactions (one Delete call each, `--live` of them, one every `--interval` ms):
///   milliseconds from quaked's commit (the transaction's timestamp) to PostgreSQL's (COMMIT
///   returned in quakectl): median, p99 (goal: at most 50) and the largest;
/// - quakectl's memory: its peak RSS after the first load, and its RSS after each tenth of the
///   live transactions (goal: flat, growing by no more than a few MiB).
/// The goals are reported, never asserted.
struct SyncBenchmark: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sync", abstract: "quakectl sync into PostgreSQL/PostGIS vs psql \\copy of the same rows.")

    @Option(help: "Quakes in the store (a synthetic feed imported with quaked --once).")
    var features = 100_000

    @Option(help: "Live transactions per round.")
    var live = 500

    @Option(help: "Milliseconds between live transactions.")
    var interval = 20

    @Option(help: "Rounds.")
    var runs = 3

    @Option(help: "Working directory for the feed and the store (default: a temp directory).")
    var work: String?

    static let rowsGoal = 50_000.0
    static let p99GoalMs = 50.0

    func validate() throws {
        guard runs >= 1, features >= 1, live >= 10, interval >= 0 else {
            throw ValidationError("--runs and --features must be at least 1, --live at least 10")
        }
    }

    func run() async throws {
        let bin = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent()
        let quaked = bin.appendingPathComponent("quaked").path
        let quakectl = bin.appendingPathComponent("quakectl").path
        guard FileManager.default.isExecutableFile(atPath: quaked), FileManager.default.isExecutableFile(atPath: quakectl)
        else {
            throw ValidationError(
                "build quaked and quakectl next to quake-bench first: swift build -c release --scratch-path .build-release")
        }
        let workDir = try SyntheticFeed.workDirectory(work)
        let (feed, _) = try SyntheticFeed.make(features: features, in: workDir)
        let base = workDir.appendingPathComponent("sync-\(getpid())")
        try FileManager.default.createDirectory(at: base, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: base) }
        let state = base.appendingPathComponent("state")
        let imported = try MeasuredProcess.run([
            quaked, "--once", "--state-directory", state.path, "--socket", base.appendingPathComponent("once.sock").path,
            "--feed", feed.absoluteString,
        ])
        guard imported.status == 0 else { throw ValidationError("quaked --once failed (exit \(imported.status))") }
        let empty = base.appendingPathComponent("empty.geojson")
        try #"{"type":"FeatureCollection","metadata":{},"features":[]}"#.write(to: empty, atomically: true, encoding: .utf8)
        let socket = base.appendingPathComponent("q.sock").path
        let daemon = try ChildProcess(
            quaked, ["--state-directory", state.path, "--socket", socket, "--feed", empty.absoluteString, "--interval", "1h"])
        defer { daemon.signal(SIGKILL) }
        let connection = try await Self.connect(socket)
        let pg = try await PostgresTestServer.start(fsync: true)
        defer { Task { try? await pg.kill() } }
        print(
            "PostgreSQL \(try pg.psql("SHOW server_version")) at 127.0.0.1:\(pg.port) (fsync on), PostGIS \(pg.hasPostGIS ? "installed" : "missing"); quaked and quakectl: \(bin.path)"
        )
        var ids = try await connection.snapshotQuakes().map(\.id).shuffled()[...]

        var loads: [Double] = []
        var peers: [Double] = []
        var latencies: [Double] = []
        var peaks: [Double] = []
        var growths: [Double] = []
        for round in 1...runs {
            let database = "bench_\(round)"
            try pg.psql("CREATE DATABASE \(database)", database: "postgres")
            if pg.hasPostGIS { try pg.psql("CREATE EXTENSION postgis", database: database) }
            let url = "postgresql://postgres@127.0.0.1:\(pg.port)/\(database)?sslmode=disable"

            // The peer: the same rows, as COPY text, into a table of the same shape.
            let settings = try PostgresSettings.resolve(url: url, environment: [:])
            let rows = try await connection.snapshotQuakes()
            let copyFile = base.appendingPathComponent("rows.copy")
            try Data(PostgresSink.copyText(rows)).write(to: copyFile)
            // As sync loads a new table: created, loaded and indexed in one transaction.
            let create = PostgresSink.createTableSQL(table: "peer", geometry: pg.hasPostGIS)
            let columns = PostgresSink.columnNames.map { "\"\($0)\"" }.joined(separator: ", ")
            let script = base.appendingPathComponent("peer.sql")
            try (["BEGIN;", create.table + ";", "\\copy peer (\(columns)) FROM '\(copyFile.path)'"]
                + create.indexes.map { $0 + ";" } + ["COMMIT;"]).joined(separator: "\n")
                .write(to: script, atomically: true, encoding: .utf8)
            let peerStart = ContinuousClock.now
            try pg.psql(file: script.path, database: database)
            let peer = (ContinuousClock.now - peerStart).inSeconds
            peers.append(peer)

            // The first load.
            let started = ContinuousClock.now
            let sync = try ChildProcess(quakectl, ["sync", "--socket", socket, "--to", url, "--json"])
            defer { sync.signal(SIGKILL) }
            try await Self.wait(timeout: .seconds(600)) {
                guard sync.isRunning else { throw ValidationError("quakectl sync exited: \(sync.stderr)") }
                return sync.stdout.contains(#""event":"reset""#)
            }
            let load = (ContinuousClock.now - started).inSeconds
            loads.append(load)
            let count = Int(try pg.psql("SELECT count(*) FROM quakes", database: database)) ?? 0
            let afterLoad = Self.memory(of: sync.pid)
            peaks.append(afterLoad.peakMiB)
            print(
                String(
                    format: "round %d: first load of %d rows in %.2f s: %.0f rows/s (peer \\copy %.2f s: %.0f rows/s); quakectl peak RSS %.1f MiB",
                    round, count, load, Double(count) / load, peer, Double(count) / peer, afterLoad.peakMiB))
            guard count == rows.count, settings.database == database else {
                throw ValidationError("the table holds \(count) rows, the store \(rows.count)")
            }

            // Live transactions: one Delete each.
            var samples: [Double] = [afterLoad.rssMiB]
            let before = sync.stdout.split(separator: "\n").count
            for index in 0..<live {
                guard let id = ids.popFirst() else { break }
                _ = try await connection.delete(ids: [id])
                if interval > 0 { try await Task.sleep(for: .milliseconds(interval)) }
                if (index + 1) % max(1, live / 10) == 0 { samples.append(Self.memory(of: sync.pid).rssMiB) }
            }
            try await Self.wait(timeout: .seconds(60)) { sync.stdout.split(separator: "\n").count >= before + live }
            let applied = sync.stdout.split(separator: "\n").dropFirst(before).compactMap { line -> Double? in
                guard let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
                    object["event"] as? String == "applied", let committed = object["committedAt"] as? Int,
                    let appliedAt = object["appliedAt"] as? Int
                else { return nil }
                return Double(appliedAt - committed)
            }
            latencies += applied
            let sorted = applied.sorted()
            let growth = (samples.last ?? 0) - samples[0]
            growths.append(growth)
            print(
                String(
                    format: "round %d: %d live transactions, quaked's commit to PostgreSQL's: median %.0f ms, p99 %.0f ms, max %.0f ms; quakectl RSS %@ MiB",
                    round, applied.count, ProtocolBenchmark.percentile(sorted, 0.5), ProtocolBenchmark.percentile(sorted, 0.99), sorted.last ?? 0,
                    samples.map { String(format: "%.1f", $0) }.joined(separator: " → ")))
            sync.signal(SIGTERM)
            _ = try await sync.wait(timeout: .seconds(30))
        }
        let median = BackfillBenchmark.median
        let rate = Double(features) / median(loads)
        let p99 = ProtocolBenchmark.percentile(latencies, 0.99)
        print("")
        print(
            String(
                format: "first load: median %.2f s, %.0f rows/s (goal ≥ %.0f: %@); peer \\copy median %.2f s (sync takes %.2fx the peer's time)",
                median(loads), rate, Self.rowsGoal, rate >= Self.rowsGoal ? "met" : "NOT met", median(peers),
                median(loads) / median(peers)))
        print(
            String(
                format: "live: %d transactions, p99 %.0f ms from quaked's commit to PostgreSQL's (goal ≤ %.0f: %@), median %.0f ms",
                latencies.count, p99, Self.p99GoalMs, p99 <= Self.p99GoalMs ? "met" : "NOT met",
                ProtocolBenchmark.percentile(latencies, 0.5)))
        print(
            String(
                format: "quakectl memory: peak %.1f MiB after the first load; RSS growth over %d live transactions: %@ MiB",
                peaks.max() ?? 0, live, growths.map { String(format: "%+.1f", $0) }.joined(separator: ", ")))
        await connection.close()
    }

    static func connect(_ socket: String) async throws -> QuakedConnection {
        let deadline = ContinuousClock.now + .seconds(60)
        while true {
            do {
                return try await QuakedConnection.connect(to: socket)
            } catch {
                guard ContinuousClock.now < deadline else { throw error }
                try await Task.sleep(for: .milliseconds(100))
            }
        }
    }

    static func wait(timeout: Duration, _ condition: () throws -> Bool) async throws {
        let deadline = ContinuousClock.now + timeout
        while try !condition() {
            guard ContinuousClock.now < deadline else { throw ValidationError("timed out") }
            try await Task.sleep(for: .milliseconds(5))
        }
    }

    /// VmRSS and VmHWM of a process, in MiB.
    static func memory(of pid: Int32) -> (rssMiB: Double, peakMiB: Double) {
        func mib(_ field: String) -> Double {
            Double(BackfillBenchmark.statusBytes(pid: pid, field: field) ?? 0) / 1_048_576
        }
        return (mib("VmRSS"), mib("VmHWM"))
    }
}

extension QuakedConnection {
    /// Every quake of the store, from a snapshot.
    func snapshotQuakes() async throws -> [IOQuaked.Quake] {
        var quakes: [IOQuaked.Quake] = []
        for try await page in try await snapshot(pageSize: 5000) { quakes += page.quakes }
        return quakes
    }
}
