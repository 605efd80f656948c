import ArgumentParser
import Foundation
import GRDBSQLite
import QuakeAssociation
import QuakeModel
import QuakeModelCheck
import QuakeStore

/// `quake-bench associate`: the association engine's speed. Synthetic, seeded reports of one month
/// of quakes from three agencies (each quake reported by every agency, seconds and tens of
/// kilometres apart, arriving in the order the agencies publish them) are fed to an `Associator`
/// one item at a time; beside it, the same reports given as one source only (each its own event:
/// the same time index and neighbour lookups, no merging) — the single-source pass. Prints reports
/// per second of each and the ratio (goal: at least 0.5x), and checks the three-agency run found
/// one event per quake, each named after one of its reports (the own id of the report that founds
/// it: the first published, `emsc0`...). Then the store's open: the three-agency state's snapshot
/// (reports, events with members, tombstones) restored into a new associator, which must emit no
/// changes and give the same snapshot.
///
/// Then the store (unless `--no-store`), each a process of its own (`associate-child`, through
/// `measure-child`): the three agencies' reports imported through `QuakeStore.importSource` as
/// three sources, each run giving what the agency published in one `--interval` (the daemon's
/// default 60 s; a run without reports is not made), against a single-source import of as many
/// events: the same reports as one source through `importSource` in runs of the same interval,
/// and quaked's USGS GeoJSON store import (`import-once`) of the synthetic feed of as many
/// features, one transaction. Checks the three agencies' store holds one quake per quake, each
/// event with at most one report per source.
struct AssociateBenchmark: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "associate",
        abstract: "Association benchmark: three agencies against a single-source pass over the same reports.")

    @Option(help: "Reports in the synthetic set (a third each from three agencies).")
    var reports = 100_000

    @Option(help: "Days the quakes are spread over.")
    var days = 30.0

    @Option(help: "The seed of the synthetic set.")
    var seed: UInt64 = 42

    @Option(help: "Rounds: each runs the three agencies and the single source once; the best round of each counts.")
    var runs = 3

    @Option(help: "Store path: seconds of publications one source run gives (a source's interval).")
    var interval = 60.0

    @Option(help: "Store path: rounds (default: --runs).")
    var storeRuns: Int?

    @Option(help: "Working directory for the GeoJSON feed and the stores (default: a temp directory).")
    var work: String?

    @Flag(help: "Skip the store path (the engine alone).")
    var noStore = false

    func validate() throws {
        guard runs >= 1 else { throw ValidationError("--runs must be at least 1") }
        guard reports >= 3 else { throw ValidationError("--reports must be at least 3") }
        guard days > 0 else { throw ValidationError("--days must be positive") }
        guard interval > 0 else { throw ValidationError("--interval must be positive") }
        guard (storeRuns ?? 1) >= 1 else { throw ValidationError("--store-runs must be at least 1") }
    }

    func run() async throws {
        let items = Self.synthetic(reports: reports, days: days, seed: seed)
        let single = items.map { item -> SourceItem in
            guard case .report(var report) = item else { return item }
            report.id = "\(report.source)-\(report.id)"
            report.source = "one"
            return .report(report)
        }
        let quakes = (reports + 2) / 3
        print("associate: \(items.count) reports of \(quakes) quakes from 3 agencies over \(days) days (seed \(seed))")
        var best = (agencies: Double.infinity, single: Double.infinity, restore: Double.infinity)
        for round in 1...runs {
            let (agencySeconds, agencies) = Self.time(items)
            let (singleSeconds, singleSource) = Self.time(single)
            guard agencies.eventCount == quakes else {
                print("associate: the three agencies made \(agencies.eventCount) events of \(quakes) quakes")
                throw ExitCode(1)
            }
            guard singleSource.eventCount == items.count else {
                print("associate: the single source made \(singleSource.eventCount) events of \(items.count) reports")
                throw ExitCode(1)
            }
            // One source: every event's id is its report's id. Three: each quake's event is named
            // after one of its reports (the first published, emsc's).
            guard singleSource.events.allSatisfy({ $0.reports == [ReportKey(source: "one", id: $0.id)] }),
                agencies.events.allSatisfy({ event in event.reports.contains { $0.id == event.id } })
            else {
                print("associate: an event is not named after its founding report")
                throw ExitCode(1)
            }
            let snapshot = agencies.snapshot
            let restoreStarted = ContinuousClock.now
            let (restored, changes) = Associator.restore(snapshot, configuration: agencies.configuration)
            let restoreSeconds = Double((ContinuousClock.now - restoreStarted) / .microseconds(1)) / 1e6
            guard changes.isEmpty, restored.snapshot == snapshot else {
                print("associate: restoring the snapshot changed \(changes.count) events")
                throw ExitCode(1)
            }
            print(
                "round \(round) of \(runs): 3 agencies \(Self.rate(items.count, agencySeconds)), single source \(Self.rate(items.count, singleSeconds)), restore \(Self.rate(items.count, restoreSeconds))"
            )
            best = (min(best.agencies, agencySeconds), min(best.single, singleSeconds), min(best.restore, restoreSeconds))
        }
        let ratio = best.single / best.agencies
        print(
            """
            associate (best of \(runs)):
              3 agencies:     \(Self.rate(items.count, best.agencies)) (\(quakes) events)
              single source:  \(Self.rate(items.count, best.single)) (\(items.count) events)
              ratio:          \(String(format: "%.2f", ratio))x (goal: at least 0.5x) \(ratio >= 0.5 ? "met" : "NOT met")
              restore:        \(Self.rate(items.count, best.restore)) (the 3 agencies' snapshot, \(quakes) events, no changes)
            """)
        try engineInRuns()
        if !noStore { try storePath(quakes: quakes) }
    }

    /// The engine fed the three agencies' source runs (`--interval`), one `apply` per run, twice: on
    /// an associator no one else holds, and keeping the value before each run (as a caller that
    /// rolls back by keeping the old value would), so that every run's first mutation copies the
    /// associator's storage (copy-on-write) and the old copy is freed after it. The store holds
    /// neither between runs: each import restores the part of the store it touches.
    func engineInRuns() throws {
        let runs = Self.runs(
            Self.published(reports: reports, days: days, seed: seed), intervalMilliseconds: Int64(interval * 1000))
        let configuration = AssociationConfiguration(sourceOrder: ["usgs", "emsc", "gfz"])
        var seconds = (unique: Double.infinity, kept: Double.infinity)
        for keep in [false, true] {
            var associator = Associator(configuration: configuration)
            var kept: Associator?
            var changes = 0
            let started = ContinuousClock.now
            for run in runs {
                if keep { kept = associator }
                changes &+= associator.apply(run.items).count
            }
            let elapsed = (ContinuousClock.now - started).inSeconds
            precondition(changes > 0 && (kept == nil) == !keep)
            guard associator.eventCount == (reports + 2) / 3 else {
                print("associate: the runs made \(associator.eventCount) events")
                throw ExitCode(1)
            }
            if keep { seconds.kept = elapsed } else { seconds.unique = elapsed }
        }
        print(
            """
            engine in the \(runs.count) source runs of \(interval) s (one apply each):
              held by no one else:           \(Self.rate(reports, seconds.unique))
              the value before each run kept: \(Self.rate(reports, seconds.kept)) (kept for a rollback: every run copies the storage)
            """)
    }

    /// The store path: three agencies through importSource against a single source through
    /// importSource and against the GeoJSON store import, each a child process, `storeRuns` rounds.
    func storePath(quakes: Int) throws {
        let workDir = try SyntheticFeed.workDirectory(work)
        let feed = try SyntheticFeed.make(features: reports, in: workDir).url
        let base = workDir.appendingPathComponent("associate-\(getpid())")
        try? FileManager.default.removeItem(at: base)
        try FileManager.default.createDirectory(at: base, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: base) }
        let storeDir = base.appendingPathComponent("store")
        let me = CommandLine.arguments[0].hasPrefix("/") ? CommandLine.arguments[0] : "/proc/self/exe"
        let selfPath = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? me
        let common = ["--reports", "\(reports)", "--days", "\(days)", "--seed", "\(seed)", "--interval", "\(interval)"]

        struct Measured {
            var seconds: Double
            var rssMiB: Double
            var transactions: Int
            var json: [String: Any]
        }
        func child(_ argv: [String], seconds key: String?) throws -> Measured {
            try? FileManager.default.removeItem(at: storeDir)
            defer { try? FileManager.default.removeItem(at: storeDir) }
            let run = try MeasuredProcess.runIsolated(argv)
            guard run.status == 0, let json = QuakeMLBenchmark.jsonObject(run.stdout) else {
                print("associate: \(argv.dropFirst().joined(separator: " ")) failed (exit \(run.status))\n\(run.stdout)")
                throw ExitCode(1)
            }
            let seconds = key.flatMap { (json[$0] as? NSNumber)?.doubleValue } ?? run.wall.inSeconds
            return Measured(
                seconds: seconds, rssMiB: Double(run.maxRSSBytes) / 1_048_576,
                transactions: (json["transactions"] as? NSNumber)?.intValue ?? 1, json: json)
        }
        var agencies: [Measured] = []
        var single: [Measured] = []
        var geojson: [Measured] = []
        let rounds = storeRuns ?? runs
        print(
            "store: \(reports) reports through QuakeStore.importSource, a source run every \(interval) s of publications; "
                + "GeoJSON: \(feed.lastPathComponent) through import-once")
        for round in 1...rounds {
            let a = try child([selfPath, "associate-child", "agencies", storeDir.path] + common, seconds: "seconds")
            guard let made = (a.json["quakes"] as? NSNumber)?.intValue, made == quakes,
                (a.json["events"] as? NSNumber)?.intValue == quakes,
                (a.json["reports"] as? NSNumber)?.intValue == reports,
                (a.json["doubled"] as? NSNumber)?.intValue == 0
            else {
                print("associate: the three agencies' store is not one event per quake (\(quakes) quakes): \(a.json)")
                throw ExitCode(1)
            }
            let s = try child([selfPath, "associate-child", "single", storeDir.path] + common, seconds: "seconds")
            guard (s.json["quakes"] as? NSNumber)?.intValue == reports else {
                print("associate: the single source's store does not hold one quake per report: \(s.json)")
                throw ExitCode(1)
            }
            let g = try child([selfPath, "import-once", feed.path, storeDir.path], seconds: nil)
            guard (g.json["inserted"] as? NSNumber)?.intValue ?? 0 > 0 else {
                print("associate: the GeoJSON import inserted nothing: \(g.json)")
                throw ExitCode(1)
            }
            agencies.append(a)
            single.append(s)
            geojson.append(g)
            print(
                "store round \(round) of \(rounds): 3 agencies \(Self.rate(reports, a.seconds)) in \(a.transactions) runs, "
                    + "single source \(Self.rate(reports, s.seconds)) in \(s.transactions) runs, "
                    + "GeoJSON store import \(Self.rate(reports, g.seconds))")
        }
        func line(_ name: String, _ measured: [Measured], _ what: String) -> Double {
            let best = measured.map(\.seconds).min()!
            let median = QuakeMLBenchmark.median(measured.map(\.seconds))
            print(
                "  \(name.padding(toLength: 34, withPad: " ", startingAt: 0)) \(Self.rate(reports, best)); median \(Self.rate(reports, median)); "
                    + String(format: "peak RSS %.1f MiB; ", measured.map(\.rssMiB).max()!) + what)
            return best
        }
        let load =
            (try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8))?
            .split(separator: " ").prefix(3).joined(separator: " ") ?? "?"
        print("associate, the store (best of \(rounds); load average \(load)):")
        let a = line(
            "3 agencies, importSource", agencies, "\(agencies[0].transactions) runs, \(quakes) events")
        let s = line(
            "single source, importSource", single, "\(single[0].transactions) runs, \(reports) events")
        let g = line("GeoJSON store import (import-once)", geojson, "1 transaction, whole process")
        print(
            String(
                format:
                    "  ratio:  %.2fx the single source through importSource; %.4fx the GeoJSON store import (goal: at least 0.5x) %@",
                s / a, g / a, g / a >= 0.5 ? "met" : "NOT met"))
    }

    static func rate(_ count: Int, _ seconds: Double) -> String {
        String(format: "%.0f reports/s (%.2f s)", Double(count) / seconds, seconds)
    }

    /// Feeds the items one at a time to a new associator: seconds taken and the associator.
    static func time(_ items: [SourceItem]) -> (Double, Associator) {
        var associator = Associator(configuration: AssociationConfiguration(sourceOrder: ["usgs", "emsc", "gfz"]))
        var changes = 0
        let started = ContinuousClock.now
        for item in items { changes &+= associator.apply(item).count }
        let elapsed = ContinuousClock.now - started
        precondition(changes > 0)
        return (Double(elapsed / .microseconds(1)) / 1e6, associator)
    }

    /// Quakes at random times over `days` and random places between 60°S and 60°N, each reported
    /// by usgs, emsc and gfz with their own offsets (up to 3 s and 20 km) and magnitudes (±0.3),
    /// published 2, 5 and 10 minutes (± a minute) after the origin, in publication order.
    /// Quakes closer than the windows would be ambiguous, so a quake is placed again until it is
    /// at least a minute or 500 km from every other.
    static func synthetic(reports: Int, days: Double, seed: UInt64) -> [SourceItem] {
        published(reports: reports, days: days, seed: seed).map { .report($0.report) }
    }

    /// The source runs that deliver `published`: each source's reports published in one interval
    /// (`end` is the interval's end), in time order, then by source; no run without reports.
    static func runs(_ published: [(at: Int64, report: SourceReport)], intervalMilliseconds: Int64) -> [(
        end: Int64, source: String, items: [SourceItem]
    )] {
        var runs: [(end: Int64, source: String, items: [SourceItem])] = []
        var pending: [String: [SourceItem]] = [:]
        var window: Int64?
        func flush() {
            guard let window else { return }
            for source in pending.keys.sorted() {
                runs.append(((window + 1) * intervalMilliseconds, source, pending[source]!))
            }
            pending = [:]
        }
        for (at, report) in published {
            let w = at / intervalMilliseconds
            if w != window {
                flush()
                window = w
            }
            pending[report.source, default: []].append(.report(report))
        }
        flush()
        return runs
    }

    /// ``synthetic(reports:days:seed:)``'s reports with the time each was published (ms), in
    /// publication order.
    static func published(reports: Int, days: Double, seed: UInt64) -> [(at: Int64, report: SourceReport)] {
        var random = SeededRandom(seed: seed)
        let quakes = (reports + 2) / 3
        let span = Int64(days * 86_400_000)
        let start: Int64 = 1_767_225_600_000
        var times = (0..<quakes).map { _ in start + Int64.random(in: 0..<span, using: &random) }
        times.sort()
        var published: [(at: Int64, report: SourceReport)] = []
        var recent: [(time: Int64, latitude: Double, longitude: Double)] = []
        for (index, time) in times.enumerated() {
            var latitude: Double
            var longitude: Double
            repeat {
                latitude = Double.random(in: -60...60, using: &random)
                longitude = Double.random(in: -180..<180, using: &random)
                recent.removeAll { time - $0.time >= 60_000 }
            } while recent.contains { Association.distanceKm($0.latitude, $0.longitude, latitude, longitude) < 500 }
            recent.append((time, latitude, longitude))
            let magnitude = Double.random(in: 2.5...7, using: &random)
            for (agency, delayMinutes) in [("usgs", 5.0), ("emsc", 2.0), ("gfz", 10.0)] {
                if published.count == reports { break }
                let kmNorth = Double.random(in: -14...14, using: &random)
                let kmEast = Double.random(in: -14...14, using: &random)
                var reportLongitude = longitude + kmEast / (111.195 * cos(latitude * .pi / 180))
                if reportLongitude >= 180 { reportLongitude -= 360 }
                if reportLongitude < -180 { reportLongitude += 360 }
                let report = SourceReport(
                    source: agency, id: "\(agency)\(index)", agency: agency.uppercased(),
                    time: time + Int64.random(in: -3000...3000, using: &random), latitude: latitude + kmNorth / 111.195,
                    longitude: reportLongitude, depth: Double.random(in: 0...100, using: &random),
                    magnitude: ((magnitude + Double.random(in: -0.3...0.3, using: &random)) * 10).rounded() / 10,
                    magnitudeType: "ml", place: "somewhere", eventType: "earthquake", evaluationMode: .automatic,
                    updated: time + Int64(delayMinutes * 60_000))
                let at = time + Int64((delayMinutes + Double.random(in: -1...1, using: &random)) * 60_000)
                published.append((at, report))
            }
        }
        published.sort { ($0.at, $0.report.source) < ($1.at, $1.report.source) }
        return published
    }
}

/// The child side of `quake-bench associate`'s store path: the synthetic reports into a fresh store
/// in DIR through `QuakeStore.importSource`, each source's run giving what it published in one
/// `--interval`; runs are imported in time order (at the end of each interval, the sources in name
/// order), a run without reports is not made. Prints one JSON line: `{"reports", "transactions",
/// "seconds"` (the imports, from the store's open to its close, the generation left out)`,
/// "quakes"` (quake rows)`, "events"` (distinct events of the reports)`, "doubled"` (events with
/// two reports of one source)`}`.
///
/// - `agencies`: three sources, `emsc`, `gfz` and `ingv` (the engine benchmark's `usgs` renamed:
///   the store's source `usgs` is the USGS feed's);
/// - `single`: the same reports as one source `one`, each its own event.
struct AssociateChild: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "associate-child", abstract: "The store path of the associate benchmark, in a process of its own.",
        shouldDisplay: false)

    enum Mode: String, ExpressibleByArgument {
        case agencies, single
    }

    @Argument var mode: Mode
    @Argument var directory: String
    @Option var reports = 100_000
    @Option var days = 30.0
    @Option var seed: UInt64 = 42
    @Option var interval = 60.0

    func run() async throws {
        let intervalMs = Int64(interval * 1000)
        var published = AssociateBenchmark.published(reports: reports, days: days, seed: seed)
        for i in published.indices {
            var report = published[i].report
            switch mode {
            case .agencies where report.source == "usgs":
                report.source = "ingv"
                report.agency = "INGV"
                report.id = report.id.replacingOccurrences(of: "usgs", with: "ingv")
            case .agencies:
                break
            case .single:
                report.id = "\(report.source)-\(report.id)"
                report.source = "one"
            }
            published[i].report = report
        }
        let runs = AssociateBenchmark.runs(published, intervalMilliseconds: intervalMs)

        let association = AssociationConfiguration(
            sourceOrder: mode == .single ? ["one"] : ["ingv", "emsc", "gfz"])
        let started = ContinuousClock.now
        let url = URL(fileURLWithPath: directory)
        let store = try QuakeStore(directory: url)
        // Progress on stderr: the milliseconds a run took in each tenth of the runs, as the store grows.
        var sliceStart = ContinuousClock.now
        var sliceReports = 0
        let slice = max(runs.count / 10, 1)
        for (index, run) in runs.enumerated() {
            let now = Date(timeIntervalSince1970: Double(run.end) / 1000)
            _ = try await store.importSource(
                run.source, items: run.items, position: run.end, query: nil, association: association, now: now)
            sliceReports += run.items.count
            if (index + 1) % slice == 0 || index + 1 == runs.count {
                let elapsed = (ContinuousClock.now - sliceStart).inSeconds
                let done = runs[...index].reduce(0) { $0 + $1.items.count }
                FileHandle.standardError.write(
                    Data(
                        String(
                            format: "associate-child %@: %d of %d runs, %d reports stored: %.2f ms a run, %.0f reports/s\n",
                            mode.rawValue, index + 1, runs.count, done,
                            elapsed * 1000 / Double((index % slice) + 1), Double(sliceReports) / elapsed
                        ).utf8))
                sliceStart = ContinuousClock.now
                sliceReports = 0
            }
        }
        let quakes = try store.count()
        try store.close()
        let seconds = (ContinuousClock.now - started).inSeconds

        // The grouping, read from the file.
        var db: OpaquePointer?
        defer { sqlite3_close_v2(db) }
        guard
            sqlite3_open_v2(url.appendingPathComponent(QuakeStore.fileName).path, &db, SQLITE_OPEN_READONLY, nil)
                == SQLITE_OK
        else { throw ValidationError("cannot open the store's file") }
        func count(_ sql: String) throws -> Int {
            var statement: OpaquePointer?
            defer { sqlite3_finalize(statement) }
            guard sqlite3_prepare_v2(db, sql, -1, &statement, nil) == SQLITE_OK, sqlite3_step(statement) == SQLITE_ROW
            else { throw ValidationError("SQLite: \(String(cString: sqlite3_errmsg(db)))") }
            return Int(sqlite3_column_int64(statement, 0))
        }
        let stored = try count("SELECT count(*) FROM reports")
        let events = try count("SELECT count(DISTINCT event) FROM reports")
        let doubled = try count(
            "SELECT count(*) FROM (SELECT event FROM reports GROUP BY event HAVING count(*) > count(DISTINCT source))")
        print(
            "{\"reports\":\(stored),\"transactions\":\(runs.count),\"seconds\":\(seconds),\"quakes\":\(quakes),"
                + "\"events\":\(events),\"doubled\":\(doubled)}")
    }
}

