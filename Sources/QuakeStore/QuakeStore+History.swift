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
    ///
    /// With a non-empty `filter`, each change is judged by the quake before and after it (see
    /// ``QuakeFilter/judge(_:image:before:)``): changes the filter does not send are left out, and
    /// so are transactions left without changes. The same transactions are read as without a
    /// filter, so a page may hold fewer than `limit`, or none, while `hasMore` is true.
    public func history(
        after token: HistoryToken, limit: Int = 100, maxChanges: Int = .max, filter: QuakeFilter? = nil
    ) throws -> HistoryPage {
        var collector = HistoryCollector()
        let summary = try visitHistory(after: token, limit: limit, maxChanges: maxChanges, filter: filter, &collector)
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
        after token: HistoryToken, limit: Int = 100, maxChanges: Int = .max, filter: QuakeFilter? = nil,
        _ visitor: inout some StoredHistoryVisitor
    ) throws -> StoredHistorySummary {
        let filter = filter.flatMap { $0.isEmpty ? nil : $0 }
        return try pool.read { db in
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
            // A filtered read also selects the filter images (migration v8), after the quake.
            let images =
                filter == nil
                ? "" : ", " + (QuakeImage.historyColumns + ["atOld"]).map { "c.\($0)" }.joined(separator: ", ")
            let changes = try RawStatement(
                db,
                sql: """
                    SELECT c.quakeId, c.kind, c.fields, c.tombstone, c.reason, c.supersededBy, q.id IS NOT NULL,
                        \(QuakeColumns.names.map { "q.\($0)" }.joined(separator: ", "))\(images)
                    FROM historyChanges c LEFT JOIN quakes q ON q.id = c.quakeId AND c.kind <> 'delete'
                    WHERE c.token = ? ORDER BY c.quakeId
                    """)
            for header in transactions {
                visitor.beginTransaction(header)
                changes.reset()
                changes.bind(1, header.token)
                guard let filter else {
                    while try changes.step() { visitor.visitChange(StoredChangeRow(statement: changes.handle)) }
                    visitor.endTransaction(header.counts)
                    continue
                }
                var sent = StoredTransactionCounts()
                while try changes.step() {
                    guard
                        let row = try StoredChangeRow(
                            statement: changes.handle, judgedBy: filter)
                    else { continue }
                    sent.count(row.kind)
                    visitor.visitChange(row)
                }
                if sent.total == 0 {
                    visitor.dropTransaction()
                } else {
                    visitor.endTransaction(sent)
                }
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

extension StoredTransactionHeader {
    /// The transaction's counts as stored.
    public var counts: StoredTransactionCounts {
        StoredTransactionCounts(inserted: inserted, updated: updated, deleted: deleted)
    }
}

/// How many changes of each kind a transaction holds, or sends to a filtered reader.
public struct StoredTransactionCounts: Sendable, Hashable {
    public var inserted = 0
    public var updated = 0
    public var deleted = 0
    /// Filtered readers only.
    public var entered = 0
    public var left = 0

    public init(inserted: Int = 0, updated: Int = 0, deleted: Int = 0, entered: Int = 0, left: Int = 0) {
        self.inserted = inserted
        self.updated = updated
        self.deleted = deleted
        self.entered = entered
        self.left = left
    }

    public var total: Int { inserted + updated + deleted + entered + left }

    mutating func count(_ kind: ChangeKind) {
        switch kind {
        case .insert: inserted += 1
        case .update: updated += 1
        case .delete: deleted += 1
        case .enter: entered += 1
        case .leave: left += 1
        }
    }
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
    /// After the transaction's changes: their counts (for a filtered read, of the changes sent).
    mutating func endTransaction(_ counts: StoredTransactionCounts)
    /// Instead of ``endTransaction(_:)`` when a filtered read sends none of the transaction's
    /// changes: forget the transaction begun.
    mutating func dropTransaction()
}

/// One change row as SQLite holds it, with the quake as stored now (for inserts and updates).
/// Texts are SQLite's own bytes (UTF-8), valid only until the visitor returns.
public struct StoredChangeRow {
    let statement: OpaquePointer
    /// The change as the reader is sent it: as stored, or as a filter judged it.
    public let kind: ChangeKind
    /// A leave: what is kept of the quake that left (its values after the change; code and place
    /// as stored now, when it still is).
    public private(set) var leaveTombstone: Tombstone?

    init(statement: OpaquePointer) {
        self.statement = statement
        self.kind = Self.storedKind(statement)
    }

    /// The row as `filter` judges it, or nil when the filter sends nothing for it. The row must
    /// have been selected with the image columns after the quake's.
    init?(statement: OpaquePointer, judgedBy filter: QuakeFilter) throws {
        self.statement = statement
        let stored = Self.storedKind(statement)
        let base = Int32(7 + QuakeColumns.names.count)
        func double(_ i: Int32) -> Double? {
            sqlite3_column_type(statement, base + i) == SQLITE_NULL ? nil : sqlite3_column_double(statement, base + i)
        }
        func int(_ i: Int32) -> Int64? {
            sqlite3_column_type(statement, base + i) == SQLITE_NULL ? nil : sqlite3_column_int64(statement, base + i)
        }
        func string(_ i: Int32) -> String? {
            guard sqlite3_column_type(statement, base + i) != SQLITE_NULL, let text = sqlite3_column_text(statement, base + i)
            else { return nil }
            return String(cString: text)
        }
        // Only the values the filter looks at (a leave reads the rest below).
        let needs = filter.needs
        var image = QuakeImage(
            mag: needs.magnitude ? double(0) : nil, lat: needs.position ? double(1) : nil,
            lon: needs.position ? double(2) : nil, time: int(3), type: needs.type ? string(4) : nil,
            alert: needs.alert ? string(5) : nil, tsunami: needs.tsunami ? int(6) : nil,
            status: needs.status ? string(7) : nil, sig: needs.significance ? int(8) : nil)
        if image.time == nil {
            // An insert of a first import whose quake no later transaction changed (a deferred
            // image, migration v8): the row as stored now is the quake as it was inserted.
            guard stored == .insert, sqlite3_column_int64(statement, 6) != 0 else { return nil }
            image = QuakeImage(QuakeColumns.feature(from: statement, offset: 7))
            image.sources = image.sources ?? ""
        } else if needs.sources {
            image.sources = string(9)
        }
        var before: QuakeImage?
        if stored == .update, sqlite3_column_type(statement, base + 10) != SQLITE_NULL {
            let count = Int(sqlite3_column_bytes(statement, base + 10))
            let old = UnsafeRawBufferPointer(start: sqlite3_column_blob(statement, base + 10), count: count)
            let base = image
            if let fast = base.replacingOldValues(json: old) {
                before = fast
            } else {
                let changes = try JSONDecoder().decode([String: FieldValue?].self, from: Data(old))
                before = base.replacing(changes.map { FieldChange(field: $0.key, old: ($0.value ?? .null), new: .null) })
            }
        }
        var filter = filter
        if needs.sources, image.sources == nil || (before != nil && before?.sources == nil) {
            // Agencies unknown (NULL atSources, migration v13): agency conditions are not
            // judged, so a change they might have sent is sent.
            filter.agencies = nil
            filter.minAgencies = nil
        }
        guard let kind = filter.judge(stored, image: image, before: before) else { return nil }
        self.kind = kind
        if kind == .leave {
            // '' in history is no agencies: a tombstone keeps none as nil.
            let sources = string(9).flatMap { $0.isEmpty ? nil : $0 }
            image = QuakeImage(
                mag: double(0), lat: double(1), lon: double(2), time: image.time, type: string(4), alert: string(5),
                tsunami: int(6), status: string(7), sig: int(8), sources: sources)
            let row = QuakeColumns.feature(from: statement, offset: 7)
            let stored = sqlite3_column_int64(statement, 6) != 0
            var tombstone = Tombstone(
                id: String(decoding: quakeID, as: UTF8.self), code: stored ? row.code : nil, mag: image.mag,
                place: stored ? row.place : nil, time: image.time ?? 0)
            tombstone.lat = image.lat
            tombstone.lon = image.lon
            tombstone.depth = stored ? row.depth : nil
            tombstone.type = image.type
            tombstone.alert = image.alert
            tombstone.status = image.status
            tombstone.tsunami = image.tsunami
            tombstone.sig = image.sig
            tombstone.sources = image.sources
            leaveTombstone = tombstone
        }
    }

    private static func text(_ statement: OpaquePointer, column: Int32) -> UnsafeRawBufferPointer? {
        guard sqlite3_column_type(statement, column) != SQLITE_NULL else { return nil }
        let count = Int(sqlite3_column_bytes(statement, column))
        return UnsafeRawBufferPointer(start: sqlite3_column_blob(statement, column), count: count)
    }

    private static func storedKind(_ statement: OpaquePointer) -> ChangeKind {
        guard sqlite3_column_type(statement, 1) != SQLITE_NULL, let first = sqlite3_column_text(statement, 1)?.pointee
        else { return .update }
        switch first {
        case UInt8(ascii: "i"): return .insert
        case UInt8(ascii: "d"): return .delete
        default: return .update
        }
    }

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
    /// Update: the JSON array of FieldChange objects, as stored.
    public var fieldsJSON: UnsafeRawBufferPointer? { text(2) }
    /// Delete: the JSON Tombstone object, as stored.
    public var tombstoneJSON: UnsafeRawBufferPointer? { text(3) }
    public var reason: DeleteReason? {
        text(4).flatMap { DeleteReason(rawValue: String(decoding: $0, as: UTF8.self)) }
    }
    public var supersededBy: UnsafeRawBufferPointer? { text(5) }
    /// Whether the quake is stored (inserts, updates and enters whose quake a later transaction did
    /// not remove).
    public var hasQuake: Bool { kind != .leave && sqlite3_column_int64(statement, 6) != 0 }

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
                    tombstone: try row.leaveTombstone
                        ?? row.tombstoneJSON.map { try decoder.decode(Tombstone.self, from: Data($0)) },
                    reason: row.reason, supersededBy: row.supersededBy.map { String(decoding: $0, as: UTF8.self) },
                    quake: row.quake))
        } catch {
            if failure == nil { failure = error }
        }
    }

    mutating func endTransaction(_ counts: StoredTransactionCounts) {
        transactions[transactions.count - 1].inserted = counts.inserted
        transactions[transactions.count - 1].updated = counts.updated
        transactions[transactions.count - 1].deleted = counts.deleted
        transactions[transactions.count - 1].entered = counts.entered
        transactions[transactions.count - 1].left = counts.left
    }

    mutating func dropTransaction() { transactions.removeLast() }
}

extension QuakeStore {
    /// Whether history after `token` (through `through`, if given) holds a change that `filter`
    /// sends: what a filtered subscriber is woken for. Throws as
    /// ``history(after:limit:maxChanges:filter:)`` does.
    public func sendsChanges(after token: HistoryToken, through: HistoryToken = .max, filter: QuakeFilter) throws -> Bool {
        var counter = SentChangeCounter(through: through)
        var after = token
        while after < through {
            let page = try visitHistory(after: after, limit: 1000, maxChanges: 100_000, filter: filter, &counter)
            if counter.sent > 0 { return true }
            guard page.hasMore else { return false }
            after = page.nextAfter
        }
        return false
    }
}

/// Counts the changes a filtered read sends.
private struct SentChangeCounter: StoredHistoryVisitor {
    let through: HistoryToken
    var sent = 0
    private var counting = true
    init(through: HistoryToken) { self.through = through }
    mutating func beginPage(changeCount: Int) {}
    mutating func beginTransaction(_ header: StoredTransactionHeader) { counting = header.token <= through }
    mutating func visitChange(_ row: StoredChangeRow) { if counting { sent += 1 } }
    mutating func endTransaction(_ counts: StoredTransactionCounts) {}
    mutating func dropTransaction() {}
}
