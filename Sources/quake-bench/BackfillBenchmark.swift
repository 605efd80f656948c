import ArgumentParser
import Foundation
import QuakeClient
import QuakeProtocol
import QuakeTestSupport
import QuakeModel

#if canImport(Glibc)
    import Glibc
#endif

/// A backfill job against the same events imported as one feed: the synthetic feed served by the
/// in-process FDSN test service and backfilled by a real quaked (with `backfill-pause = 0s`), and
/// the same file imported by `quaked --once` (the peer), and into a store that already holds one
/// event. Prints wall time, events per second, the ratio (goal: at least 0.5), the windows, and
/// quaked's peak RSS during the backfill (goal: at most 64 MiB), the goals reported, never
/// asserted; then where the backfill's time went (windows, CPU, the service's own cost).
struct BackfillBenchmark: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "backfill",
        abstract: "Backfill job through a local FDSN service vs the same events imported as one feed.")

    @Option(help: "Events in the synthetic feed (served by the FDSN test service and imported by the peer).")
    var features = 200_000

    @Option(help: "Rounds: each runs the peer, the same import into a store with 1 event, and the backfill.")
    var runs = 3

    @Option(help: "The FDSN test service's search limit (the USGS's is 20,000).")
    var searchLimit = 20_000

    @Flag(
        help: """
            The FDSN service gzip-compresses the windows, as quaked asks. Off by default: the peer \
            reads the same bytes uncompressed from a file, and the compression, which the real \
            service does on its own machines, would run here on the cores quaked uses.
            """)
    var gzip = false

    @Option(help: "Working directory for the feed and the stores (default: a temp directory).")
    var work: String?

    @Flag(help: "Print one JSON object with the figures (progress goes to stderr).")
    var json = false

    /// The goals of the issue: the backfill's events/s at least this share of the one-feed import's.
    static let speedGoal = 0.5
    /// And quaked's peak RSS during the backfill at most this many MiB.
    static let memoryGoalMiB = 64.0

    func validate() throws {
        guard runs >= 1 else { throw ValidationError("--runs must be at least 1") }
        guard features >= 1 else { throw ValidationError("--features must be at least 1") }
        guard searchLimit >= 2 else { throw ValidationError("--search-limit must be at least 2") }
    }

    // MARK: Figures

    /// One `quaked --once` import of the whole feed.
    struct PeerRun: Encodable {
        var seconds: Double
        var peakRSSMiB: Double
        var cpuSeconds: Double
        /// The import report's `inserted`.
        var inserted: Int?
    }

    /// One backfill job, from the Backfill call to its `done`.
    struct BackfillRun: Encodable {
        var seconds: Double
        /// VmHWM of quaked just before it was stopped (its whole life: start-up, the tiny feed, the job).
        var peakRSSMiB: Double
        /// quaked's user + system CPU over its whole life.
        var quakedCPUSeconds: Double
        /// This process's CPU while the job ran: the FDSN service (selecting, building bodies,
        /// gzip, HTTP) and the status polling.
        var serviceCPUSeconds: Double
        var windowsDone: Int
        var eventsFetched: Int
        var eventsImported: Int
        /// Answered query requests: 200s (one per window) and 400s (a window over the search
        /// limit, split and asked again); `count` requests.
        var queryRequests: Int
        var refusedQueries: Int
        var countRequests: Int
        /// From the call to the first query (the job starting, `count`).
        var planSeconds: Double
        /// Each window: from its request to the next request (or to `done`), and its events.
        var windowSeconds: [Double]
        var windowEvents: [Int]
    }

    /// The FDSN service alone: a backfill's window requests again, one after another on one
    /// connection, by curl (which throws the bodies away undecoded), with `Accept-Encoding: gzip` as
    /// quaked sends it and without; wall time and this process's CPU.
    struct ServiceAlone: Encodable {
        var windows: Int
        var gzipSeconds: Double
        var gzipCPUSeconds: Double
        var plainSeconds: Double
        var plainCPUSeconds: Double
    }

    /// Median and fastest (or, for memory, median and largest) of a figure over the rounds.
    struct Spread: Encodable {
        var median: Double
        var fastest: Double
    }

    /// What --json prints.
    struct Figures: Encodable {
        struct Summary: Encodable {
            var seconds: Spread
            var eventsPerSecond: Spread
            var peakRSSMiB: Double
            var peakRSSMiBMax: Double
        }
        struct Goals: Encodable {
            var speedRatio: Double
            var speedMet: Bool
            var peakRSSMiB: Double
            var memoryMet: Bool
        }
        var features: Int
        var feedBytes: Int
        var runs: Int
        var searchLimit: Int
        /// Whether the service gzip-compressed the windows (quaked asks for it; only with --gzip).
        var gzip: Bool
        var backfillPauseSeconds: Double
        var peer: Summary
        /// The same import into a store that already holds one other event: without the empty
        /// store's bulk path, as every backfill window is imported.
        var peerNonEmpty: Summary
        var backfill: Summary
        var windowsDone: Spread
        /// Backfill events/s over the peer's (the goal's ratio), and over the non-empty peer's.
        var ratio: Spread
        var ratioToNonEmpty: Spread
        var goals: Goals
        var serviceAlone: ServiceAlone?
        var peerRuns: [PeerRun]
        var peerNonEmptyRuns: [PeerRun]
        var backfillRuns: [BackfillRun]
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
        let (feed, feedBytes) = try SyntheticFeed.make(features: features, in: workDir, say: say)
        let quaked = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
            .deletingLastPathComponent()
            .appendingPathComponent("quaked").path
        guard FileManager.default.isExecutableFile(atPath: quaked) else {
            throw ValidationError(
                "build quaked next to quake-bench first: swift build -c release --scratch-path .build-release --product quaked"
            )
        }

        let base = workDir.appendingPathComponent("backfill-\(getpid())")
        try? FileManager.default.removeItem(at: base)
        try FileManager.default.createDirectory(at: base, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: base) }
        // The pause between a job's requests is 1 s by default: politeness to the USGS. The
        // benchmark measures the pipeline, so it is 0 here. The peer reads the same file.
        let config = base.appendingPathComponent("quaked.conf")
        try "# quake-bench backfill\nbackfill-pause = 0s\n".write(to: config, atomically: true, encoding: .utf8)
        // The daemon's own feed: one event that is not in the synthetic feed, from a local file,
        // so that it pulls nothing from the network and its pull does not touch the job's events.
        let tiny = base.appendingPathComponent("tiny.geojson")
        try Self.tinyFeed.write(to: tiny, atomically: true, encoding: .utf8)

        let server = try await FeedTestServer.start()
        do {
            let service = FDSNTestService(on: server, searchLimit: searchLimit)
            let loadStarted = ContinuousClock.now
            let loaded = try service.add(featuresOf: feed)
            guard loaded == features, let range = service.timeRange else {
                throw ValidationError("the FDSN test service took \(loaded) of the feed's \(features) features")
            }
            let (start, end) = (Int(range.lowerBound), Int(range.upperBound) + 1)
            if !gzip { service.failAlways = .transform { $0.uncompressed() } }
            say(
                String(
                    format: "FDSN test service at %@ (search limit %d, %@): %d events loaded in %.1f s",
                    service.baseURL, searchLimit,
                    gzip ? "windows gzip-compressed (--gzip)" : "windows uncompressed, as the peer's file (--gzip compresses them)",
                    loaded, (ContinuousClock.now - loadStarted).inSeconds))
            say(
                "job: \(FDSNTestService.formatTime(Int64(start)))Z to \(FDSNTestService.formatTime(Int64(end)))Z (end excluded), "
                    + "through the io.quaked Varlink client (Backfill, then BackfillStatus every 100 ms)")
            say("backfill-pause = 0s (default 1s): the benchmark measures the pipeline, not the politeness")

            var peers: [PeerRun] = []
            var nonEmptyPeers: [PeerRun] = []
            var backfills: [BackfillRun] = []
            var windowURIs: [String] = []
            // Rounds interleave them, so a slow spell of the machine hits all alike.
            for round in 1...runs {
                say("round \(round) of \(runs) …")
                let peer = try peerRun(quaked: quaked, feed: feed, config: config, directory: base, first: nil)
                say(
                    String(
                        format:
                            "  peer (quaked --once, one feed, empty store): %.2f s, %.0f events/s, peak RSS %.1f MiB, CPU %.1f s",
                        peer.seconds, Double(features) / peer.seconds, peer.peakRSSMiB, peer.cpuSeconds))
                peers.append(peer)
                let nonEmpty = try peerRun(quaked: quaked, feed: feed, config: config, directory: base, first: tiny)
                say(
                    String(
                        format:
                            "  quaked --once, one feed, store with 1 event: %.2f s, %.0f events/s, peak RSS %.1f MiB, CPU %.1f s",
                        nonEmpty.seconds, Double(features) / nonEmpty.seconds, nonEmpty.peakRSSMiB,
                        nonEmpty.cpuSeconds))
                nonEmptyPeers.append(nonEmpty)
                let (backfill, uris) = try await backfillRun(
                    quaked: quaked, service: service, start: start, end: end, config: config, tiny: tiny,
                    directory: base.appendingPathComponent("round-\(round)"))
                say(
                    String(
                        format:
                            "  backfill: %.2f s, %.0f events/s, %d windows, %d imported, peak RSS %.1f MiB, CPU quaked %.1f s, service %.1f s",
                        backfill.seconds, Double(features) / backfill.seconds, backfill.windowsDone,
                        backfill.eventsImported, backfill.peakRSSMiB, backfill.quakedCPUSeconds,
                        backfill.serviceCPUSeconds))
                backfills.append(backfill)
                windowURIs = uris
            }
            service.clearFaults()
            let alone = serviceAlone(urls: windowURIs.map { server.url($0) })
            try await server.shutdown()
            report(
                peers: peers, nonEmptyPeers: nonEmptyPeers, backfills: backfills, alone: alone, feedBytes: feedBytes)
        } catch {
            try? await server.shutdown()
            throw error
        }
    }

    /// A one-feature feed whose event is not among gen-feed.py's (ids `..g00000000` up).
    static let tinyFeed = #"""
        {"type":"FeatureCollection","metadata":{"generated":946684800000,"count":1},"features":[{"type":"Feature","properties":{"mag":1.2,"place":"quake-bench idle feed","time":946684800000,"updated":946684800000,"status":"reviewed","tsunami":0,"sig":22,"net":"qb","code":"idle1","ids":",qbidle1,","type":"earthquake","title":"M 1.2 - quake-bench idle feed"},"geometry":{"type":"Point","coordinates":[0,0,10]},"id":"qbidle1"}]}
        """#

    /// `quaked --once --feed file://FEED` on a fresh state directory, or on one that `first` was
    /// imported into (not measured).
    private func peerRun(quaked: String, feed: URL, config: URL, directory: URL, first: URL?) throws -> PeerRun {
        let state = directory.appendingPathComponent("peer")
        try? FileManager.default.removeItem(at: state)
        if let first {
            let setup = try MeasuredProcess.run([
                quaked, "--once", "--config", config.path, "--feed", first.standardizedFileURL.absoluteString,
                "--state-directory", state.path,
            ])
            guard setup.status == 0 else { throw ValidationError("quaked --once of the tiny feed failed") }
        }
        // Through the launcher: this process holds the FDSN service's events (hundreds of MB),
        // which a child spawned from it would count in its peak RSS.
        let run = try MeasuredProcess.runIsolated([
            quaked, "--once", "--json", "--config", config.path, "--feed", feed.standardizedFileURL.absoluteString,
            "--state-directory", state.path,
        ])
        guard run.status == 0 else { throw ValidationError("quaked --once failed (exit \(run.status))") }
        let report = try? JSONSerialization.jsonObject(with: Data(run.stdout.utf8)) as? [String: Any]
        let inserted = report?["inserted"] as? Int
        if let inserted, inserted != features {
            say("  note: quaked --once inserted \(inserted) of \(features) events")
        }
        try? FileManager.default.removeItem(at: state)
        return PeerRun(
            seconds: run.wall.inSeconds, peakRSSMiB: Double(run.maxRSSBytes) / 1_048_576, cpuSeconds: run.cpuSeconds,
            inserted: inserted)
    }

    /// A real quaked on a fresh state directory and socket, one backfill job over the whole feed.
    private func backfillRun(
        quaked: String, service: FDSNTestService, start: Int, end: Int, config: URL, tiny: URL, directory: URL
    ) async throws -> (BackfillRun, windowURIs: [String]) {
        try? FileManager.default.removeItem(at: directory)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let socket = directory.appendingPathComponent("q.sock").path
        let daemon = try ChildProcess(
            quaked,
            [
                "--config", config.path, "--state-directory", directory.appendingPathComponent("state").path,
                "--socket", socket, "--feed", tiny.standardizedFileURL.absoluteString, "--interval", "1h",
                "--log-level", "warning",
            ])
        var stopped = false
        defer { if !stopped { daemon.signal(SIGKILL) } }

        let deadline = ContinuousClock.now + .seconds(30)
        while !UnixSocketClient.canConnect(socket) {
            guard daemon.isRunning else { throw ValidationError("quaked exited at start-up: \(daemon.stderr)") }
            guard ContinuousClock.now < deadline else { throw ValidationError("quaked did not start") }
            try await Task.sleep(for: .milliseconds(20))
        }
        let connection = try await QuakedConnection.connect(to: socket)
        let job: IOQuaked.BackfillJob
        let called: ContinuousClock.Instant
        let calledAtMs: Int
        let observed: ContinuousClock.Instant
        let cpuBefore: Double
        let cpuAfter: Double
        do {
            // The tiny feed's first pull, out of the job's way.
            while true {
                let feed = try await connection.status().feeds.first
                if feed?.lastSuccess != nil { break }
                if let error = feed?.lastError {
                    throw ValidationError("quaked's pull of its tiny feed failed: \(error)")
                }
                guard ContinuousClock.now < deadline else { throw ValidationError("quaked's first pull did not end") }
                try await Task.sleep(for: .milliseconds(20))
            }
            service.clearLog()
            cpuBefore = Self.cpuSeconds(of: "self") ?? 0
            calledAtMs = Int(QuakeTime.milliseconds(Date(), rounding: .down))
            called = ContinuousClock.now
            let started = try await connection.call(
                IOQuaked.Backfill.self, .init(start: start, end: end, catalog: service.baseURL)
            ).job
            var current = started
            while current.state == .queued || current.state == .running {
                try await Task.sleep(for: .milliseconds(100))
                guard daemon.isRunning else {
                    throw ValidationError("quaked exited during the backfill: \(daemon.stderr)")
                }
                let status = try await connection.call(IOQuaked.BackfillStatus.self, .init(id: started.id))
                guard let latest = status.jobs.first else {
                    throw ValidationError("BackfillStatus does not know job \(started.id)")
                }
                current = latest
            }
            observed = ContinuousClock.now
            cpuAfter = Self.cpuSeconds(of: "self") ?? 0
            job = current
            await connection.close()
        } catch {
            await connection.close()
            throw error
        }
        let hwm = Self.peakRSSBytes(pid: daemon.pid)
        let quakedCPU = Self.cpuSeconds(of: "\(daemon.pid)") ?? 0
        daemon.signal(SIGTERM)
        let exit = try await daemon.wait(timeout: .seconds(60))
        stopped = true
        if exit != 0 { say("  note: quaked exited \(exit) on SIGTERM: \(daemon.stderr)") }

        guard job.state == .done else {
            say("FAILED: backfill job \(job.id) ended \(job.state.rawValue): \(job.error ?? "no error given")")
            throw ExitCode(1)
        }
        guard job.eventsImported == features else {
            say(
                "FAILED: backfill job \(job.id) imported \(job.eventsImported) events (fetched \(job.eventsFetched)), "
                    + "not the feed's \(features)")
            throw ExitCode(1)
        }
        guard let hwm else { throw ValidationError("cannot read VmHWM of quaked (pid \(daemon.pid))") }

        // The job's time ends at its finishedAt (ms, the same clock), which the poll notices up to 100 ms later.
        var seconds = (observed - called).inSeconds
        if let finished = job.finishedAt, finished >= calledAtMs, Double(finished - calledAtMs) / 1000 <= seconds {
            seconds = Double(finished - calledAtMs) / 1000
        }
        let done = called + .milliseconds(Int64((seconds * 1000).rounded()))
        let log = service.log
        let queries = log.filter { $0.endpoint == .query }
        let windows = queries.filter { $0.status == 200 }
        var windowSeconds: [Double] = []
        for (index, window) in windows.enumerated() {
            let next = index + 1 < windows.count ? windows[index + 1].request.receivedAt : done
            windowSeconds.append((next - window.request.receivedAt).inSeconds)
        }
        let run = BackfillRun(
            seconds: seconds, peakRSSMiB: Double(hwm) / 1_048_576, quakedCPUSeconds: quakedCPU,
            serviceCPUSeconds: cpuAfter - cpuBefore, windowsDone: job.windowsDone, eventsFetched: job.eventsFetched,
            eventsImported: job.eventsImported, queryRequests: queries.count,
            refusedQueries: queries.filter { $0.status == 400 }.count,
            countRequests: log.filter { $0.endpoint == .count }.count,
            planSeconds: queries.first.map { ($0.request.receivedAt - called).inSeconds } ?? 0,
            windowSeconds: windowSeconds, windowEvents: windows.map { $0.returned ?? 0 })
        return (run, windows.map(\.request.uri))
    }

    /// ``ServiceAlone`` for these window URLs, or `nil` without curl.
    private func serviceAlone(urls: [String]) -> ServiceAlone? {
        guard !urls.isEmpty else { return nil }
        func fetchAll(gzip: Bool) -> (seconds: Double, cpu: Double)? {
            let before = Self.cpuSeconds(of: "self") ?? 0
            let argv =
                ["curl", "--silent", "--fail"] + (gzip ? ["--header", "Accept-Encoding: gzip"] : [])
                + urls.flatMap { ["--output", "/dev/null", $0] }
            guard let run = try? MeasuredProcess.run(argv), run.status == 0 else { return nil }
            return (run.wall.inSeconds, (Self.cpuSeconds(of: "self") ?? 0) - before)
        }
        guard let gzip = fetchAll(gzip: true), let plain = fetchAll(gzip: false) else {
            say("(curl failed or is missing: no figure for the FDSN service alone)")
            return nil
        }
        return ServiceAlone(
            windows: urls.count, gzipSeconds: gzip.seconds, gzipCPUSeconds: gzip.cpu, plainSeconds: plain.seconds,
            plainCPUSeconds: plain.cpu)
    }

    // MARK: /proc

    /// VmHWM (peak resident set) of a process, in bytes.
    static func peakRSSBytes(pid: Int32) -> Int? {
        statusBytes(pid: pid, field: "VmHWM")
    }

    /// A memory field of /proc/PID/status (VmHWM, VmRSS, ...), in bytes.
    static func statusBytes(pid: Int32, field: String) -> Int? {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
            let line = status.split(separator: "\n").first(where: { $0.hasPrefix("\(field):") }),
            let kB = Int(line.dropFirst(field.count + 1).split(whereSeparator: { $0 == " " || $0 == "\t" }).first ?? "")
        else { return nil }
        return kB * 1024
    }

    /// User + system CPU seconds of a process (`self` or a pid), from /proc/PID/stat.
    static func cpuSeconds(of process: String) -> Double? {
        guard let stat = try? String(contentsOfFile: "/proc/\(process)/stat", encoding: .utf8),
            let close = stat.lastIndex(of: ")")
        else { return nil }
        // After the command's ")": state is field 3, utime field 14, stime field 15.
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        guard fields.count > 12, let user = Double(fields[11]), let system = Double(fields[12]) else { return nil }
        return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    // MARK: Report

    private func summary(_ seconds: [Double], rss: [Double]) -> Figures.Summary {
        let n = Double(features)
        return Figures.Summary(
            seconds: Spread(median: Self.median(seconds), fastest: seconds.min()!),
            eventsPerSecond: Spread(median: n / Self.median(seconds), fastest: n / seconds.min()!),
            peakRSSMiB: Self.median(rss), peakRSSMiBMax: rss.max()!)
    }

    /// Events/s of `a` over those of `b`, median to median and fastest to fastest.
    private func ratio(_ a: Figures.Summary, _ b: Figures.Summary) -> Spread {
        Spread(median: b.seconds.median / a.seconds.median, fastest: b.seconds.fastest / a.seconds.fastest)
    }

    private func report(
        peers: [PeerRun], nonEmptyPeers: [PeerRun], backfills: [BackfillRun], alone: ServiceAlone?, feedBytes: Int
    ) {
        let peer = summary(peers.map(\.seconds), rss: peers.map(\.peakRSSMiB))
        let nonEmpty = summary(nonEmptyPeers.map(\.seconds), rss: nonEmptyPeers.map(\.peakRSSMiB))
        let backfill = summary(backfills.map(\.seconds), rss: backfills.map(\.peakRSSMiB))
        let fastestRun = backfills.min { $0.seconds < $1.seconds }!
        let windows = Spread(
            median: Self.median(backfills.map { Double($0.windowsDone) }), fastest: Double(fastestRun.windowsDone))
        let toPeer = ratio(backfill, peer)
        let toNonEmpty = ratio(backfill, nonEmpty)
        let goals = Figures.Goals(
            speedRatio: Self.speedGoal, speedMet: toPeer.median >= Self.speedGoal, peakRSSMiB: Self.memoryGoalMiB,
            memoryMet: backfill.peakRSSMiBMax <= Self.memoryGoalMiB)

        say("")
        say("median of \(runs) runs (fastest in brackets; peak RSS: median [largest])")
        say("                                          wall s          events/s        peak RSS MiB    windows")
        func row(_ name: String, _ s: Figures.Summary, windows: String = "-") {
            say(
                name.padding(toLength: 38, withPad: " ", startingAt: 0)
                    + String(
                        format: "%7.2f [%6.2f] %8.0f [%7.0f] %7.1f [%5.1f]", s.seconds.median, s.seconds.fastest,
                        s.eventsPerSecond.median, s.eventsPerSecond.fastest, s.peakRSSMiB, s.peakRSSMiBMax)
                    + "   " + windows)
        }
        row("peer: quaked --once, empty store", peer)
        row("quaked --once, store with 1 event", nonEmpty)
        row(
            gzip ? "quaked backfill (FDSN, 0s, gzip)" : "quaked backfill (FDSN, pause 0s)", backfill,
            windows: String(format: "%.0f [%.0f]", windows.median, windows.fastest))
        say("")
        say(
            String(
                format:
                    "speed: the backfill runs at %.2f of the peer's events/s (fastest runs: %.2f); goal >= %.2f: %@",
                toPeer.median, toPeer.fastest, Self.speedGoal, goals.speedMet ? "met" : "MISSED"))
        say(
            String(
                format:
                    "  (and at %.2f [%.2f] of the import into a store with 1 event, which runs at %.2f [%.2f] of the peer's)",
                toNonEmpty.median, toNonEmpty.fastest, ratio(nonEmpty, peer).median, ratio(nonEmpty, peer).fastest))
        say(
            String(
                format:
                    "memory: quaked peaks at %.1f MiB during the backfill (largest of %d runs; median %.1f; the peer %.1f); goal <= %.0f MiB: %@",
                backfill.peakRSSMiBMax, runs, backfill.peakRSSMiB, peer.peakRSSMiBMax, Self.memoryGoalMiB,
                goals.memoryMet ? "met" : "MISSED"))

        // Where the backfill's time goes, in the median run.
        let medianRun = backfills.sorted { $0.seconds < $1.seconds }[backfills.count / 2]
        let importing = medianRun.windowSeconds.reduce(0, +)
        say("")
        say(String(format: "the median backfill run (%.2f s):", medianRun.seconds))
        say(
            String(
                format: "  %.2f s from the call to the first window's request (the job starting, %d count request(s))",
                medianRun.planSeconds, medianRun.countRequests))
        say(
            String(
                format:
                    "  %d windows in %.2f s, request to request: %.0f events and %.2f s each (median; %.2f to %.2f s), %.0f events/s; %d request(s) refused as over the limit",
                medianRun.windowEvents.count, importing, Self.median(medianRun.windowEvents.map(Double.init)),
                Self.median(medianRun.windowSeconds), medianRun.windowSeconds.min() ?? 0,
                medianRun.windowSeconds.max() ?? 0,
                Double(medianRun.windowEvents.reduce(0, +)) / max(importing, 1e-9), medianRun.refusedQueries))
        say(
            "  window seconds in order: "
                + medianRun.windowSeconds.map { String(format: "%.2f", $0) }.joined(separator: " "))
        say(
            String(
                format:
                    "  CPU: quaked %.1f s over its life (the peer %.1f s, the import into a store with 1 event %.1f s); this process, serving the windows: %.1f s",
                medianRun.quakedCPUSeconds, Self.median(peers.map(\.cpuSeconds)),
                Self.median(nonEmptyPeers.map(\.cpuSeconds)), medianRun.serviceCPUSeconds))
        if let alone {
            say(
                String(
                    format:
                        "  the FDSN service alone (curl fetching the last run's %d windows again, one at a time): %.2f s and %.1f s CPU with gzip, %.2f s and %.1f s CPU without",
                    alone.windows, alone.gzipSeconds, alone.gzipCPUSeconds, alone.plainSeconds, alone.plainCPUSeconds))
        }

        if json {
            let figures = Figures(
                features: features, feedBytes: feedBytes, runs: runs, searchLimit: searchLimit, gzip: gzip,
                backfillPauseSeconds: 0,
                peer: peer, peerNonEmpty: nonEmpty, backfill: backfill, windowsDone: windows, ratio: toPeer,
                ratioToNonEmpty: toNonEmpty, goals: goals, serviceAlone: alone, peerRuns: peers,
                peerNonEmptyRuns: nonEmptyPeers, backfillRuns: backfills)
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys]
            if let data = try? encoder.encode(figures) { print(String(decoding: data, as: UTF8.self)) }
        }
    }

    static func median(_ values: [Double]) -> Double {
        let sorted = values.sorted()
        guard !sorted.isEmpty else { return .nan }
        return sorted.count % 2 == 1
            ? sorted[sorted.count / 2] : (sorted[sorted.count / 2 - 1] + sorted[sorted.count / 2]) / 2
    }
}
