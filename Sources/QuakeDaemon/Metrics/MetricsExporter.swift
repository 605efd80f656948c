import Foundation
import Logging
import QuakeStore
import ServiceLifecycle

/// The metrics as scraped: every component's scrape hook reads the state its gauges show (the
/// store's head and size, subscribers, feeds, named clients, backfill jobs), then the registry
/// renders the text. `io.quaked.Metrics` and the HTTP listener both come here. A scrape costs a
/// few indexed reads of the store; nothing is read per row.
public struct MetricsExporter: Sendable {
    public let metrics: QuakedMetrics
    let logger: Logger

    public init(metrics: QuakedMetrics, logger: Logger) {
        self.metrics = metrics
        self.logger = logger
    }

    /// The metrics in the Prometheus text format. When a component cannot read its state (the
    /// store), its gauges keep their last values (and the failure is logged): the rest is still
    /// worth serving.
    public func text() -> String {
        for error in metrics.collect() {
            logger.error("cannot read the store for the metrics", metadata: QuakedError(error).logMetadata)
        }
        return metrics.text()
    }
}

/// Counts the history's transactions and changes as they are committed, by whoever commits them
/// (this daemon, or `quaked --once` on the same file): one read of the new transaction rows per
/// announced commit, none of the change rows. Counts the transactions committed after it was
/// made. Registers ``HistoryCounters``.
struct HistoryMetrics: Service {
    let counters: HistoryCounters
    let store: QuakeStore
    let start: HistoryToken
    let logger: Logger

    init(metrics: QuakedMetrics, store: QuakeStore, logger: Logger) throws {
        self.counters = HistoryCounters(metrics)
        self.store = store
        // Transactions after this head are counted (whoever commits them, from now on).
        self.start = try store.head()
        self.logger = logger
    }

    func run() async throws {
        await cancelWhenGracefulShutdown {
            var last = start
            while !Task.isCancelled {
                do {
                    for try await _ in store.commits(after: last) {
                        while true {
                            let page = try store.transactionSummaries(after: last, limit: 1000)
                            counters.record(page)
                            last = page.last?.token ?? last
                            if page.count < 1000 { break }
                        }
                    }
                } catch {
                    // Metrics never stop the daemon: say why, and go on where the count stopped.
                    if Task.isCancelled { return }
                    logger.error("counting history for the metrics failed; retrying", metadata: ["error": "\(error)"])
                    try? await Task.sleep(for: .seconds(10))
                }
            }
        }
    }
}
