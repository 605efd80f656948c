import CoreMetrics
import Foundation
import NIOConcurrencyHelpers
import Varlink

/// The broadcaster's series: subscribers (read when scraped) and the time from a commit to every
/// subscriber having its notification.
public final class BroadcastMetrics: Sendable {
    private let subscribers: CoreMetrics.Meter
    private let latency: CoreMetrics.Timer

    static let subscribersFamily = QuakedMetrics.Family(
        metricName: "subscribers", unit: "", help: "Connections with a Subscribe call in progress.")
    static let latencyFamily = QuakedMetrics.Family(
        metricName: "notification_latency", unit: "seconds",
        help:
            "Time from a commit of this daemon to every subscriber having its change notification (written, or waiting in its slot)."
    )
    static let latencyBuckets = QuakedMetrics.buckets(
        [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5])

    public init(_ metrics: QuakedMetrics) {
        subscribers = metrics.meter(Self.subscribersFamily, [])
        latency = metrics.timer(Self.latencyFamily, [], buckets: Self.latencyBuckets)
    }

    /// How long a commit took to reach every subscriber.
    public func recordNotification(latency duration: Duration) {
        latency.recordNanoseconds(QuakedMetrics.nanoseconds(duration))
    }

    /// Subscribers now (when scraped).
    public func update(subscribers count: Int) {
        subscribers.set(count)
    }
}

/// The control server's series: Varlink calls handled, by method and error.
public final class CallMetrics: Sendable {
    private struct CallKey: Hashable, Sendable {
        var method: String
        var error: String
    }

    private let metrics: QuakedMetrics
    private let calls = NIOLockedValueBox<[CallKey: CoreMetrics.Counter]>([:])

    static let callsFamily = QuakedMetrics.Family(
        metricName: "varlink_calls", unit: "total", help: "Varlink calls handled, by method and error (none: success).")

    public init(_ metrics: QuakedMetrics) {
        self.metrics = metrics
    }

    /// One handled Varlink call.
    public func record(_ outcome: VarlinkServer.CallOutcome) {
        let key = CallKey(method: outcome.method ?? "unknown", error: outcome.error ?? "none")
        let counter = calls.withLockedValue { calls in
            if let counter = calls[key] { return counter }
            let counter = metrics.counter(Self.callsFamily, [("method", key.method), ("error", key.error)])
            calls[key] = counter
            return counter
        }
        counter.increment()
    }
}
