import Foundation
import GRDB

/// A history transaction's counts, without its changes: what the daemon's metrics count.
public struct TransactionSummary: Sendable, Hashable {
    public var token: HistoryToken
    public var author: HistoryAuthor?
    public var inserted: Int
    public var updated: Int
    public var deleted: Int

    public init(token: HistoryToken, author: HistoryAuthor?, inserted: Int, updated: Int, deleted: Int) {
        self.token = token
        self.author = author
        self.inserted = inserted
        self.updated = updated
        self.deleted = deleted
    }
}

/// How far one named client is behind the head, for the daemon's metrics.
public struct ClientPosition: Sendable, Hashable {
    public var name: String
    /// The last token it acknowledged.
    public var token: HistoryToken
    /// Milliseconds since the Unix epoch.
    public var lastSeen: Int64
    /// History transactions after `token` (the ones still in the history).
    public var transactionsBehind: Int
    /// The timestamp (ms since the epoch) of the oldest of those; nil when it has them all.
    public var oldestUnacknowledged: Int64?

    public init(
        name: String, token: HistoryToken, lastSeen: Int64, transactionsBehind: Int, oldestUnacknowledged: Int64?
    ) {
        self.name = name
        self.token = token
        self.lastSeen = lastSeen
        self.transactionsBehind = transactionsBehind
        self.oldestUnacknowledged = oldestUnacknowledged
    }
}

extension QuakeStore {
    /// The counts of the transactions after `token`, oldest first, at most `limit`. One indexed
    /// read of the transaction rows; the change rows are not touched.
    public func transactionSummaries(after token: HistoryToken, limit: Int = 1000) throws -> [TransactionSummary] {
        try pool.read { db in
            try Row.fetchAll(
                db,
                sql: """
                    SELECT token, author, inserted, updated, deleted FROM historyTransactions
                    WHERE token > ? ORDER BY token LIMIT ?
                    """,
                arguments: [token, max(1, limit)]
            ).map {
                TransactionSummary(
                    token: $0[0], author: ($0[1] as String?).flatMap(HistoryAuthor.init(rawValue:)), inserted: $0[2],
                    updated: $0[3], deleted: $0[4])
            }
        }
    }

    /// The named clients seen since `since`, most recently seen first, at most `limit`, with how
    /// far each is behind; and how many named clients there are in all. One read.
    public func clientPositions(seenSince since: Date, limit: Int) throws -> (total: Int, clients: [ClientPosition]) {
        try pool.read { db in
            let total = try Int.fetchOne(db, sql: "SELECT count(*) FROM clients") ?? 0
            let clients = try Row.fetchAll(
                db,
                sql: """
                    SELECT c.name, c.token, c.lastSeen,
                        (SELECT count(*) FROM historyTransactions t WHERE t.token > c.token),
                        (SELECT t.timestamp FROM historyTransactions t WHERE t.token > c.token ORDER BY t.token LIMIT 1)
                    FROM clients c WHERE c.lastSeen >= ? ORDER BY c.lastSeen DESC, c.name LIMIT ?
                    """,
                arguments: [Self.milliseconds(since), max(0, limit)]
            ).map {
                ClientPosition(
                    name: $0[0], token: $0[1], lastSeen: $0[2], transactionsBehind: $0[3], oldestUnacknowledged: $0[4])
            }
            return (total, clients)
        }
    }

    /// Bytes of the database file and its WAL.
    public var fileBytes: Int {
        ["", "-wal"].reduce(0) { total, suffix in
            total + ((try? FileManager.default.attributesOfItem(atPath: path + suffix)[.size] as? Int) ?? 0)
        }
    }
}
