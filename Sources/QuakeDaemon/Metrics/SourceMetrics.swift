import CoreMetrics
import Foundation
import NIOConcurrencyHelpers
import QuakeStore
import QuakeStreams

/// The sources' series (`source = ...`), by source name: runs by result, the reports the
/// answers held and the events the readers skipped, and when the last successful run began.
/// A source's series exist from its configuration on (its runs at 0), so that an alert on
/// failures sees it before its first run. An emsc source's runs are its catch-ups; its websocket
/// has series of its own (``recordStream(_:counters:connected:lastMessage:)``), made when the
/// stream first reports. `quaked_source_report_delay_seconds` is a histogram of the time from each
/// report's own `updated` to the commit of the import that held it
/// (``recordReportDelays(_:updated:committedAt:)``), made with its first observation.
public final class SourceMetrics: Sendable {
    private struct Series {
        var runs: [Bool: CoreMetrics.Counter]
        var reports: CoreMetrics.Counter
        var skipped: CoreMetrics.Counter
        var lastSuccess: CoreMetrics.Meter?
        var stream: Stream?
        var reportDelay: CoreMetrics.Timer?
    }

    /// An emsc source's websocket.
    private struct Stream {
        var messages: CoreMetrics.Counter
        var badMessages: CoreMetrics.Counter
        var reconnects: CoreMetrics.Counter
        var catchUps: [Bool: CoreMetrics.Counter]
        var connected: CoreMetrics.Meter
        var lastMessage: CoreMetrics.Meter
    }

    private let metrics: QuakedMetrics
    private let series = NIOLockedValueBox<[String: Series]>([:])

    static let runsFamily = QuakedMetrics.Family(
        metricName: "source_runs", unit: "total", help: "Runs of each source, by result.")
    static let reportsFamily = QuakedMetrics.Family(
        metricName: "source_reports", unit: "total",
        help: "Reports and retractions the answers of each source held, imported or not.")
    static let skippedFamily = QuakedMetrics.Family(
        metricName: "source_skipped_events", unit: "total",
        help: "Events of each source's answers skipped as unreadable (no origin, bad coordinates, ...).")
    static let lastSuccessFamily = QuakedMetrics.Family(
        metricName: "source_last_success_timestamp", unit: "seconds",
        help: "When each source's last successful run began, in seconds since the epoch.")

    static let messagesFamily = QuakedMetrics.Family(
        metricName: "source_messages", unit: "total",
        help: "Websocket messages each push source (emsc) received, good and bad.")
    static let badMessagesFamily = QuakedMetrics.Family(
        metricName: "source_bad_messages", unit: "total",
        help:
            "Websocket messages each push source skipped as bad (binary, not UTF-8, too large, not EMSC's message, an event that cannot be imported)."
    )
    static let reconnectsFamily = QuakedMetrics.Family(
        metricName: "source_reconnects", unit: "total", help: "Connections each push source tried after its first.")
    static let catchUpsFamily = QuakedMetrics.Family(
        metricName: "source_catch_ups", unit: "total",
        help: "Catch-ups through the FDSN service after each push source's connects, by result.")
    static let connectedFamily = QuakedMetrics.Family(
        metricName: "source_connected", unit: "",
        help: "Whether each push source's websocket is connected (1) or not (0).")
    static let lastMessageFamily = QuakedMetrics.Family(
        metricName: "source_last_message_timestamp", unit: "seconds",
        help: "When each push source's last websocket message arrived, in seconds since the epoch.")

    static let reportDelayFamily = QuakedMetrics.Family(
        metricName: "source_report_delay", unit: "seconds",
        help:
            "Time from each report's own update time (lastupdate) to the commit of the source's import that held it (reports with one, not retractions)."
    )
    static let reportDelayBuckets = QuakedMetrics.buckets([0.5, 1, 2, 5, 10, 30, 60, 120, 300, 900, 3600])

    public init(_ metrics: QuakedMetrics) {
        self.metrics = metrics
    }

    /// An import of `name`'s reports committed at `committedAt`: observes, for each report's
    /// `updated` (ms since the epoch), the time from it to the commit (0 for one in the future,
    /// a clock ahead of ours). The series is made with the first observation.
    public func recordReportDelays(_ name: String, updated: [Int64], committedAt: Date) {
        guard !updated.isEmpty else { return }
        let committed = Int64((committedAt.timeIntervalSince1970 * 1000).rounded(.down))
        series.withLockedValue { all in
            var series = all[name] ?? make(name)
            let delay =
                series.reportDelay
                ?? metrics.timer(Self.reportDelayFamily, [("source", name)], buckets: Self.reportDelayBuckets)
            for value in updated {
                delay.recordNanoseconds(min(max(0, committed - value), Int64.max / 1_000_000) * 1_000_000)
            }
            series.reportDelay = delay
            all[name] = series
        }
    }

    /// Makes the series of the sources not seen yet.
    public func configureSources(_ names: [String]) {
        series.withLockedValue { all in
            for name in names where all[name] == nil { all[name] = make(name) }
        }
    }

    private func make(_ name: String) -> Series {
        let label = [("source", name)]
        return Series(
            runs: [
                true: metrics.counter(Self.runsFamily, label + [("result", "success")]),
                false: metrics.counter(Self.runsFamily, label + [("result", "failed")]),
            ],
            reports: metrics.counter(Self.reportsFamily, label), skipped: metrics.counter(Self.skippedFamily, label),
            lastSuccess: nil)
    }

    /// A run of `name` ended: a successful one began at `startedAt`, its answer held `reports`
    /// items, and `skipped` events were skipped.
    public func recordRun(_ name: String, success: Bool, startedAt: Date, reports: Int = 0, skipped: Int = 0) {
        series.withLockedValue { all in
            var series = all[name] ?? make(name)
            series.runs[success]?.increment()
            if success {
                series.reports.increment(by: Int64(reports))
                series.skipped.increment(by: Int64(skipped))
                if series.lastSuccess == nil {
                    series.lastSuccess = metrics.meter(Self.lastSuccessFamily, [("source", name)])
                }
                series.lastSuccess?.set(startedAt.timeIntervalSince1970)
            }
            all[name] = series
        }
    }

    /// A push source's stream: `counters` holds what happened since the last call (added to the
    /// counters), `connected` and `lastMessage` (ms since the epoch) are the state now.
    public func recordStream(
        _ name: String, counters: EMSCStream.Counters = .init(), connected: Bool, lastMessage: Int64? = nil
    ) {
        series.withLockedValue { all in
            var series = all[name] ?? make(name)
            let label = [("source", name)]
            let stream =
                series.stream
                ?? Stream(
                    messages: metrics.counter(Self.messagesFamily, label),
                    badMessages: metrics.counter(Self.badMessagesFamily, label),
                    reconnects: metrics.counter(Self.reconnectsFamily, label),
                    catchUps: [
                        true: metrics.counter(Self.catchUpsFamily, label + [("result", "success")]),
                        false: metrics.counter(Self.catchUpsFamily, label + [("result", "failed")]),
                    ],
                    connected: metrics.meter(Self.connectedFamily, label),
                    lastMessage: metrics.meter(Self.lastMessageFamily, label))
            if counters.messages > 0 { stream.messages.increment(by: Int64(counters.messages)) }
            if counters.badMessages > 0 { stream.badMessages.increment(by: Int64(counters.badMessages)) }
            if counters.reconnects > 0 { stream.reconnects.increment(by: Int64(counters.reconnects)) }
            if counters.catchUps > 0 { stream.catchUps[true]?.increment(by: Int64(counters.catchUps)) }
            if counters.catchUpFailures > 0 { stream.catchUps[false]?.increment(by: Int64(counters.catchUpFailures)) }
            stream.connected.set(connected ? 1 : 0)
            if let lastMessage { stream.lastMessage.set(Double(lastMessage) / 1000) }
            series.stream = stream
            all[name] = series
        }
    }
}

/// The association of reports into events, read from the store when scraped (its counts are kept
/// in the store, across restarts): reports that joined an event another source had reported,
/// and events created, merged and split. The series exist once the store follows sources.
public final class AssociationMetrics: Sendable {
    private struct Series {
        var joined: CoreMetrics.Counter
        var events: [String: CoreMetrics.Counter]
        /// What the counters have been increased to.
        var counted: [String: Int64] = [:]
    }

    private let metrics: QuakedMetrics
    private let series = NIOLockedValueBox<Series?>(nil)

    static let joinedFamily = QuakedMetrics.Family(
        metricName: "association_joined_reports", unit: "total",
        help: "Reports that joined an event another source had already reported.")
    static let eventsFamily = QuakedMetrics.Family(
        metricName: "association_events", unit: "total",
        help: "Events created (new), merged into another (merged) and split into two or more (split) by the association.")

    public init(_ metrics: QuakedMetrics) {
        self.metrics = metrics
    }

    /// Brings the counters up to the store's counts (nil: the store does not follow sources yet).
    public func update(_ counts: AssociationCounts?) {
        guard let counts else { return }
        series.withLockedValue { series in
            var current =
                series
                ?? Series(
                    joined: metrics.counter(Self.joinedFamily, []),
                    events: Dictionary(
                        uniqueKeysWithValues: ["new", "merged", "split"].map {
                            ($0, metrics.counter(Self.eventsFamily, [("change", $0)]))
                        }))
            let values: [(String, Int64, CoreMetrics.Counter)] = [
                ("joined", counts.joined, current.joined), ("new", counts.created, current.events["new"]!),
                ("merged", counts.merged, current.events["merged"]!), ("split", counts.split, current.events["split"]!),
            ]
            for (key, value, counter) in values {
                let counted = current.counted[key] ?? 0
                if value > counted { counter.increment(by: value - counted) }
                // A store restored from an older backup counts from its value on.
                current.counted[key] = value
            }
            series = current
        }
    }
}
