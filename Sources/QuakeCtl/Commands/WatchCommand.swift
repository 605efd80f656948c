import QuakeClient
import QuakeProtocol
import ArgumentParser
import Foundation

/// `quakectl watch`: live changes, kept in a local cache.
public struct WatchCommand: AsyncParsableCommand {
    public static let configuration = CommandConfiguration(
        commandName: "watch",
        abstract: "Print earthquakes as they are added, updated and removed, keeping a local cache.",
        discussion: """
            The cache holds the store's rows, its id and the last applied history token, written \
            in one transaction per applied change, so a crash never leaves them out of step. On \
            start, watch catches up from the saved token, then follows quaked's notifications. \
            When the token has expired or quaked serves another store, it replaces the cache from \
            a snapshot and says so. When quaked goes away, it keeps the cache and retries; every \
            change made meanwhile is printed once when it is back. With --json, each line is \
            {"event":"change","token":...,"change":{...}} or {"event":"reset","quakes":...}.
            """)

    @OptionGroup public var options: ClientOptions

    @Option(help: ArgumentHelp("The cache file. Default: $XDG_CACHE_HOME/quakectl/cache.sqlite.", valueName: "path"))
    public var cache: String?

    @Option(help: ArgumentHelp("now: apply the backlog to the cache without printing it.", valueName: "now"))
    public var since: String?

    @Option(
        name: .customLong("min-mag"),
        help: ArgumentHelp(
            "Print only changes of at least this magnitude (the cache keeps everything).", valueName: "magnitude"))
    public var minMagnitude: Double?

    @Option(
        help: ArgumentHelp(
            "A durable client name: quaked keeps the history it has not acknowledged.", valueName: "name"))
    public var name: String?

    @Option(help: .hidden)
    public var heartbeat: Int = 30

    public init() {}

    public func validate() throws {
        if let since, since != "now" { throw ValidationError("--since takes only `now` (to skip the backlog).") }
        if heartbeat < 1 { throw ValidationError("--heartbeat must be at least 1 second.") }
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
        var watchOptions = Watcher.Options(socketPath: options.socketPath)
        watchOptions.clientName = name
        watchOptions.sinceNow = since == "now"
        watchOptions.heartbeatSeconds = heartbeat
        let printer = WatchPrinter(style: options.style, minMagnitude: minMagnitude)
        try await Watcher(options: watchOptions, cache: cache).run { printer.print($0) }
    }
}

/// How `watch` shows the Watcher's events: a line per change (or per JSON object), a line per
/// reset, and one message on stderr per outage.
struct WatchPrinter: Sendable {
    let style: OutputStyle
    /// Print only changes with a magnitude of at least this (the cache keeps everything).
    let minMagnitude: Double?

    func print(_ event: WatchEvent) {
        switch event {
        case .connected(let afterOutage):
            if afterOutage { Console.err("quakectl: reconnected to quaked; catching up from the cache's token.\n") }
        case .disconnected(let reason):
            Console.err("quakectl: \(QuakectlError.from(reason).message) Retrying; the cache is kept.\n")
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
            var text = ""
            for change in transaction.changes where passes(change, before: before[change.quakeId]) {
                if style.json {
                    text +=
                        JSONText.encode(
                            WatchLine(
                                event: "change", storeId: storeId, token: transaction.token,
                                author: transaction.author.rawValue, change: change)) + "\n"
                } else {
                    text += ChangeText.line(change, before: before[change.quakeId], style) + "\n"
                }
            }
            if !text.isEmpty { Console.out(text) }
        }
    }

    /// `--min-mag`: an update passes when the old or the new magnitude does.
    func passes(_ change: IOQuaked.Change, before: IOQuaked.Quake?) -> Bool {
        guard let min = minMagnitude else { return true }
        let old = change.fields?.first(where: { $0.field == "mag" })?.old?.number
        let mags = [change.quake?.mag, change.tombstone?.mag, before?.mag, ChangeText.newValue(change, "mag"), old]
        return mags.contains { ($0 ?? -.infinity) >= min }
    }

    struct WatchLine: Encodable {
        var event: String
        var storeId: String
        var token: Int
        var author: String?
        var change: IOQuaked.Change?
        var quakes: Int?
        var reason: String?
    }
}
