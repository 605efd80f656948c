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
///   connects again and re-reads the position from the database.
public actor PostgresSink: WatchCache {
    public let settings: PostgresSettings
    public let name: String
    public let table: String
    let quakeTable: QuakeTable
    private var connection: PostgresConnection?
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

    public func position() async throws -> QuakeCache.Position? {
        try await step { connection in try await self.readPosition(connection) }
    }

    public func prepare(_ transaction: IOQuaked.Transaction, storeId: String) async throws -> [String: IOQuaked.Quake]? {
        try await step { connection in
            guard let position = try await self.readPosition(connection), position.storeId == storeId,
                position.token < transaction.token
            else { return nil }
            var before: [String: IOQuaked.Quake] = [:]
            for change in transaction.changes where change.quake == nil {
                guard change.kind == .update || change.kind == .leave else { continue }
                if let old = try await self.quake(connection, id: change.quakeId) { before[change.quakeId] = old }
            }
            return before
        }
    }

    @discardableResult
    public func apply(_ transaction: IOQuaked.Transaction, storeId: String, outbox: [OutboxEntry]) async throws -> Bool {
        precondition(outbox.isEmpty, "a PostgreSQL sink has no outbox")
        return try await step { connection in
            try await connection.query("BEGIN", logger: self.logger)
            let rows = try await connection.query(
                "SELECT store_id, token FROM quaked_sync_state WHERE name = \(self.name) FOR UPDATE", logger: self.logger)
            var current: (String, Int)?
            for try await row in rows { current = try row.decode((String, Int).self) }
            guard let current, current.0 == storeId, current.1 < transaction.token else {
                try await connection.query("ROLLBACK", logger: self.logger)
                return false
            }
            let delete = "DELETE FROM \(self.quakeTable.quotedName) WHERE id = $1"
            for change in transaction.changes {
                switch change.kind {
                case .insert, .update, .enter:
                    // Without a quake: removed by a later transaction, which removes it here too.
                    if let quake = change.quake { try await connection.query(try self.quakeTable.upsert(quake), logger: self.logger) }
                case .delete, .leave:
                    var binds = PostgresBindings()
                    binds.append(change.quakeId)
                    try await connection.query(PostgresQuery(unsafeSQL: delete, binds: binds), logger: self.logger)
                }
            }
            try await connection.query(
                "UPDATE quaked_sync_state SET token = \(transaction.token), updated_at = clock_timestamp() WHERE name = \(self.name)",
                logger: self.logger)
            try await connection.query("COMMIT", logger: self.logger)
            self.committed?(transaction, Date())
            return true
        }
    }

    public func advance(storeId: String, to token: Int) async throws {
        _ = try await step { connection in
            try await connection.query(
                """
                UPDATE quaked_sync_state SET token = \(token), updated_at = clock_timestamp()
                WHERE name = \(self.name) AND store_id = \(storeId) AND token < \(token)
                """, logger: self.logger)
        }
    }

    public func beginReset() async throws {
        try await step { connection in
            try await connection.query("BEGIN", logger: self.logger)
            self.resetting = true
            if self.createOnReset {
                try await connection.query(
                    PostgresQuery(unsafeSQL: self.quakeTable.createSQL(geometry: self.hasGeometry)), logger: self.logger)
            } else {
                // Readers keep seeing the old rows until the commit (DELETE, not TRUNCATE, which
                // would block them and is not MVCC-safe).
                try await connection.query(
                    PostgresQuery(unsafeSQL: "DELETE FROM \(self.quakeTable.quotedName)"), logger: self.logger)
            }
            self.staged = 0
            self.copy = try await CopyStream.start(
                on: connection, table: self.table, columns: QuakeTable.columns.map(\.name), logger: self.logger)
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
        return try await step { connection in
            try await copy.finish()
            self.copy = nil
            if self.createOnReset {
                for sql in self.quakeTable.indexSQL(geometry: self.hasGeometry) {
                    try await connection.query(PostgresQuery(unsafeSQL: sql), logger: self.logger)
                }
            }
            try await connection.query(
                """
                INSERT INTO quaked_sync_state (name, table_name, store_id, token, filter, updated_at)
                VALUES (\(self.name), \(self.table), \(storeId), \(token), \(filter), clock_timestamp())
                ON CONFLICT (name) DO UPDATE SET table_name = EXCLUDED.table_name, store_id = EXCLUDED.store_id,
                  token = EXCLUDED.token, filter = EXCLUDED.filter, updated_at = EXCLUDED.updated_at
                """, logger: self.logger)
            // The table was emptied, then given these rows (a duplicate id would have failed the COPY).
            let count = self.staged
            try await connection.query("COMMIT", logger: self.logger)
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
        if let connection {
            do {
                try await connection.query("ROLLBACK", logger: logger)
            } catch {
                await drop()
            }
        }
    }

    public func newest(_ count: Int) async throws -> [IOQuaked.Quake] {
        try await step { connection in
            try await self.quakes(connection, where: "ORDER BY \"time\" DESC, id DESC LIMIT \(max(0, count))").reversed()
        }
    }

    // MARK: Reading the table

    /// Every row, ordered by id.
    public func allQuakes() async throws -> [IOQuaked.Quake] {
        try await step { connection in try await self.quakes(connection, where: "ORDER BY id") }
    }

    /// A sink's position and rows as one snapshot (a REPEATABLE READ transaction on a connection
    /// of its own, which takes no lock: the sink may be running). For tests and the benchmark.
    public static func read(settings: PostgresSettings, name: String, table: String) async throws -> (
        position: QuakeCache.Position?, quakes: [IOQuaked.Quake]
    ) {
        let reader = try PostgresSink(settings: settings, name: name, table: table)
        let connection = try await PostgresConnection.connect(
            on: MultiThreadedEventLoopGroup.singleton.any(), configuration: try settings.configuration(), id: 2,
            logger: reader.logger)
        do {
            try await connection.query("BEGIN ISOLATION LEVEL REPEATABLE READ", logger: reader.logger)
            let position = try await reader.readPosition(connection)
            let quakes = try await reader.quakes(connection, where: "ORDER BY id")
            try await connection.query("COMMIT", logger: reader.logger)
            try await connection.close()
            return (position, quakes)
        } catch {
            try? await connection.close()
            throw error
        }
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

    private func quakes(_ connection: PostgresConnection, where clause: String) async throws -> [IOQuaked.Quake] {
        let rows = try await connection.query(
            PostgresQuery(unsafeSQL: "SELECT \(quakeTable.selectList) FROM \(quakeTable.quotedName) \(clause)"),
            logger: logger)
        var quakes: [IOQuaked.Quake] = []
        for try await row in rows { quakes.append(try QuakeTable.quake(row)) }
        return quakes
    }

    private func quake(_ connection: PostgresConnection, id: String) async throws -> IOQuaked.Quake? {
        var binds = PostgresBindings()
        binds.append(id)
        let rows = try await connection.query(
            PostgresQuery(
                unsafeSQL: "SELECT \(quakeTable.selectList) FROM \(quakeTable.quotedName) WHERE id = $1", binds: binds),
            logger: logger)
        var quake: IOQuaked.Quake?
        for try await row in rows { quake = try QuakeTable.quake(row) }
        return quake
    }

    private func readPosition(_ connection: PostgresConnection) async throws -> QuakeCache.Position? {
        let rows = try await connection.query(
            """
            SELECT store_id, token, (extract(epoch FROM updated_at) * 1000)::bigint, filter
            FROM quaked_sync_state WHERE name = \(name)
            """, logger: logger)
        var position: QuakeCache.Position?
        for try await row in rows {
            let (storeId, token, appliedAt, filter) = try row.decode((String, Int, Int64, String?).self)
            position = QuakeCache.Position(storeId: storeId, token: token, appliedAt: appliedAt, filter: filter)
        }
        return position
    }

    // MARK: The connection

    /// Runs `body` on the connection (connecting and checking the tables first when there is
    /// none). A failure drops the connection, which rolls back whatever was in flight, and comes
    /// out as a ``PostgresSinkError``.
    private func step<T: Sendable>(_ body: (PostgresConnection) async throws -> T) async throws -> T {
        do {
            if !resetting, let connection, connection.isClosed { await drop() }
            let connection = try await connected()
            return try await body(connection)
        } catch let error as PostgresSinkError {
            await drop()
            throw error
        } catch is CancellationError {
            await drop()
            throw CancellationError()
        } catch {
            await drop()
            throw PostgresSinkError(describe(error))
        }
    }

    private func drop() async {
        resetting = false
        if let copy {
            self.copy = nil
            await copy.abandon()
        }
        if let connection {
            self.connection = nil
            try? await connection.close()
        }
    }

    private func connected() async throws -> PostgresConnection {
        if let connection { return connection }
        let configuration: PostgresConnection.Configuration
        do {
            configuration = try settings.configuration()
        } catch {
            throw PostgresSinkError("\(error)", permanent: true)
        }
        let connection = try await PostgresConnection.connect(
            on: MultiThreadedEventLoopGroup.singleton.any(), configuration: configuration, id: 1, logger: logger)
        do {
            try await prepareTables(connection)
        } catch {
            try? await connection.close()
            throw error
        }
        self.connection = connection
        return connection
    }

    /// On each new connection: creates `quaked_sync_state` when missing, checks that no other
    /// sink keeps the table (and that this sink keeps no other), takes the sink's lock (held by
    /// the connection: one process at a time runs a sink), then creates the table when missing
    /// and checks that it has the columns the sink writes.
    private func prepareTables(_ connection: PostgresConnection) async throws {
        // One sink at a time creates tables (two starting at once would both try).
        try await connection.query("BEGIN", logger: logger)
        try await connection.query("SELECT pg_advisory_xact_lock(hashtext('quaked_sync'))", logger: logger)
        try await connection.query(
            """
            CREATE TABLE IF NOT EXISTS quaked_sync_state (
              name text PRIMARY KEY,
              table_name text NOT NULL UNIQUE,
              store_id text NOT NULL,
              token bigint NOT NULL CHECK (token >= 0),
              filter text,
              updated_at timestamptz NOT NULL
            )
            """, logger: logger)
        try await checkColumns(
            connection, table: "quaked_sync_state",
            expected: [
                ("name", "text"), ("table_name", "text"), ("store_id", "text"), ("token", "bigint"), ("filter", "text"),
                ("updated_at", "timestamp with time zone"),
            ])
        var owners: [(String, String)] = []
        for try await row in try await connection.query(
            "SELECT name, table_name FROM quaked_sync_state WHERE name = \(name) OR table_name = \(table)", logger: logger)
        {
            owners.append(try row.decode((String, String).self))
        }
        if let other = owners.first(where: { $0.0 != name }) {
            try await connection.query("ROLLBACK", logger: logger)
            throw PostgresSinkError(
                "the table \(table) is kept by the sink \(other.0.debugDescription): give this sink its own --table",
                permanent: true)
        }
        if let mine = owners.first(where: { $0.0 == name }), mine.1 != table {
            try await connection.query("ROLLBACK", logger: logger)
            throw PostgresSinkError(
                "the sink \(name.debugDescription) keeps the table \(mine.1): pass --table \(mine.1), or another --name",
                permanent: true)
        }
        var locked = false
        for try await row in try await connection.query(
            "SELECT pg_try_advisory_lock(hashtext('quaked_sync'), hashtext(\(name)))", logger: logger)
        {
            locked = try row.decode(Bool.self)
        }
        guard locked else {
            try await connection.query("ROLLBACK", logger: logger)
            throw PostgresSinkError(
                "another quakectl sync runs the sink \(name.debugDescription) on \(settings.redacted); waiting for it to stop")
        }
        var postgis = false
        for try await _ in try await connection.query("SELECT 1 FROM pg_extension WHERE extname = 'postgis'", logger: logger) {
            postgis = true
        }
        let columns = try await columns(connection, table: table)
        createOnReset = columns.isEmpty
        if columns.isEmpty {
            // No table (a new sink, or its table was dropped): a position without its rows means
            // nothing, and the reset that follows creates the table.
            try await connection.query("DELETE FROM quaked_sync_state WHERE name = \(name)", logger: logger)
        } else {
            try await checkColumns(
                connection, table: table, expected: QuakeTable.columns.map { ($0.name, $0.kind.sqlType) }, known: columns)
            if let geom = columns["geom"], geom != QuakeTable.geometryType {
                throw PostgresSinkError(
                    "the table \(table) has a column geom of type \(geom), not \(QuakeTable.geometryType): drop or rename it")
            }
            if postgis && columns["geom"] == nil {
                // PostGIS installed since the table was made: add the column.
                try await connection.query(
                    PostgresQuery(unsafeSQL: "ALTER TABLE \(quakeTable.quotedName) ADD COLUMN \(QuakeTable.geometryDefinition)"),
                    logger: logger)
                try await connection.query(PostgresQuery(unsafeSQL: quakeTable.geometryIndexSQL), logger: logger)
            }
        }
        try await connection.query("COMMIT", logger: logger)
        hasGeometry = postgis
        if !postgis, notes.isEmpty {
            notes.append(
                "PostGIS is not installed in \(settings.database), so the table \(table) has no geom column (CREATE EXTENSION postgis adds it at the next start)"
            )
        }
    }

    /// A table's columns and their types (`format_type`); empty when there is no such table.
    private func columns(_ connection: PostgresConnection, table: String) async throws -> [String: String] {
        var columns: [String: String] = [:]
        for try await row in try await connection.query(
            """
            SELECT a.attname::text, format_type(a.atttypid, a.atttypmod)
            FROM pg_attribute a WHERE a.attrelid = to_regclass(\(QuakeTable.quoted(table)))
              AND a.attnum > 0 AND NOT a.attisdropped
            """, logger: logger)
        {
            let (name, type) = try row.decode((String, String).self)
            columns[name] = type
        }
        return columns
    }

    private func checkColumns(
        _ connection: PostgresConnection, table: String, expected: [(String, String)], known: [String: String]? = nil
    ) async throws {
        let columns: [String: String]
        if let known { columns = known } else { columns = try await self.columns(connection, table: table) }
        var problems: [String] = []
        for (column, type) in expected {
            switch columns[column] {
            case nil: problems.append("no column \(column) (\(type))")
            case let actual? where actual != type: problems.append("\(column) is \(actual), not \(type)")
            default: break
            }
        }
        guard problems.isEmpty else {
            _ = try? await connection.query("ROLLBACK", logger: logger)
            throw PostgresSinkError(
                "the table \(table) in \(settings.redacted) has the wrong shape: \(problems.joined(separator: "; ")). Drop or rename it (quakectl sync creates it), or pass another --table"
            )
        }
    }

    /// One sentence for a PostgreSQL failure: the server's own message when it sent one.
    func describe(_ error: any Error) -> String {
        let target = settings.redacted
        if let error = error as? PSQLError {
            if let info = error.serverInfo, let message = info[.message] {
                var text = "PostgreSQL at \(target): \(message)"
                if let detail = info[.detail] { text += " (\(detail))" }
                if let state = info[.sqlState] { text += " [SQLSTATE \(state)]" }
                return text
            }
            switch error.code {
            case .connectionError:
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
final class CopyStream: Sendable {
    private let writer: PostgresCopyFromWriter
    private let ending: AsyncStream<Bool>.Continuation
    private let task: Task<Void, any Error>
    /// Completes when the connection closes: a COPY step waits for this too, so that a server
    /// that goes away mid-COPY ends the step with an error instead of leaving it waiting.
    private let closed: EventLoopFuture<Void>

    private init(
        writer: PostgresCopyFromWriter, ending: AsyncStream<Bool>.Continuation, task: Task<Void, any Error>,
        closed: EventLoopFuture<Void>
    ) {
        self.writer = writer
        self.ending = ending
        self.task = task
        self.closed = closed
    }

    struct Closed: Error, CustomStringConvertible {
        var description: String { "the connection closed during the COPY" }
    }

    /// `operation`, or ``Closed`` once the connection closes, whichever comes first.
    private func unlessClosed(_ operation: @escaping @Sendable () async throws -> Void) async throws {
        // An AsyncStream, not the future's get(), which a cancellation cannot end.
        let (closing, signal) = AsyncStream<Void>.makeStream()
        closed.whenComplete { _ in
            signal.yield()
            signal.finish()
        }
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await operation() }
            group.addTask {
                for await _ in closing { break }
                if Task.isCancelled { return }
                throw Closed()
            }
            defer { group.cancelAll() }
            try await group.next()
        }
    }

    struct Abandoned: Error {}

    static func start(on connection: PostgresConnection, table: String, columns: [String], logger: Logger)
        async throws -> CopyStream
    {
        let (endings, ending) = AsyncStream<Bool>.makeStream()
        let (writers, lend) = AsyncStream<PostgresCopyFromWriter>.makeStream()
        // Unstructured on purpose: the COPY outlives this call (it ends in finish or abandon).
        let task = Task {
            defer { lend.finish() }
            try await connection.copyFrom(table: table, columns: columns, logger: logger) { writer in
                lend.yield(writer)
                lend.finish()
                for await commit in endings {
                    if commit { return }
                    break
                }
                throw Abandoned()
            }
        }
        var lent = writers.makeAsyncIterator()
        guard let writer = await lent.next() else {
            // The COPY failed to start: its error.
            ending.finish()
            try await task.value
            throw PostgresSinkError("the COPY ended before it began")
        }
        return CopyStream(writer: writer, ending: ending, task: task, closed: connection.closeFuture)
    }

    func write(_ buffer: ByteBuffer) async throws {
        let writer = writer
        try await unlessClosed { try await writer.write(buffer) }
    }

    /// Ends the COPY; throws what PostgreSQL said of the data.
    func finish() async throws {
        ending.yield(true)
        ending.finish()
        let task = task
        try await unlessClosed { try await task.value }
    }

    /// Fails the COPY without waiting for it: the caller closes the connection next, which ends
    /// it whatever state it is in.
    func abandon() async {
        ending.yield(false)
        ending.finish()
        task.cancel()
    }
}
