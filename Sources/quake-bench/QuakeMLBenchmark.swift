import ArgumentParser
import Foundation
import GRDBSQLite
import QuakeFeed
import QuakeModel
import QuakeSources
import QuakeTestSupport

/// `quake-bench quakeml`: the QuakeML import into the store, against ObsPy and against our own
/// GeoJSON store import over the same events.
///
/// The issue asks, for the QuakeML import into the store: at least 100x ObsPy's `read_events` +
/// sqlite3 `executemany`, at most 64 MiB peak RSS, at least 0.5x our GeoJSON import of the same
/// events. Ours is the file through QuakeMLReader (64 KiB chunks) into a fresh quaked store through
/// `QuakeStore.importSource`, as one source whose runs give `--batch` items each (one transaction
/// each, with association and history); beside it, for context, the reader into a plain SQLite
/// table (the peer's table) and the reader alone. Each run is a child process of its own (its peak
/// RSS its own, through `measure-child`). The events are the synthetic feed's (`scripts/gen-feed.py`, seeded, from the
/// real fixtures), written as QuakeML 1.2 by `QuakeMLWriter` as the FDSN test service writes them
/// (`FDSNTestService.report(ofFeature:)`), so the GeoJSON and the QuakeML hold the same events.
struct QuakeMLBenchmark: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "quakeml",
        abstract: "QuakeML benchmark: QuakeMLReader + SQLite vs ObsPy read_events + sqlite3, and vs our GeoJSON.")

    @Option(help: "Events in the synthetic feed, written as GeoJSON and as QuakeML 1.2.")
    var events = 100_000

    @Option(help: "Events the ObsPy peer reads (the first ones, as a QuakeML file of their own): ObsPy is slow.")
    var peerEvents = 10_000

    @Option(help: "Rounds: each runs every reader once, interleaved; the median and the fastest are reported.")
    var runs = 3

    @Option(help: "Items per source run of the store import (one importSource transaction each).")
    var batch = QuakeMLBenchmark.defaultBatch

    @Flag(help: "Also import the whole file as one source run (one transaction), as a row of its own.")
    var oneRun = false

    @Option(help: "Working directory for the files and the databases (default: a temp directory).")
    var work: String?

    @Flag(help: "Skip the ObsPy peer (and its installation).")
    var noPeer = false

    @Flag(help: "Print one JSON object (progress and the table go to stderr).")
    var json = false

    func validate() throws {
        guard runs >= 1 else { throw ValidationError("--runs must be at least 1") }
        guard events >= 1 else { throw ValidationError("--events must be at least 1") }
        guard peerEvents >= 1 else { throw ValidationError("--peer-events must be at least 1") }
        guard batch >= 1 else { throw ValidationError("--batch must be at least 1") }
    }

    /// The issue's goals, reported, never asserted.
    static let goalVsObsPy = 100.0
    static let goalVsGeoJSON = 0.5
    static let goalPeakRSSMiB = 64.0
    /// The chunk size the reader is fed in.
    static let chunkBytes = 64 * 1024
    /// Items per source run of the store import: a run imports one answer in one transaction, and
    /// an answer is bounded by the services' search limits (20,000 at the USGS) and by the windows
    /// a backfill pages in, so 100,000 events come as several runs.
    static let defaultBatch = 10_000

    // MARK: Figures

    /// One measured child run.
    struct Run: Encodable {
        var seconds: Double
        var peakRSSMiB: Double
        var cpuSeconds: Double
        /// Events stored (or, for the parsers, items produced).
        var events: Int
    }

    /// One reader over its rounds.
    struct Row: Encodable {
        var name: String
        var events: Int
        var seconds: Spread
        var eventsPerSecond: Spread
        /// Median and largest over the rounds.
        var peakRSSMiB: Double
        var peakRSSMiBMax: Double
        /// Events per second of the process's CPU time (user + system, its whole life: for the
        /// peer the interpreter's start and `import obspy` too), median: steadier than wall time on a
        /// busy machine.
        var eventsPerCPUSecond: Double
        var runs: [Run]
    }

    struct Spread: Encodable {
        var median: Double
        var fastest: Double
    }

    struct Figures: Encodable {
        struct Goals: Encodable {
            var vsObsPy: Double?
            var vsObsPyGoal: Double
            var vsObsPyMet: Bool?
            /// Ours on the peer's own file (the first `peerEvents` events) over the peer.
            var vsObsPySameFile: Double?
            /// The reader into a plain table (the figures before the store import existed) over the peer.
            var plainTableVsObsPy: Double?
            var vsGeoJSONImport: Double
            var vsGeoJSONGoal: Double
            var vsGeoJSONMet: Bool
            var vsGeoJSONSameTable: Double
            var peakRSSMiB: Double
            var peakRSSGoalMiB: Double
            var peakRSSMet: Bool
        }
        var events: Int
        var peerEvents: Int?
        var quakeMLBytes: Int
        var peerQuakeMLBytes: Int?
        var geoJSONBytes: Int
        var chunkBytes: Int
        var batch: Int
        var runs: Int
        var loadAverage: String
        var obspyVersion: String?
        /// `quakemlImport` (ours: into the store), `quakemlStore` (into a plain table), `quakemlParse`,
        /// `geojsonImport`, `geojsonStore`, `geojsonParse`, with `--one-run` `quakemlImportOneRun`, and
        /// with the peer `quakemlImportPeerFile` (ours on the peer's file) and `obspy`.
        var rows: [String: Row]
        var goals: Goals
    }

    /// Progress and the human-readable report: stdout, or stderr with --json.
    func say(_ text: String) {
        if json {
            FileHandle.standardError.write(Data((text + "\n").utf8))
        } else {
            print(text)
        }
    }

    // MARK: Running

    func run() async throws {
        let workDir = try SyntheticFeed.workDirectory(work)
        let (feed, feedBytes) = try SyntheticFeed.make(features: events, in: workDir, say: say)
        let base = workDir.appendingPathComponent("quakeml-\(getpid())")
        try? FileManager.default.removeItem(at: base)
        try FileManager.default.createDirectory(at: base, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: base) }

        // Written again on every run (a few seconds), kept beside the feed for profiling.
        let quakeML = workDir.appendingPathComponent("quakeml-\(events).xml")
        let peerQuakeML = workDir.appendingPathComponent("quakeml-\(events)-first-\(min(peerEvents, events)).xml")
        let written = try Self.writeQuakeML(
            feed: feed, to: quakeML, prefix: noPeer ? nil : (peerQuakeML, min(peerEvents, events)))
        say(
            String(
                format: "QuakeML 1.2 (QuakeMLWriter): %d events (%d reports, %d retractions), %.1f MB%@",
                written.events, written.reports, written.events - written.reports, Double(written.bytes) / 1e6,
                noPeer
                    ? ""
                    : String(
                        format: "; the peer's first %d events: %.1f MB", written.prefixEvents,
                        Double(written.prefixBytes) / 1e6)))

        var obspy: (python: String, version: String)?
        if !noPeer { obspy = try ensureObsPy() }

        let me = CommandLine.arguments[0].hasPrefix("/") ? CommandLine.arguments[0] : "/proc/self/exe"
        let selfPath = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? me
        let db = base.appendingPathComponent("plain.sqlite")
        let storeDir = base.appendingPathComponent("quaked-store")
        let quakeMLStoreDir = base.appendingPathComponent("quakeml-store")
        func freshDB() {
            for suffix in ["", "-wal", "-shm", "-journal"] {
                try? FileManager.default.removeItem(atPath: db.path + suffix)
            }
        }

        var results: [String: [Run]] = [:]
        /// Runs `argv` through `measure-child`; `parse` reads its output: the events, and its own
        /// timed seconds when the wall time of the process is not the figure.
        func measure(_ key: String, _ argv: [String], _ parse: (String) -> (events: Int, seconds: Double?)?) throws {
            let child = try MeasuredProcess.runIsolated(argv)
            guard child.status == 0, let parsed = parse(child.stdout) else {
                throw ValidationError(
                    "\(key) failed (exit \(child.status)): \(argv.joined(separator: " "))\n\(child.stdout)")
            }
            results[key, default: []].append(
                Run(
                    seconds: parsed.seconds ?? child.wall.inSeconds, peakRSSMiB: Double(child.maxRSSBytes) / 1_048_576,
                    cpuSeconds: child.cpuSeconds, events: parsed.events))
        }
        let childEvents: (String) -> (events: Int, seconds: Double?)? = { out in
            Self.jsonInt(out, "events").map { ($0, nil) }
        }
        // The store import reports `inserted`.
        let importEvents: (String) -> (events: Int, seconds: Double?)? = { out in
            Self.jsonInt(out, "inserted").map { ($0, nil) }
        }
        // The peer's time is its own timed section (read_events + executemany), without the
        // interpreter's start and `import obspy`: in its favour.
        let peerEvents: (String) -> (events: Int, seconds: Double?)? = { out in
            guard let count = Self.jsonInt(out, "events"), let seconds = Self.jsonDouble(out, "seconds") else {
                return nil
            }
            return (count, seconds)
        }

        /// The store import of `file` (`batch` items a run) into a fresh store.
        func importQuakeML(_ key: String, _ file: URL, batch: Int) throws {
            try? FileManager.default.removeItem(at: quakeMLStoreDir)
            try measure(
                key,
                [selfPath, "quakeml-child", "quakeml-import", file.path, quakeMLStoreDir.path, "--batch", "\(batch)"],
                childEvents)
            try? FileManager.default.removeItem(at: quakeMLStoreDir)
        }

        for round in 1...runs {
            say("round \(round) of \(runs) …")
            try importQuakeML("quakemlImport", quakeML, batch: batch)
            if oneRun { try importQuakeML("quakemlImportOneRun", quakeML, batch: events) }
            freshDB()
            try measure(
                "quakemlStore", [selfPath, "quakeml-child", "quakeml-store", quakeML.path, db.path], childEvents)
            try measure("quakemlParse", [selfPath, "quakeml-child", "quakeml-parse", quakeML.path], childEvents)
            freshDB()
            try measure("geojsonStore", [selfPath, "quakeml-child", "geojson-store", feed.path, db.path], childEvents)
            try measure("geojsonParse", [selfPath, "quakeml-child", "geojson-parse", feed.path], childEvents)
            try? FileManager.default.removeItem(at: storeDir)
            try measure("geojsonImport", [selfPath, "import-once", feed.path, storeDir.path], importEvents)
            if let obspy {
                try importQuakeML("quakemlImportPeerFile", peerQuakeML, batch: batch)
                freshDB()
                try measure("obspy", [obspy.python, "-c", Self.peerScript, peerQuakeML.path, db.path], peerEvents)
            }
            for key in ["quakemlImport", "quakemlImportOneRun", "quakemlStore"] {
                guard let got = results[key]?.last?.events else { continue }
                guard got == written.reports else {
                    throw ValidationError("\(key): QuakeMLReader stored \(got) events of the \(written.reports) written")
                }
            }
            if let got = results["quakemlImportPeerFile"]?.last?.events, got != written.prefixReports {
                throw ValidationError(
                    "QuakeMLReader stored \(got) events of the peer's file's \(written.prefixReports) written")
            }
            if let peer = results["obspy"]?.last, peer.events != written.prefixReports {
                throw ValidationError("ObsPy stored \(peer.events) events of the \(written.prefixReports) written")
            }
            let r = { (key: String) in
                results[key].flatMap(\.last).map { String(format: "%.0f/s", Double($0.events) / $0.seconds) } ?? "-"
            }
            say(
                "  QuakeML into the store \(r("quakemlImport")); QuakeML+SQLite \(r("quakemlStore")), parse \(r("quakemlParse")); GeoJSON+SQLite \(r("geojsonStore")), "
                    + "parse \(r("geojsonParse")), store import \(r("geojsonImport")); ObsPy \(r("obspy"))")
        }
        try report(results, written: written, feedBytes: feedBytes, obspyVersion: obspy?.version)
    }

    // MARK: The report

    private func report(_ results: [String: [Run]], written: Written, feedBytes: Int, obspyVersion: String?) throws {
        func row(_ key: String, _ name: String) -> Row? {
            guard let runs = results[key], !runs.isEmpty else { return nil }
            let seconds = runs.map(\.seconds)
            let count = runs[0].events
            let rss = runs.map(\.peakRSSMiB)
            return Row(
                name: name, events: count, seconds: Spread(median: Self.median(seconds), fastest: seconds.min()!),
                eventsPerSecond: Spread(
                    median: Double(count) / Self.median(seconds), fastest: Double(count) / seconds.min()!),
                peakRSSMiB: Self.median(rss), peakRSSMiBMax: rss.max()!,
                eventsPerCPUSecond: Self.median(runs.map { Double($0.events) / max($0.cpuSeconds, 1e-9) }), runs: runs)
        }
        var rows: [String: Row] = [:]
        let order: [(String, String)] = [
            ("quakemlImport", "QuakeML into the store (\(batch)/run)"),
            ("quakemlImportOneRun", "QuakeML into the store, one run"),
            ("quakemlStore", "QuakeMLReader + plain SQLite table"),
            ("quakemlParse", "QuakeMLReader, parse alone"),
            ("geojsonImport", "GeoJSON: quaked's store import"),
            ("geojsonStore", "GeoJSON: FeedParser + same table"),
            ("geojsonParse", "GeoJSON: FeedParser, parse alone"),
            ("quakemlImportPeerFile", "QuakeML into the store, peer's file"),
            ("obspy", "ObsPy read_events + sqlite3"),
        ]
        for (key, name) in order { rows[key] = row(key, name) }

        let load =
            (try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8))?
            .split(separator: " ").prefix(3).joined(separator: " ") ?? "?"
        say("")
        say(
            "quakeml: \(events) events; QuakeML 1.2 \(String(format: "%.1f", Double(written.bytes) / 1e6)) MB, "
                + "GeoJSON \(String(format: "%.1f", Double(feedBytes) / 1e6)) MB; \(Self.chunkBytes / 1024) KiB chunks; "
                + "\(batch) items a source run; "
                + "\(ProcessInfo.processInfo.activeProcessorCount) cores, load average \(load)")
        say("median of \(runs) runs (fastest in brackets); each a process of its own, peak RSS its own")
        say(
            "reader".padding(toLength: 40, withPad: " ", startingAt: 0)
                + "   events   wall s     events/s   events/CPU-s   peak RSS MiB")
        for (key, _) in order {
            guard let r = rows[key] else { continue }
            say(
                r.name.padding(toLength: 40, withPad: " ", startingAt: 0)
                    + String(
                        format: "%9d %8.2f %12.0f %14.0f %9.1f (max %.1f)   [%.2f s, %.0f/s]", r.events,
                        r.seconds.median, r.eventsPerSecond.median, r.eventsPerCPUSecond, r.peakRSSMiB,
                        r.peakRSSMiBMax, r.seconds.fastest,
                        r.eventsPerSecond.fastest))
        }
        if let obspyVersion {
            say(
                "  (ObsPy \(obspyVersion) reads the first \(written.prefixEvents) events, a QuakeML file of their own "
                    + "(\(String(format: "%.1f", Double(written.prefixBytes) / 1e6)) MB), as it is slow; events/s are compared. "
                    + "Its time is read_events + executemany, timed in Python: not the interpreter's start nor `import obspy`.)"
            )
        }

        let ours = rows["quakemlImport"]!
        let vsObsPy = rows["obspy"].map { ours.eventsPerSecond.median / $0.eventsPerSecond.median }
        let vsObsPySameFile = rows["obspy"].flatMap { peer in
            rows["quakemlImportPeerFile"].map { $0.eventsPerSecond.median / peer.eventsPerSecond.median }
        }
        let plainTableVsObsPy = rows["obspy"].map {
            rows["quakemlStore"]!.eventsPerSecond.median / $0.eventsPerSecond.median
        }
        let vsImport = ours.eventsPerSecond.median / rows["geojsonImport"]!.eventsPerSecond.median
        let vsSameTable = rows["quakemlStore"]!.eventsPerSecond.median / rows["geojsonStore"]!.eventsPerSecond.median
        let cpuRatio = { (a: String, b: String) -> Double in
            rows[a]!.eventsPerCPUSecond / rows[b]!.eventsPerCPUSecond
        }
        let plainVsImport = rows["quakemlStore"]!.eventsPerSecond.median / rows["geojsonImport"]!.eventsPerSecond.median
        let parseRatio =
            rows["quakemlParse"]!.eventsPerSecond.median / rows["geojsonParse"]!.eventsPerSecond.median
        let goals = Figures.Goals(
            vsObsPy: vsObsPy, vsObsPyGoal: Self.goalVsObsPy, vsObsPyMet: vsObsPy.map { $0 >= Self.goalVsObsPy },
            vsObsPySameFile: vsObsPySameFile, plainTableVsObsPy: plainTableVsObsPy,
            vsGeoJSONImport: vsImport, vsGeoJSONGoal: Self.goalVsGeoJSON, vsGeoJSONMet: vsImport >= Self.goalVsGeoJSON,
            vsGeoJSONSameTable: vsSameTable, peakRSSMiB: ours.peakRSSMiBMax, peakRSSGoalMiB: Self.goalPeakRSSMiB,
            peakRSSMet: ours.peakRSSMiBMax <= Self.goalPeakRSSMiB)
        func met(_ yes: Bool) -> String { yes ? "met" : "NOT met" }
        say("")
        say(
            "the issue's goals, for the QuakeML import into the store (\(batch) items a source run, one importSource transaction each):"
        )
        if let vsObsPy {
            say(
                String(
                    format: "  vs ObsPy:            %.1fx ObsPy's events/s (goal: at least %.0fx) %@", vsObsPy,
                    Self.goalVsObsPy, met(vsObsPy >= Self.goalVsObsPy)))
            if let vsObsPySameFile {
                say(
                    String(
                        format:
                            "                       %.1fx on the peer's own file (the first %d events); per CPU second %.1fx",
                        vsObsPySameFile, written.prefixEvents, cpuRatio("quakemlImportPeerFile", "obspy")))
            }
            if let plainTableVsObsPy {
                say(
                    String(
                        format: "                       (the reader into a plain table: %.1fx)", plainTableVsObsPy))
            }
        } else {
            say("  vs ObsPy:            not measured (--no-peer)")
        }
        say(
            String(
                format: "  vs our GeoJSON:      %.2fx quaked's GeoJSON store import (goal: at least %.1fx) %@",
                vsImport,
                Self.goalVsGeoJSON, met(vsImport >= Self.goalVsGeoJSON)))
        say(
            String(
                format:
                    "                       per CPU second %.2fx; (the reader into a plain table: %.2fx the GeoJSON store import, %.2fx FeedParser into the same table; parse alone %.2fx FeedParser's)",
                cpuRatio("quakemlImport", "geojsonImport"), plainVsImport, vsSameTable, parseRatio))
        say(
            String(
                format: "  peak RSS:            %.1f MiB, largest of %d runs (goal: at most %.0f MiB) %@",
                ours.peakRSSMiBMax, runs, Self.goalPeakRSSMiB, met(ours.peakRSSMiBMax <= Self.goalPeakRSSMiB)))
        if let one = rows["quakemlImportOneRun"] {
            say(
                String(
                    format:
                        "  as one source run (one transaction of %d): %.0f events/s, %.2fx the GeoJSON store import, peak RSS %.1f MiB",
                    events, one.eventsPerSecond.median,
                    one.eventsPerSecond.median / rows["geojsonImport"]!.eventsPerSecond.median, one.peakRSSMiBMax))
        }

        if json {
            let figures = Figures(
                events: events, peerEvents: obspyVersion == nil ? nil : written.prefixEvents,
                quakeMLBytes: written.bytes,
                peerQuakeMLBytes: obspyVersion == nil ? nil : written.prefixBytes, geoJSONBytes: feedBytes,
                chunkBytes: Self.chunkBytes, batch: batch, runs: runs, loadAverage: load, obspyVersion: obspyVersion, rows: rows,
                goals: goals)
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys]
            print(String(decoding: try encoder.encode(figures), as: UTF8.self))
        }
    }

    // MARK: The files

    struct Written {
        var events = 0
        var reports = 0
        var bytes = 0
        var prefixEvents = 0
        var prefixReports = 0
        var prefixBytes = 0
    }

    /// Writes the feed's features as QuakeML 1.2 to `url` (and the first `prefix.count` to `prefix.url`),
    /// each as the FDSN test service answers `format=xml`.
    static func writeQuakeML(feed: URL, to url: URL, prefix: (url: URL, count: Int)?) throws -> Written {
        let writer = QuakeMLWriter(authority: FDSNTestService.quakeMLAuthority)
        let out = try FileOutput(url)
        let prefixOut = try prefix.map { try FileOutput($0.url) }
        var written = Written()
        var buffer: [UInt8] = []
        var prefixBuffer: [UInt8] = []
        writer.appendHeader(to: &buffer)
        writer.appendHeader(to: &prefixBuffer)
        var parser = FeedParser()
        let input = try FileHandle(forReadingFrom: feed)
        defer { try? input.close() }
        while let chunk = try input.read(upToCount: 1 << 20), !chunk.isEmpty {
            try chunk.withUnsafeBytes { bytes in
                try parser.consume(bytes, decode: false) { element in
                    guard let item = FDSNTestService.report(ofFeature: Array(element.bytes)) else { return }
                    let start = buffer.count
                    writer.append(item, to: &buffer)
                    written.events += 1
                    if case .report = item { written.reports += 1 }
                    if let prefix, written.prefixEvents < prefix.count {
                        prefixBuffer.append(contentsOf: buffer[start...])
                        written.prefixEvents += 1
                        if case .report = item { written.prefixReports += 1 }
                    }
                }
            }
            try out.write(&buffer)
            try prefixOut?.write(&prefixBuffer)
        }
        try parser.finish()
        writer.appendFooter(to: &buffer)
        writer.appendFooter(to: &prefixBuffer)
        try out.write(&buffer)
        try prefixOut?.write(&prefixBuffer)
        written.bytes = try out.close()
        written.prefixBytes = try prefixOut?.close() ?? 0
        return written
    }

    /// A file written in pieces.
    final class FileOutput {
        let handle: FileHandle
        var bytes = 0
        init(_ url: URL) throws {
            guard FileManager.default.createFile(atPath: url.path, contents: nil) else {
                throw CocoaError(.fileWriteUnknown, userInfo: [NSFilePathErrorKey: url.path])
            }
            handle = try FileHandle(forWritingTo: url)
        }
        func write(_ buffer: inout [UInt8]) throws {
            guard !buffer.isEmpty else { return }
            try handle.write(contentsOf: buffer)
            bytes += buffer.count
            buffer.removeAll(keepingCapacity: true)
        }
        func close() throws -> Int {
            try handle.close()
            return bytes
        }
    }

    // MARK: The peer

    /// The virtualenv the peer's ObsPy is installed into, on demand (`.build/bench-venv`).
    static var benchVenv: URL { SyntheticFeed.packageRoot.appendingPathComponent(".build/bench-venv") }

    /// The venv's Python with ObsPy importable (created and installed with pip when missing), and
    /// ObsPy's version; fails saying what to do when it cannot be installed.
    func ensureObsPy() throws -> (python: String, version: String) {
        let venv = Self.benchVenv
        let python = venv.appendingPathComponent("bin/python3").path
        func fail(_ what: String) throws -> Never {
            FileHandle.standardError.write(
                Data(
                    ("quake-bench quakeml: \(what)\nThe peer needs ObsPy in \(venv.path): python3 -m venv \(venv.path) && "
                        + "\(venv.path)/bin/pip install obspy (needs python3-venv and PyPI), or run with --no-peer.\n")
                        .utf8))
            throw ExitCode(1)
        }
        if !FileManager.default.isExecutableFile(atPath: python) {
            say("creating a virtualenv for the peer: python3 -m venv \(venv.path)")
            let made = try MeasuredProcess.run(["python3", "-m", "venv", venv.path])
            guard made.status == 0 else {
                try fail("python3 -m venv failed (exit \(made.status)); on Debian: apt-get install python3-venv")
            }
        }
        let version = "import obspy; print(obspy.__version__)"
        var check = try MeasuredProcess.run([python, "-c", version])
        if check.status != 0 {
            say("installing ObsPy into \(venv.path) for the peer: \(venv.path)/bin/python3 -m pip install obspy …")
            let pip = try MeasuredProcess.run([python, "-m", "pip", "install", "--quiet", "obspy"])
            guard pip.status == 0 else { try fail("pip install obspy failed (exit \(pip.status))") }
            check = try MeasuredProcess.run([python, "-c", version])
            guard check.status == 0 else { try fail("ObsPy was installed but does not import (exit \(check.status))") }
        }
        let found = check.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        say("peer: ObsPy \(found) (\(python))")
        return (python, found)
    }

    /// The peer: ObsPy's `read_events` of the file, then the same plain table as ours, filled by
    /// sqlite3's `executemany` in one transaction; prints {"events", "seconds"} (the timed section).
    static let peerScript = """
        import json, sqlite3, sys, time
        from obspy import read_events
        path, db_path = sys.argv[1], sys.argv[2]
        start = time.monotonic()
        catalog = read_events(path, format="QUAKEML")
        rows = []
        for ev in catalog:
            o = ev.preferred_origin() or (ev.origins[0] if ev.origins else None)
            if o is None:
                continue
            m = ev.preferred_magnitude() or (ev.magnitudes[0] if ev.magnitudes else None)
            rows.append((str(ev.resource_id.id).rsplit("/", 1)[-1], int(round(o.time.timestamp * 1000)),
                         o.latitude, o.longitude, o.depth / 1000 if o.depth is not None else None,
                         m.mag if m is not None else None))
        db = sqlite3.connect(db_path)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
        db.execute("CREATE TABLE quakes (id TEXT PRIMARY KEY NOT NULL, time INTEGER NOT NULL, lat REAL, lon REAL, depth REAL, mag REAL)")
        with db:
            db.executemany("INSERT INTO quakes VALUES (?, ?, ?, ?, ?, ?)", rows)
        count = db.execute("SELECT count(*) FROM quakes").fetchone()[0]
        db.close()
        print(json.dumps({"events": count, "seconds": time.monotonic() - start}))
        """

    // MARK: Helpers

    static func median(_ values: [Double]) -> Double {
        let sorted = values.sorted()
        return sorted.count % 2 == 1
            ? sorted[sorted.count / 2] : (sorted[sorted.count / 2 - 1] + sorted[sorted.count / 2]) / 2
    }

    static func jsonObject(_ text: String) -> [String: Any]? {
        let line = text.split(separator: "\n").last.map(String.init) ?? ""
        return (try? JSONSerialization.jsonObject(with: Data(line.utf8))) as? [String: Any]
    }

    static func jsonInt(_ text: String, _ key: String) -> Int? {
        (jsonObject(text)?[key] as? NSNumber)?.intValue
    }

    static func jsonDouble(_ text: String, _ key: String) -> Double? {
        (jsonObject(text)?[key] as? NSNumber)?.doubleValue
    }
}
