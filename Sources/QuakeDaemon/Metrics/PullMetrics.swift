import CoreMetrics
import Foundation
import NIOConcurrencyHelpers

/// The feed scheduler's series: pulls by feed and result, their durations, the imports' time and
/// bytes, and per configured feed its failures in a row and last success. The scheduler makes it
/// on the registry, configures the feeds at start and on each reload, records each pull, and sets
/// the gauges from the feeds' status when the metrics are scraped.
public final class PullMetrics: Sendable {
    /// How a pull ended, as the `result` label says it.
    public enum Outcome: String, Sendable, CaseIterable {
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
        var pulls: [Outcome: CoreMetrics.Counter]
        var pullDuration: CoreMetrics.Timer
        var importDuration: CoreMetrics.Timer
        var bytes: CoreMetrics.Counter
        /// While the feed is configured.
        var failures: CoreMetrics.Meter?
        /// From the feed's first successful pull, while it is configured.
        var lastSuccess: CoreMetrics.Meter?
    }

    private let metrics: QuakedMetrics
    private let feeds = NIOLockedValueBox<[String: FeedSeries]>([:])

    static let pulls = QuakedMetrics.Family(metricName: "pulls", unit: "total", help: "Feed pulls, by feed and result.")
    static let pullDuration = QuakedMetrics.Family(
        metricName: "pull_duration", unit: "seconds", help: "Time of whole feed pulls (request, download and import).")
    static let importDuration = QuakedMetrics.Family(
        metricName: "import_duration", unit: "seconds",
        help: "Time of the imports of feed documents (pulls answered 200, and files).")
    static let bytes = QuakedMetrics.Family(
        metricName: "pull_bytes", unit: "total",
        help: "Bytes of feed documents downloaded and imported (decompressed; file feeds included).")
    static let failures = QuakedMetrics.Family(
        metricName: "feed_consecutive_failures", unit: "", help: "Failed pulls in a row, per configured feed.")
    static let lastSuccess = QuakedMetrics.Family(
        metricName: "feed_last_success_timestamp", unit: "seconds",
        help: "When a pull of the feed last succeeded (imported or not modified), in seconds since the epoch.")

    static let pullBuckets = QuakedMetrics.buckets([0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120])
    static let importBuckets = QuakedMetrics.buckets([0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30])

    public init(_ metrics: QuakedMetrics) {
        self.metrics = metrics
    }

    /// Makes the series of the configured feeds (at zero) and drops the gauges of feeds no
    /// longer configured. At start-up and after each reload.
    public func configureFeeds(_ names: [String]) {
        feeds.withLockedValue { feeds in
            for name in names where feeds[name]?.failures == nil {
                var series = feeds[name] ?? makeFeedSeries(name)
                series.failures = metrics.meter(Self.failures, [("feed", name)])
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
    public func record(feed: String, result: PullResult, duration: Duration) {
        let series = feeds.withLockedValue { feeds in
            if let series = feeds[feed] { return series }
            let series = makeFeedSeries(feed)
            feeds[feed] = series
            return series
        }
        series.pulls[Outcome(result)]?.increment()
        series.pullDuration.recordNanoseconds(QuakedMetrics.nanoseconds(duration))
        if case .imported(let report, _) = result {
            series.importDuration.recordMilliseconds(report.durationMs)
            series.bytes.increment(by: report.bytes)
        }
    }

    /// Sets the configured feeds' gauges from their status (when scraped).
    public func update(_ statuses: [FeedStatus]) {
        feeds.withLockedValue { feeds in
            for status in statuses {
                guard var series = feeds[status.name], let failures = series.failures else { continue }
                failures.set(status.consecutiveFailures)
                if let success = status.lastSuccess {
                    if series.lastSuccess == nil {
                        series.lastSuccess = metrics.meter(Self.lastSuccess, [("feed", status.name)])
                        feeds[status.name] = series
                    }
                    series.lastSuccess?.set(success.timeIntervalSince1970)
                }
            }
        }
    }

    private func makeFeedSeries(_ feed: String) -> FeedSeries {
        let labels = [("feed", feed)]
        var pulls: [Outcome: CoreMetrics.Counter] = [:]
        for outcome in Outcome.allCases {
            pulls[outcome] = metrics.counter(Self.pulls, labels + [("result", outcome.rawValue)])
        }
        return FeedSeries(
            pulls: pulls, pullDuration: metrics.timer(Self.pullDuration, labels, buckets: Self.pullBuckets),
            importDuration: metrics.timer(Self.importDuration, labels, buckets: Self.importBuckets),
            bytes: metrics.counter(Self.bytes, labels))
    }
}
