import CoreMetrics
import Foundation
import NIOConcurrencyHelpers
import QuakeModel
import QuakeStore

/// What the store holds, read when the metrics are scraped: the history's head and oldest token,
/// quakes stored, the database's size, and named clients with their lag. Store maintenance makes
/// it on the registry (it keeps history for those clients, and knows how long a client counts).
public final class StoreMetrics: Sendable {
    /// At most this many named clients get lag series (the most recently seen ones).
    public static let maxClientSeries = 100

    private struct ClientSeries: Sendable {
        var lagTransactions: CoreMetrics.Meter
        var lagSeconds: CoreMetrics.Meter
        var lastSeen: CoreMetrics.Meter
    }

    private let metrics: QuakedMetrics
    private let headToken: CoreMetrics.Meter
    private let oldestToken: CoreMetrics.Meter
    private let quakes: CoreMetrics.Meter
    private let databaseBytes: CoreMetrics.Meter
    private let namedClients: CoreMetrics.Meter
    private let clients = NIOLockedValueBox<[String: ClientSeries]>([:])

    static let headTokenFamily = QuakedMetrics.Family(
        metricName: "history_head_token", unit: "", help: "The newest history token.")
    static let oldestTokenFamily = QuakedMetrics.Family(
        metricName: "history_oldest_token", unit: "",
        help: "The oldest token history can be served after (older history is purged).")
    static let quakesFamily = QuakedMetrics.Family(metricName: "quakes", unit: "", help: "Earthquakes stored.")
    static let databaseBytesFamily = QuakedMetrics.Family(
        metricName: "database", unit: "bytes", help: "Bytes of quakes.sqlite and its write-ahead log.")
    static let namedClientsFamily = QuakedMetrics.Family(
        metricName: "named_clients", unit: "", help: "Named clients known to the store, seen recently or not.")
    static let lagTransactions = QuakedMetrics.Family(
        metricName: "client_lag_transactions", unit: "",
        help: "History transactions after the token a named client acknowledged last.")
    static let lagSeconds = QuakedMetrics.Family(
        metricName: "client_lag", unit: "seconds",
        help: "Age of the oldest history transaction a named client has not acknowledged (0 when it has them all).")
    static let lastSeen = QuakedMetrics.Family(
        metricName: "client_last_seen_timestamp", unit: "seconds",
        help: "When a named client last subscribed, fetched or acknowledged, in seconds since the epoch.")

    public init(_ metrics: QuakedMetrics) {
        self.metrics = metrics
        headToken = metrics.meter(Self.headTokenFamily, [])
        oldestToken = metrics.meter(Self.oldestTokenFamily, [])
        quakes = metrics.meter(Self.quakesFamily, [])
        databaseBytes = metrics.meter(Self.databaseBytesFamily, [])
        namedClients = metrics.meter(Self.namedClientsFamily, [])
    }

    /// Reads the store: a few indexed reads, nothing per row. Named clients not seen for
    /// `clientWindow` (history-hard-max-age) hold nothing back and get no series.
    func update(from store: QuakeStore, clientWindow: Duration, now: Date = Date()) throws {
        let (total, positions) = try store.clientPositions(
            seenSince: now - clientWindow.timeInterval, limit: Self.maxClientSeries)
        update(
            head: try store.head(), oldest: try store.oldestToken(), quakes: try store.count(),
            databaseBytes: store.fileBytes, namedClients: total, clients: positions, now: now)
    }

    /// Sets the gauges; clients without a position here lose their series.
    public func update(
        head: HistoryToken, oldest: HistoryToken, quakes: Int, databaseBytes: Int, namedClients: Int,
        clients positions: [ClientPosition], now: Date = Date()
    ) {
        headToken.set(head)
        oldestToken.set(oldest)
        self.quakes.set(quakes)
        self.databaseBytes.set(databaseBytes)
        self.namedClients.set(namedClients)
        let nowMs = QuakeTime.milliseconds(now)
        clients.withLockedValue { clients in
            var kept: [String: ClientSeries] = [:]
            for position in positions.prefix(Self.maxClientSeries) {
                let labels = [("client", position.name)]
                let series =
                    clients.removeValue(forKey: position.name)
                    ?? ClientSeries(
                        lagTransactions: metrics.meter(Self.lagTransactions, labels),
                        lagSeconds: metrics.meter(Self.lagSeconds, labels), lastSeen: metrics.meter(Self.lastSeen, labels))
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
}

/// The history's counters: changes by kind and transactions by author, as they are committed (by
/// whoever commits them). ``HistoryMetrics`` makes it on the registry and feeds it.
public final class HistoryCounters: Sendable {
    private let changes: [ChangeKind: CoreMetrics.Counter]
    private let transactions: [HistoryAuthor: CoreMetrics.Counter]

    static let changesFamily = QuakedMetrics.Family(
        metricName: "history_changes", unit: "total", help: "Changes recorded in the history, by kind.")
    static let transactionsFamily = QuakedMetrics.Family(
        metricName: "history_transactions", unit: "total", help: "History transactions recorded, by author.")

    public init(_ metrics: QuakedMetrics) {
        changes = Dictionary(
            uniqueKeysWithValues: [ChangeKind.insert, .update, .delete].map {
                ($0, metrics.counter(Self.changesFamily, [("kind", $0.rawValue)]))
            })
        transactions = Dictionary(
            uniqueKeysWithValues: HistoryAuthor.allCases.map {
                ($0, metrics.counter(Self.transactionsFamily, [("author", $0.rawValue)]))
            })
    }

    /// Committed history transactions (read once each, after their commit).
    public func record(_ summaries: [TransactionSummary]) {
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
}
