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
        watchOptions.minMagnitude = minMagnitude
        watchOptions.heartbeatSeconds = heartbeat
        try await Watcher(options: watchOptions, cache: cache, style: options.style).run()
    }
}
