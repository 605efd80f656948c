import Foundation
import Logging
import QuakeStore
import ServiceLifecycle

/// The metrics as scraped: reads the state they show (the store's head and size, subscribers,
/// feeds, named clients) and renders the text. `io.quaked.Metrics` and the HTTP listener both
/// come here. A scrape costs a few indexed reads of the store; nothing is read per row.
public struct MetricsExporter: Sendable {
    public let metrics: QuakedMetrics
    let store: QuakeStore
    let broadcaster: ChangeBroadcaster
    let scheduler: FeedScheduler
    /// Named clients not seen for this long (history-hard-max-age) hold nothing back and get no
    /// series; read at each scrape, so a reload applies.
    let clientWindow: @Sendable () -> Duration
    let logger: Logger

    public init(
        metrics: QuakedMetrics, store: QuakeStore, broadcaster: ChangeBroadcaster, scheduler: FeedScheduler,
        clientWindow: @escaping @Sendable () -> Duration, logger: Logger
    ) {
        self.metrics = metrics
        self.store = store
        self.broadcaster = broadcaster
        self.scheduler = scheduler
        self.clientWindow = clientWindow
        self.logger = logger
    }

    /// The metrics in the Prometheus text format. When the store cannot be read, the gauges it
    /// sets keep their last values (and the failure is logged): counters are still worth serving.
    public func text() -> String {
        do {
            metrics.update(try state())
        } catch {
            logger.error("cannot read the store for the metrics", metadata: ["error": "\(error)"])
        }
        return metrics.text()
    }

    func state(now: Date = Date()) throws -> QuakedMetrics.State {
        let (total, clients) = try store.clientPositions(
            seenSince: now - clientWindow().timeInterval, limit: QuakedMetrics.maxClientSeries)
        var state = QuakedMetrics.State(
            head: try store.head(), oldest: try store.oldestToken(), quakes: try store.count(),
            databaseBytes: store.fileBytes, subscribers: broadcaster.count, feeds: scheduler.statuses(),
            namedClients: total, clients: clients, now: now)
        for job in try store.unfinishedBackfillJobs() { state.backfillJobs[job.state.rawValue, default: 0] += 1 }
        return state
    }
}

/// Counts the history's transactions and changes as they are committed, by whoever commits them
/// (this daemon, or `quaked --once` on the same file): one read of the new transaction rows per
/// announced commit, none of the change rows. Counts the transactions after `start`.
struct HistoryMetrics: Service {
    let metrics: QuakedMetrics
    let store: QuakeStore
    let start: HistoryToken
    let logger: Logger

    init(metrics: QuakedMetrics, store: QuakeStore, start: HistoryToken, logger: Logger) {
        self.metrics = metrics
        self.store = store
        self.start = start
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
                            metrics.recordTransactions(page)
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
