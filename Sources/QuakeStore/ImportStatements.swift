import GRDB
import GRDBSQLite
import QuakeFeed

/// The import's prepared statements on `quakes`, and the lookups and writes of one row it makes
/// through them (see ``RawStatement`` for why they bypass GRDB's rows and arguments).
struct ImportStatements {
    private let db: Database
    /// A row by id: its columns, then `feedHash` (column ``QuakeColumns/feedHashColumn``).
    let select: RawStatement
    let insert: RawStatement
    let update: RawStatement
    private let delete: RawStatement
    private let setHash: RawStatement
    private let selectHash: RawStatement

    init(_ db: Database, tables: ImportTables = .quakes) throws {
        self.db = db
        let quakes = tables.rows
        // `feedHash` last: after the columns `QuakeColumns.feature(from:)` reads.
        select = try RawStatement(db, sql: "SELECT \(QuakeColumns.list), feedHash FROM \(quakes) WHERE id = ?")
        // OR IGNORE: a statement that cannot abort halfway needs no statement journal (a copy of
        // every page it touches). Only called when the id is not stored, so nothing is ignored
        // but a CHECK failure, which the import turns back into an error.
        insert = try RawStatement(
            db,
            sql:
                "INSERT OR IGNORE INTO \(quakes) (\(QuakeColumns.list), feedHash) VALUES (\(QuakeColumns.placeholders), ?)"
        )
        // Parameters in column order, `id` first, so one bind function serves insert and update.
        update = try RawStatement(
            db, sql: "UPDATE \(quakes) SET \(QuakeColumns.assignments), feedHash = ?\(QuakeColumns.feedHashParameter) WHERE id = ?1")
        delete = try RawStatement(db, sql: "DELETE FROM \(quakes) WHERE id = ?")
        setHash = try RawStatement(db, sql: "UPDATE \(quakes) SET feedHash = ? WHERE id = ?")
        selectHash = try RawStatement(db, sql: "SELECT feedHash, time FROM \(quakes) WHERE id = ?")
    }

    /// The row stored under `id`, if any.
    func fetch(_ id: String) throws -> FeedFeature? {
        select.reset()
        select.bind(1, id)
        guard try select.step() else { return nil }
        defer { select.reset() }  // no statement stays mid-step across the commit
        return QuakeColumns.feature(from: select)
    }

    /// The `feedHash` and `time` of the row stored under `id` (UTF-8), if one is.
    func storedHashAndTime(of id: UnsafeRawBufferPointer) throws -> (hash: UInt64?, time: Int64)? {
        let s = selectHash.handle
        sqlite3_reset(s)
        selectHash.bindStatic(1, id)
        defer { sqlite3_reset(s) }  // no statement stays mid-step across the commit
        guard try selectHash.step() else { return nil }
        return (selectHash.int64(0).map { UInt64(bitPattern: $0) }, selectHash.int64(1) ?? 0)
    }

    /// The `feedHash` of the row stored under `id` (UTF-8), if any.
    func storedHash(of id: UnsafeRawBufferPointer) throws -> UInt64? {
        let s = selectHash.handle
        sqlite3_reset(s)
        selectHash.bindStatic(1, id)
        defer { sqlite3_reset(s) }  // no statement stays mid-step across the commit
        guard try selectHash.step() else { return nil }
        return selectHash.int64(0).map { UInt64(bitPattern: $0) }
    }

    /// Binds a feature of the slow paths (an update, an insert after aliases) to `statement`
    /// (``insert`` or ``update``) and steps.
    func bindAndStep(_ feature: FeedFeature, hash: UInt64, _ statement: RawStatement) throws {
        var arena: [UInt8] = []
        let record = FeatureRecord(feature, arena: &arena)
        try arena.withUnsafeBytes { try QuakeColumns.bindAndStep(record, arena: $0, hash: hash, statement) }
    }

    /// The row holds the incoming values but came from other bytes (formatted differently, or
    /// written before `feedHash` existed): remember these bytes, so that the next import of them
    /// finds the row unchanged without decoding. Not a change of the quake: no history.
    func recordHash(_ hash: UInt64, of id: String) throws {
        setHash.reset()
        setHash.bind(1, Int64(bitPattern: hash))
        setHash.bind(2, id)
        try setHash.step()
    }

    /// Deletes the row stored under `id`; the trigger takes its aliases out of the index.
    func deleteRow(_ id: String) throws {
        delete.reset()
        delete.bind(1, id)
        try delete.step()
    }
}

/// The tables a ``FeedImport`` writes: `quakes` and its alias index (plain mode), or the USGS
/// source's reports, `usgsReports` and `usgsReportAliases` (association mode), which have the same
/// columns.
struct ImportTables: Sendable, Equatable {
    /// The rows, with the columns of `quakes` and `feedHash`.
    var rows: String
    /// Their alias index: `(alias, quakeId)`.
    var aliases: String

    static let quakes = ImportTables(rows: "quakes", aliases: "quakeAliases")
    static let usgsReports = ImportTables(rows: "usgsReports", aliases: "usgsReportAliases")
}
