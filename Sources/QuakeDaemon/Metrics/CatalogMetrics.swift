import CoreMetrics
import Foundation
import NIOConcurrencyHelpers

/// The backfill runner's series: windows imported and the events in them, and jobs not ended by
/// state (read when scraped).
public final class BackfillMetrics: Sendable {
    private let windows: CoreMetrics.Counter
    private let events: CoreMetrics.Counter
    private let jobs: [String: CoreMetrics.Meter]

    static let windowsFamily = QuakedMetrics.Family(
        metricName: "backfill_windows", unit: "total", help: "Windows of backfill jobs imported.")
    static let eventsFamily = QuakedMetrics.Family(
        metricName: "backfill_events", unit: "total", help: "Events the catalog sent in the windows of backfill jobs.")
    static let jobsFamily = QuakedMetrics.Family(
        metricName: "backfill_jobs", unit: "", help: "Backfill jobs that have not ended, by state.")

    public init(_ metrics: QuakedMetrics) {
        windows = metrics.counter(Self.windowsFamily, [])
        events = metrics.counter(Self.eventsFamily, [])
        jobs = Dictionary(
            uniqueKeysWithValues: ["queued", "running"].map { ($0, metrics.meter(Self.jobsFamily, [("state", $0)])) })
    }

    /// A window of a backfill job was imported.
    public func recordWindow(events count: Int) {
        windows.increment()
        events.increment(by: Int64(count))
    }

    /// Jobs that have not ended, by state (`queued`, `running`; a state not given is 0).
    public func update(jobs counts: [String: Int]) {
        for (state, meter) in jobs { meter.set(counts[state] ?? 0) }
    }
}

/// The catalog sync's series: runs by result, and when the last successful one began.
public final class CatalogMetrics: Sendable {
    private let metrics: QuakedMetrics
    private let runs: [Bool: CoreMetrics.Counter]
    /// From the first successful catalog sync of this daemon on.
    private let lastSuccess = NIOLockedValueBox<CoreMetrics.Meter?>(nil)

    static let runsFamily = QuakedMetrics.Family(
        metricName: "catalog_runs", unit: "total", help: "Runs of the incremental catalog sync, by result.")
    static let lastSuccessFamily = QuakedMetrics.Family(
        metricName: "catalog_last_success_timestamp", unit: "seconds",
        help: "When the last successful catalog sync run began, in seconds since the epoch.")

    public init(_ metrics: QuakedMetrics) {
        self.metrics = metrics
        runs = [
            true: metrics.counter(Self.runsFamily, [("result", "success")]),
            false: metrics.counter(Self.runsFamily, [("result", "failed")]),
        ]
    }

    /// A catalog sync run ended; a successful one began at `startedAt`.
    public func recordRun(success: Bool, startedAt: Date) {
        runs[success]?.increment()
        guard success else { return }
        lastSuccess.withLockedValue { meter in
            if meter == nil { meter = metrics.meter(Self.lastSuccessFamily, []) }
            meter?.set(startedAt.timeIntervalSince1970)
        }
    }
}
