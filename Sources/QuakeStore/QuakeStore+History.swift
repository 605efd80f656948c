import Foundation
import GRDB
import QuakeFeed

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
        try pool.read { db in
            let head = try Self.head(db)
            let oldest = try Self.purgedThrough(db)
            if token < oldest { throw HistoryError.tokenExpired(after: token, oldest: oldest, head: head) }
            if token > head { throw HistoryError.tokenAhead(after: token, head: head) }
            let rows = try Row.fetchAll(
                db,
                sql: """
                    SELECT token, author, timestamp, source, inserted, updated, deleted
                    FROM historyTransactions WHERE token > ? ORDER BY token LIMIT ?
                    """,
                arguments: [token, max(1, limit) + 1])
            let hasMore = rows.count > max(1, limit)
            var transactions: [HistoryTransaction] = []
            var changeCount = 0
            var cutShort = false
            for row in rows.prefix(max(1, limit)) {
                let t: HistoryToken = row[0]
                let size: Int = row[4] + row[5] + row[6]
                if !transactions.isEmpty && changeCount + size > maxChanges {
                    cutShort = true
                    break
                }
                changeCount += size
                transactions.append(
                    HistoryTransaction(
                        token: t, author: HistoryAuthor(rawValue: row[1]) ?? .import, timestamp: row[2], source: row[3],
                        inserted: row[4], updated: row[5], deleted: row[6], changes: try Self.changes(db, token: t)))
            }
            return HistoryPage(
                storeID: storeID, transactions: transactions, head: head, hasMore: hasMore || cutShort,
                nextAfter: transactions.last?.token ?? token)
        }
    }

    static func changes(_ db: Database, token: HistoryToken) throws -> [HistoryChange] {
        let columns = QuakeColumns.names.map { "q.\($0)" }.joined(separator: ", ")
        let rows = try Row.fetchCursor(
            db,
            sql: """
                SELECT c.quakeId, c.kind, c.fields, c.tombstone, c.reason, c.supersededBy, q.id IS NOT NULL, \(columns)
                FROM historyChanges c LEFT JOIN quakes q ON q.id = c.quakeId AND c.kind <> 'delete'
                WHERE c.token = ? ORDER BY c.quakeId
                """,
            arguments: [token])
        var changes: [HistoryChange] = []
        let decoder = JSONDecoder()
        while let row = try rows.next() {
            let fields: String? = row[2]
            let tombstone: String? = row[3]
            let hasQuake: Bool = row[6]
            let quake: FeedFeature? =
                hasQuake ? QuakeColumns.feature(from: row, offset: 7) : nil
            changes.append(
                HistoryChange(
                    quakeId: row[0], kind: ChangeKind(rawValue: row[1]) ?? .update,
                    fields: try fields.map { try decoder.decode([FieldChange].self, from: Data($0.utf8)) },
                    tombstone: try tombstone.map { try decoder.decode(Tombstone.self, from: Data($0.utf8)) },
                    reason: (row[4] as String?).flatMap(DeleteReason.init(rawValue:)), supersededBy: row[5],
                    quake: quake))
        }
        return changes
    }
}
