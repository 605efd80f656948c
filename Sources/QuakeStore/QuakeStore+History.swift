import Foundation
import GRDB
import GRDBSQLite
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
        var collector = HistoryCollector()
        let summary = try visitHistory(after: token, limit: limit, maxChanges: maxChanges, &collector)
        if let failure = collector.failure { throw failure }
        return HistoryPage(
            storeID: summary.storeID, transactions: collector.transactions, head: summary.head,
            hasMore: summary.hasMore, nextAfter: summary.nextAfter)
    }

    /// The fast path for serving history: the same page as ``history(after:limit:maxChanges:)``,
    /// handed to `visitor` row by row, straight from SQLite's buffers (nothing decoded, no string
    /// made), inside one read transaction. The page's head, oldest token and continuation come
    /// back at the end.
    public func visitHistory(
        after token: HistoryToken, limit: Int = 100, maxChanges: Int = .max, _ visitor: inout some StoredHistoryVisitor
    ) throws -> StoredHistorySummary {
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
            var transactions: [StoredTransactionHeader] = []
            var changeCount = 0
            var more = false
            while try headers.step() {
                let header = StoredTransactionHeader(
                    token: headers.int64(0) ?? 0, author: HistoryAuthor(rawValue: headers.string(1) ?? "") ?? .import,
                    timestamp: headers.int64(2) ?? 0, source: headers.string(3),
                    inserted: Int(headers.int64(4) ?? 0), updated: Int(headers.int64(5) ?? 0),
                    deleted: Int(headers.int64(6) ?? 0))
                let size = header.inserted + header.updated + header.deleted
                if transactions.count == limit || (!transactions.isEmpty && changeCount + size > maxChanges) {
                    more = true
                    break
                }
                changeCount += size
                transactions.append(header)
            }
            headers.reset()
            visitor.beginPage(changeCount: changeCount)
            let changes = try RawStatement(
                db,
                sql: """
                    SELECT c.quakeId, c.kind, c.fields, c.tombstone, c.reason, c.supersededBy, q.id IS NOT NULL,
                        \(QuakeColumns.names.map { "q.\($0)" }.joined(separator: ", "))
                    FROM historyChanges c LEFT JOIN quakes q ON q.id = c.quakeId AND c.kind <> 'delete'
                    WHERE c.token = ? ORDER BY c.quakeId
                    """)
            for header in transactions {
                visitor.beginTransaction(header)
                changes.reset()
                changes.bind(1, header.token)
                while try changes.step() { visitor.visitChange(StoredChangeRow(statement: changes.handle)) }
                visitor.endTransaction()
            }
            changes.reset()
            return StoredHistorySummary(
                storeID: storeID, head: head, oldest: oldest, hasMore: more,
                nextAfter: transactions.last?.token ?? token)
        }
    }
}

/// A transaction's own columns (see ``QuakeStore/visitHistory(after:limit:maxChanges:_:)``).
public struct StoredTransactionHeader: Sendable, Hashable {
    public var token: HistoryToken
    public var author: HistoryAuthor
    public var timestamp: Int64
    public var source: String?
    public var inserted: Int
    public var updated: Int
    public var deleted: Int
}

/// What a history page is as a whole, known once it has been read.
public struct StoredHistorySummary: Sendable, Hashable {
    public var storeID: String
    public var head: HistoryToken
    public var oldest: HistoryToken
    public var hasMore: Bool
    public var nextAfter: HistoryToken
}

/// Receives a history page row by row.
public protocol StoredHistoryVisitor {
    /// Before the first transaction: how many change rows the page holds.
    mutating func beginPage(changeCount: Int)
    mutating func beginTransaction(_ header: StoredTransactionHeader)
    /// `row` reads SQLite's current row: use it before returning, never keep it.
    mutating func visitChange(_ row: StoredChangeRow)
    mutating func endTransaction()
}

/// One change row as SQLite holds it, with the quake as stored now (for inserts and updates).
/// Texts are SQLite's own bytes (UTF-8), valid only until the visitor returns.
public struct StoredChangeRow {
    let statement: OpaquePointer

    /// The quake columns in table order: the names, which are also the feed's and the
    /// interface's `Quake` field names.
    public static let quakeColumns: [String] = QuakeColumns.names

    /// A column value as stored.
    public enum Value {
        case null
        case integer(Int64)
        case real(Double)
        case text(UnsafeRawBufferPointer)
    }

    public var quakeID: UnsafeRawBufferPointer { text(0) ?? UnsafeRawBufferPointer(start: nil, count: 0) }
    public var kind: ChangeKind {
        guard let bytes = text(1), let first = bytes.first else { return .update }
        switch first {
        case UInt8(ascii: "i"): return .insert
        case UInt8(ascii: "d"): return .delete
        default: return .update
        }
    }
    /// Update: the JSON array of FieldChange objects, as stored.
    public var fieldsJSON: UnsafeRawBufferPointer? { text(2) }
    /// Delete: the JSON Tombstone object, as stored.
    public var tombstoneJSON: UnsafeRawBufferPointer? { text(3) }
    public var reason: DeleteReason? {
        text(4).flatMap { DeleteReason(rawValue: String(decoding: $0, as: UTF8.self)) }
    }
    public var supersededBy: UnsafeRawBufferPointer? { text(5) }
    /// Whether the quake is stored (inserts and updates whose quake a later transaction did not remove).
    public var hasQuake: Bool { sqlite3_column_int64(statement, 6) != 0 }

    /// Quake column `index` (in ``quakeColumns`` order).
    public func quake(_ index: Int) -> Value {
        let column = Int32(7 + index)
        switch sqlite3_column_type(statement, column) {
        case SQLITE_INTEGER: return .integer(sqlite3_column_int64(statement, column))
        case SQLITE_FLOAT: return .real(sqlite3_column_double(statement, column))
        case SQLITE_TEXT: return text(column).map(Value.text) ?? .null
        default: return .null
        }
    }

    /// The quake as a value (for the slow paths).
    public var quake: FeedFeature? { hasQuake ? QuakeColumns.feature(from: statement, offset: 7) : nil }

    private func text(_ column: Int32) -> UnsafeRawBufferPointer? {
        guard sqlite3_column_type(statement, column) != SQLITE_NULL else { return nil }
        // _blob: the bytes as stored, without the copy SQLite makes to NUL-terminate text.
        let count = Int(sqlite3_column_bytes(statement, column))
        return UnsafeRawBufferPointer(start: sqlite3_column_blob(statement, column), count: count)
    }
}

/// Collects a visited page as decoded values (``QuakeStore/history(after:limit:maxChanges:)``).
struct HistoryCollector: StoredHistoryVisitor {
    var transactions: [HistoryTransaction] = []
    /// The first stored JSON that did not decode (visitors cannot throw).
    var failure: (any Error)?
    private let decoder = JSONDecoder()

    mutating func beginPage(changeCount: Int) {}

    mutating func beginTransaction(_ h: StoredTransactionHeader) {
        transactions.append(
            HistoryTransaction(
                token: h.token, author: h.author, timestamp: h.timestamp, source: h.source, inserted: h.inserted,
                updated: h.updated, deleted: h.deleted, changes: []))
    }

    mutating func visitChange(_ row: StoredChangeRow) {
        do {
            transactions[transactions.count - 1].changes.append(
                HistoryChange(
                    quakeId: String(decoding: row.quakeID, as: UTF8.self), kind: row.kind,
                    fields: try row.fieldsJSON.map { try decoder.decode([FieldChange].self, from: Data($0)) },
                    tombstone: try row.tombstoneJSON.map { try decoder.decode(Tombstone.self, from: Data($0)) },
                    reason: row.reason, supersededBy: row.supersededBy.map { String(decoding: $0, as: UTF8.self) },
                    quake: row.quake))
        } catch {
            if failure == nil { failure = error }
        }
    }

    mutating func endTransaction() {}
}
