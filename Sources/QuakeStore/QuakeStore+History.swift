import Foundation
import GRDB
import GRDBSQLite
import QuakeFeed

/// One change row as stored: its JSON columns kept as their text, so that a server can send
/// them on as they are (they are stored in the interface's form), and the quake as stored now.
public struct StoredChange: Sendable, Hashable {
    public var quakeId: String
    public var kind: ChangeKind
    /// Update: the JSON array of FieldChange objects.
    public var fieldsJSON: String?
    /// Delete: the JSON Tombstone object.
    public var tombstoneJSON: String?
    public var reason: DeleteReason?
    public var supersededBy: String?
    /// Insert and update: the quake as stored now; nil when a later transaction removed it.
    public var quake: FeedFeature?
}

/// One history transaction with its stored change rows.
public struct StoredTransaction: Sendable, Hashable {
    public var token: HistoryToken
    public var author: HistoryAuthor
    public var timestamp: Int64
    public var source: String?
    public var inserted: Int
    public var updated: Int
    public var deleted: Int
    public var changes: [StoredChange]
}

/// A page of history after a token, as stored (see ``QuakeStore/storedHistory(after:limit:maxChanges:)``).
public struct StoredHistoryPage: Sendable, Hashable {
    public var storeID: String
    public var transactions: [StoredTransaction]
    /// The newest token when the page was read.
    public var head: HistoryToken
    /// History after any token from this one to `head` is complete.
    public var oldest: HistoryToken
    public var hasMore: Bool
    public var nextAfter: HistoryToken
}

extension QuakeStore {
    /// History after `token`, oldest first: at most `limit` transactions, each with its changes
    /// and, for inserts and updates, the quake as stored now.
    ///
    /// Throws ``HistoryError/tokenExpired(after:oldest:head:)`` when history after `token` has been
    /// purged, and ``HistoryError/tokenAhead(after:head:)`` for a token this store never wrote:
    /// never a silent gap.
    /// `maxChanges` bounds a page's size: transactions are added while the changes so far stay
    /// under it, but the first transaction is always returned whole.
    public func history(after token: HistoryToken, limit: Int = 100, maxChanges: Int = .max) throws -> HistoryPage {
        let page = try storedHistory(after: token, limit: limit, maxChanges: maxChanges)
        let decoder = JSONDecoder()
        return HistoryPage(
            storeID: page.storeID,
            transactions: try page.transactions.map { t in
                HistoryTransaction(
                    token: t.token, author: t.author, timestamp: t.timestamp, source: t.source, inserted: t.inserted,
                    updated: t.updated, deleted: t.deleted,
                    changes: try t.changes.map { c in
                        HistoryChange(
                            quakeId: c.quakeId, kind: c.kind,
                            fields: try c.fieldsJSON.map { try decoder.decode([FieldChange].self, from: Data($0.utf8)) },
                            tombstone: try c.tombstoneJSON.map {
                                try decoder.decode(Tombstone.self, from: Data($0.utf8))
                            },
                            reason: c.reason, supersededBy: c.supersededBy, quake: c.quake)
                    })
            }, head: page.head, hasMore: page.hasMore, nextAfter: page.nextAfter)
    }

    /// ``history(after:limit:maxChanges:)`` with each change's JSON columns as stored: the fast
    /// path for serving history (rows read through the C API, nothing decoded).
    public func storedHistory(after token: HistoryToken, limit: Int = 100, maxChanges: Int = .max) throws
        -> StoredHistoryPage
    {
        try pool.read { db in
            let head = try Self.head(db)
            let oldest = try Self.purgedThrough(db)
            if token < oldest { throw HistoryError.tokenExpired(after: token, oldest: oldest, head: head) }
            if token > head { throw HistoryError.tokenAhead(after: token, head: head) }
            let limit = max(1, limit)
            let headers = try RawStatement(
                db,
                sql: """
                    SELECT token, author, timestamp, source, inserted, updated, deleted
                    FROM historyTransactions WHERE token > ? ORDER BY token LIMIT ?
                    """)
            headers.reset()
            headers.bind(1, token)
            headers.bind(2, Int64(limit + 1))
            var transactions: [StoredTransaction] = []
            var changeCount = 0
            var more = false
            while try headers.step() {
                let size = Int(headers.int64(4) ?? 0) + Int(headers.int64(5) ?? 0) + Int(headers.int64(6) ?? 0)
                if transactions.count == limit || (!transactions.isEmpty && changeCount + size > maxChanges) {
                    more = true
                    break
                }
                changeCount += size
                transactions.append(
                    StoredTransaction(
                        token: headers.int64(0) ?? 0, author: HistoryAuthor(rawValue: headers.string(1) ?? "") ?? .import,
                        timestamp: headers.int64(2) ?? 0, source: headers.string(3),
                        inserted: Int(headers.int64(4) ?? 0), updated: Int(headers.int64(5) ?? 0),
                        deleted: Int(headers.int64(6) ?? 0), changes: []))
            }
            headers.reset()
            let changes = try RawStatement(
                db,
                sql: """
                    SELECT c.quakeId, c.kind, c.fields, c.tombstone, c.reason, c.supersededBy, q.id IS NOT NULL,
                        \(QuakeColumns.names.map { "q.\($0)" }.joined(separator: ", "))
                    FROM historyChanges c LEFT JOIN quakes q ON q.id = c.quakeId AND c.kind <> 'delete'
                    WHERE c.token = ? ORDER BY c.quakeId
                    """)
            for i in transactions.indices {
                changes.reset()
                changes.bind(1, transactions[i].token)
                var rows: [StoredChange] = []
                rows.reserveCapacity(transactions[i].inserted + transactions[i].updated + transactions[i].deleted)
                while try changes.step() {
                    rows.append(
                        StoredChange(
                            quakeId: changes.string(0) ?? "", kind: ChangeKind(rawValue: changes.string(1) ?? "") ?? .update,
                            fieldsJSON: changes.string(2), tombstoneJSON: changes.string(3),
                            reason: changes.string(4).flatMap(DeleteReason.init(rawValue:)),
                            supersededBy: changes.string(5),
                            quake: changes.int64(6) == 1 ? QuakeColumns.feature(from: changes, offset: 7) : nil))
                }
                transactions[i].changes = rows
            }
            changes.reset()
            return StoredHistoryPage(
                storeID: storeID, transactions: transactions, head: head, oldest: oldest, hasMore: more,
                nextAfter: transactions.last?.token ?? token)
        }
    }
}
