import ArgumentParser
import Foundation
import QuakeClient
import QuakeProtocol
import UnixSignals
import QuakeModel

/// `quakectl backfill`: start a backfill job in quaked and follow it; list and cancel jobs.
public struct BackfillCommand: AsyncParsableCommand {
    public static let configuration = CommandConfiguration(
        commandName: "backfill",
        abstract: "Fetch older earthquakes from an FDSN event service into the store.",
        discussion: """
            Starts a job in quaked that pages the FDSN event service (default: the catalog key of \
            quaked.conf, else https://earthquake.usgs.gov/fdsnws/event/1/; with --source NAME, the \
            configured fdsn source NAME in its format, its windows that source's reports, \
            associated with the other sources') through time windows, \
            oldest first, each window one history transaction (author backfill), and follows it: \
            a progress bar on a terminal, a line per window otherwise, a JSON object per update \
            with --json. Ctrl-C detaches: the job goes on in quaked (and survives its restarts); \
            `backfill --status ID --follow` follows it again, `backfill --cancel ID` stops it. \
            Starting and cancelling jobs needs quaked's admin rights (as delete does). Exits 0 \
            when the job is done (or on detaching), 1 when it failed or was cancelled.
            """)

    @OptionGroup public var options: ClientOptions

    @Option(help: ArgumentHelp("The oldest event time to fetch: \(TimeArgument.help).", valueName: "time"))
    public var start: String?

    @Option(help: ArgumentHelp("Fetch events before this time (default: now).", valueName: "time"))
    public var end: String?

    @Option(name: .customLong("min-mag"), help: ArgumentHelp("Only events of at least this magnitude.", valueName: "m"))
    public var minMag: Double?

    @Option(help: ArgumentHelp("Only events within --radius of this point.", valueName: "lat,lon"))
    public var near: String?

    @Option(help: ArgumentHelp("The radius for --near in kilometres (default 100).", valueName: "km"))
    public var radius: Double?

    @Option(
        help: ArgumentHelp(
            "Only events in this box; it crosses the antimeridian when minlon > maxlon.",
            valueName: "minlat,minlon,maxlat,maxlon"))
    public var box: String?

    @Option(help: ArgumentHelp("The FDSN event service's base URL.", valueName: "url"))
    public var catalog: String?

    @Option(
        help: ArgumentHelp(
            "Page this configured fdsn source (source = NAME in quaked.conf) instead: its URL and format, its min-magnitude and region unless given.",
            valueName: "name"))
    public var source: String?

    @Flag(help: "Start the job and return at once, printing it.")
    public var detach = false

    @Flag(help: "List the jobs (newest first), or show job ID.")
    public var status = false

    @Flag(help: "With --status ID: follow the job as it runs.")
    public var follow = false

    @Option(help: ArgumentHelp("Cancel this job; the windows it imported stay.", valueName: "id"))
    public var cancel: Int?

    @Argument(help: ArgumentHelp("With --status: the job to show.", valueName: "id"))
    public var id: Int?

    public init() {}

    public func validate() throws {
        let starting = start != nil || end != nil || minMag != nil || near != nil || radius != nil || box != nil
            || catalog != nil || source != nil || detach
        if status || cancel != nil {
            guard !starting else {
                throw ValidationError("--status and --cancel take no job options (--start, --end, --near, ...).")
            }
            guard !(status && cancel != nil) else { throw ValidationError("give one of --status and --cancel.") }
            if cancel != nil && id != nil { throw ValidationError("--cancel takes the job's id: --cancel ID.") }
            if follow && id == nil { throw ValidationError("--follow needs a job: --status ID --follow.") }
            return
        }
        if id != nil { throw ValidationError("a job id goes with --status (--status ID) or --cancel (--cancel ID).") }
        if follow { throw ValidationError("--follow goes with --status ID.") }
        _ = try parameters()
    }

    /// The Backfill call's parameters, checked here with messages that name the flag.
    func parameters(now: Date = Date()) throws -> IOQuaked.Backfill.Parameters {
        guard let start else {
            throw ValidationError("give --start (the oldest event time to fetch), or --status or --cancel.")
        }
        guard let startMs = TimeArgument.parse(start, now: now) else {
            throw ValidationError("--start \(start.debugDescription) is not a time: use \(TimeArgument.help).")
        }
        var endMs: Int?
        if let end {
            guard let parsed = TimeArgument.parse(end, now: now) else {
                throw ValidationError("--end \(end.debugDescription) is not a time: use \(TimeArgument.help).")
            }
            endMs = parsed
        }
        let nowMs = Int(QuakeTime.milliseconds(now, rounding: .towardZero))
        guard startMs < (endMs ?? nowMs) else {
            throw ValidationError(
                endMs == nil ? "--start is not in the past: there is nothing to fetch." : "--start must be before --end.")
        }
        if let minMag, !(minMag.isFinite && (-2...10).contains(minMag)) {
            throw ValidationError("--min-mag must be a magnitude from -2 to 10.")
        }
        // The region flags mean what they mean for list and watch: FilterOptions reads them.
        var regionArguments: [String] = []
        if let near { regionArguments += ["--near", near] }
        if let radius { regionArguments += ["--radius", "\(radius)"] }
        if let box { regionArguments += ["--box", box] }
        let filters = try FilterOptions.parse(regionArguments)
        let filter = try filters.filter(now: now)
        let nearParameter = filter?.near
        let boxParameter = filter?.box
        if let box = boxParameter, !(box.minLat <= box.maxLat && box.minLon != box.maxLon) {
            throw ValidationError("--box has no area: give MINLAT <= MAXLAT and MINLON ≠ MAXLON.")
        }
        if catalog != nil && source != nil {
            throw ValidationError("give one of --catalog and --source.")
        }
        if let catalog {
            guard let url = URLComponents(string: catalog), ["http", "https"].contains(url.scheme?.lowercased() ?? ""),
                url.host?.isEmpty == false, url.query == nil
            else {
                throw ValidationError(
                    "--catalog \(catalog.debugDescription) is not an FDSN event service URL: give an http:// or https:// base URL such as https://earthquake.usgs.gov/fdsnws/event/1/.")
            }
        }
        return IOQuaked.Backfill.Parameters(
            start: startMs, end: endMs, minMagnitude: minMag, near: nearParameter, box: boxParameter, catalog: catalog,
            source: source)
    }

    public func run() async throws {
        let style = options.style
        if status {
            if let id {
                if follow {
                    try await followJob(style) { connection in
                        try await connection.callMore(IOQuaked.BackfillStatus.self, .init(id: id)).map { $0.jobs.first }
                    }
                } else {
                    let reply = try await options.withConnection {
                        try await $0.call(IOQuaked.BackfillStatus.self, .init(id: id))
                    }
                    if style.json { Console.line(JSONText.encode(reply)) } else { reply.jobs.forEach { print(job: $0, style) } }
                }
            } else {
                let reply = try await options.withConnection {
                    try await $0.call(IOQuaked.BackfillStatus.self, .init(id: nil))
                }
                if style.json {
                    Console.line(JSONText.encode(reply))
                } else if reply.jobs.isEmpty {
                    Console.line("no backfill jobs")
                } else {
                    reply.jobs.forEach { Console.line(Self.summary($0)) }
                }
            }
            return
        }
        if let cancel {
            let reply = try await options.withConnection {
                try await $0.call(IOQuaked.BackfillCancel.self, .init(id: cancel))
            }
            if style.json { Console.line(JSONText.encode(reply)) } else { Console.line(Self.summary(reply.job)) }
            return
        }
        let parameters = try parameters()
        if detach {
            let reply = try await options.withConnection { try await $0.call(IOQuaked.Backfill.self, parameters) }
            if style.json { Console.line(JSONText.encode(reply)) } else { Console.line(Self.summary(reply.job)) }
            return
        }
        try await followJob(style) { connection in
            try await connection.callMore(IOQuaked.Backfill.self, parameters).map { Optional($0.job) }
        }
    }

    private func print(job: IOQuaked.BackfillJob, _ style: OutputStyle) {
        Console.line(Self.summary(job))
        if let error = job.error { Console.line("  error: \(error)") }
    }

    /// Follows a job's replies until it ends, or detaches on SIGINT/SIGTERM.
    private func followJob<S: AsyncSequence & Sendable>(
        _ style: OutputStyle, _ open: @escaping @Sendable (QuakedConnection) async throws -> S
    ) async throws where S.Element == IOQuaked.BackfillJob? {
        let signals = await UnixSignalsSequence(trapping: .sigint, .sigterm)
        let bar = ProgressLine(enabled: style.progress)
        let seen = LastJob()
        let options = options
        let ended: IOQuaked.BackfillJob? = try await withThrowingTaskGroup(of: IOQuaked.BackfillJob?.self) { group in
            group.addTask {
                try await options.withConnection { connection in
                    var last: IOQuaked.BackfillJob?
                    var lastLine = ""
                    for try await job in try await open(connection) {
                        guard let job else { continue }
                        seen.set(job)
                        last = job
                        if style.json {
                            Console.line(JSONText.encode(job))
                        } else if style.progress {
                            bar.show(Self.bar(job))
                        } else {
                            let line = Self.progressLine(job)
                            if line != lastLine { Console.line(line) }
                            lastLine = line
                        }
                    }
                    return last
                }
            }
            group.addTask {
                for await _ in signals { return nil }
                return nil
            }
            let first = try await group.next() ?? nil
            group.cancelAll()
            return first
        }
        bar.clear()
        guard let ended, ended.state != .queued, ended.state != .running else {
            guard let job = seen.value else {
                if ended == nil {
                    Console.err("detached before quaked answered; `quakectl backfill --status` lists the jobs.\n")
                    return
                }
                throw QuakectlError(QuakectlError.unavailable, "quaked closed the connection before answering.")
            }
            if ended == nil {
                Console.err(
                    "detached: backfill \(job.id) goes on in quaked; `quakectl backfill --status \(job.id) --follow` follows it, `quakectl backfill --cancel \(job.id)` stops it.\n"
                )
                return
            }
            throw QuakectlError(
                QuakectlError.unavailable,
                "quaked stopped answering while backfill \(job.id) ran; the job resumes when quaked starts again (`quakectl backfill --status \(job.id)`).")
        }
        if !style.json { Console.line(Self.summary(ended)) }
        switch ended.state {
        case .done:
            return
        case .failed:
            throw QuakectlError(
                QuakectlError.failure,
                "backfill \(ended.id) failed: \(ended.error ?? "no reason given"); the \(Formatting.count(ended.windowsDone)) windows done stay imported.")
        default:
            throw QuakectlError(
                QuakectlError.failure,
                "backfill \(ended.id) was cancelled; the \(Formatting.count(ended.windowsDone)) windows done stay imported.")
        }
    }

    // MARK: Text

    /// `backfill 3 done · 40/40 windows · 45,120 events, 31,002 imported · 2024-01-01 00:00 → 2024-02-01 00:00 UTC`
    static func summary(_ job: IOQuaked.BackfillJob) -> String {
        var parts = [
            "backfill \(job.id)\(job.source.map { " (source \($0))" } ?? "") \(job.state.rawValue)",
            "\(Formatting.count(job.windowsDone))/\(Formatting.count(job.windowsTotal)) windows",
            "\(Formatting.count(job.eventsFetched)) events, \(Formatting.count(job.eventsImported)) imported",
            "\(QuakeTime.utcMinutes(job.start)) → \(QuakeTime.utcMinutes(job.end)) UTC",
        ]
        if let m = job.minMagnitude { parts.append("M ≥ \(Formatting.oneDecimal(m))") }
        if let token = job.lastToken { parts.append("token \(token)") }
        if job.state == .failed, let error = job.error { parts.append(error) }
        return parts.joined(separator: " · ")
    }

    /// One line per update when not on a terminal.
    static func progressLine(_ job: IOQuaked.BackfillJob) -> String {
        var line =
            "backfill \(job.id): \(Formatting.count(job.windowsDone))/\(Formatting.count(job.windowsTotal)) windows, "
            + "\(Formatting.count(job.eventsFetched)) events, \(Formatting.count(job.eventsImported)) imported"
        if let start = job.windowStart, let end = job.windowEnd { line += ", now \(QuakeTime.utcMinutes(start)) → \(QuakeTime.utcMinutes(end))" }
        if let rate = job.eventsPerSecond { line += ", \(Formatting.count(Int(rate.rounded())))/s" }
        if let eta = job.etaSeconds { line += ", ETA \(Formatting.duration(ms: eta * 1000))" }
        if let error = job.error, job.state == .running { line += " (\(error))" }
        return line
    }

    /// `[██████░░░░░░░░] 12/40 windows · 45,120 events · 1,520/s · ETA 3m`
    static func bar(_ job: IOQuaked.BackfillJob, width: Int = 24) -> String {
        let total = max(job.windowsTotal, 1)
        let filled = min(width, width * job.windowsDone / total)
        var text =
            "[" + String(repeating: "█", count: filled) + String(repeating: "░", count: width - filled) + "] "
            + "\(Formatting.count(job.windowsDone))/\(Formatting.count(job.windowsTotal)) windows · "
            + "\(Formatting.count(job.eventsFetched)) events"
        if let rate = job.eventsPerSecond { text += " · \(Formatting.count(Int(rate.rounded())))/s" }
        if let eta = job.etaSeconds { text += " · ETA \(Formatting.duration(ms: eta * 1000))" }
        if job.state == .queued { text += " · queued" }
        if job.error != nil { text += " · retrying" }
        return text
    }
}

/// The newest job description seen, for the message on detaching.
private final class LastJob: Sendable {
    private let box = NIOLockedValueBoxLite<IOQuaked.BackfillJob?>(nil)
    func set(_ job: IOQuaked.BackfillJob) { box.set(job) }
    var value: IOQuaked.BackfillJob? { box.get() }
}

/// A tiny lock box (QuakeCtl does not depend on NIO).
private final class NIOLockedValueBoxLite<T: Sendable>: @unchecked Sendable {
    private var value: T
    private let lock = NSLock()
    init(_ value: T) { self.value = value }
    func set(_ new: T) { lock.withLock { value = new } }
    func get() -> T { lock.withLock { value } }
}
