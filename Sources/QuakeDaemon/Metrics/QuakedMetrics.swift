import CoreMetrics
import Foundation
import NIOConcurrencyHelpers
import Prometheus

/// quaked's metrics registry: a Prometheus registry of its own (not swift-metrics' global system,
/// so any number can live in one process, as in the tests), in which each component registers and
/// updates its own series. The composition root makes one and passes it to the components; it
/// knows none of their series.
///
/// Events are recorded through swift-metrics' types (`Counter`, `Timer`, `Meter`) whose handlers
/// are swift-prometheus collectors made with HELP text (``counter(_:_:)``, ``meter(_:_:)``,
/// ``timer(_:_:buckets:)``); state (the head, quakes stored, clients' lag, ...) is read when scraped,
/// by what each component registers with ``onScrape(_:)``. Everything is recorded once per pull,
/// call, transaction or scrape, never per row. Label values are bounded: feeds are configured, results,
/// kinds and authors are enums, methods are the served ones (else `unknown`), errors are the
/// interfaces' error names, and at most ``StoreMetrics/maxClientSeries`` named clients have series.
///
/// The series and who registers them (quaked(8) documents them too):
///
/// | name | type | labels | registered by |
/// |---|---|---|---|
/// | `quaked_build_info` | gauge (1) | `version` | this registry |
/// | `quaked_pulls_total` | counter | `feed`, `result` (`imported`, `not_modified`, `failed`) | ``PullMetrics`` (the scheduler) |
/// | `quaked_pull_duration_seconds` | histogram | `feed` | ``PullMetrics`` |
/// | `quaked_import_duration_seconds` | histogram | `feed` | ``PullMetrics`` |
/// | `quaked_pull_bytes_total` | counter | `feed` | ``PullMetrics`` |
/// | `quaked_feed_last_success_timestamp_seconds` | gauge | `feed` | ``PullMetrics`` |
/// | `quaked_feed_consecutive_failures` | gauge | `feed` | ``PullMetrics`` |
/// | `quaked_history_changes_total` | counter | `kind` (`insert`, `update`, `delete`) | ``HistoryCounters`` (the history counter) |
/// | `quaked_history_transactions_total` | counter | `author` (`import`, `delete`, `retention`, `backfill`, `catalog`) | ``HistoryCounters`` |
/// | `quaked_backfill_windows_total`, `quaked_backfill_events_total` | counter | | ``BackfillMetrics`` (the backfill runner) |
/// | `quaked_backfill_jobs` | gauge | `state` (`queued`, `running`) | ``BackfillMetrics`` |
/// | `quaked_catalog_runs_total` | counter | `result` (`success`, `failed`) | ``CatalogMetrics`` (the catalog sync) |
/// | `quaked_catalog_last_success_timestamp_seconds` | gauge | | ``CatalogMetrics`` |
/// | `quaked_source_runs_total` | counter | `source`, `result` (`success`, `failed`) | ``SourceMetrics`` (the sources' loops) |
/// | `quaked_source_reports_total`, `quaked_source_skipped_events_total` | counter | `source` | ``SourceMetrics`` |
/// | `quaked_source_last_success_timestamp_seconds` | gauge | `source` | ``SourceMetrics`` |
/// | `quaked_association_joined_reports_total` | counter (the store's count, read when scraped) | | ``AssociationMetrics`` (the sources' loops) |
/// | `quaked_association_events_total` | counter (the store's counts) | `change` (`new`, `merged`, `split`) | ``AssociationMetrics`` |
/// | `quaked_history_head_token`, `quaked_history_oldest_token` | gauge | | ``StoreMetrics`` (store maintenance) |
/// | `quaked_quakes`, `quaked_database_bytes`, `quaked_named_clients` | gauge | | ``StoreMetrics`` |
/// | `quaked_client_lag_transactions`, `quaked_client_lag_seconds`, `quaked_client_last_seen_timestamp_seconds` | gauge | `client` | ``StoreMetrics`` |
/// | `quaked_subscribers` | gauge | | ``BroadcastMetrics`` (the broadcaster) |
/// | `quaked_notification_latency_seconds` | histogram | | ``BroadcastMetrics`` |
/// | `quaked_varlink_calls_total` | counter | `method`, `error` (`none` on success) | ``CallMetrics`` (the control server) |
public final class QuakedMetrics: Sendable {
    /// The registry every series is in; ``text()`` renders it.
    public let registry: PrometheusCollectorRegistry
    /// swift-metrics' factory on ``registry``: what `destroy()` of a series goes through.
    private let factory: PrometheusMetricsFactory
    /// What components read when the metrics are scraped, in the order they registered.
    private let scrapeHooks = NIOLockedValueBox<[@Sendable () throws -> Void]>([])

    public init(version: String = QuakedVersion.string) {
        let registry = PrometheusCollectorRegistry()
        self.registry = registry
        self.factory = PrometheusMetricsFactory(registry: registry)
        meter(Self.buildInfo, [("version", version)]).set(1)
    }

    static let buildInfo = Family(
        metricName: "build_info", unit: "", help: "quaked's version (the value is always 1).")

    /// One metric family: its name (`quaked_` + name + unit) and HELP text. Each component
    /// declares its own.
    public struct Family: Sendable {
        let metricName: String
        /// `total`, `seconds`, `bytes`, or empty.
        let unit: String
        let help: String

        init(metricName: String, unit: String, help: String) {
            self.metricName = metricName
            self.unit = unit
            self.help = help
        }

        var descriptor: MetricNameDescriptor {
            MetricNameDescriptor(namespace: "quaked", metricName: metricName, unitName: unit, helpText: help)
        }
        var name: String { descriptor.name }
    }

    // MARK: Scraping

    /// Registers what a component reads when the metrics are scraped (its gauges of state). A
    /// hook that throws leaves its gauges at their last values.
    public func onScrape(_ hook: @escaping @Sendable () throws -> Void) {
        scrapeHooks.withLockedValue { $0.append(hook) }
    }

    /// Runs every scrape hook; returns the errors of those that failed (the others ran).
    public func collect() -> [any Error] {
        var errors: [any Error] = []
        for hook in scrapeHooks.withLockedValue({ $0 }) {
            do { try hook() } catch { errors.append(error) }
        }
        return errors
    }

    // MARK: Rendering

    /// The Prometheus text exposition format (0.0.4), families sorted by name, as the series are
    /// now (``collect()`` first reads the state).
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

    // MARK: Series

    // swift-metrics' types, whose handlers are the registry's collectors: made with the registry
    // (for the HELP text) and destroyed through the factory (which unregisters them).

    func counter(_ family: Family, _ labels: [(String, String)]) -> CoreMetrics.Counter {
        CoreMetrics.Counter(
            label: family.name, dimensions: labels,
            handler: registry.makeCounter(descriptor: family.descriptor, labels: labels), factory: factory)
    }

    func meter(_ family: Family, _ labels: [(String, String)]) -> CoreMetrics.Meter {
        CoreMetrics.Meter(
            label: family.name, dimensions: labels,
            handler: registry.makeGauge(descriptor: family.descriptor, labels: labels), factory: factory)
    }

    func timer(_ family: Family, _ labels: [(String, String)], buckets: [Duration]) -> CoreMetrics.Timer {
        CoreMetrics.Timer(
            label: family.name, dimensions: labels,
            handler: registry.makeDurationHistogram(descriptor: family.descriptor, labels: labels, buckets: buckets),
            factory: factory)
    }

    static func buckets(_ seconds: [Double]) -> [Duration] {
        seconds.map { .nanoseconds(Int64(($0 * 1e9).rounded())) }
    }

    static func nanoseconds(_ duration: Duration) -> Int64 {
        let (seconds, attoseconds) = duration.components
        return seconds * 1_000_000_000 + attoseconds / 1_000_000_000
    }
}
