import Foundation
import GRDB
import GRDBSQLite
import QuakeFeed
import QuakeModel

/// What a write transaction's history holds, counted from its change rows when it finished.
struct CommittedChanges {
    /// The transaction's token, or `nil` when nothing changed.
    var token: HistoryToken?
    var inserted = 0
    var updated = 0
    var deleted = 0
    /// Of `deleted`, the deletes with reason `superseded`.
    var superseded = 0
    /// Of `deleted`, the deletes with reason `deleted-upstream`.
    var deletedUpstream = 0
}

/// Writes the history of one write transaction: one `historyTransactions` row, created on the
/// first change so that a write that changes nothing leaves no trace, and one `historyChanges` row
/// per changed quake.
///
/// A quake changed several times in one transaction still gets one change row, its net change
/// from before the transaction to after it, so a reader applies each transaction as a set:
/// - insert then update is an insert (readers get the current row);
/// - insert then delete is nothing (the quake was new, and it is gone);
/// - update then update is one update (fields that ended where they started drop out);
/// - update then delete is a delete;
/// - delete then insert (an import superseded the quake, then brought it back) is an update from
///   the row before the transaction to the row after it, or nothing when they are equal.
///
/// So an insert always means the quake was not stored before the transaction, a delete or an
/// update that it was, and the counts the transaction row keeps are counted from its change rows.
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
    /// Records nothing per change; `finish` records one insert per row of `quakes` instead.
    /// Only right for a write that started on an empty table and only wrote quakes (an import):
    /// its net changes are exactly the rows it leaves, all inserts.
    var recordsInsertsOfTableAtFinish = false
    /// Collecting mode (a USGS import into `usgsReports` in association mode): no history is
    /// written; the ids whose row was inserted, updated or deleted are collected instead, to become
    /// the `usgs` source's items, whose events' changes the transaction's real recorder records.
    var collected: CollectedChanges?
    /// The whole row, as it was before this transaction, of each stored quake the transaction
    /// deleted with its row given (an import's supersede): what the update is computed from if
    /// the transaction brings the quake back. Few entries: supersedes are rare.
    private var rowsBefore: [String: [DatabaseValue]] = [:]
    /// Whether an update change row of this transaction may lack its filter image: one recorded
    /// without the row (``recordUpdate(id:fields:row:)``), which ``finish()`` then fills in from
    /// `quakes` for every update.
    private var updateWithoutImage = false
    private let insertChange: RawStatement
    /// The common case, an insert's change row, with fewer bindings.
    private let insertInsertChange: RawStatement

    init(db: Database, author: HistoryAuthor, source: String?, now: Date, commitSignal: CommitSignal) throws {
        self.db = db
        self.commitSignal = commitSignal
        self.insertChange = try RawStatement(
            db,
            sql: """
                INSERT OR IGNORE INTO historyChanges (token, quakeId, kind, fields, tombstone, reason, supersededBy, atOld,
                    \(QuakeImage.historyColumns.joined(separator: ", ")))
                VALUES (?, ?, ?, ?, ?, ?, ?, ?\(String(repeating: ", ?", count: QuakeImage.historyColumns.count)))
                """)
        self.insertInsertChange = try RawStatement(
            db, sql: "INSERT OR IGNORE INTO historyChanges (token, quakeId, kind) VALUES (?, ?, 'insert')")
        self.author = author
        self.source = source
        self.timestamp = QuakeStore.milliseconds(now)
    }

    /// Records the insert of the quake whose id is the UTF-8 `id`.
    mutating func recordInsert(id: UnsafeRawBufferPointer) throws {
        if collected != nil {
            collected!.ids.insert(String(decoding: id, as: UTF8.self))
            return
        }
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
                tombstoneJSON: nil, reason: nil, supersededBy: nil, row: nil, image: nil)
        }
    }

    mutating func recordInsert(id: String) throws {
        var id = id
        try id.withUTF8 { try recordInsert(id: UnsafeRawBufferPointer($0)) }
    }

    /// Records an update. `row`: the quake's whole row after it, as column values in table order
    /// (``QuakeColumns/values(of:)``), when the caller has it: the change row's filter image is
    /// written from it, rather than read back from `quakes` when the transaction finishes.
    mutating func recordUpdate(id: String, fields: [FieldChange], row: [DatabaseValue]? = nil) throws {
        if collected != nil {
            collected!.ids.insert(id)
            return
        }
        if recordsInsertsOfTableAtFinish { return }
        try record(
            id: id, kind: .update, fields: fields, tombstone: nil, reason: nil, supersededBy: nil, row: nil,
            image: row.map(Self.image))
    }

    /// The filter image (``QuakeImage/columns``, history's `at…` columns) of a row given as
    /// column values in table order, as ``HistoryImages/fillFromQuakes`` stores it.
    static func image(_ row: [DatabaseValue]) -> [DatabaseValue] {
        imageIndexes.map { column, index in HistoryImages.stored(column, value: row[index]) }
    }

    private static let imageIndexes: [(String, Int)] = QuakeImage.columns.map { column in
        (column, QuakeColumns.names.firstIndex(of: column)!)
    }

    /// Records a delete. `row`, the whole row being deleted, is given when the same transaction may
    /// store the quake again (an import's supersede); called before the row is deleted.
    mutating func recordDelete(
        _ tombstone: Tombstone, reason: DeleteReason, supersededBy: String? = nil, row: FeedFeature? = nil
    ) throws {
        if collected != nil {
            collected!.deleted(tombstone.id, reason: reason, supersededBy: supersededBy, row: row)
            return
        }
        if recordsInsertsOfTableAtFinish { return }
        try record(
            id: tombstone.id, kind: .delete, fields: nil, tombstone: tombstone, reason: reason,
            supersededBy: supersededBy, row: row)
    }

    /// Whether this transaction has a change row for the quake `id` so far.
    func hasChange(of id: String) throws -> Bool {
        if let collected { return collected.ids.contains(id) }
        guard let token else { return false }
        return try Bool.fetchOne(
            db, sql: "SELECT EXISTS (SELECT 1 FROM historyChanges WHERE token = ? AND quakeId = ?)",
            arguments: [token, id]) == true
    }

    /// A delete superseded by a quake this transaction deleted too names where that one went:
    /// its survivor, or its reason when it had none. A transaction that regroups in steps (a
    /// source run applied a slice at a time) may supersede A by B and then B by C; clients are
    /// told A went to C, a quake that exists after the transaction.
    private func resolveSupersedeChains(_ token: HistoryToken) throws {
        let resolve = try db.cachedStatement(
            sql: """
                UPDATE historyChanges AS h SET reason = t.reason, supersededBy = t.supersededBy
                FROM historyChanges AS t
                WHERE h.token = ?1 AND h.kind = 'delete' AND h.reason = 'superseded'
                    AND t.token = ?1 AND t.quakeId = h.supersededBy AND t.kind = 'delete'
                    AND t.quakeId != h.quakeId
                """)
        // One link of each chain a round; a chain is as long as the steps the transaction took.
        for _ in 0..<16 {
            try resolve.execute(arguments: [token])
            if db.changesCount == 0 { break }
        }
    }

    /// Writes the transaction's counts, counted from its change rows. A transaction whose changes
    /// all cancelled out is removed, and its token given back: the head stays a token that a
    /// transaction carries (or the last purged one).
    mutating func finish() throws -> CommittedChanges {
        if collected != nil { return CommittedChanges() }
        let token: HistoryToken
        let committed: CommittedChanges
        if recordsInsertsOfTableAtFinish {
            guard try Bool.fetchOne(db, sql: "SELECT EXISTS (SELECT 1 FROM quakes)") == true else {
                return CommittedChanges()
            }
            // In key order: the change rows' primary key (token, quakeId) is appended to, and
            // the ids come from the primary key's index alone. These are all the change rows, so
            // the one statement counts them.
            token = try currentToken()
            try db.execute(
                sql: "INSERT INTO historyChanges (token, quakeId, kind) SELECT ?, id, 'insert' FROM quakes ORDER BY id",
                arguments: [token])
            committed = CommittedChanges(token: token, inserted: db.changesCount)
            // Their filter images are the rows until a later transaction changes them (migration v8).
            try db.execute(sql: "INSERT INTO historyDeferredImages (token) VALUES (?)", arguments: [token])
        } else {
            guard let current = self.token else { return CommittedChanges() }
            token = current
            try resolveSupersedeChains(token)
            let row = try Row.fetchOne(
                db.cachedStatement(
                    sql: """
                        SELECT total(kind = 'insert'), total(kind = 'update'), total(kind = 'delete'),
                            total(reason = 'superseded'), total(reason = 'deleted-upstream')
                        FROM historyChanges WHERE token = ?
                        """),
                arguments: [token])!
            committed = CommittedChanges(
                token: token, inserted: Int(row[0] as Double), updated: Int(row[1] as Double),
                deleted: Int(row[2] as Double), superseded: Int(row[3] as Double),
                deletedUpstream: Int(row[4] as Double))
            if committed.inserted + committed.updated + committed.deleted == 0 {
                // Every change cancelled out. (The commit signal still fires: a spurious wake-up.)
                try db.cachedStatement(sql: "DELETE FROM historyTransactions WHERE token = ?").execute(arguments: [token])
                try db.execute(
                    sql: "UPDATE sqlite_sequence SET seq = ? WHERE name = 'historyTransactions'",
                    arguments: [token - 1])
                self.token = nil
                return CommittedChanges()
            }
            // What a filtered reader judges the changes by (see migration v8): updates by the rows
            // as the transaction leaves them, deletes by their tombstones. Inserts are deferred, as
            // a first import's are: until a later transaction changes such a quake, its row as
            // stored is its image, and that transaction fills the image in (a random read of each
            // inserted row saved: a backfill window inserts thousands).
            let thisToken: StatementArguments = [token]
            if committed.updated > 0, updateWithoutImage {
                try db.cachedStatement(sql: HistoryImages.fillFromQuakes + " WHERE token = ? AND kind = 'update'").execute(arguments: thisToken)
            }
            if QuakeStore.checksHistory, committed.updated > 0 { try checkImages(token) }
            if committed.deleted > 0 {
                try db.cachedStatement(sql: HistoryImages.fillFromTombstones + " WHERE token = ? AND kind = 'delete'").execute(arguments: thisToken)
            }
            // Updates' old values (`atOld`) were written with their rows (``oldValuesJSON(_:)``);
            // debug builds compare them with what SQL makes of the rows' fields.
            if QuakeStore.checksHistory, committed.updated > 0 { try checkOldValues(token) }
            if committed.updated + committed.deleted > 0,
                try Bool.fetchOne(db.cachedStatement(sql: "SELECT EXISTS (SELECT 1 FROM historyDeferredImages)")) == true
            {
                try db.cachedStatement(sql: HistoryImages.fillDeferred).execute(arguments: thisToken)
            }
            if committed.inserted > 0 {
                try db.cachedStatement(sql: "INSERT INTO historyDeferredImages (token) VALUES (?)").execute(arguments: thisToken)
            }
        }
        try db.cachedStatement(sql: "UPDATE historyTransactions SET inserted = ?, updated = ?, deleted = ? WHERE token = ?")
            .execute(arguments: [committed.inserted, committed.updated, committed.deleted, token])
        if QuakeStore.checksHistory { try QuakeStore.checkTransaction(db, token: token) }
        return committed
    }

    private mutating func currentToken() throws -> HistoryToken {
        if let token { return token }
        try db.cachedStatement(sql: "INSERT INTO historyTransactions (author, timestamp, source) VALUES (?, ?, ?)")
            .execute(arguments: [author.rawValue, timestamp, source])
        let token = db.lastInsertedRowID
        self.token = token
        commitSignal.arm()
        return token
    }

    private mutating func record(
        id: String, kind: ChangeKind, fields: [FieldChange]?, tombstone: Tombstone?, reason: DeleteReason?,
        supersededBy: String?, row: FeedFeature?, image: [DatabaseValue]? = nil
    ) throws {
        let token = try currentToken()
        if kind == .update, image == nil { updateWithoutImage = true }
        let fieldsJSON = try fields.map(Self.fieldsJSON)
        let tombstoneJSON = try tombstone.map(Self.json)
        let oldValues = try fields.flatMap(Self.oldValuesJSON)
        insertChange.reset()
        insertChange.bind(1, token)
        insertChange.bind(2, id)
        insertChange.bind(3, kind.rawValue)
        insertChange.bind(4, fieldsJSON)
        insertChange.bind(5, tombstoneJSON)
        insertChange.bind(6, reason?.rawValue)
        insertChange.bind(7, supersededBy)
        insertChange.bind(8, oldValues)
        for (i, value) in (image ?? []).enumerated() { insertChange.bind(Int32(9 + i), value: value) }
        try insertChange.step()
        if db.changesCount == 0 {
            try coalesce(
                token: token, id: id, kind: kind, fields: fields, tombstoneJSON: tombstoneJSON, reason: reason,
                supersededBy: supersededBy, row: row, image: image)
        } else if kind == .delete, let row {
            // The quake's first change in this transaction: the row is as it was before it.
            rowsBefore[id] = QuakeColumns.values(of: row)
        }
    }

    /// The quake already changed earlier in this transaction: fold the new change into that row.
    private mutating func coalesce(
        token: HistoryToken, id: String, kind: ChangeKind, fields: [FieldChange]?, tombstoneJSON: String?,
        reason: DeleteReason?, supersededBy: String?, row: FeedFeature?, image: [DatabaseValue]?
    ) throws {
        let earlierRow = try Row.fetchOne(
            db, sql: "SELECT kind, fields FROM historyChanges WHERE token = ? AND quakeId = ?", arguments: [token, id])
        // OR IGNORE also ignores a CHECK failure: then there is no earlier row, and that is an error.
        guard let earlierRow, let earlier = ChangeKind(rawValue: earlierRow[0]) else {
            throw DatabaseError(
                resultCode: .SQLITE_CONSTRAINT, message: "history change for \(id) violates a constraint")
        }
        let key: StatementArguments = [token, id]
        func removeChange() throws {
            try db.execute(sql: "DELETE FROM historyChanges WHERE token = ? AND quakeId = ?", arguments: key)
        }
        // The update's image is the row after this change (nil: finish fills it in).
        func setUpdate(_ fields: [FieldChange], image: [DatabaseValue]?) throws {
            if fields.isEmpty { return try removeChange() }
            if image == nil { updateWithoutImage = true }
            let images = image ?? Array(repeating: .null, count: QuakeImage.historyColumns.count)
            try db.execute(
                sql: """
                    UPDATE historyChanges SET kind = 'update', fields = ?, tombstone = NULL, reason = NULL,
                        supersededBy = NULL, atOld = ?,
                        (\(QuakeImage.historyColumns.joined(separator: ", "))) = (\(QuakeImage.historyColumns.map { _ in "?" }.joined(separator: ", ")))
                    WHERE token = ? AND quakeId = ?
                    """,
                arguments: StatementArguments(
                    [try Self.fieldsJSON(fields).databaseValue, try Self.oldValuesJSON(fields).databaseValue] + images
                        + [token.databaseValue, id.databaseValue]))
        }
        switch (earlier, kind) {
        case (.insert, .update):
            break  // still an insert; readers get the current row
        case (.insert, .delete):
            try removeChange()  // new in this transaction and gone again
        case (.update, .update):
            let before = try JSONDecoder().decode([FieldChange].self, from: Data((earlierRow[1] as String).utf8))
            try setUpdate(Self.merge(before, fields ?? []), image: image)
        case (.update, .delete):
            var tombstoneJSON = tombstoneJSON
            if let row {
                // The row before the transaction: the one being deleted, with the update undone.
                // Readers never saw the update: the tombstone describes the row they have.
                var values = QuakeColumns.values(of: row)
                let earlierFields = try JSONDecoder().decode(
                    [FieldChange].self, from: Data((earlierRow[1] as String).utf8))
                for change in earlierFields {
                    if let i = QuakeColumns.names.firstIndex(of: change.field) { values[i] = change.old.databaseValue }
                }
                if rowsBefore[id] == nil { rowsBefore[id] = values }
                tombstoneJSON = try Self.json(QuakeColumns.tombstone(id: id, values: values))
            }
            try db.execute(
                sql: """
                    UPDATE historyChanges SET kind = 'delete', fields = NULL, tombstone = ?, reason = ?,
                        supersededBy = ?, atOld = NULL
                    WHERE token = ? AND quakeId = ?
                    """,
                arguments: [tombstoneJSON, reason?.rawValue, supersededBy, token, id])
        case (.delete, .insert):
            // Stored before the transaction, gone, and back: an update from then to now.
            guard let before = rowsBefore[id],
                let now = try Row.fetchOne(
                    db, sql: "SELECT \(QuakeColumns.list) FROM quakes WHERE id = ?", arguments: [id])
            else {
                throw DatabaseError(
                    resultCode: .SQLITE_INTERNAL,
                    message: "history cannot record quake \(id) coming back without its earlier row")
            }
            let after = QuakeColumns.values(of: QuakeColumns.feature(from: now))
            try setUpdate(QuakeColumns.changes(from: before, to: after), image: Self.image(after))
        default:
            // A stored quake inserted, a deleted one changed: the writer lost track of the store.
            throw DatabaseError(
                resultCode: .SQLITE_INTERNAL,
                message: "history cannot record \(kind.rawValue) after \(earlier.rawValue) for quake \(id)")
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

    /// An update's field changes as `JSONEncoder` (``json(_:)``) writes them, byte for byte: the
    /// common changes (integers, plain texts, reals written without an exponent) written
    /// directly, the others (contributors, texts that need escapes, other reals) through the
    /// encoder, one element each. With ``QuakeStore/checksHistory`` (debug builds) every result
    /// is compared with the encoder's.
    static func fieldsJSON(_ fields: [FieldChange]) throws -> String {
        var out: [UInt8] = []
        out.reserveCapacity(64 * fields.count + 2)
        out.append(UInt8(ascii: "["))
        for (i, change) in fields.enumerated() {
            if i > 0 { out.append(UInt8(ascii: ",")) }
            if !writeDirectly(change, to: &out) { out.append(contentsOf: try json(change).utf8) }
        }
        out.append(UInt8(ascii: "]"))
        let text = String(decoding: out, as: UTF8.self)
        if QuakeStore.checksHistory {
            let expected = try json(fields)
            guard text == expected else {
                throw DatabaseError(
                    resultCode: .SQLITE_INTERNAL, message: "history fields written as \(text), not \(expected)")
            }
        }
        return text
    }

    /// An update's `atOld`: the old values of the image fields it changes (``QuakeImage/columns``),
    /// in the order of `fields`, as a JSON object of FieldValues by field, a null old value as
    /// `null` (`{"mag":{"float":4.5},"alert":null}`); nil when it changes none of them. What
    /// ``HistoryImages/fillOldValues`` makes of the update's `fields` JSON, without SQLite parsing
    /// that JSON (contributors and all) again for every update.
    static func oldValuesJSON(_ fields: [FieldChange]) throws -> String? {
        var out: [UInt8] = []
        for change in fields where QuakeImage.columns.contains(change.field) {
            out.append(UInt8(ascii: out.isEmpty ? "{" : ","))
            if !plain(change.field, to: &out) { out.append(contentsOf: try json(change.field).utf8) }
            out.append(UInt8(ascii: ":"))
            if change.old == .null {
                out.append(contentsOf: "null".utf8)
            } else if !write(change.old, to: &out) {
                out.append(contentsOf: try json(change.old).utf8)
            }
        }
        if out.isEmpty { return nil }
        out.append(UInt8(ascii: "}"))
        return String(decoding: out, as: UTF8.self)
    }

    /// Debug builds: every update of transaction `token` has the image of its quake's row as the
    /// transaction leaves it (what ``HistoryImages/fillFromQuakes`` writes), compared column by
    /// column.
    private func checkImages(_ token: HistoryToken) throws {
        let stored = QuakeImage.columns.map { HistoryImages.stored($0, from: "q.\($0)") }
        let wrong = try String.fetchAll(
            db,
            sql: """
                SELECT h.quakeId FROM historyChanges AS h JOIN quakes AS q ON q.id = h.quakeId
                WHERE h.token = ? AND h.kind = 'update'
                    AND (\(QuakeImage.historyColumns.map { "h.\($0)" }.joined(separator: ", ")))
                        IS NOT (\(stored.joined(separator: ", ")))
                LIMIT 5
                """,
            arguments: [token])
        guard wrong.isEmpty else {
            throw DatabaseError(
                resultCode: .SQLITE_INTERNAL,
                message: "history's images of \(wrong.joined(separator: ", ")) differ from their rows")
        }
    }

    /// Debug builds: every update of transaction `token` has the `atOld` that SQL makes of its
    /// `fields` (``HistoryImages/fillOldValues``), compared as JSON.
    private func checkOldValues(_ token: HistoryToken) throws {
        let wrong = try String.fetchAll(
            db,
            sql: """
                SELECT quakeId FROM historyChanges AS h
                WHERE token = ? AND kind = 'update' AND json(h.atOld) IS NOT (\(HistoryImages.oldValues(QuakeImage.columns, of: "h")))
                LIMIT 5
                """,
            arguments: [token])
        guard wrong.isEmpty else {
            throw DatabaseError(
                resultCode: .SQLITE_INTERNAL,
                message: "history's old values of \(wrong.joined(separator: ", ")) differ from their fields")
        }
    }

    /// Writes `change` as the encoder would (sorted keys `field`, `new`, `old`; a null value left
    /// out), unless one of its values is one the direct writer leaves to the encoder.
    private static func writeDirectly(_ change: FieldChange, to out: inout [UInt8]) -> Bool {
        let start = out.count
        out.append(contentsOf: #"{"field":"#.utf8)
        guard plain(change.field, to: &out) else {
            out.removeSubrange(start...)
            return false
        }
        for (key, value) in [(#","new":"#, change.new), (#","old":"#, change.old)] where value != .null {
            out.append(contentsOf: key.utf8)
            guard write(value, to: &out) else {
                out.removeSubrange(start...)
                return false
            }
        }
        out.append(UInt8(ascii: "}"))
        return true
    }

    private static func write(_ value: FieldValue, to out: inout [UInt8]) -> Bool {
        switch value {
        case .integer(let i):
            out.append(contentsOf: #"{"int":"#.utf8)
            out.append(contentsOf: String(i).utf8)
        case .real(let d):
            guard let text = realText(d) else { return false }
            out.append(contentsOf: #"{"float":"#.utf8)
            out.append(contentsOf: text.utf8)
        case .text(let s):
            out.append(contentsOf: #"{"string":"#.utf8)
            guard plain(s, to: &out) else { return false }
        case .contributors(let json):
            if ContributorsTranscoder.write(json, to: &out) { return true }
            guard let list = Contributor.decode(json: json) else { return false }
            out.append(contentsOf: #"{"contributors":["#.utf8)
            for (i, contributor) in list.enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                guard write(contributor, to: &out) else { return false }
            }
            out.append(UInt8(ascii: "]"))
        case .null:
            return false
        }
        out.append(UInt8(ascii: "}"))
        return true
    }

    /// A contributor as its synthesized `Encodable` conformance writes it through the encoder:
    /// keys sorted, nil members left out.
    private static func write(_ c: Contributor, to out: inout [UInt8]) -> Bool {
        var first = true
        func key(_ name: String) {
            out.append(contentsOf: (first ? #"{""# : #",""#).utf8)
            first = false
            out.append(contentsOf: name.utf8)
            out.append(contentsOf: #"":"#.utf8)
        }
        func text(_ name: String, _ value: String?) -> Bool {
            guard let value else { return true }
            key(name)
            return plain(value, to: &out)
        }
        func real(_ name: String, _ value: Double?) -> Bool {
            guard let value else { return true }
            guard let text = realText(value) else { return false }
            key(name)
            out.append(contentsOf: text.utf8)
            return true
        }
        func integer(_ name: String, _ value: Int64?) {
            guard let value else { return }
            key(name)
            out.append(contentsOf: String(value).utf8)
        }
        guard text("agency", c.agency), real("depth", c.depth), text("id", c.id), real("lat", c.lat),
            real("lon", c.lon), real("mag", c.mag), text("magType", c.magType)
        else { return false }
        key("preferred")
        out.append(contentsOf: (c.preferred ? "true" : "false").utf8)
        guard text("source", c.source), text("status", c.status) else { return false }
        integer("time", c.time)
        integer("updated", c.updated)
        out.append(UInt8(ascii: "}"))
        return true
    }

    /// A Double as the encoder writes it (its description without a trailing ".0"), for the
    /// values written without an exponent; nil for the others.
    static func realText(_ d: Double) -> String? {
        guard d.isFinite else { return nil }
        var text = d.description
        guard text.utf8.allSatisfy({ $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: ".") || ($0 >= 48 && $0 <= 57) })
        else { return nil }
        if text.hasSuffix(".0") { text.removeLast(2) }
        return text
    }

    /// Writes `s` quoted when none of its bytes needs an escape (`"`, `\`, control characters).
    private static func plain(_ s: String, to out: inout [UInt8]) -> Bool {
        guard s.utf8.allSatisfy({ $0 >= 0x20 && $0 != UInt8(ascii: "\"") && $0 != UInt8(ascii: "\\") }) else {
            return false
        }
        out.append(UInt8(ascii: "\""))
        out.append(contentsOf: s.utf8)
        out.append(UInt8(ascii: "\""))
        return true
    }

    static func json(_ value: some Encodable) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return String(decoding: try encoder.encode(value), as: UTF8.self)
    }
}

/// What a ``HistoryRecorder`` in collecting mode gathered: the ids of the rows changed, and of
/// those deleted, the last `updated` of the row (the version deleted) and the winner of a
/// supersede.
struct CollectedChanges {
    var ids: Set<String> = []
    /// The deleted rows' `updated` as they were (nil when they had none or were not known).
    var deletedUpdated: [String: Int64] = [:]
    /// The deleted rows superseded, and by which id.
    var supersededBy: [String: String] = [:]

    mutating func deleted(_ id: String, reason: DeleteReason, supersededBy winner: String?, row: FeedFeature?) {
        ids.insert(id)
        if let updated = row?.updated { deletedUpdated[id] = max(deletedUpdated[id] ?? updated, updated) }
        if reason == .superseded, let winner { supersededBy[id] = winner } else { supersededBy[id] = nil }
    }
}
