import Foundation
import QuakeConfigValues
import QuakeProtocol
import QuakeStore
import Varlink
import Logging
import QuakeModel
import QuakeAssociation

/// Everything quaked can be configured with: the one source of truth for the configuration.
///
/// Each setting has one key; the same key names the config-file entry (`interval = 60s`), the
/// environment variable (`QUAKED_INTERVAL=60s`) and, where one exists, the command-line flag
/// (`--interval 60s`). Precedence, highest first: flags, environment, config file, defaults.
/// quaked.conf(5) documents every key; a test checks it against ``Key/allCases``.
public struct DaemonConfiguration: Sendable, Equatable {
    /// Feeds to pull: USGS summary feed names or URLs; none (`feed = none`) when the sources, the
    /// USGS among them, are all that is followed. Beside sources, each feed is the source `usgs`.
    public var feeds: [FeedSource] = [FeedSource.defaultFeed]
    /// How often each feed is pulled (never sooner than the server's max-age allows).
    public var interval: Duration = .seconds(60)
    /// Directory holding quakes.sqlite.
    public var stateDirectory: String
    /// The Unix socket clients connect to (when not socket-activated).
    public var socketPath: String
    /// Group owning the socket (mode 0660); nil leaves the group as created.
    public var socketGroup: String? = "quake"
    /// Members of this group may call Delete, Reload, Backfill and BackfillCancel (besides root and the
    /// daemon's own user).
    public var adminGroup: String? = "quake-admin"
    /// History older than this is purged.
    public var historyMaxAge: Duration = .seconds(7 * 86_400)
    /// History a named client still needs is kept, but never longer than this.
    public var historyHardMaxAge: Duration = .seconds(30 * 86_400)
    /// Quakes whose event time is older than this are deleted (reason `expired`); nil keeps everything.
    public var eventRetention: Duration? = nil
    public var logLevel: Logger.Level = .info
    public var connectTimeout: Duration = .seconds(10)
    /// Time for one whole pull, headers and body.
    public var totalTimeout: Duration = .seconds(120)
    /// The largest feed accepted, decompressed.
    public var maxFeedSize: Int = 256 * 1024 * 1024
    /// First delay after a failed pull; it doubles with each failure in a row.
    public var retryInitialDelay: Duration = .seconds(10)
    /// The longest delay between retries.
    public var retryMaxDelay: Duration = .seconds(15 * 60)
    /// The longest `Retry-After` honoured; a server asking for longer is asked again after this.
    public var retryAfterMax: Duration = .seconds(3600)
    /// Connections served at once on the control socket. The defaults of the control socket's
    /// limits are the Varlink server's own, defined once there.
    public var maxConnections: Int = VarlinkServer.Limits().maxConnections
    /// How long a client may take to finish a message it started.
    public var messageTimeout: Duration = .milliseconds(VarlinkServer.Limits().messageDeadline.nanoseconds / 1_000_000)
    /// How long a reply may wait for a client to read it before the client is disconnected.
    public var writeTimeout: Duration = VarlinkServer.Limits().writeTimeout
    /// The HTTP proxies and exceptions of the environment (`https_proxy`, `no_proxy`, ...): not
    /// configuration keys, but read with them, so that a bad one stops quaked the same way.
    public var proxy = ProxySettings()
    /// Where the metrics HTTP listener listens (`/metrics`); nil: no listener (the default),
    /// unless systemd passes a socket named `metrics`.
    public var metricsListen: MetricsAddress? = nil
    /// Where the merged catalog is served over HTTP (USGS summary feeds, FDSN event service;
    /// docs/http.md); nil: no listener (the default), unless systemd passes a socket named `http`.
    /// With metrics-listen unset or the same address, one server also answers `/metrics`.
    public var httpListen: MetricsAddress? = nil
    /// The FDSN event service of the incremental catalog sync, and the default of backfill jobs;
    /// nil: no catalog sync, and backfill jobs use the USGS's service.
    public var catalog: CatalogService? = nil
    /// How often the catalog sync runs.
    public var catalogInterval: Duration = .seconds(15 * 60)
    /// How far before the last successful run's start the next one asks for updates: the
    /// service's own indexing lag.
    public var catalogOverlap: Duration = .seconds(10 * 60)
    /// How far back a catalog's first run (no position yet) asks for updates, outside the event
    /// times a backfill job fetched.
    public var catalogSince: Duration = .seconds(24 * 3600)
    /// The catalog sync's minimum magnitude; nil: every magnitude.
    public var catalogMinMagnitude: Double? = nil
    /// The catalog sync's region; nil: everywhere.
    public var catalogRegion: CatalogRegion? = nil
    /// Between two requests of a backfill job or a catalog sync run.
    public var backfillPause: Duration = .seconds(1)
    /// Failures of one window in a row before a backfill job (or a catalog sync run) gives up.
    public var backfillAttempts: Int = 5
    /// The agencies followed (`source = NAME KIND URL ...`), in configuration order: an earlier
    /// source's report is preferred. The summary feed's, `catalog`'s and backfill jobs' imports
    /// are the source `usgs` (``association``), so no source may be named `usgs` (``validate()``).
    public var sources: [SourceConfiguration] = []
    /// Reports of different sources whose origin times are at most this far apart may be one quake.
    public var associateTime: Duration = .seconds(16)
    /// ... and whose epicentres are at most this many kilometres apart.
    public var associateDistanceKm: Double = 100
    /// Regional authorities (`prefer = AGENCY[,AGENCY...] region=...`), in configuration order:
    /// an earlier line ranks first. In its region, an agency's report is preferred to other
    /// equally reviewed reports, before the order of the sources (``association``).
    public var preferences: [PreferenceConfiguration] = []

    /// Whether quaked imports from the USGS itself: a summary feed or the catalog sync. Once
    /// sources are configured, these imports are the store's source `usgs`.
    public var usgsImports: Bool { !feeds.isEmpty || catalog != nil }

    /// The association settings this configuration gives: its windows, the regional authorities
    /// (``preferences``, in order) and the sources' order.
    ///
    /// The order is the preference among reports equally reviewed and not regional: `usgs` (the
    /// summary feed's and the catalog sync's reports) first when a feed or `catalog` is
    /// configured, then the sources in configuration order.
    public var association: AssociationConfiguration {
        AssociationConfiguration(
            associateTimeMilliseconds: Int64(associateTime / .milliseconds(1)),
            associateDistanceKm: associateDistanceKm,
            sourceOrder: (usgsImports ? [QuakeStore.usgsSource] : []) + sources.map(\.name),
            regionalPreferences: preferences.map(\.regionalPreference))
    }

    public init(defaults paths: DefaultPaths = DefaultPaths()) {
        stateDirectory = paths.stateDirectory
        socketPath = paths.socketPath
    }

    /// The pull limits this configuration gives.
    public var pullLimits: FeedPuller.Limits {
        FeedPuller.Limits(connectTimeout: connectTimeout, totalTimeout: totalTimeout, maxBytes: maxFeedSize)
    }

    /// The pull limits of the default configuration (``FeedPuller/Limits/init()``).
    static let defaultPullLimits = DaemonConfiguration(defaults: DefaultPaths(environment: [:], isRoot: true)).pullLimits

    /// The control socket's limits this configuration gives.
    public var serverLimits: VarlinkServer.Limits {
        var limits = VarlinkServer.Limits()
        limits.messageDeadline = .milliseconds(Int64(messageTimeout / .milliseconds(1)))
        limits.maxConnections = maxConnections
        limits.writeTimeout = writeTimeout
        return limits
    }

    /// Every configuration key. The raw value is the config-file key; ``environmentName`` the
    /// environment variable.
    public enum Key: String, CaseIterable, Sendable {
        case feed
        case interval
        case stateDirectory = "state-directory"
        case socket
        case socketGroup = "socket-group"
        case adminGroup = "admin-group"
        case historyMaxAge = "history-max-age"
        case historyHardMaxAge = "history-hard-max-age"
        case eventRetention = "event-retention"
        case logLevel = "log-level"
        case connectTimeout = "connect-timeout"
        case totalTimeout = "total-timeout"
        case maxFeedSize = "max-feed-size"
        case retryInitialDelay = "retry-initial-delay"
        case retryMaxDelay = "retry-max-delay"
        case retryAfterMax = "retry-after-max"
        case maxConnections = "max-connections"
        case messageTimeout = "message-timeout"
        case writeTimeout = "write-timeout"
        case metricsListen = "metrics-listen"
        case httpListen = "http-listen"
        case catalog
        case catalogInterval = "catalog-interval"
        case catalogOverlap = "catalog-overlap"
        case catalogSince = "catalog-since"
        case catalogMinMagnitude = "catalog-min-magnitude"
        case catalogRegion = "catalog-region"
        case backfillPause = "backfill-pause"
        case backfillAttempts = "backfill-attempts"
        case source
        case associateTime = "associate-time"
        case associateDistance = "associate-distance"
        case prefer

        /// `QUAKED_` + the key in upper case with `-` as `_` (`QUAKED_STATE_DIRECTORY`).
        /// `QUAKED_FEED` takes several feeds separated by commas or spaces, `QUAKED_SOURCE`
        /// several sources and `QUAKED_PREFER` several preferences separated by `;`.
        public var environmentName: String {
            "QUAKED_" + rawValue.uppercased().replacingOccurrences(of: "-", with: "_")
        }

        /// Keys a config file may give more than once (and the flag more than once): each entry
        /// adds to the others of the same origin.
        public var isRepeatable: Bool { self == .feed || self == .source || self == .prefer }
    }

    /// Applies one textual setting. Throws ``ConfigurationError`` naming the key and the problem.
    /// `feed`, `source` and `prefer` entries accumulate within one origin (`replaceFeeds` is false
    /// after the first of the key).
    public mutating func apply(_ key: Key, _ text: String, source: String, replaceFeeds: Bool = true) throws {
        func fail(_ problem: String) -> ConfigurationError {
            ConfigurationError(key: key.rawValue, source: source, problem: problem)
        }
        func parse<T>(_ body: () throws -> T) throws -> T {
            do { return try body() } catch let problem as ConfigValue.Problem { throw fail(problem.message) }
        }
        let value = text.trimmingCharacters(in: .whitespaces)
        switch key {
        case .feed:
            let items = value.split(whereSeparator: { $0 == "," || $0 == " " }).map(String.init)
            // `none` (or nothing): no summary feed, as when the agencies are followed as sources.
            if items.isEmpty || items == ["none"] {
                if replaceFeeds { feeds = [] }
                return
            }
            let parsed = try items.map { item in
                do { return try FeedSource(parsing: item) } catch { throw fail("\(error)") }
            }
            feeds = replaceFeeds ? parsed : feeds + parsed
        case .source:
            let entries = value.split(separator: ";").map { $0.trimmingCharacters(in: .whitespaces) }.filter {
                !$0.isEmpty
            }
            if entries.isEmpty || entries == ["none"] {
                if replaceFeeds { sources = [] }
                return
            }
            let parsed = try parse { try entries.map(SourceConfiguration.init(parsing:)) }
            var all = replaceFeeds ? [] : sources
            for source in parsed {
                if all.contains(where: { $0.name == source.name }) {
                    throw fail("source \(source.name): the name is already used by another source: give each source its own name")
                }
                all.append(source)
            }
            sources = all
        case .prefer:
            let entries = value.split(separator: ";").map { $0.trimmingCharacters(in: .whitespaces) }.filter {
                !$0.isEmpty
            }
            if entries.isEmpty || entries == ["none"] {
                if replaceFeeds { preferences = [] }
                return
            }
            let parsed = try parse { try entries.map(PreferenceConfiguration.init(parsing:)) }
            preferences = (replaceFeeds ? [] : preferences) + parsed
        case .associateTime:
            associateTime = try parse { try ConfigValue.duration(value, minimum: .seconds(1)) }
            guard associateTime <= .seconds(600) else {
                throw fail("'\(value)' is longer than the maximum of 10m (the default, 16s, is USGS PDL's)")
            }
        case .associateDistance:
            var number = Substring(value)
            if number.lowercased().hasSuffix("km") { number = number.dropLast(2) }
            guard let km = Double(number.trimmingCharacters(in: .whitespaces)), km.isFinite, km > 0, km <= 2000 else {
                throw fail("'\(value)' is not a distance: use kilometres from 0 to 2000, e.g. 100km or 100")
            }
            associateDistanceKm = km
        case .interval:
            interval = try parse { try ConfigValue.duration(value, minimum: .seconds(1)) }
        case .stateDirectory:
            guard value.hasPrefix("/") else { throw fail("'\(value)' is not an absolute path") }
            stateDirectory = value
        case .socket:
            guard value.hasPrefix("/") else { throw fail("'\(value)' is not an absolute path") }
            guard value.utf8.count < 108 else { throw fail("a Unix socket path must be shorter than 108 bytes") }
            socketPath = value
        case .socketGroup:
            socketGroup = value.isEmpty || value == "none" ? nil : value
        case .adminGroup:
            adminGroup = value.isEmpty || value == "none" ? nil : value
        case .historyMaxAge:
            historyMaxAge = try parse { try ConfigValue.duration(value, minimum: .seconds(60)) }
        case .historyHardMaxAge:
            historyHardMaxAge = try parse { try ConfigValue.duration(value, minimum: .seconds(60)) }
        case .eventRetention:
            eventRetention =
                value == "forever" || value == "infinity" || value.isEmpty
                ? nil : try parse { try ConfigValue.duration(value, minimum: .seconds(3600)) }
        case .logLevel:
            guard let level = Logger.Level(rawValue: value.lowercased()) else {
                throw fail("'\(value)' is not a log level (trace, debug, info, notice, warning, error, critical)")
            }
            logLevel = level
        case .connectTimeout:
            connectTimeout = try parse { try ConfigValue.duration(value, minimum: .milliseconds(100)) }
        case .totalTimeout:
            totalTimeout = try parse { try ConfigValue.duration(value, minimum: .milliseconds(100)) }
        case .maxFeedSize:
            maxFeedSize = try parse { try ConfigValue.size(value) }
        case .retryInitialDelay:
            retryInitialDelay = try parse { try ConfigValue.duration(value, minimum: .milliseconds(10)) }
        case .retryMaxDelay:
            retryMaxDelay = try parse { try ConfigValue.duration(value, minimum: .milliseconds(10)) }
        case .retryAfterMax:
            retryAfterMax = try parse { try ConfigValue.duration(value, minimum: .seconds(1)) }
        case .maxConnections:
            guard let count = Int(value), (1...1_000_000).contains(count) else {
                throw fail("'\(value)' is not a number of connections (1 to 1000000)")
            }
            maxConnections = count
        case .messageTimeout:
            messageTimeout = try parse { try ConfigValue.duration(value, minimum: .milliseconds(100)) }
        case .writeTimeout:
            writeTimeout = try parse { try ConfigValue.duration(value, minimum: .milliseconds(100)) }
        case .metricsListen:
            metricsListen =
                value.isEmpty || value == "off" || value == "none" ? nil : try parse { try MetricsAddress(parsing: value) }
        case .httpListen:
            httpListen =
                value.isEmpty || value == "off" || value == "none"
                ? nil : try parse { try MetricsAddress(parsing: value, examplePort: 8080) }
        case .catalog:
            if value.isEmpty || value == "none" || value == "off" {
                catalog = nil
            } else {
                do { catalog = try CatalogService(parsing: value) } catch { throw fail("\(error)") }
            }
        case .catalogInterval:
            catalogInterval = try parse { try ConfigValue.duration(value, minimum: .seconds(1)) }
        case .catalogOverlap:
            catalogOverlap = try parse { try ConfigValue.duration(value) }
        case .catalogSince:
            catalogSince = try parse { try ConfigValue.duration(value) }
        case .catalogMinMagnitude:
            if value.isEmpty || value == "none" {
                catalogMinMagnitude = nil
            } else {
                guard let m = Double(value), m.isFinite, (-2...10).contains(m) else {
                    throw fail("'\(value)' is not a magnitude (-2 to 10)")
                }
                catalogMinMagnitude = m
            }
        case .catalogRegion:
            catalogRegion = try parse { try ConfigValue.region(value) }
        case .backfillPause:
            backfillPause = try parse { try ConfigValue.duration(value) }
        case .backfillAttempts:
            guard let count = Int(value), (1...100).contains(count) else {
                throw fail("'\(value)' is not a number of attempts (1 to 100)")
            }
            backfillAttempts = count
        }
    }

    /// The value of `key` in the syntax ``apply(_:_:source:replaceFeeds:)`` and the config file
    /// accept, one string per entry (several only for `feed`, `source` and `prefer`): what
    /// `quaked --check-config` prints. Applying the entries to another configuration gives it this
    /// value (a test checks it for every key).
    ///
    /// Keys whose value needs its own spelling are listed; any other key is read generically from
    /// the stored property named like its case (`retryMaxDelay` for `retry-max-delay`): a
    /// duration as `15m`, a number as digits, a string as is, nil as `none`.
    public func text(for key: Key) -> [String] {
        switch key {
        case .feed: return feeds.isEmpty ? ["none"] : feeds.map(\.name)
        case .source: return sources.isEmpty ? ["none"] : sources.map(\.description)
        case .prefer: return preferences.isEmpty ? ["none"] : preferences.map(\.description)
        case .associateDistance: return ["\(CatalogQuery.number(associateDistanceKm))km"]
        case .stateDirectory: return [stateDirectory]
        case .socket: return [socketPath]
        case .socketGroup: return [socketGroup ?? "none"]
        case .adminGroup: return [adminGroup ?? "none"]
        case .eventRetention: return [eventRetention.map(ConfigValue.text(duration:)) ?? "forever"]
        case .logLevel: return [logLevel.rawValue]
        case .maxFeedSize: return [ConfigValue.text(size: maxFeedSize)]
        case .catalog: return [catalog?.description ?? "none"]
        case .httpListen: return [httpListen?.description ?? "off"]
        case .catalogMinMagnitude: return [catalogMinMagnitude.map { "\($0)" } ?? "none"]
        case .catalogRegion: return [catalogRegion.map(ConfigValue.text(region:)) ?? "none"]
        default:
            let property = "\(key)"
            guard let value = Mirror(reflecting: self).children.first(where: { $0.label == property })?.value else {
                return []
            }
            return [ConfigValue.text(of: value)]
        }
    }

    /// Checks relations between keys.
    public func validate() throws {
        if historyHardMaxAge < historyMaxAge {
            throw ConfigurationError(
                key: Key.historyHardMaxAge.rawValue, source: "configuration",
                problem: "must not be shorter than history-max-age")
        }
        if retryMaxDelay < retryInitialDelay {
            throw ConfigurationError(
                key: Key.retryMaxDelay.rawValue, source: "configuration",
                problem: "must not be shorter than retry-initial-delay")
        }
        // The summary feed, the catalog sync and backfill jobs (which may run with neither) import
        // as the store's source `usgs` once sources are configured (association mode): a source
        // of that name would be a second `usgs`, its reports mixed with theirs.
        if let source = sources.first(where: { $0.name == QuakeStore.usgsSource }) {
            let beside = [
                feeds.isEmpty ? nil : "feed = \(feeds.map(\.name).joined(separator: ", "))",
                catalog.map { "catalog = \($0)" },
            ].compactMap { $0 }.joined(separator: " and ")
            throw ConfigurationError(
                key: Key.source.rawValue, source: "configuration",
                problem:
                    "source \(source.name): the name usgs is the store's own source for the USGS summary feed, "
                    + "the catalog sync and backfill jobs" + (beside.isEmpty ? "" : " (\(beside))")
                    + ": choose another name, e.g. source = comcat \(source.kind.rawValue) \(source.endpoint?.absoluteString ?? source.service.description)")
        }
    }
}

/// A configuration problem: which key, where it came from, what is wrong. quaked exits 78
/// (EX_CONFIG) on one at start-up, and keeps its running configuration on one at reload.
public struct ConfigurationError: Error, Sendable, Equatable, CustomStringConvertible {
    public var key: String
    /// Where the value came from: `--interval`, `QUAKED_INTERVAL`, `/etc/quaked/quaked.conf:12`.
    public var source: String
    public var problem: String

    public init(key: String, source: String, problem: String) {
        self.key = key
        self.source = source
        self.problem = problem
    }

    public var description: String { "invalid configuration: \(key) (\(source)): \(problem)" }
}
