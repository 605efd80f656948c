import CoreMetrics
import Foundation
import NIOConcurrencyHelpers
import Prometheus
import QuakeStore
import Varlink
import QuakeModel

/// quaked's metrics, in a Prometheus registry of their own (not swift-metrics' global system, so
/// any number can live in one process, as in the tests).
///
/// Events are recorded through swift-metrics' types (`Counter`, `Timer`, `Meter`) whose handlers
/// are swift-prometheus collectors made with HELP text; state (the head, quakes stored, clients'
/// lag, ...) is read when scraped (``update(_:)``). Everything is recorded once per pull, call,
/// transaction or scrape, never per row. Label values are bounded: feeds are configured, results,
/// kinds and authors are enums, methods are the served ones (else `unknown`), errors are the
/// interfaces' error names, and at most ``maxClientSeries`` named clients have series.
///
/// The series (quaked(8) documents them too):
///
/// | name | type | labels |
/// |---|---|---|
/// | `quaked_build_info` | gauge (1) | `version` |
/// | `quaked_pulls_total` | counter | `feed`, `result` (`imported`, `not_modified`, `failed`) |
/// | `quaked_pull_duration_seconds` | histogram | `feed` |
/// | `quaked_import_duration_seconds` | histogram | `feed` |
/// | `quaked_pull_bytes_total` | counter | `feed` |
/// | `quaked_feed_last_success_timestamp_seconds` | gauge | `feed` |
/// | `quaked_feed_consecutive_failures` | gauge | `feed` |
/// | `quaked_history_changes_total` | counter | `kind` (`insert`, `update`, `delete`) |
/// | `quaked_history_transactions_total` | counter | `author` (`import`, `delete`, `retention`, `backfill`, `catalog`) |
/// | `quaked_backfill_windows_total`, `quaked_backfill_events_total` | counter | |
/// | `quaked_backfill_jobs` | gauge | `state` (`queued`, `running`) |
/// | `quaked_catalog_runs_total` | counter | `result` (`success`, `failed`) |
/// | `quaked_catalog_last_success_timestamp_seconds` | gauge | |
/// | `quaked_history_head_token`, `quaked_history_oldest_token` | gauge | |
/// | `quaked_quakes`, `quaked_database_bytes`, `quaked_subscribers`, `quaked_named_clients` | gauge | |
/// | `quaked_client_lag_transactions`, `quaked_client_lag_seconds`, `quaked_client_last_seen_timestamp_seconds` | gauge | `client` |
/// | `quaked_varlink_calls_total` | counter | `method`, `error` (`none` on success) |
/// | `quaked_notification_latency_seconds` | histogram | |
public final class QuakedMetrics: Sendable {
    /// The registry every series is in; ``text()`` renders it.
    public let registry: PrometheusCollectorRegistry
    /// swift-metrics' factory on ``registry``: what `destroy()` of a series goes through.
    private let factory: PrometheusMetricsFactory

    /// At most this many named clients get lag series (the most recently seen ones).
    public static let maxClientSeries = 100

    /// How a pull ended, as the `result` label says it.
    public enum PullOutcome: String, Sendable, CaseIterable {
        case imported
        case notModified = "not_modified"
        case failed

        init(_ result: PullResult) {
            switch result {
            case .imported: self = .imported
            case .notModified: self = .notModified
            case .failed: self = .failed
            }
        }
    }

    private struct FeedSeries: Sendable {
        var pulls: [PullOutcome: CoreMetrics.Counter]
        var pullDuration: CoreMetrics.Timer
        var importDuration: CoreMetrics.Timer
        var bytes: CoreMetrics.Counter
        /// While the feed is configured.
        var failures: CoreMetrics.Meter?
        /// From the feed's first successful pull, while it is configured.
        var lastSuccess: CoreMetrics.Meter?
    }

    private struct ClientSeries: Sendable {
        var lagTransactions: CoreMetrics.Meter
        var lagSeconds: CoreMetrics.Meter
        var lastSeen: CoreMetrics.Meter
    }

    private struct CallKey: Hashable, Sendable {
        var method: String
        var error: String
    }

    private let changes: [ChangeKind: CoreMetrics.Counter]
    private let transactions: [HistoryAuthor: CoreMetrics.Counter]
    private let headToken: CoreMetrics.Meter
    private let oldestToken: CoreMetrics.Meter
    private let quakes: CoreMetrics.Meter
    private let databaseBytes: CoreMetrics.Meter
    private let subscribers: CoreMetrics.Meter
    private let namedClients: CoreMetrics.Meter
    private let notificationLatency: CoreMetrics.Timer
    private let backfillWindows: CoreMetrics.Counter
    private let backfillEvents: CoreMetrics.Counter
    private let backfillJobs: [String: CoreMetrics.Meter]
    private let catalogRuns: [Bool: CoreMetrics.Counter]
    /// From the first successful catalog sync of this daemon on.
    private let catalogLastSuccess = NIOLockedValueBox<CoreMetrics.Meter?>(nil)
    private let feeds = NIOLockedValueBox<[String: FeedSeries]>([:])
    private let clients = NIOLockedValueBox<[String: ClientSeries]>([:])
    private let calls = NIOLockedValueBox<[CallKey: CoreMetrics.Counter]>([:])

    static let pullBuckets = QuakedMetrics.buckets([0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120])
    static let importBuckets = QuakedMetrics.buckets([0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30])
    static let latencyBuckets = QuakedMetrics.buckets(
        [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5])

    private static func buckets(_ seconds: [Double]) -> [Duration] {
        seconds.map { .nanoseconds(Int64(($0 * 1e9).rounded())) }
    }

    public init(version: String = QuakedVersion.string) {
        let registry = PrometheusCollectorRegistry()
        let factory = PrometheusMetricsFactory(registry: registry)
        self.registry = registry
        self.factory = factory
        Self.meter(Family.buildInfo, [("version", version)], registry, factory).set(1)
        changes = Dictionary(
            uniqueKeysWithValues: [ChangeKind.insert, .update, .delete].map {
                ($0, Self.counter(Family.changes, [("kind", $0.rawValue)], registry, factory))
            })
        transactions = Dictionary(
            uniqueKeysWithValues: HistoryAuthor.allCases.map {
                ($0, Self.counter(Family.transactions, [("author", $0.rawValue)], registry, factory))
            })
        headToken = Self.meter(Family.headToken, [], registry, factory)
        oldestToken = Self.meter(Family.oldestToken, [], registry, factory)
        quakes = Self.meter(Family.quakes, [], registry, factory)
        databaseBytes = Self.meter(Family.databaseBytes, [], registry, factory)
        subscribers = Self.meter(Family.subscribers, [], registry, factory)
        namedClients = Self.meter(Family.namedClients, [], registry, factory)
        notificationLatency = Self.timer(
            Family.notificationLatency, [], Self.latencyBuckets, registry, factory)
        backfillWindows = Self.counter(Family.backfillWindows, [], registry, factory)
        backfillEvents = Self.counter(Family.backfillEvents, [], registry, factory)
        backfillJobs = Dictionary(
            uniqueKeysWithValues: ["queued", "running"].map {
                ($0, Self.meter(Family.backfillJobs, [("state", $0)], registry, factory))
            })
        catalogRuns = [
            true: Self.counter(Family.catalogRuns, [("result", "success")], registry, factory),
            false: Self.counter(Family.catalogRuns, [("result", "failed")], registry, factory),
        ]
    }

    /// One metric family: its name (`quaked_` + name + unit) and HELP text.
    struct Family: Sendable {
        let metricName: String
        /// `total`, `seconds`, `bytes`, or empty.
        let unit: String
        let help: String

        var descriptor: MetricNameDescriptor {
            MetricNameDescriptor(namespace: "quaked", metricName: metricName, unitName: unit, helpText: help)
        }
        var name: String { descriptor.name }

        static let buildInfo = Family(
            metricName: "build_info", unit: "", help: "quaked's version (the value is always 1).")
        static let pulls = Family(metricName: "pulls", unit: "total", help: "Feed pulls, by feed and result.")
        static let pullDuration = Family(
            metricName: "pull_duration", unit: "seconds", help: "Time of whole feed pulls (request, download and import).")
        static let importDuration = Family(
            metricName: "import_duration", unit: "seconds",
            help: "Time of the imports of feed documents (pulls answered 200, and files).")
        static let bytes = Family(
            metricName: "pull_bytes", unit: "total",
            help: "Bytes of feed documents downloaded and imported (decompressed; file feeds included).")
        static let failures = Family(
            metricName: "feed_consecutive_failures", unit: "", help: "Failed pulls in a row, per configured feed.")
        static let lastSuccess = Family(
            metricName: "feed_last_success_timestamp", unit: "seconds",
            help: "When a pull of the feed last succeeded (imported or not modified), in seconds since the epoch.")
        static let changes = Family(
            metricName: "history_changes", unit: "total", help: "Changes recorded in the history, by kind.")
        static let transactions = Family(
            metricName: "history_transactions", unit: "total", help: "History transactions recorded, by author.")
        static let headToken = Family(metricName: "history_head_token", unit: "", help: "The newest history token.")
        static let oldestToken = Family(
            metricName: "history_oldest_token", unit: "",
            help: "The oldest token history can be served after (older history is purged).")
        static let quakes = Family(metricName: "quakes", unit: "", help: "Earthquakes stored.")
        static let databaseBytes = Family(
            metricName: "database", unit: "bytes", help: "Bytes of quakes.sqlite and its write-ahead log.")
        static let subscribers = Family(
            metricName: "subscribers", unit: "", help: "Connections with a Subscribe call in progress.")
        static let namedClients = Family(
            metricName: "named_clients", unit: "", help: "Named clients known to the store, seen recently or not.")
        static let lagTransactions = Family(
            metricName: "client_lag_transactions", unit: "",
            help: "History transactions after the token a named client acknowledged last.")
        static let lagSeconds = Family(
            metricName: "client_lag", unit: "seconds",
            help: "Age of the oldest history transaction a named client has not acknowledged (0 when it has them all).")
        static let lastSeen = Family(
            metricName: "client_last_seen_timestamp", unit: "seconds",
            help: "When a named client last subscribed, fetched or acknowledged, in seconds since the epoch.")
        static let calls = Family(
            metricName: "varlink_calls", unit: "total", help: "Varlink calls handled, by method and error (none: success).")
        static let backfillWindows = Family(
            metricName: "backfill_windows", unit: "total", help: "Windows of backfill jobs imported.")
        static let backfillEvents = Family(
            metricName: "backfill_events", unit: "total", help: "Events the catalog sent in the windows of backfill jobs.")
        static let backfillJobs = Family(
            metricName: "backfill_jobs", unit: "", help: "Backfill jobs that have not ended, by state.")
        static let catalogRuns = Family(
            metricName: "catalog_runs", unit: "total", help: "Runs of the incremental catalog sync, by result.")
        static let catalogLastSuccess = Family(
            metricName: "catalog_last_success_timestamp", unit: "seconds",
            help: "When the last successful catalog sync run began, in seconds since the epoch.")
        static let notificationLatency = Family(
            metricName: "notification_latency", unit: "seconds",
            help:
                "Time from a commit of this daemon to every subscriber having its change notification (written, or waiting in its slot)."
        )
    }

    // MARK: Events

    /// A window of a backfill job was imported.
    public func recordBackfillWindow(events: Int) {
        backfillWindows.increment()
        backfillEvents.increment(by: Int64(events))
    }

    /// A catalog sync run ended; a successful one began at `startedAt`.
    public func recordCatalogRun(success: Bool, startedAt: Date) {
        catalogRuns[success]?.increment()
        guard success else { return }
        catalogLastSuccess.withLockedValue { meter in
            if meter == nil { meter = self.meter(Family.catalogLastSuccess, []) }
            meter?.set(startedAt.timeIntervalSince1970)
        }
    }

    /// Makes the series of the configured feeds (at zero) and drops the gauges of feeds no
    /// longer configured. At start-up and after each reload.
    public func configureFeeds(_ names: [String]) {
        feeds.withLockedValue { feeds in
            for name in names where feeds[name]?.failures == nil {
                var series = feeds[name] ?? makeFeedSeries(name)
                series.failures = meter(Family.failures, [("feed", name)])
                feeds[name] = series
            }
            for (name, series) in feeds where !names.contains(name) {
                series.failures?.destroy()
                series.lastSuccess?.destroy()
                feeds[name]?.failures = nil
                feeds[name]?.lastSuccess = nil
            }
        }
    }

    /// One finished pull: its result, its duration and, for an import, the import's time and bytes.
    public func recordPull(feed: String, result: PullResult, duration: Duration) {
        let series = feeds.withLockedValue { feeds in
            if let series = feeds[feed] { return series }
            let series = makeFeedSeries(feed)
            feeds[feed] = series
            return series
        }
        series.pulls[PullOutcome(result)]?.increment()
        series.pullDuration.recordNanoseconds(Self.nanoseconds(duration))
        if case .imported(let report, _) = result {
            series.importDuration.recordMilliseconds(report.durationMs)
            series.bytes.increment(by: report.bytes)
        }
    }

    /// Committed history transactions (read once each, after their commit).
    public func recordTransactions(_ summaries: [TransactionSummary]) {
        var inserted = 0
        var updated = 0
        var deleted = 0
        for summary in summaries {
            inserted += summary.inserted
            updated += summary.updated
            deleted += summary.deleted
            if let author = summary.author { transactions[author]?.increment() }
        }
        if inserted > 0 { changes[.insert]?.increment(by: inserted) }
        if updated > 0 { changes[.update]?.increment(by: updated) }
        if deleted > 0 { changes[.delete]?.increment(by: deleted) }
    }

    /// One handled Varlink call.
    public func recordCall(_ outcome: VarlinkServer.CallOutcome) {
        let key = CallKey(method: outcome.method ?? "unknown", error: outcome.error ?? "none")
        let counter = calls.withLockedValue { calls in
            if let counter = calls[key] { return counter }
            let counter = Self.counter(
                Family.calls, [("method", key.method), ("error", key.error)], registry, factory)
            calls[key] = counter
            return counter
        }
        counter.increment()
    }

    /// How long a commit took to reach every subscriber.
    public func recordNotification(latency: Duration) {
        notificationLatency.recordNanoseconds(Self.nanoseconds(latency))
    }

    // MARK: State, when scraped

    /// What is read when the metrics are scraped.
    public struct State: Sendable {
        public var head: HistoryToken
        public var oldest: HistoryToken
        public var quakes: Int
        public var databaseBytes: Int
        public var subscribers: Int
        public var feeds: [FeedStatus]
        /// Named clients in all, and the ones that get series (at most ``maxClientSeries``).
        public var namedClients: Int
        public var clients: [ClientPosition]
        public var now: Date
        /// Backfill jobs that have not ended, by state (`queued`, `running`).
        public var backfillJobs: [String: Int] = [:]

        public init(
            head: HistoryToken, oldest: HistoryToken, quakes: Int, databaseBytes: Int, subscribers: Int,
            feeds: [FeedStatus], namedClients: Int, clients: [ClientPosition], now: Date = Date(),
            backfillJobs: [String: Int] = [:]
        ) {
            self.backfillJobs = backfillJobs
            self.head = head
            self.oldest = oldest
            self.quakes = quakes
            self.databaseBytes = databaseBytes
            self.subscribers = subscribers
            self.feeds = feeds
            self.namedClients = namedClients
            self.clients = clients
            self.now = now
        }
    }

    /// Sets the gauges from `state`; clients without a position there lose their series.
    public func update(_ state: State) {
        headToken.set(state.head)
        oldestToken.set(state.oldest)
        quakes.set(state.quakes)
        databaseBytes.set(state.databaseBytes)
        subscribers.set(state.subscribers)
        namedClients.set(state.namedClients)
        for (name, meter) in backfillJobs { meter.set(state.backfillJobs[name] ?? 0) }
        feeds.withLockedValue { feeds in
            for status in state.feeds {
                guard var series = feeds[status.name], let failures = series.failures else { continue }
                failures.set(status.consecutiveFailures)
                if let success = status.lastSuccess {
                    if series.lastSuccess == nil {
                        series.lastSuccess = meter(Family.lastSuccess, [("feed", status.name)])
                        feeds[status.name] = series
                    }
                    series.lastSuccess?.set(success.timeIntervalSince1970)
                }
            }
        }
        let nowMs = QuakeTime.milliseconds(state.now)
        clients.withLockedValue { clients in
            var kept: [String: ClientSeries] = [:]
            for position in state.clients.prefix(Self.maxClientSeries) {
                let labels = [("client", position.name)]
                let series =
                    clients.removeValue(forKey: position.name)
                    ?? ClientSeries(
                        lagTransactions: meter(Family.lagTransactions, labels), lagSeconds: meter(Family.lagSeconds, labels),
                        lastSeen: meter(Family.lastSeen, labels))
                series.lagTransactions.set(position.transactionsBehind)
                let waiting = position.oldestUnacknowledged.map { max(0, nowMs - $0) } ?? 0
                series.lagSeconds.set(Double(waiting) / 1000)
                series.lastSeen.set(Double(position.lastSeen) / 1000)
                kept[position.name] = series
            }
            for series in clients.values {
                series.lagTransactions.destroy()
                series.lagSeconds.destroy()
                series.lastSeen.destroy()
            }
            clients = kept
        }
    }

    // MARK: Rendering

    /// The Prometheus text exposition format (0.0.4), families sorted by name.
    public func text() -> String {
        Self.sortedByFamily(registry.emitToString())
    }

    /// The content type of ``text()`` over HTTP.
    public static let contentType = "text/plain; version=0.0.4; charset=utf-8"

    /// The registry writes families in no particular order; people read them better sorted. Each
    /// family starts at its `# HELP` (every series here has one) and stays whole.
    static func sortedByFamily(_ text: String) -> String {
        var families: [(name: Substring, lines: [Substring])] = []
        for line in text.split(separator: "\n") {
            if line.hasPrefix("# HELP ") || families.isEmpty {
                let name = line.hasPrefix("# HELP ") ? line.dropFirst(7).prefix { $0 != " " } : ""
                families.append((name, [line]))
            } else {
                families[families.count - 1].lines.append(line)
            }
        }
        return families.sorted { $0.name < $1.name }.map { $0.lines.joined(separator: "\n") + "\n" }.joined()
    }

    // MARK: Helpers

    private func makeFeedSeries(_ feed: String) -> FeedSeries {
        let labels = [("feed", feed)]
        var pulls: [PullOutcome: CoreMetrics.Counter] = [:]
        for outcome in PullOutcome.allCases {
            pulls[outcome] = Self.counter(Family.pulls, labels + [("result", outcome.rawValue)], registry, factory)
        }
        return FeedSeries(
            pulls: pulls, pullDuration: Self.timer(Family.pullDuration, labels, Self.pullBuckets, registry, factory),
            importDuration: Self.timer(Family.importDuration, labels, Self.importBuckets, registry, factory),
            bytes: Self.counter(Family.bytes, labels, registry, factory))
    }

    private func meter(_ family: Family, _ labels: [(String, String)]) -> CoreMetrics.Meter {
        Self.meter(family, labels, registry, factory)
    }

    // swift-metrics' types, whose handlers are the registry's collectors: made with the registry
    // (for the HELP text) and destroyed through the factory (which unregisters them).

    private static func counter(
        _ family: Family, _ labels: [(String, String)], _ registry: PrometheusCollectorRegistry,
        _ factory: PrometheusMetricsFactory
    ) -> CoreMetrics.Counter {
        CoreMetrics.Counter(
            label: family.name, dimensions: labels,
            handler: registry.makeCounter(descriptor: family.descriptor, labels: labels), factory: factory)
    }

    private static func meter(
        _ family: Family, _ labels: [(String, String)], _ registry: PrometheusCollectorRegistry,
        _ factory: PrometheusMetricsFactory
    ) -> CoreMetrics.Meter {
        CoreMetrics.Meter(
            label: family.name, dimensions: labels,
            handler: registry.makeGauge(descriptor: family.descriptor, labels: labels), factory: factory)
    }

    private static func timer(
        _ family: Family, _ labels: [(String, String)], _ buckets: [Duration], _ registry: PrometheusCollectorRegistry,
        _ factory: PrometheusMetricsFactory
    ) -> CoreMetrics.Timer {
        CoreMetrics.Timer(
            label: family.name, dimensions: labels,
            handler: registry.makeDurationHistogram(descriptor: family.descriptor, labels: labels, buckets: buckets),
            factory: factory)
    }

    private static func nanoseconds(_ duration: Duration) -> Int64 {
        let (seconds, attoseconds) = duration.components
        return seconds * 1_000_000_000 + attoseconds / 1_000_000_000
    }
}
