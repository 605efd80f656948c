import GRDB
import GRDBSQLite

/// A prepared statement driven through the SQLite C API, for the import's per-feature statements.
///
/// GRDB's row and argument types cost more than the SQL itself at 100,000 features per import
/// (column-name tables per fetched row, boxed arguments); these few statements bind and read
/// columns directly. GRDB still owns the statement and the connection.
struct RawStatement {
    private let statement: Statement
    private let db: Database
    var handle: OpaquePointer { statement.sqliteStatement }

    init(_ db: Database, sql: String) throws {
        self.db = db
        self.statement = try db.cachedStatement(sql: sql)
    }

    /// Clears the previous run's state and bindings.
    func reset() {
        sqlite3_reset(handle)
        sqlite3_clear_bindings(handle)
    }

    func bind(_ index: Int32, _ value: String?) {
        guard var value else { return }  // bindings are NULL after reset
        // SQLITE_TRANSIENT: SQLite copies the bytes before withUTF8's buffer goes away. With the
        // byte count, as `QuakeColumns.bindAndStep` binds: a string may contain U+0000.
        value.withUTF8 { utf8 in
            let base = utf8.baseAddress.map(UnsafeRawPointer.init) ?? UnsafeRawPointer(bitPattern: 1)!
            _ = sqlite3_bind_text(
                handle, index, base.assumingMemoryBound(to: CChar.self), Int32(utf8.count), Self.transient)
        }
    }

    /// Binds `bytes` as text without a copy (SQLITE_STATIC): they must stay put until the
    /// statement is reset or bound anew.
    func bindStatic(_ index: Int32, _ bytes: UnsafeRawBufferPointer) {
        let base = bytes.baseAddress ?? UnsafeRawPointer(bitPattern: 1)!  // "" is text, not NULL
        sqlite3_bind_text(handle, index, base.assumingMemoryBound(to: CChar.self), Int32(bytes.count), nil)
    }

    func bind(_ index: Int32, _ value: Int64?) {
        guard let value else { return }
        sqlite3_bind_int64(handle, index, value)
    }

    func bind(_ index: Int32, _ value: Double?) {
        guard let value else { return }
        sqlite3_bind_double(handle, index, value)
    }

    /// Steps once: `true` when a row is available, `false` when done.
    @discardableResult
    func step() throws -> Bool {
        switch sqlite3_step(handle) {
        case SQLITE_ROW: return true
        case SQLITE_DONE: return false
        case let code:
            let message = String(cString: sqlite3_errmsg(db.sqliteConnection))
            sqlite3_reset(handle)
            throw DatabaseError(resultCode: ResultCode(rawValue: code), message: message, sql: statement.sql)
        }
    }

    /// The current row's columns.
    var columns: ColumnReader { ColumnReader(handle: handle) }

    func string(_ column: Int32) -> String? { columns.string(column) }
    func int64(_ column: Int32) -> Int64? { columns.int64(column) }
    func double(_ column: Int32) -> Double? { columns.double(column) }

    fileprivate static let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)
}

/// Reads the columns of a statement's current row through the C API.
struct ColumnReader {
    let handle: OpaquePointer

    /// The text of a column, all `sqlite3_column_bytes` of it (a string may contain U+0000).
    func string(_ column: Int32) -> String? {
        guard let text = sqlite3_column_text(handle, column) else { return nil }
        return String(
            decoding: UnsafeRawBufferPointer(start: text, count: Int(sqlite3_column_bytes(handle, column))),
            as: UTF8.self)
    }

    func int64(_ column: Int32) -> Int64? {
        sqlite3_column_type(handle, column) == SQLITE_NULL ? nil : sqlite3_column_int64(handle, column)
    }

    func double(_ column: Int32) -> Double? {
        sqlite3_column_type(handle, column) == SQLITE_NULL ? nil : sqlite3_column_double(handle, column)
    }
}

extension RawStatement {
    /// Binds a value as GRDB would bind it in `StatementArguments` (NULL for nil), through the
    /// typed binds above.
    func bind(_ index: Int32, value: DatabaseValue) {
        switch value.storage {
        case .null: sqlite3_bind_null(handle, index)
        case .int64(let v): bind(index, v)
        case .double(let v): bind(index, v)
        case .string(let v): bind(index, v)
        case .blob(let data):
            data.withUnsafeBytes { bytes in
                let base = bytes.baseAddress ?? UnsafeRawPointer(bitPattern: 1)!
                _ = sqlite3_bind_blob(handle, index, base, Int32(bytes.count), Self.transient)
            }
        }
    }

    /// Resets, binds `values` to parameters 1...n, steps once (to the end: for statements that
    /// return no row) and resets again, so that no statement stays mid-step across the commit.
    func run(_ values: [DatabaseValue]) throws {
        sqlite3_reset(handle)
        for (i, value) in values.enumerated() { bind(Int32(i + 1), value: value) }
        defer { sqlite3_reset(handle) }
        try step()
    }

    /// ``run(_:)`` for a few values.
    func run(_ values: DatabaseValueConvertible?...) throws {
        try run(values.map { $0?.databaseValue ?? .null })
    }

    /// Runs with the texts `values` bound to parameters 1...n, `body` for each row, and leaves the
    /// statement reset (no statement stays mid-step).
    func forEachRow(_ values: [String], _ body: (RawStatement) -> Void) throws {
        reset()
        for (i, value) in values.enumerated() { bind(Int32(i + 1), value) }
        defer { reset() }
        while try step() { body(self) }
    }
}
