import QuakeClient
import QuakeProtocol
import ArgumentParser
import Foundation
import UnixSignals
import Varlink
import QuakeModel

/// `quakectl watch`: live changes, kept in a local cache.
public struct WatchCommand: AsyncParsableCommand {
    public static let configuration = CommandConfiguration(
        commandName: "watch",
        abstract: "Print earthquakes as they are added, updated and removed, keeping a local cache.",
        discussion: """
            The cache holds the store's rows, its id and the last applied history token, written \
            together in one transaction per commit (see below), so a crash never leaves them out \
            of step. On \
            start, watch catches up from the saved token, then follows quaked's notifications. \
            When the token has expired or quaked serves another store, it replaces the cache from \
            a snapshot and says so. When quaked goes away, it keeps the cache and retries; every \
            change made meanwhile is printed once when it is back. With --json, each line is \
            {"event":"change","token":...,"change":{...}} or {"event":"reset","quakes":...}.

            The filters are applied by quaked: the cache keeps only the quakes that match. A quake \
            that comes to match (revised upwards, say) is printed as `enter`, one that stops \
            matching as `leave`; in --json the change's kind is "enter" or "leave". A cache kept \
            with other filters starts over from a snapshot, and watch says so. A relative --since \
            (2h) moves with each start, so the cache starts over each time: give a date.

            --since now is a start position, not a filter, for a cache that has none: what \
            quaked holds up to its head goes into the cache without being printed or run for. \
            A cache with a position resumes from it, so a watch started again with the same \
            command line (by systemd, a script, after a crash) delivers everything after it, at \
            least once. Only a position it cannot use (an expired token, another store, other \
            filters: the cases that reset it, and say why) makes --since now a start again.

            A quaked that says nothing, not even a heartbeat, for three heartbeats and 5 s, or a \
            cache that stays behind quaked's head for as long, ends the connection: watch says \
            so once and reconnects. Under systemd (Type=notify with WatchdogSec=), watch sends \
            READY=1 when it starts and WATCHDOG=1 while it makes progress, is idle at the head \
            or is retrying; a wedged watch goes quiet and systemd restarts it.

            Each change is printed, then committed to the cache. A catch-up commits each page of \
            history it fetches once all of the page is printed: at most 100 transactions and \
            about 8,000 changes, or one larger transaction; at the live tail a page is one transaction. \
            On SIGTERM, SIGINT or SIGHUP the page in hand is finished, printed and committed, and \
            watch exits 0. A crash between printing and committing prints that page's changes \
            again on the next run, never not at all. With --exec but neither --batch nor \
            --quiet-hours, each transaction is committed once its commands have run, so a crash \
            runs at most one transaction's again.

            Revision rules choose the updates worth printing and running --exec for: \
            --on-change lists the fields whose change counts (status counts automatic to \
            reviewed), --min-mag-change and --min-move-km set how far the magnitude and the \
            epicentre must move. Without --on-change, the thresholds given name the fields. \
            Updates that do not qualify still reach the cache; inserts, enters, leaves and \
            deletes always print.

            --batch and --quiet-hours change when --exec's command runs, not what is printed. \
            Each change for the command is queued in the cache in the transaction that applies \
            it, and leaves the queue when a run that got it exits 0: delivery is at least once, \
            across stops, crashes and reboots. --batch 5m runs the command once per window, \
            opened by the first change queued, with all of the window's changes as one JSON \
            array on stdin. In --quiet-hours (by the --tz clock) changes are held, except quakes \
            of at least --quiet-min-mag; when the hours end, the command runs once on all of \
            them, a digest. A window or quiet hours that ended while watch was stopped are \
            delivered when it starts again; a run that was going on is finished first on a stop \
            signal, and repeated after a crash.
            """)

    @OptionGroup public var options: ClientOptions

    @Option(help: ArgumentHelp("The cache file. Default: $XDG_CACHE_HOME/quakectl/cache.sqlite.", valueName: "path"))
    public var cache: String?

    @OptionGroup(title: "Filters") public var filters: FilterOptions

    @OptionGroup public var revisions: RevisionOptions

    @OptionGroup(title: "Display") public var display: DisplayOptions

    @Option(
        help: ArgumentHelp(
            "First print the newest N matching quakes of the cache, like tail -f.", valueName: "n"))
    public var last: Int?

    @Option(
        help: ArgumentHelp(
            "A durable client name: quaked keeps the history it has not acknowledged.", valueName: "name"))
    public var name: String?

    @Option(
        help: ArgumentHelp(
            "Run CMD with /bin/sh -c for each change printed (or per --batch), the change as JSON on stdin; see the man page.",
            valueName: "cmd"))
    public var exec: String?

    @Option(
        name: .customLong("exec-timeout"),
        help: ArgumentHelp(
            "Stop a run of --exec's command after this long (\(QuakeDuration.examples)), and retry it.",
            valueName: "duration"))
    public var execTimeout: String = "60s"

    @OptionGroup public var digests: DigestOptions

    @Option(help: .hidden)
    public var heartbeat: Int = IOQuaked.Defaults.heartbeatSeconds

    public init() {}

    public func validate() throws {
        _ = try filters.filter(sinceIsFilter: filters.since != "now")
        _ = try revisions.rules()
        if let last, last < 0 { throw ValidationError("--last must not be negative.") }
        guard DurationArgument.parse(execTimeout) != nil else {
            throw ValidationError("--exec-timeout takes a duration: \(QuakeDuration.examples).")
        }
        if let exec, exec.trimmingCharacters(in: .whitespaces).isEmpty {
            throw ValidationError("--exec needs a command.")
        }
        if heartbeat < 1 { throw ValidationError("--heartbeat must be at least 1 second.") }
        _ = try digests.plan(timeZone: .current)
        if exec == nil, digests.isSet {
            let flag = digests.batch != nil ? "--batch" : digests.quietHours != nil ? "--quiet-hours" : "--quiet-min-mag"
            throw ValidationError("\(flag) says when --exec's command runs: give --exec too.")
        }
        if let name, name.isEmpty { throw ValidationError("--name must not be empty.") }
    }

    public func run() async throws {
        let path = cache ?? CachePath.defaultPath()
        let cache: QuakeCache
        do {
            cache = try QuakeCache(path: path)
        } catch {
            throw QuakectlError(
                QuakectlError.failure, "cannot open the cache at \(path) (\(error)); pass --cache with a writable path."
            )
        }
        var watchOptions = Watcher.Options(endpoint: try options.endpoint)
        watchOptions.clientName = name
        watchOptions.sinceNow = filters.since == "now"
        watchOptions.filter = try filters.filter(sinceIsFilter: filters.since != "now")
        watchOptions.lastCount = last
        watchOptions.heartbeatSeconds = heartbeat
        // --exec running its command for each change: a crash should repeat one transaction's
        // runs at most, not a page's (with --batch or --quiet-hours the runs are the outbox's).
        watchOptions.commitEachTransaction = exec != nil && !digests.isSet
        // The stop signals are the watch's own (below); a stop ends the ssh children of --host.
        let stop = WatchStop()
        let style = try display.apply(to: options.style)
        let delivery = exec.map {
            ExecDelivery(
                command: $0, timeout: DurationArgument.parse(execTimeout)!, stop: stop, clientName: name,
                endpoint: watchOptions.endpoint, cache: cache, timeZone: style.timeZone)
        }
        let rules = try revisions.rules()
        let plan = try digests.plan(timeZone: style.timeZone)
        let clock = try DeliveryClock.fromEnvironment()
        let wakeup = Wakeup()
        // With --batch or --quiet-hours, changes go through the cache's outbox: the printer only
        // prints, and the dispatcher runs the command when the plan says.
        let printer = WatchPrinter(style: style, delivery: plan == nil ? delivery : nil, rules: rules)
        let outbox = plan.map { plan in
            Watcher.Outbox(
                entries: { transaction, storeId, before, isBacklog in
                    isBacklog ? [] : printer.outboxEntries(transaction, storeId: storeId, before: before, plan: plan, now: clock.now())
                },
                queued: { wakeup.signal() })
        }
        let queued = try cache.outboxCount()
        if queued > 0 {
            Console.err(
                delivery == nil
                    ? "quakectl: \(queued) change\(queued == 1 ? "" : "s") queued for --exec by an earlier watch wait in the cache; give --exec to deliver them.\n"
                    : "quakectl: \(queued) change\(queued == 1 ? "" : "s") queued by an earlier watch wait in the cache; delivering them as --batch and --quiet-hours say.\n"
            )
        }
        let health = WatchHealth(heartbeatSeconds: watchOptions.heartbeatSeconds)
        let service = ServiceNotifications()
        let watcher =
            outbox.map { Watcher(options: watchOptions, cache: cache, outbox: $0) }
            ?? Watcher(options: watchOptions, cache: cache)
        // Under systemd: started, and alive for as long as the watch is healthy.
        service.ready()
        try await withThrowingTaskGroup(of: Void.self) { group in
            if let keepAlive = service.keepAlive(health) {
                // Runs until cancelled with the others, when the watch has ended.
                group.addTask { await keepAlive() }
            }
            group.addTask {
                // SIGTERM, SIGINT and SIGHUP stop the watch once the change in hand is delivered.
                for await _ in await UnixSignalsSequence(trapping: .sigterm, .sigint, .sighup) {
                    service.stopping()
                    await stop.request()
                    wakeup.signal()
                    return
                }
            }
            if let delivery, plan != nil || queued > 0 {
                // Without --batch or --quiet-hours, what an earlier run queued is delivered first
                // (a digest of what was held, then each change), then the watch goes on as usual.
                let dispatcher = OutboxDispatcher(
                    cache: cache, plan: plan ?? OutboxPlan(timeZone: style.timeZone), clock: clock)
                if plan == nil {
                    try await dispatcher.run(wakeup: wakeup, untilEmpty: true, stopped: { stop.isRequested }) {
                        try await delivery.deliver($0)
                    }
                    if stop.isRequested { return }
                } else {
                    group.addTask {
                        try await dispatcher.run(wakeup: wakeup, stopped: { stop.isRequested }) {
                            try await delivery.deliver($0)
                        }
                        // Stopped: wait for the watch to end too (the group ends with the first).
                        while !stop.isRequested, !Task.isCancelled { await wakeup.wait(upTo: .seconds(1)) }
                    }
                }
            }
            group.addTask {
                try await watcher.run(stop: stop, health: health) { try await printer.deliver($0) }
            }
            defer { group.cancelAll() }
            do {
                try await group.next()
            } catch is CancellationError where stop.isRequested {
                // Stopped by a signal: whichever part noticed it first may end with a
                // CancellationError; the watch ends as stopped (exit 0), its cache as committed.
            }
        }
    }
}

/// How `watch` shows the Watcher's events: a line per change (or per JSON object), a line per
/// reset, and one message on stderr per outage.
struct WatchPrinter: Sendable {
    let style: OutputStyle
    /// `--exec`: run for each change printed, after it is printed.
    var delivery: ExecDelivery? = nil
    /// `--on-change`, `--min-mag-change`, `--min-move-km`: the updates printed and run for.
    var rules: RevisionRules? = nil

    /// The changes of a transaction that are delivered: all, or the updates the rules pass and
    /// every other kind.
    func delivered(_ transaction: IOQuaked.Transaction, before: [String: IOQuaked.Quake]) -> [IOQuaked.Change] {
        guard let rules else { return transaction.changes }
        return transaction.changes.filter { rules.delivers($0, before: before[$0.quakeId]) }
    }

    /// The outbox entries of a transaction (`--batch`, `--quiet-hours`): its delivered changes,
    /// each as its JSON line and its `QUAKE_*` variables, held for the digest when the plan says.
    func outboxEntries(
        _ transaction: IOQuaked.Transaction, storeId: String, before: [String: IOQuaked.Quake], plan: OutboxPlan,
        now: Int64
    ) -> [OutboxEntry] {
        delivered(transaction, before: before).map { change in
            let line = JSONText.encode(
                WatchLine(
                    event: "change", storeId: storeId, token: transaction.token, author: transaction.author.rawValue,
                    change: change))
            let values = ExecDelivery.values(
                change, token: transaction.token, storeId: storeId, before: before[change.quakeId],
                timeZone: style.timeZone)
            let mag = values["QUAKE_MAG"].flatMap(Double.init)
            return OutboxEntry(
                storeId: storeId, token: transaction.token, queuedAt: now, held: plan.holds(magnitude: mag, at: now),
                mag: mag, line: line, environment: values)
        }
    }

    /// Prints the event, then runs `--exec`'s command for each change in it (not for the backlog
    /// of `--since now`), returning once every run exited 0.
    func deliver(_ event: WatchEvent) async throws {
        print(event)
        guard let delivery, case .applied(let transaction, let storeId, let before, let isBacklog) = event, !isBacklog
        else { return }
        for change in delivered(transaction, before: before) {
            let line = JSONText.encode(
                WatchLine(
                    event: "change", storeId: storeId, token: transaction.token, author: transaction.author.rawValue,
                    change: change))
            try await delivery.deliver(
                change, line: line, token: transaction.token, storeId: storeId, before: before[change.quakeId])
        }
    }

    func print(_ event: WatchEvent) {
        switch event {
        case .connected(let afterOutage):
            if afterOutage { Console.err("quakectl: reconnected to quaked; catching up from the cache's token.\n") }
        case .disconnected(let reason):
            Console.err("quakectl: \(QuakectlError.from(reason).message) Retrying; the cache is kept.\n")
        case .cacheUnavailable(let reason):
            Console.err("quakectl: \(QuakectlError.from(reason).message) Retrying with backoff.\n")
        case .cacheRecovered:
            Console.err("quakectl: the cache works again.\n")
        case .reset(let storeId, let token, let quakes, let reason):
            if style.json {
                Console.line(
                    JSONText.encode(WatchLine(event: "reset", storeId: storeId, token: token, quakes: quakes, reason: reason)))
            } else {
                Console.line(
                    style.bold("reset")
                        + "    cache replaced (\(reason)): \(Formatting.earthquakes(quakes)) at token \(token) of store \(storeId)"
                )
            }
        case .applied(let transaction, let storeId, let before, let isBacklog):
            guard !isBacklog else { return }
            let changes = delivered(transaction, before: before)
            var text = OutputBytes(capacity: style.json ? 0 : changes.count * 160)
            // One reading of the clock for the transaction's relative times.
            let now = Date()
            // Each change read in place through the buffer: a change is large, and `for change
            // in`, or an array's subscript, copies each.
            changes.withUnsafeBufferPointer { changes in
                for i in changes.indices {
                    if style.json {
                        text +=
                            JSONText.encode(
                                WatchLine(
                                    event: "change", storeId: storeId, token: transaction.token,
                                    author: transaction.author.rawValue, change: changes[i]))
                        text += "\n"
                    } else {
                        ChangeText.appendLine(
                            changes[i], before: before.isEmpty ? nil : before[changes[i].quakeId], style, now: now,
                            to: &text)
                        text += "\n"
                    }
                }
            }
            if !text.isEmpty { Console.out(text) }
        case .recent(let quakes):
            var text = ""
            for quake in quakes {
                if style.json {
                    text += JSONText.encode(WatchLine(event: "quake", storeId: nil, token: nil, quake: quake)) + "\n"
                } else {
                    text += ChangeText.line(quake: quake, style) + "\n"
                }
            }
            if !text.isEmpty { Console.out(text) }
        }
    }

    struct WatchLine: Encodable {
        var event: String
        var storeId: String?
        var token: Int?
        var author: String?
        var change: IOQuaked.Change?
        var quake: IOQuaked.Quake?
        var quakes: Int?
        var reason: String?
    }
}
