import ArgumentParser
import Foundation
import QuakeClient
import QuakeFeed
import QuakeProtocol
import QuakeStore
import QuakeTestSupport
import QuakeModel

#if canImport(Glibc)
    import Glibc
#endif

/// A real quaked following an all_month-like feed that changes every second, pulled every second,
/// for `--minutes`: two `quakectl watch` caches (one `--min-mag 4`) follow it, and a client keeps
/// connecting, calling GetInfo and GetStatus and abandoning Subscribe calls. Every `--report-every`
/// seconds and at the end it prints quaked's private memory (RssAnon), descriptors, threads, the
/// database and WAL sizes and the subscribers GetStatus counts; at the end their slopes per 1,000
/// pulls after the warm-up, beside the goals, and whether both caches equal the store. The goals
/// are reported, never asserted; a cache that differs from the store fails the run (exit 1).
struct SoakBenchmark: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "soak",
        abstract: "quaked following a feed that changes every second, with two watches and churning clients.")

    @Option(help: "How long the soak runs, in minutes.")
    var minutes: Double = 30

    @Option(help: "Events in the feed (an all_month feed holds about 10,000).")
    var events = 10_000

    @Option(help: "Print a line of figures every this many seconds.")
    var reportEvery = 30

    @Option(help: "Minutes left out of the slopes at the start (default: a sixth of the run).")
    var warmUp: Double?

    @Option(help: "Working directory for quaked's state and the caches (default: a temp directory).")
    var work: String?

    @Flag(help: "Print one JSON object with the figures at the end (progress goes to stderr).")
    var json = false

    /// What each second changes in the feed: new events (the newest), revised ones, and the oldest
    /// leaving it (the 30-day window moving on), so that it keeps its size.
    static let newPerSecond = 1
    static let revisedPerSecond = 5
    /// The soak's history-max-age: short, so that purges happen within the run.
    static let historyMaxAge = "10m"
    /// How often the figures are sampled (the slopes use every sample).
    static let sampleEvery: Duration = .seconds(5)

    /// The goals: private memory and descriptors flat after the warm-up, the WAL bounded.
    static let memoryGoalMiBPer1000 = 1.0
    static let descriptorGoalPer1000 = 1.0
    /// quaked checkpoints the WAL when it passes 1,000 pages (quaked's pages are 16 KiB; see
    /// QuakeStore's WALCheckpointer) and SQLite reuses it from the start when no reader is
    /// behind; the file keeps its largest size.
    static let walCheckpointMiB = 1000.0 * 16 / 1024

    func validate() throws {
        guard minutes > 0 else { throw ValidationError("--minutes must be more than 0") }
        guard events >= 100 else { throw ValidationError("--events must be at least 100") }
        guard reportEvery >= 1 else { throw ValidationError("--report-every must be at least 1") }
        if let warmUp, warmUp < 0 || warmUp >= minutes {
            throw ValidationError("--warm-up must be at least 0 and shorter than --minutes")
        }
    }

    /// The warm-up in seconds.
    var warmUpSeconds: Double { (warmUp ?? minutes / 6) * 60 }

    // MARK: Figures

    struct Sample: Codable {
        var seconds: Double
        var pulls: Int
        var privateBytes: Int
        var descriptors: Int
        var threads: Int
        var databaseBytes: Int
        var walBytes: Int
        var subscribers: Int
        var headToken: Int
        var oldestToken: Int
        var quakes: Int
        var churnConnections: Int
    }

    struct Slopes: Codable {
        var privateMiB: Double
        var descriptors: Double
        var threads: Double
        var databaseMiB: Double
        var walMiB: Double
        var subscribers: Double
    }

    struct Figures: Codable {
        var minutes: Double
        var events: Int
        var warmUpMinutes: Double
        var pulls: Int
        var feedVersions: Int
        var churnConnections: Int
        var churnErrors: Int
        var historyMaxAge: String
        /// Per 1,000 pulls, after the warm-up.
        var slopesPer1000Pulls: Slopes
        var walMaxMiB: Double
        var walBoundMiB: Double
        var databaseBytesPerNewQuake: Double?
        var goals: [String: Bool]
        var cacheEqual: Bool
        var filteredCacheEqual: Bool
        var samples: [Sample]
    }

    /// Progress and the report, written at once (not through stdio's buffer, which into a file
    /// or pipe would hold a long soak's lines until it ends).
    func say(_ text: String) {
        (json ? FileHandle.standardError : FileHandle.standardOutput).write(Data((text + "\n").utf8))
    }

    // MARK: Running

    func run() async throws {
        let products = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
            .deletingLastPathComponent()
        let quaked = products.appendingPathComponent("quaked").path
        let quakectl = products.appendingPathComponent("quakectl").path
        for tool in [quaked, quakectl] where !FileManager.default.isExecutableFile(atPath: tool) {
            throw ValidationError(
                "build quaked and quakectl next to quake-bench first: swift build -c release --scratch-path .build-release")
        }
        let base = try SyntheticFeed.workDirectory(work).appendingPathComponent("soak-\(getpid())")
        try? FileManager.default.removeItem(at: base)
        try FileManager.default.createDirectory(at: base, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: base) }
        let state = base.appendingPathComponent("state")
        let socket = base.appendingPathComponent("q.sock").path
        let config = base.appendingPathComponent("quaked.conf")
        try """
        # quake-bench soak
        history-max-age = \(Self.historyMaxAge)

        """.write(to: config, atomically: true, encoding: .utf8)

        let feed = EvolvingFeed(events: events, seed: 2024)
        let server = try await FeedTestServer.start()
        let path = "/summary/all_month.geojson"
        server.setHandler(path) { _ in
            let (version, body) = feed.current
            return TestResponse(
                body: .bytes(body), contentType: "application/json", etag: "\"v\(version)\"", gzip: false)
        }
        var processes: [ChildProcess] = []
        defer { for process in processes where process.isRunning { process.signal(SIGKILL) } }
        do {
            say(
                "feed: \(events) events at \(server.url(path)), each second \(Self.newPerSecond) new, "
                    + "\(Self.revisedPerSecond) revised, \(Self.newPerSecond) leaving; quaked pulls it every 1s")
            say(
                "quaked: history-max-age = \(Self.historyMaxAge) (quaked purges every tenth of it, at least every minute)")
            let daemon = try ChildProcess(
                quaked,
                [
                    "--config", config.path, "--state-directory", state.path, "--socket", socket, "--feed",
                    server.url(path), "--interval", "1s", "--log-level", "warning",
                ])
            processes.append(daemon)
            let deadline = ContinuousClock.now + .seconds(60)
            while !UnixSocketClient.canConnect(socket) {
                guard daemon.isRunning else { throw ValidationError("quaked exited at start-up: \(daemon.stderr)") }
                guard ContinuousClock.now < deadline else { throw ValidationError("quaked did not start") }
                try await Task.sleep(for: .milliseconds(50))
            }
            // The first pull, before the watches take their snapshots.
            while try await Self.status(socket).headToken <= 0 {
                guard ContinuousClock.now < deadline else { throw ValidationError("quaked's first pull did not end") }
                try await Task.sleep(for: .milliseconds(100))
            }
            let caches = (all: base.appendingPathComponent("all.sqlite").path, strong: base.appendingPathComponent("strong.sqlite").path)
            for (cache, extra) in [(caches.all, ""), (caches.strong, " --min-mag 4")] {
                // stdout to /dev/null: every change is printed, for hours.
                let watch = try ChildProcess(
                    "/bin/sh",
                    ["-c", "exec '\(quakectl)' watch --json --socket '\(socket)' --cache '\(cache)'\(extra) >/dev/null"])
                processes.append(watch)
            }
            say("two quakectl watch caches (all, --min-mag 4); a client connecting and abandoning Subscribe calls")

            let stop = StopFlag()
            let churn = ChurnCounter()
            let started = ContinuousClock.now
            let samples = SampleLog()
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask {
                    // The feed changes every second.
                    while !stop.isSet {
                        try await Task.sleep(for: .seconds(1))
                        feed.tick(now: QuakeTime.now())
                    }
                }
                group.addTask {
                    try await onBlockingThread { Self.churn(socket: socket, stop: stop, counter: churn) }
                }
                group.addTask {
                    var nextReport = ContinuousClock.now
                    let end = started + .seconds(minutes * 60)
                    self.say(
                        "    min  pulls  private MiB  fds  threads  db MiB  WAL MiB  subscribers  quakes  history tokens  connections")
                    while ContinuousClock.now < end {
                        guard daemon.isRunning else { throw ValidationError("quaked exited: \(daemon.stderr)") }
                        let sample = try await Self.sample(
                            pid: daemon.pid, socket: socket, state: state, pulls: server.requestCount(path),
                            seconds: (ContinuousClock.now - started).inSeconds, churn: churn.connections)
                        samples.append(sample)
                        if ContinuousClock.now >= nextReport {
                            self.say(Self.line(sample))
                            nextReport = nextReport + .seconds(reportEvery)
                        }
                        try await Task.sleep(for: min(Self.sampleEvery, max(end - ContinuousClock.now, .zero)))
                    }
                    stop.set()
                }
                try await group.waitForAll()
            }
            // The end: the feed stands still; quaked takes its last version, the caches catch up.
            let finalSample = try await Self.sample(
                pid: daemon.pid, socket: socket, state: state, pulls: server.requestCount(path),
                seconds: (ContinuousClock.now - started).inSeconds, churn: churn.connections)
            samples.append(finalSample)
            say(Self.line(finalSample))
            let pullsAtEnd = server.requestCount(path)
            let settle = ContinuousClock.now + .seconds(120)
            while server.requestCount(path) < pullsAtEnd + 2 {
                guard ContinuousClock.now < settle else { throw ValidationError("quaked stopped pulling") }
                try await Task.sleep(for: .milliseconds(200))
            }
            let head = try await Self.status(socket).headToken
            var positions: [Int?] = []
            while true {
                positions = [caches.all, caches.strong].map { path in
                    (try? QuakeCache(path: path)).flatMap { cache in
                        defer { try? cache.close() }
                        return try? cache.position()?.token
                    }
                }
                if positions.allSatisfy({ $0 == head }) { break }
                guard ContinuousClock.now < settle, processes.allSatisfy(\.isRunning) else { break }
                try await Task.sleep(for: .milliseconds(200))
            }
            let (allEqual, strongEqual) = try Self.compare(state: state, all: caches.all, strong: caches.strong)
            for process in processes.reversed() { process.signal(SIGTERM) }
            for process in processes.reversed() { _ = try? await process.wait(timeout: .seconds(30)) }
            try await server.shutdown()
            say(
                "caches at the end (store head token \(head), caches at \(positions.map { $0.map(String.init) ?? "none" }.joined(separator: ", "))): "
                    + "all \(allEqual ? "equal to the store" : "DIFFERENT from the store"), "
                    + "--min-mag 4 \(strongEqual ? "equal to the store's M ≥ 4" : "DIFFERENT from the store's M ≥ 4")")
            report(samples.all, feedVersions: feed.current.version, churn: churn, allEqual: allEqual, strongEqual: strongEqual)
            if !(allEqual && strongEqual) { throw ExitCode(1) }
        } catch {
            try? await server.shutdown()
            throw error
        }
    }

    // MARK: Pieces

    /// What the soak reads from GetStatus.
    struct Status: Sendable {
        var headToken = -1
        var oldestToken = -1
        var quakes = -1
        var subscribers = -1
    }

    static func status(_ socket: String) async throws -> Status {
        try await onBlockingThread {
            let reply = try UnixSocketClient(path: socket).call("io.quaked.GetStatus", timeout: .seconds(30))
            let parameters = reply["parameters"] as? [String: Any] ?? [:]
            return Status(
                headToken: parameters["headToken"] as? Int ?? -1, oldestToken: parameters["oldestToken"] as? Int ?? -1,
                quakes: parameters["quakeCount"] as? Int ?? -1, subscribers: parameters["subscribers"] as? Int ?? -1)
        }
    }

    static func sample(pid: Int32, socket: String, state: URL, pulls: Int, seconds: Double, churn: Int) async throws
        -> Sample
    {
        let status = try await status(socket)
        let database = state.appendingPathComponent("quakes.sqlite").path
        func size(_ path: String) -> Int {
            (try? FileManager.default.attributesOfItem(atPath: path)[.size] as? Int) ?? 0
        }
        let descriptors = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd").count) ?? -1
        let threads = (try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8))?.split(separator: "\n")
            .first { $0.hasPrefix("Threads:") }.flatMap { Int($0.dropFirst(8).trimmingCharacters(in: .whitespaces)) }
        return Sample(
            seconds: seconds, pulls: pulls,
            privateBytes: BackfillBenchmark.statusBytes(pid: pid, field: "RssAnon") ?? -1, descriptors: descriptors,
            threads: threads ?? -1, databaseBytes: size(database), walBytes: size(database + "-wal"),
            subscribers: status.subscribers, headToken: status.headToken, oldestToken: status.oldestToken,
            quakes: status.quakes, churnConnections: churn)
    }

    static func line(_ s: Sample) -> String {
        String(
            format: "%7.1f %6d %12.1f %4d %8d %7.1f %8.1f %12d %7d ", s.seconds / 60, s.pulls,
            Double(s.privateBytes) / 1_048_576, s.descriptors, s.threads, Double(s.databaseBytes) / 1_048_576,
            Double(s.walBytes) / 1_048_576, s.subscribers, s.quakes)
            + "\(s.oldestToken)-\(s.headToken)".padding(toLength: 15, withPad: " ", startingAt: 0)
            + String(format: " %12d", s.churnConnections)
    }

    /// The churning client: connects, calls GetInfo and GetStatus, starts a Subscribe (every other
    /// one filtered) and goes away, after its first reply or at once, over and over.
    static func churn(socket: String, stop: StopFlag, counter: ChurnCounter) {
        let plain = #"{"method":"io.quaked.Subscribe","parameters":{"heartbeatSeconds":3600},"more":true}"#
        let filtered =
            #"{"method":"io.quaked.Subscribe","parameters":{"heartbeatSeconds":3600,"filter":{"minMagnitude":4}},"more":true}"#
        var index = 0
        while !stop.isSet {
            index += 1
            do {
                let client = try UnixSocketClient(path: socket)
                _ = try client.call("org.varlink.service.GetInfo", timeout: .seconds(30))
                if index % 4 == 0 { _ = try client.call("io.quaked.GetStatus", timeout: .seconds(30)) }
                try client.send(index % 2 == 0 ? plain : filtered)
                if index % 3 != 0 { _ = try client.receive(timeout: .seconds(30)) }
                counter.connected()
                // The client's deinit closes the connection with the Subscribe call in progress.
            } catch {
                counter.failed()
            }
            usleep(50_000)
        }
    }

    /// Whether each cache holds what the store holds (all of it, and its quakes of M 4 or more).
    static func compare(state: URL, all: String, strong: String) throws -> (Bool, Bool) {
        let store = try QuakeStore(directory: state)
        defer { try? store.close() }
        let stored = try store.allQuakes()
        let filter = QuakeFilter(minMagnitude: 4)
        func wire(_ quake: FeedFeature) throws -> IOQuaked.Quake {
            try IOQuaked.Quake.decode(json: JSONEncoder().encode(quake))
        }
        let quakes = try stored.map(wire)
        let strongQuakes = try stored.filter(filter.matches).map(wire)
        func rows(_ quakes: [IOQuaked.Quake]) -> [String: IOQuaked.Quake] {
            Dictionary(quakes.map { ($0.id, $0) }, uniquingKeysWith: { a, _ in a })
        }
        func cached(_ path: String) throws -> [String: IOQuaked.Quake] {
            let cache = try QuakeCache(path: path)
            defer { try? cache.close() }
            return rows(try cache.allQuakes())
        }
        return (try cached(all) == rows(quakes), try cached(strong) == rows(strongQuakes))
    }

    /// Least-squares slope of `value` over pulls, per 1,000 pulls.
    static func slope(_ samples: [Sample], _ value: (Sample) -> Double) -> Double {
        guard samples.count >= 2 else { return .nan }
        let xs = samples.map { Double($0.pulls) }
        let ys = samples.map(value)
        let mx = xs.reduce(0, +) / Double(xs.count)
        let my = ys.reduce(0, +) / Double(ys.count)
        let sxx = xs.reduce(0) { $0 + ($1 - mx) * ($1 - mx) }
        guard sxx > 0 else { return .nan }
        let sxy = zip(xs, ys).reduce(0) { $0 + ($1.0 - mx) * ($1.1 - my) }
        return sxy / sxx * 1000
    }

    private func report(
        _ samples: [Sample], feedVersions: Int, churn: ChurnCounter, allEqual: Bool, strongEqual: Bool
    ) {
        let after = samples.filter { $0.seconds >= warmUpSeconds }
        let mib = 1_048_576.0
        let slopes = Slopes(
            privateMiB: Self.slope(after) { Double($0.privateBytes) / mib },
            descriptors: Self.slope(after) { Double($0.descriptors) },
            threads: Self.slope(after) { Double($0.threads) },
            databaseMiB: Self.slope(after) { Double($0.databaseBytes) / mib },
            walMiB: Self.slope(after) { Double($0.walBytes) / mib },
            subscribers: Self.slope(after) { Double($0.subscribers) })
        let walAtWarmUp = Double(after.first?.walBytes ?? 0) / mib
        let walMax = Double(after.map(\.walBytes).max() ?? 0) / mib
        // The bound: the checkpoint threshold's 16 MiB plus a pull's transaction (1 MiB is ample for a
        // few changes), or what the WAL already reached by the end of the warm-up (the first
        // import of the whole feed is one transaction; the file keeps its largest size).
        let walBound = max(Self.walCheckpointMiB + 1, walAtWarmUp)
        var perQuake: Double?
        if let first = after.first, let last = after.last, last.quakes > first.quakes {
            perQuake = Double(last.databaseBytes - first.databaseBytes) / Double(last.quakes - first.quakes)
        }
        let goals: [String: Bool] = [
            "privateMemoryFlat": slopes.privateMiB <= Self.memoryGoalMiBPer1000,
            "descriptorsFlat": slopes.descriptors <= Self.descriptorGoalPer1000,
            "walBounded": walMax <= walBound,
            "databaseInProportion": (perQuake ?? 0) <= 8192,
            "cachesEqual": allEqual && strongEqual,
        ]
        func met(_ key: String) -> String { goals[key]! ? "met" : "MISSED" }
        let pulls = samples.last?.pulls ?? 0
        say("")
        say(
            String(
                format: "%.1f min, %d pulls, %d feed versions, %d client connections (%d failed); slopes per 1,000 pulls after %.1f min of warm-up:",
                minutes, pulls, feedVersions, churn.connections, churn.failures, warmUpSeconds / 60))
        say(
            String(
                format: "  private memory (RssAnon) %+.2f MiB (%.1f → %.1f MiB); goal ≤ %.1f MiB: %@", slopes.privateMiB,
                Double(after.first?.privateBytes ?? 0) / mib, Double(after.last?.privateBytes ?? 0) / mib,
                Self.memoryGoalMiBPer1000, met("privateMemoryFlat")))
        say(
            String(
                format: "  descriptors %+.2f (%d → %d); goal: no growth (≤ %.0f): %@", slopes.descriptors,
                after.first?.descriptors ?? 0, after.last?.descriptors ?? 0, Self.descriptorGoalPer1000,
                met("descriptorsFlat")))
        say(
            String(
                format: "  threads %+.2f (%d → %d); subscribers %+.2f (%d → %d; the two watches are 2)", slopes.threads,
                after.first?.threads ?? 0, after.last?.threads ?? 0, slopes.subscribers, after.first?.subscribers ?? 0,
                after.last?.subscribers ?? 0))
        say(
            String(
                format:
                    "  WAL %+.2f MiB, largest %.1f MiB; goal: bounded by %.1f MiB (checkpointed past 1,000 pages of 16 KiB, plus a pull; or its size after the warm-up): %@",
                slopes.walMiB, walMax, walBound, met("walBounded")))
        say(
            String(
                format: "  database %+.2f MiB (%.1f → %.1f MiB, %d → %d quakes: %@ per quake added); goal: growth in proportion to the quakes added, ≤ 8 KiB each, history older than %@ purged: %@",
                slopes.databaseMiB, Double(after.first?.databaseBytes ?? 0) / mib,
                Double(after.last?.databaseBytes ?? 0) / mib, after.first?.quakes ?? 0, after.last?.quakes ?? 0,
                perQuake.map { String(format: "%.0f bytes", $0) } ?? "none" as String, Self.historyMaxAge,
                met("databaseInProportion")))
        say("  caches equal to the store: \(met("cachesEqual"))")
        if json {
            let figures = Figures(
                minutes: minutes, events: events, warmUpMinutes: warmUpSeconds / 60, pulls: pulls,
                feedVersions: feedVersions, churnConnections: churn.connections, churnErrors: churn.failures,
                historyMaxAge: Self.historyMaxAge, slopesPer1000Pulls: slopes, walMaxMiB: walMax, walBoundMiB: walBound,
                databaseBytesPerNewQuake: perQuake, goals: goals, cacheEqual: allEqual, filteredCacheEqual: strongEqual,
                samples: samples)
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys]
            encoder.nonConformingFloatEncodingStrategy = .convertToString(
                positiveInfinity: "inf", negativeInfinity: "-inf", nan: "nan")
            if let data = try? encoder.encode(figures) { print(String(decoding: data, as: UTF8.self)) }
        }
    }
}

// MARK: The feed

/// An all_month-like feed that changes every tick: new events at the newest end, revisions
/// (magnitude, status) of random ones, and the oldest leaving. Deterministic for a seed.
final class EvolvingFeed: @unchecked Sendable {
    private struct Event {
        var number: Int
        var time: Int64
        var updated: Int64
        var mag: Double
        var lat: Double
        var lon: Double
        var depth: Double
        var reviewed: Bool
        var json: [UInt8]
    }

    private let lock = NSLock()
    /// Oldest first.
    private var events: [Event] = []
    private var next = 0
    private var rng: SeededRandom
    private var version = 0
    private var body: [UInt8] = []

    init(events count: Int, seed: UInt64) {
        rng = SeededRandom(seed: seed)
        let now = QuakeTime.now()
        let month: Int64 = 30 * 86_400_000
        for index in 0..<count {
            let time = now - month + month * Int64(index) / Int64(count)
            events.append(make(time: time, updated: time + 60_000))
        }
        rebuild(now: now)
    }

    /// The current version's number and body.
    var current: (version: Int, body: [UInt8]) {
        lock.withLock { (version, body) }
    }

    func tick(now: Int64) {
        lock.withLock {
            for _ in 0..<SoakBenchmark.newPerSecond {
                events.append(make(time: now - 30_000, updated: now))
                events.removeFirst()
            }
            for _ in 0..<SoakBenchmark.revisedPerSecond {
                let index = Int(random() % UInt64(events.count))
                var event = events[index]
                event.mag = max(-1, min(8, event.mag + (Double(random() % 61) - 30) / 100))
                event.reviewed = event.reviewed || random() % 4 == 0
                event.updated = max(now, event.updated + 1)
                event.json = Self.encode(event)
                events[index] = event
            }
            rebuild(now: now)
        }
    }

    private func rebuild(now: Int64) {
        version += 1
        var out: [UInt8] = []
        out.reserveCapacity(body.count + 4096)
        out += Array(
            #"{"type":"FeatureCollection","metadata":{"generated":\#(now),"url":"https://earthquake.usgs.gov/earthquakes/feed/v1.0/summary/all_month.geojson","title":"USGS All Earthquakes, Past Month (quake-bench soak)","status":200,"api":"1.10.3","count":\#(events.count)},"features":["#
                .utf8)
        // Newest first, as the USGS orders them.
        for (offset, event) in events.reversed().enumerated() {
            if offset > 0 { out.append(UInt8(ascii: ",")) }
            out += event.json
        }
        out += Array("]}".utf8)
        body = out
    }

    private func make(time: Int64, updated: Int64) -> Event {
        next += 1
        let u = Double(random() % 10_000) / 10_000
        var event = Event(
            number: next, time: time, updated: updated, mag: ((1 + 4.5 * u * u) * 100).rounded() / 100,
            lat: Double(Int(random() % 17_000) - 8500) / 100, lon: Double(Int(random() % 36_000) - 18_000) / 100,
            depth: Double(random() % 6000) / 100, reviewed: false, json: [])
        event.json = Self.encode(event)
        return event
    }

    private static func encode(_ e: Event) -> [UInt8] {
        let mag = (e.mag * 100).rounded() / 100
        let id = "sk\(e.number)"
        var values = [QuakeValue](repeating: .null, count: QuakeRecord.fields.count)
        func set(_ name: String, _ value: QuakeValue) { values[QuakeRecord.index(of: name)!] = value }
        set("id", .text(id))
        set("mag", .real(mag))
        set("place", .text("soak event \(e.number)"))
        set("time", .integer(e.time))
        set("updated", .integer(e.updated))
        set("url", .text("https://earthquake.usgs.gov/earthquakes/eventpage/\(id)"))
        set("detail", .text("https://earthquake.usgs.gov/earthquakes/feed/v1.0/detail/\(id).geojson"))
        set("status", .text(e.reviewed ? "reviewed" : "automatic"))
        set("tsunami", .integer(0))
        set("sig", .integer(Int64(max(0, e.mag * 40))))
        set("net", .text("sk"))
        set("code", .text("\(e.number)"))
        set("ids", .text(",\(id),"))
        set("sources", .text(",sk,"))
        set("types", .text(",origin,phase-data,"))
        set("magType", .text("ml"))
        set("type", .text("earthquake"))
        set("title", .text("M \(mag) - soak event \(e.number)"))
        set("lon", .real(e.lon))
        set("lat", .real(e.lat))
        set("depth", .real(e.depth))
        // The location's quality fields, as a located event in the USGS feed has them: whatever
        // numeric fields are left, a small number each; felt reports and intensities stay null.
        for (index, field) in QuakeRecord.fields.enumerated() where values[index].isNull && field.unit != nil {
            values[index] = field.kind == .integer ? .null : .real(0.1)
        }
        return SoakFeature.json(values)
    }

    private func random() -> UInt64 { rng.next() }
}

/// Set once, read from any thread.
final class StopFlag: @unchecked Sendable {
    private let lock = NSLock()
    private var value = false
    var isSet: Bool { lock.withLock { value } }
    func set() { lock.withLock { value = true } }
}

/// The churning client's connections and failures.
final class ChurnCounter: @unchecked Sendable {
    private let lock = NSLock()
    private var counts = (connections: 0, failures: 0)
    var connections: Int { lock.withLock { counts.connections } }
    var failures: Int { lock.withLock { counts.failures } }
    func connected() { lock.withLock { counts.connections += 1 } }
    func failed() { lock.withLock { counts.failures += 1 } }
}

/// The samples, appended from the sampling task.
final class SampleLog: @unchecked Sendable {
    private let lock = NSLock()
    private var samples: [SoakBenchmark.Sample] = []
    var all: [SoakBenchmark.Sample] { lock.withLock { samples } }
    func append(_ sample: SoakBenchmark.Sample) { lock.withLock { samples.append(sample) } }
}

/// A USGS GeoJSON feature from a quake's values (QuakeModel's order): the properties, the point
/// and the id, as the feed writes them.
enum SoakFeature {
    static func json(_ values: [QuakeValue]) -> [UInt8] {
        var properties: [String] = []
        var coordinates = ["null", "null", "null"]
        var id = ""
        for (field, value) in zip(QuakeRecord.fields, values) {
            let text: String =
                switch value {
                case .null: "null"
                case .integer(let n): String(n)
                case .real(let d): String(d)
                case .text(let t): "\"" + t + "\""
                }
            switch field.origin {
            case .featureID: id = text
            case .property: properties.append("\"\(field.name)\":\(text)")
            case .coordinate(let i): coordinates[i] = text
            case .derived: break  // not in the feed
            }
        }
        return Array(
            (#"{"type":"Feature","properties":{"# + properties.joined(separator: ",")
                + #"},"geometry":{"type":"Point","coordinates":["# + coordinates.joined(separator: ",")
                + #"]},"id":"# + id + "}").utf8)
    }
}
