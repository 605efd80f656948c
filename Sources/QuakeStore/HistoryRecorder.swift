import Foundation
import GRDB
import GRDBSQLite

/// Writes the history of one write transaction: one `historyTransactions` row, created on the
/// first change so that a write that changes nothing leaves no trace, and one `historyChanges` row
/// per changed quake.
///
/// A quake changed twice in one transaction still gets one change row (insert then update is an
/// insert, update then delete is a delete, and so on), so a reader applies each transaction as a set.
///
/// Creating the transaction row also arranges for `commitSignal` to be signalled once the SQLite
/// transaction has committed (never if it rolls back), so every write that takes a token wakes
/// whoever in this process waits for the store's commits.
struct HistoryRecorder {
    let db: Database
    let author: HistoryAuthor
    let source: String?
    let timestamp: Int64
    let commitSignal: CommitSignal
    private(set) var token: HistoryToken?
    /// Change rows written so far, by kind (coalescing moves a row from one kind to another).
    private var counts: [ChangeKind: Int] = [:]
    /// Records nothing per change; `finish` records one insert per row of `quakes` instead.
    /// Only right for a write that started on an empty table and only wrote quakes (an import):
    /// its net changes are exactly the rows it leaves, all inserts.
    var recordsInsertsOfTableAtFinish = false
    private let insertChange: RawStatement
    /// The common case, an insert's change row, with fewer bindings.
    private let insertInsertChange: RawStatement

    init(db: Database, author: HistoryAuthor, source: String?, now: Date, commitSignal: CommitSignal) throws {
        self.db = db
        self.commitSignal = commitSignal
        self.insertChange = try RawStatement(
            db,
            sql: """
                INSERT OR IGNORE INTO historyChanges (token, quakeId, kind, fields, tombstone, reason, supersededBy)
                VALUES (?, ?, ?, ?, ?, ?, ?)
                """)
        self.insertInsertChange = try RawStatement(
            db, sql: "INSERT OR IGNORE INTO historyChanges (token, quakeId, kind) VALUES (?, ?, 'insert')")
        self.author = author
        self.source = source
        self.timestamp = QuakeStore.milliseconds(now)
    }

    /// Records the insert of the quake whose id is the UTF-8 `id`.
    mutating func recordInsert(id: UnsafeRawBufferPointer) throws {
        if recordsInsertsOfTableAtFinish { return }
        let token = try currentToken()
        sqlite3_reset(insertInsertChange.handle)
        insertInsertChange.bind(1, token)
        insertInsertChange.bindStatic(2, id)
        defer { sqlite3_bind_null(insertInsertChange.handle, 2) }
        try insertInsertChange.step()
        if sqlite3_changes(db.sqliteConnection) == 0 {
            try coalesce(
                token: token, id: String(decoding: id, as: UTF8.self), kind: .insert, fields: nil,
                tombstoneJSON: nil, reason: nil, supersededBy: nil)
        } else {
            counts[.insert, default: 0] += 1
        }
    }

    mutating func recordInsert(id: String) throws {
        var id = id
        try id.withUTF8 { try recordInsert(id: UnsafeRawBufferPointer($0)) }
    }

    mutating func recordUpdate(id: String, fields: [FieldChange]) throws {
        if recordsInsertsOfTableAtFinish { return }
        try record(id: id, kind: .update, fields: fields, tombstone: nil, reason: nil, supersededBy: nil)
    }

    mutating func recordDelete(_ tombstone: Tombstone, reason: DeleteReason, supersededBy: String? = nil) throws {
        if recordsInsertsOfTableAtFinish { return }
        try record(
            id: tombstone.id, kind: .delete, fields: nil, tombstone: tombstone, reason: reason,
            supersededBy: supersededBy)
    }

    /// Writes the transaction's counts. Returns its token, or `nil` when nothing changed.
    mutating func finish() throws -> HistoryToken? {
        if recordsInsertsOfTableAtFinish, try Bool.fetchOne(db, sql: "SELECT EXISTS (SELECT 1 FROM quakes)") == true {
            // In key order: the change rows' primary key (token, quakeId) is appended to, and
            // the ids come from the primary key's index alone.
            try db.execute(
                sql: "INSERT INTO historyChanges (token, quakeId, kind) SELECT ?, id, 'insert' FROM quakes ORDER BY id",
                arguments: [try currentToken()])
            counts[.insert] = db.changesCount
        }
        guard let token else { return nil }
        if counts.values.allSatisfy({ $0 == 0 }) {
            // Every change cancelled out (an insert then a delete of the same quake).
            try db.execute(sql: "DELETE FROM historyTransactions WHERE token = ?", arguments: [token])
            self.token = nil
            return nil
        }
        try db.execute(
            sql: "UPDATE historyTransactions SET inserted = ?, updated = ?, deleted = ? WHERE token = ?",
            arguments: [counts[.insert, default: 0], counts[.update, default: 0], counts[.delete, default: 0], token])
        return token
    }

    private mutating func currentToken() throws -> HistoryToken {
        if let token { return token }
        try db.execute(
            sql: "INSERT INTO historyTransactions (author, timestamp, source) VALUES (?, ?, ?)",
            arguments: [author.rawValue, timestamp, source])
        let token = db.lastInsertedRowID
        self.token = token
        // Also when `finish` removes the row again: the token is used up, the head has moved.
        let commitSignal = commitSignal
        db.afterNextTransaction(onCommit: { _ in commitSignal.signal() })
        return token
    }

    private mutating func record(
        id: String, kind: ChangeKind, fields: [FieldChange]?, tombstone: Tombstone?, reason: DeleteReason?,
        supersededBy: String?
    ) throws {
        let token = try currentToken()
        let fieldsJSON = try fields.map(Self.json)
        let tombstoneJSON = try tombstone.map(Self.json)
        insertChange.reset()
        insertChange.bind(1, token)
        insertChange.bind(2, id)
        insertChange.bind(3, kind.rawValue)
        insertChange.bind(4, fieldsJSON)
        insertChange.bind(5, tombstoneJSON)
        insertChange.bind(6, reason?.rawValue)
        insertChange.bind(7, supersededBy)
        try insertChange.step()
        if db.changesCount == 0 {
            try coalesce(
                token: token, id: id, kind: kind, fields: fields, tombstoneJSON: tombstoneJSON, reason: reason,
                supersededBy: supersededBy)
        } else {
            counts[kind, default: 0] += 1
        }
    }

    /// The quake already changed earlier in this transaction: fold the new change into that row.
    private mutating func coalesce(
        token: HistoryToken, id: String, kind: ChangeKind, fields: [FieldChange]?, tombstoneJSON: String?,
        reason: DeleteReason?, supersededBy: String?
    ) throws {
        let row = try Row.fetchOne(
            db, sql: "SELECT kind, fields FROM historyChanges WHERE token = ? AND quakeId = ?", arguments: [token, id])
        // OR IGNORE also ignores a CHECK failure: then there is no earlier row, and that is an error.
        guard let row, let earlier = ChangeKind(rawValue: row[0]) else {
            throw DatabaseError(
                resultCode: .SQLITE_CONSTRAINT, message: "history change for \(id) violates a constraint")
        }
        let key: StatementArguments = [token, id]
        switch (earlier, kind) {
        case (.insert, .update):
            break  // still an insert; readers get the current row
        case (.insert, .delete):
            try db.execute(sql: "DELETE FROM historyChanges WHERE token = ? AND quakeId = ?", arguments: key)
            counts[.insert, default: 0] -= 1
        case (.update, .update):
            let before = try JSONDecoder().decode([FieldChange].self, from: Data((row[1] as String).utf8))
            let merged = Self.merge(before, fields ?? [])
            if merged.isEmpty {
                try db.execute(sql: "DELETE FROM historyChanges WHERE token = ? AND quakeId = ?", arguments: key)
                counts[.update, default: 0] -= 1
            } else {
                try db.execute(
                    sql: "UPDATE historyChanges SET fields = ? WHERE token = ? AND quakeId = ?",
                    arguments: [try Self.json(merged), token, id])
            }
        case (.update, .delete), (.delete, .insert), (.insert, .insert), (.delete, .update), (.delete, .delete),
            (.update, .insert):
            // The later change wins; a delete followed by an insert is an insert (readers upsert).
            try db.execute(
                sql: """
                    UPDATE historyChanges SET kind = ?, fields = NULL, tombstone = ?, reason = ?, supersededBy = ?
                    WHERE token = ? AND quakeId = ?
                    """,
                arguments: [kind.rawValue, tombstoneJSON, reason?.rawValue, supersededBy, token, id])
            counts[earlier, default: 0] -= 1
            counts[kind, default: 0] += 1
        }
    }

    /// Old values from the first change, new ones from the second; fields that ended where they
    /// started are dropped.
    static func merge(_ first: [FieldChange], _ second: [FieldChange]) -> [FieldChange] {
        var result: [FieldChange] = []
        var seen = Set<String>()
        for change in first {
            seen.insert(change.field)
            let new = second.first { $0.field == change.field }?.new ?? change.new
            if new != change.old { result.append(FieldChange(field: change.field, old: change.old, new: new)) }
        }
        result += second.filter { !seen.contains($0.field) }
        return result
    }

    private static func json(_ value: some Encodable) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return String(decoding: try encoder.encode(value), as: UTF8.self)
    }
}
