import Foundation
import Logging
import NIOCore
import NIOPosix
import PostgresNIO
import QuakeClient
import QuakeProtocol

/// Why the sink cannot go on: a PostgreSQL failure (the server went away, refused the login,
/// the table has the wrong shape), which the watch retries with backoff, or a setting only its
/// owner can change (``isPermanent``: the table is kept by another sink), which ends it.
public struct PostgresSinkError: WatchCacheError, Sendable {
    public var message: String
    public var isPermanent: Bool
    public var description: String { message }

    init(_ message: String, permanent: Bool = false) {
        self.message = message
        isPermanent = permanent
    }
}

/// `quakectl sync`: a ``WatchCache`` whose rows are a PostgreSQL table and whose position is its
/// row in `quaked_sync_state`.
///
/// - Every applied transaction is one PostgreSQL transaction that changes the rows and the
///   position together (the position row locked, its token checked), so a kill at any point
///   leaves the table equal to the store at the token it records.
/// - A reset deletes the rows, loads the snapshot with COPY and sets the position in one
///   transaction: until it commits, readers see the old rows.
/// - One process at a time runs a sink: its connection holds an advisory lock on the sink's name,
///   and a second one waits (retrying) until the first is gone.
/// - Any failure closes the connection (rolling back what was in flight); the next step
///   connects again and re-reads the position from the database, so a COMMIT that PostgreSQL
///   made but whose reply was lost is seen there, and not applied again.
/// - No step waits forever: every request ends when the connection closes, and a request that
///   PostgreSQL does not answer within the reply timeout closes it (``PostgresLink``).
public actor PostgresSink: WatchCache {
    public let settings: PostgresSettings
    public let name: String
    public let table: String
    let quakeTable: QuakeTable
    private var link: PostgresLink?
    private var resetting = false
    /// The table does not exist: the next reset creates it, in its transaction, and builds its
    /// indexes after the COPY (a bulk load is faster without them).
    private var createOnReset = false
    /// The reset's COPY, open across the snapshot's pages (see ``CopyStream``).
    private var copy: CopyStream?
    /// Rows the reset's COPY has been given.
    private var staged = 0
    /// Whether the table has the `geom` column.
    public private(set) var hasGeometry = false
    /// Said once: PostGIS is not installed in the database, so the table has no `geom`.
    public private(set) var notes: [String] = []
    private let logger: Logger
    /// Called once PostgreSQL has committed a transaction, with the time COMMIT returned.
    private let committed: (@Sendable (IOQuaked.Transaction, Date) -> Void)?

    /// `name`: the sink's row in `quaked_sync_state`; `table`: its table (a plain identifier,
    /// created in the first schema of the search path when missing).
    public init(
        settings: PostgresSettings, name: String, table: String,
        committed: (@Sendable (IOQuaked.Transaction, Date) -> Void)? = nil
    ) throws {
        try Self.check(identifier: table, what: "--table")
        guard !name.isEmpty, name.utf8.count <= 63, name.allSatisfy({ $0.isASCII && !$0.isWhitespace && !$0.isNewline })
        else {
            throw PostgresSinkError(
                "--name \(name.debugDescription): give 1 to 63 printable ASCII characters without spaces", permanent: true)
        }
        self.settings = settings
        self.name = name
        self.table = table
        quakeTable = QuakeTable(name: table)
        var logger = Logger(label: "quakectl.sync", factory: { _ in SwiftLogNoOpLogHandler() })
        logger.logLevel = .critical
        self.logger = logger
        self.committed = committed
    }

    static func check(identifier: String, what: String) throws {
        let first = identifier.unicodeScalars.first
        guard let first, first == "_" || ("a"..."z").contains(first),
            identifier.unicodeScalars.allSatisfy({ $0 == "_" || ("a"..."z").contains($0) || ("0"..."9").contains($0) }),
            identifier.utf8.count <= 63
        else {
            throw PostgresSinkError(
                "\(what) \(identifier.debugDescription): give a table name of lower-case letters, digits and _, starting with a letter or _, at most 63 characters",
                permanent: true)
        }
    }

    // MARK: WatchCache

    public func position() async throws -> WatchPosition? {
        try await step { link in try await self.readPosition(link) }
    }

    public func prepare(_ transaction: IOQuaked.Transaction, storeId: String) async throws -> [String: IOQuaked.Quake]? {
        try await step { link in
            guard let position = try await self.readPosition(link), position.storeId == storeId,
                position.token < transaction.token
            else { return nil }
            var before: [String: IOQuaked.Quake] = [:]
            for change in transaction.changes where change.quake == nil {
                guard change.kind == .update || change.kind == .leave else { continue }
                if let old = try await self.quake(link, id: change.quakeId) { before[change.quakeId] = old }
            }
            return before
        }
    }

    @discardableResult
    public func apply(_ transaction: IOQuaked.Transaction, storeId: String) async throws -> Bool {
        try await step { link in
            try await link.query("BEGIN")
            let rows = try await link.query(
                "SELECT store_id, token FROM quaked_sync_state WHERE name = \(self.name) FOR UPDATE", "the position's lock")
            var current: (String, Int)?
            for row in rows { current = try row.decode((String, Int).self) }
            guard let current, current.0 == storeId, current.1 < transaction.token else {
                try await link.query("ROLLBACK")
                return false
            }
            let delete = "DELETE FROM \(self.quakeTable.quotedName) WHERE id = $1"
            for change in transaction.changes {
                switch change.kind {
                case .insert, .update, .enter:
                    // Without a quake: removed by a later transaction, which removes it here too.
                    if let quake = change.quake { try await link.query(try self.quakeTable.upsert(quake), "an upsert") }
                case .delete, .leave:
                    var binds = PostgresBindings()
                    binds.append(change.quakeId)
                    try await link.query(PostgresQuery(unsafeSQL: delete, binds: binds), "a delete")
                }
            }
            try await link.query(
                "UPDATE quaked_sync_state SET token = \(transaction.token), updated_at = clock_timestamp() WHERE name = \(self.name)",
                "the position's update")
            try await link.query("COMMIT", "the COMMIT")
            self.committed?(transaction, Date())
            return true
        }
    }

    public func advance(storeId: String, to token: Int) async throws {
        _ = try await step { link in
            try await link.query(
                """
                UPDATE quaked_sync_state SET token = \(token), updated_at = clock_timestamp()
                WHERE name = \(self.name) AND store_id = \(storeId) AND token < \(token)
                """, "the position's update")
        }
    }

    public func beginReset() async throws {
        try await step { link in
            try await link.query("BEGIN")
            self.resetting = true
            if self.createOnReset {
                try await link.query(
                    PostgresQuery(unsafeSQL: self.quakeTable.createSQL(geometry: self.hasGeometry)), "the table's creation")
            } else {
                // Readers keep seeing the old rows until the commit (DELETE, not TRUNCATE, which
                // would block them and is not MVCC-safe).
                try await link.query(PostgresQuery(unsafeSQL: "DELETE FROM \(self.quakeTable.quotedName)"), "the reset's DELETE")
            }
            // The COPY lasts as long as the snapshot takes to read from quaked: no statement
            // timeout for it (each page written, and its end, still has the reply timeout).
            try await link.query("SET LOCAL statement_timeout = 0")
            self.staged = 0
            self.copy = try await CopyStream.start(
                on: link, table: self.table, columns: QuakeTable.columns.map(\.name), logger: self.logger)
        }
    }

    /// Sends a page to the reset's COPY without waiting for PostgreSQL to take it in: the next
    /// page is read from quaked while PostgreSQL loads this one.
    public func stage(_ quakes: [IOQuaked.Quake]) async throws {
        guard resetting, let copy else { throw PostgresSinkError("a snapshot page came outside a reset") }
        guard !quakes.isEmpty else { return }
        try await step { _ in
            var buffer = ByteBufferAllocator().buffer(capacity: quakes.count * 400)
            QuakeTable.copyText(quakes, into: &buffer)
            try await copy.write(buffer)
            self.staged += quakes.count
        }
    }

    @discardableResult
    public func finishReset(storeId: String, token: Int, filter: String?) async throws -> Int {
        guard resetting, let copy else { throw PostgresSinkError("a reset finished that had not begun") }
        return try await step { link in
            try await copy.finish()
            self.copy = nil
            try await link.query("SET LOCAL statement_timeout TO DEFAULT")
            if self.createOnReset {
                for sql in self.quakeTable.indexSQL(geometry: self.hasGeometry) {
                    try await link.query(PostgresQuery(unsafeSQL: sql), "an index's creation")
                }
            }
            try await link.query(
                """
                INSERT INTO quaked_sync_state (name, table_name, store_id, token, filter, updated_at)
                VALUES (\(self.name), \(self.table), \(storeId), \(token), \(filter), clock_timestamp())
                ON CONFLICT (name) DO UPDATE SET table_name = EXCLUDED.table_name, store_id = EXCLUDED.store_id,
                  token = EXCLUDED.token, filter = EXCLUDED.filter, updated_at = EXCLUDED.updated_at
                """, "the position's update")
            // The table was emptied, then given these rows (a duplicate id would have failed the COPY).
            let count = self.staged
            try await link.query("COMMIT", "the reset's COMMIT")
            self.resetting = false
            self.createOnReset = false
            return count
        }
    }

    public func abandonReset() async {
        guard resetting else { return }
        resetting = false
        if let copy {
            self.copy = nil
            // A COPY cannot be left in the middle: ending it fails the transaction anyway.
            await copy.abandon()
            await drop()
            return
        }
        if let link {
            do {
                try await link.query("ROLLBACK")
            } catch {
                await drop()
            }
        }
    }

    public func newest(_ count: Int) async throws -> [IOQuaked.Quake] {
        try await step { link in
            try await self.quakes(link, where: "ORDER BY \"time\" DESC, id DESC LIMIT \(max(0, count))").reversed()
        }
    }

    // MARK: Reading the table

    /// Every row, ordered by id.
    public func allQuakes() async throws -> [IOQuaked.Quake] {
        try await step { link in try await self.quakes(link, where: "ORDER BY id") }
    }

    /// A sink's position and rows as one snapshot (a REPEATABLE READ transaction on a connection
    /// of its own, which takes no lock: the sink may be running). For tests and the benchmark.
    public static func read(settings: PostgresSettings, name: String, table: String) async throws -> (
        position: WatchPosition?, quakes: [IOQuaked.Quake]
    ) {
        let reader = try PostgresSink(settings: settings, name: name, table: table)
        let link = try await PostgresLink.connect(settings, id: 2, logger: reader.logger)
        defer { Task { await link.close() } }
        try await link.query("BEGIN ISOLATION LEVEL REPEATABLE READ")
        let position = try await reader.readPosition(link)
        let quakes = try await reader.quakes(link, where: "ORDER BY id")
        try await link.query("COMMIT")
        return (position, quakes)
    }

    /// The table's columns as the sink writes them (COPY's column list), `geom` not among them.
    public static var columnNames: [String] { QuakeTable.columns.map(\.name) }

    /// The statements that create a sink's table, then its indexes.
    public static func createTableSQL(table: String, geometry: Bool) -> (table: String, indexes: [String]) {
        let quakeTable = QuakeTable(name: table)
        return (quakeTable.createSQL(geometry: geometry), quakeTable.indexSQL(geometry: geometry))
    }

    /// Quakes as the sink sends them to COPY (text format), for a peer that loads the same bytes.
    public static func copyText(_ quakes: [IOQuaked.Quake]) -> [UInt8] {
        var buffer = ByteBufferAllocator().buffer(capacity: quakes.count * 400)
        QuakeTable.copyText(quakes, into: &buffer)
        return Array(buffer.readableBytesView)
    }

    /// Closes the connection (a reset in flight is rolled back).
    public func close() async {
        resetting = false
        await drop()
    }

    private func quakes(_ link: PostgresLink, where clause: String) async throws -> [IOQuaked.Quake] {
        let rows = try await link.query(
            PostgresQuery(unsafeSQL: "SELECT \(quakeTable.selectList) FROM \(quakeTable.quotedName) \(clause)"),
            "reading the table")
        return try rows.map(QuakeTable.quake)
    }

    private func quake(_ link: PostgresLink, id: String) async throws -> IOQuaked.Quake? {
        var binds = PostgresBindings()
        binds.append(id)
        let rows = try await link.query(
            PostgresQuery(
                unsafeSQL: "SELECT \(quakeTable.selectList) FROM \(quakeTable.quotedName) WHERE id = $1", binds: binds),
            "reading a row")
        return try rows.rows.last.map(QuakeTable.quake)
    }

    private func readPosition(_ link: PostgresLink) async throws -> WatchPosition? {
        let rows = try await link.query(
            "SELECT store_id, token, filter FROM quaked_sync_state WHERE name = \(name)", "reading the position")
        var position: WatchPosition?
        for row in rows {
            let (storeId, token, filter) = try row.decode((String, Int, String?).self)
            position = WatchPosition(storeId: storeId, token: token, filter: filter)
        }
        return position
    }

    // MARK: The connection

    /// Runs `body` on the connection (connecting and checking the tables first when there is
    /// none). A failure drops the connection, which rolls back whatever was in flight, and comes
    /// out as a ``PostgresSinkError``.
    private func step<T: Sendable>(_ body: (PostgresLink) async throws -> T) async throws -> T {
        var current: PostgresLink?
        do {
            if !resetting, let link, link.isClosed { await drop() }
            let link = try await connected()
            current = link
            return try await body(link)
        } catch let error as PostgresSinkError {
            await drop()
            throw error
        } catch is CancellationError {
            await drop()
            throw CancellationError()
        } catch {
            await drop()
            if let what = current?.abandonedDuring {
                throw PostgresSinkError(
                    "PostgreSQL at \(settings.redacted) did not answer \(what) within \(Self.seconds(settings.replyTimeoutMilliseconds)) (a stopped server, or a network that drops everything?): the connection is closed and its transaction rolled back"
                )
            }
            throw PostgresSinkError(describe(error))
        }
    }

    static func seconds(_ milliseconds: Int) -> String {
        milliseconds % 1000 == 0 ? "\(milliseconds / 1000) s" : "\(Double(milliseconds) / 1000) s"
    }

    private func drop() async {
        resetting = false
        if let copy {
            self.copy = nil
            await copy.abandon()
        }
        if let link {
            self.link = nil
            await link.close()
        }
    }

    private func connected() async throws -> PostgresLink {
        if let link { return link }
        do {
            _ = try settings.configuration()
        } catch {
            throw PostgresSinkError("\(error)", permanent: true)
        }
        let link = try await PostgresLink.connect(settings, id: 1, logger: logger)
        do {
            try await prepareTables(link)
        } catch {
            await link.close()
            throw error
        }
        self.link = link
        return link
    }

    /// On each new connection: creates `quaked_sync_state` when missing, checks that no other
    /// sink keeps the table (and that this sink keeps no other), takes the sink's lock (held by
    /// the connection: one process at a time runs a sink), then creates the table when missing
    /// and checks that it has the columns the sink writes.
    private func prepareTables(_ link: PostgresLink) async throws {
        // One sink at a time creates tables (two starting at once would both try).
        try await link.query("BEGIN")
        try await link.query("SELECT pg_advisory_xact_lock(hashtext('quaked_sync'))")
        try await link.query(
            """
            CREATE TABLE IF NOT EXISTS quaked_sync_state (
              name text PRIMARY KEY,
              table_name text NOT NULL UNIQUE,
              store_id text NOT NULL,
              token bigint NOT NULL CHECK (token >= 0),
              filter text,
              updated_at timestamptz NOT NULL
            )
            """)
        try await checkColumns(
            link, table: "quaked_sync_state",
            expected: [
                ("name", "text"), ("table_name", "text"), ("store_id", "text"), ("token", "bigint"), ("filter", "text"),
                ("updated_at", "timestamp with time zone"),
            ])
        var owners: [(String, String)] = []
        for row in try await link.query(
            "SELECT name, table_name FROM quaked_sync_state WHERE name = \(name) OR table_name = \(table)")
        {
            owners.append(try row.decode((String, String).self))
        }
        if let other = owners.first(where: { $0.0 != name }) {
            try await link.query("ROLLBACK")
            throw PostgresSinkError(
                "the table \(table) is kept by the sink \(other.0.debugDescription): give this sink its own --table",
                permanent: true)
        }
        if let mine = owners.first(where: { $0.0 == name }), mine.1 != table {
            try await link.query("ROLLBACK")
            throw PostgresSinkError(
                "the sink \(name.debugDescription) keeps the table \(mine.1): pass --table \(mine.1), or another --name",
                permanent: true)
        }
        var locked = false
        for row in try await link.query(
            "SELECT pg_try_advisory_lock(hashtext('quaked_sync'), hashtext(\(name)))")
        {
            locked = try row.decode(Bool.self)
        }
        guard locked else {
            try await link.query("ROLLBACK")
            throw PostgresSinkError(
                "another quakectl sync runs the sink \(name.debugDescription) on \(settings.redacted); waiting for it to stop")
        }
        var postgis = false
        for _ in try await link.query("SELECT 1 FROM pg_extension WHERE extname = 'postgis'") {
            postgis = true
        }
        let columns = try await columns(link, table: table)
        createOnReset = columns.isEmpty
        if columns.isEmpty {
            // No table (a new sink, or its table was dropped): a position without its rows means
            // nothing, and the reset that follows creates the table.
            try await link.query("DELETE FROM quaked_sync_state WHERE name = \(name)")
        } else {
            var columns = columns
            let missing = QuakeTable.columns.filter { QuakeTable.addedColumns.contains($0.name) && columns[$0.name] == nil }
            if !missing.isEmpty {
                // A table of an older quakectl: the new columns are added, and the position
                // forgotten, so that the next sync loads every row again (with their values).
                for column in missing {
                    try await link.query(
                        PostgresQuery(
                            unsafeSQL:
                                "ALTER TABLE \(quakeTable.quotedName) ADD COLUMN IF NOT EXISTS \(QuakeTable.quoted(column.name)) \(column.kind.sqlType)"
                        ))
                    columns[column.name] = column.kind.sqlType
                }
                try await link.query("DELETE FROM quaked_sync_state WHERE name = \(name)")
            }
            try await checkColumns(
                link, table: table, expected: QuakeTable.columns.map { ($0.name, $0.kind.sqlType) }, known: columns)
            if let geom = columns["geom"], geom != QuakeTable.geometryType {
                throw PostgresSinkError(
                    "the table \(table) has a column geom of type \(geom), not \(QuakeTable.geometryType): drop or rename it")
            }
            if postgis && columns["geom"] == nil {
                // PostGIS installed since the table was made: add the column.
                try await link.query(
                    PostgresQuery(unsafeSQL: "ALTER TABLE \(quakeTable.quotedName) ADD COLUMN \(QuakeTable.geometryDefinition)"))
                try await link.query(PostgresQuery(unsafeSQL: quakeTable.geometryIndexSQL))
            }
        }
        try await link.query("COMMIT")
        hasGeometry = postgis
        if !postgis, notes.isEmpty {
            notes.append(
                "PostGIS is not installed in \(settings.database), so the table \(table) has no geom column (CREATE EXTENSION postgis adds it at the next start)"
            )
        }
    }

    /// A table's columns and their types (`format_type`); empty when there is no such table.
    private func columns(_ link: PostgresLink, table: String) async throws -> [String: String] {
        var columns: [String: String] = [:]
        for row in try await link.query(
            """
            SELECT a.attname::text, format_type(a.atttypid, a.atttypmod)
            FROM pg_attribute a WHERE a.attrelid = to_regclass(\(QuakeTable.quoted(table)))
              AND a.attnum > 0 AND NOT a.attisdropped
            """)
        {
            let (name, type) = try row.decode((String, String).self)
            columns[name] = type
        }
        return columns
    }

    private func checkColumns(
        _ link: PostgresLink, table: String, expected: [(String, String)], known: [String: String]? = nil
    ) async throws {
        let columns: [String: String]
        if let known { columns = known } else { columns = try await self.columns(link, table: table) }
        var problems: [String] = []
        for (column, type) in expected {
            switch columns[column] {
            case nil: problems.append("no column \(column) (\(type))")
            case let actual? where actual != type: problems.append("\(column) is \(actual), not \(type)")
            default: break
            }
        }
        guard problems.isEmpty else {
            _ = try? await link.query("ROLLBACK")
            throw PostgresSinkError(
                "the table \(table) in \(settings.redacted) has the wrong shape: \(problems.joined(separator: "; ")). Drop or rename it (quakectl sync creates it), or pass another --table"
            )
        }
    }

    /// One sentence for a PostgreSQL failure: the server's own message when it sent one.
    func describe(_ error: any Error) -> String {
        let target = settings.redacted
        if error is PostgresLink.Closed { return "PostgreSQL at \(target) closed the connection" }
        if let error = error as? PSQLError {
            if let info = error.serverInfo, let message = info[.message] {
                var text = "PostgreSQL at \(target): \(message)"
                if let detail = info[.detail] { text += " (\(detail))" }
                if let state = info[.sqlState] { text += " [SQLSTATE \(state)]" }
                return text
            }
            switch error.code {
            case .connectionError:
                if case .connectTimeout = error.underlying as? ChannelError {
                    return "cannot connect to PostgreSQL at \(target): no answer within \(settings.connectTimeout) s (connect_timeout)"
                }
                let reason = error.underlying.map { "\($0)" } ?? "no answer"
                return "cannot connect to PostgreSQL at \(target): \(reason)"
            case .serverClosedConnection, .uncleanShutdown:
                return "PostgreSQL at \(target) closed the connection"
            case .authMechanismRequiresPassword:
                return "PostgreSQL at \(target) asks for a password: give PGPASSWORD, --password-file or ~/.pgpass"
            case .sslUnsupported:
                return "PostgreSQL at \(target) does not offer TLS, which sslmode=\(settings.sslMode.rawValue) requires"
            default:
                let reason = error.underlying.map { ": \($0)" } ?? ""
                return "PostgreSQL at \(target) failed (\(error.code))\(reason)"
            }
        }
        if let error = error as? PostgresDecodingError {
            return "PostgreSQL at \(target) sent a value quakectl cannot read (\(error.code) in column \(error.columnName))"
        }
        if let error = error as? PostgresTransactionError {
            return describe(error.closureError ?? error.commitError ?? error.beginError ?? error)
        }
        return "PostgreSQL at \(target): \(error)"
    }
}

/// A `COPY ... FROM STDIN` kept open across calls: postgres-nio's `copyFrom` lends its writer to a
/// closure, so the closure runs in a task of its own, hands the writer out, and waits for
/// ``finish()`` (which ends the COPY, and returns once PostgreSQL has taken every row) or
/// ``abandon()`` (which fails it). ``write(_:)`` returns once the bytes are on their way, so
/// PostgreSQL loads one page while the next is read.
///
/// Its start, each write and its end are ``PostgresLink/guarded(_:_:)``: each ends when the
/// connection closes (a server that goes away mid-COPY), and closes it when PostgreSQL does not
/// take the data within the reply timeout, instead of leaving the step waiting. None of them
/// awaits the COPY's task itself, which a cancellation cannot end: its outcome comes through a
/// stream. (postgres-nio writes the COPY's request as it writes a query's, with no promise: if
/// the connection closes at that very moment the request is dropped and the task waits for
/// ever. The start then fails with the close, and the task is left behind, suspended.)
final class CopyStream: Sendable {
    private let writer: PostgresCopyFromWriter
    private let ending: AsyncStream<Bool>.Continuation
    private let task: Task<Void, Never>
    private let outcome: AsyncStream<Result<Void, any Error>>
    private let link: PostgresLink

    private init(
        writer: PostgresCopyFromWriter, ending: AsyncStream<Bool>.Continuation, task: Task<Void, Never>,
        outcome: AsyncStream<Result<Void, any Error>>, link: PostgresLink
    ) {
        self.writer = writer
        self.ending = ending
        self.task = task
        self.outcome = outcome
        self.link = link
    }

    struct Abandoned: Error {}

    static func start(on link: PostgresLink, table: String, columns: [String], logger: Logger)
        async throws -> CopyStream
    {
        let (endings, ending) = AsyncStream<Bool>.makeStream()
        let (writers, lend) = AsyncStream<PostgresCopyFromWriter>.makeStream()
        let (outcome, report) = AsyncStream<Result<Void, any Error>>.makeStream()
        let connection = link.connection
        // Unstructured on purpose: the COPY outlives this call (it ends in finish or abandon).
        let task = Task {
            defer { lend.finish() }
            do {
                try await connection.copyFrom(table: table, columns: columns, logger: logger) { writer in
                    lend.yield(writer)
                    lend.finish()
                    for await commit in endings {
                        if commit { return }
                        break
                    }
                    throw Abandoned()
                }
                report.yield(.success(()))
            } catch {
                report.yield(.failure(error))
            }
            report.finish()
        }
        let writer: PostgresCopyFromWriter?
        do {
            writer = try await link.guarded("the COPY's start") { () -> PostgresCopyFromWriter? in
                for await writer in writers { return writer }
                return nil
            }
        } catch {
            ending.finish()
            task.cancel()
            throw error
        }
        guard let writer else {
            // The COPY failed to start: its error.
            ending.finish()
            for await result in outcome { try result.get() }
            throw PostgresSinkError("the COPY ended before it began")
        }
        return CopyStream(writer: writer, ending: ending, task: task, outcome: outcome, link: link)
    }

    func write(_ buffer: ByteBuffer) async throws {
        let writer = writer
        try await link.guarded("a page of the COPY") { try await writer.write(buffer) }
    }

    /// Ends the COPY; throws what PostgreSQL said of the data.
    func finish() async throws {
        ending.yield(true)
        ending.finish()
        let outcome = outcome
        try await link.guarded("the COPY's end") {
            for await result in outcome { return try result.get() }
            throw PostgresSinkError("the COPY ended without a word")
        }
    }

    /// Fails the COPY without waiting for it: the caller closes the connection next, which ends
    /// it whatever state it is in.
    func abandon() async {
        ending.yield(false)
        ending.finish()
        task.cancel()
    }
}
