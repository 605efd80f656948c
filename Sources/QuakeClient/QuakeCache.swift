import Foundation
import GRDB
import QuakeFeed
import GRDBSQLite
import QuakeModel
import QuakeProtocol
import Varlink

/// `watch`'s local copy of the store: the merged rows, the store id and the last applied token.
///
/// Every applied history transaction is one SQLite transaction that changes rows and token
/// together, so a crash never leaves them out of step. A reset (after an expired token or a
/// replaced store) streams the snapshot into a staging table, page by page, and swaps it in with
/// the new position in one final transaction: until then the old cache stays whole.
public struct QuakeCache: Sendable {
    public let path: String
    let writer: any DatabaseWriter

    /// Opens (creating the file and its directory when missing) the cache at `path`.
    public init(path: String) throws {
        let directory = (path as NSString).deletingLastPathComponent
        if !directory.isEmpty {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        }
        var configuration = Configuration()
        configuration.busyMode = .timeout(10)
        configuration.prepareDatabase { db in
            try db.execute(sql: "PRAGMA synchronous = NORMAL")
        }
        writer = try Self.whileOpening(directory: directory) {
            let writer = try DatabasePool(path: path, configuration: configuration)
            try Self.migrator.migrate(writer)
            return writer
        }
        self.path = path
    }

    /// Runs `body` (opening the file and running the migrations) while no other process or
    /// thread opens a cache in `directory`. Two `quakectl watch` started together on one new
    /// cache would otherwise both switch it to WAL and both run the migrations ("table quakes
    /// already exists"): the busy timeout covers neither. The lock is flock(2) on the directory,
    /// not the file, whose descriptors must all be SQLite's (closing another one would drop
    /// SQLite's POSIX locks). Held for milliseconds; after 10 s of waiting, `body` runs anyway
    /// and SQLite's own errors say what is wrong.
    static func whileOpening<T>(directory: String, _ body: () throws -> T) throws -> T {
        let fd = Glibc.open(directory.isEmpty ? "." : directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { return try body() }
        defer { Glibc.close(fd) }
        let deadline = ContinuousClock.now + .seconds(10)
        while flock(fd, LOCK_EX | LOCK_NB) != 0, errno == EWOULDBLOCK || errno == EINTR,
            ContinuousClock.now < deadline
        {
            usleep(2_000)
        }
        defer { flock(fd, LOCK_UN) }
        return try body()
    }

    /// Why a cache cannot be used.
    public struct CacheError: Error, Sendable, Hashable, CustomStringConvertible {
        public var path: String
        public var reason: String
        public var description: String { "the cache at \(path) \(reason)" }
    }

    /// Opens an existing cache for reading (`list --cache`); throws ``CacheError`` when there is none.
    public static func openExisting(path: String) throws -> QuakeCache {
        guard FileManager.default.fileExists(atPath: path) else {
            throw CacheError(path: path, reason: "does not exist")
        }
        return try QuakeCache(path: path)
    }

    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1") { db in
            for table in ["quakes", "staging"] {
                try db.execute(
                    sql: """
                        CREATE TABLE \(table) (
                          id TEXT PRIMARY KEY NOT NULL,
                          time INTEGER NOT NULL,
                          mag REAL,
                          type TEXT,
                          lat REAL,
                          lon REAL,
                          quake TEXT NOT NULL CHECK (json_valid(quake))
                        ) WITHOUT ROWID
                        """)
            }
            try db.execute(sql: "CREATE INDEX quakes_time ON quakes(time)")
            try db.execute(
                sql: """
                    CREATE TABLE position (
                      one INTEGER PRIMARY KEY CHECK (one = 1),
                      storeId TEXT NOT NULL,
                      token INTEGER NOT NULL CHECK (token >= 0),
                      appliedAt INTEGER NOT NULL
                    )
                    """)
        }
        migrator.registerMigration("v2-filter") { db in
            // The filter the cache holds the quakes of (its canonical JSON), NULL for all of them.
            try db.execute(sql: "ALTER TABLE position ADD COLUMN filter TEXT")
        }
        migrator.registerMigration("v3-outbox") { db in
            // `watch --exec` with --batch or --quiet-hours: the changes whose command has not yet
            // run (exited 0), queued in the transaction that applies them (see ``OutboxEntry``).
            try db.execute(
                sql: """
                    CREATE TABLE outbox (
                      seq INTEGER PRIMARY KEY AUTOINCREMENT,
                      storeId TEXT NOT NULL,
                      token INTEGER NOT NULL,
                      queuedAt INTEGER NOT NULL,
                      held INTEGER NOT NULL CHECK (held IN (0, 1)),
                      mag REAL,
                      line TEXT NOT NULL,
                      environment TEXT NOT NULL CHECK (json_valid(environment))
                    )
                    """)
        }
        return migrator
    }

    public func close() throws {
        try writer.close()
    }

    /// The store, token and filter the rows are as of; `nil` for a cache never filled.
    public func position() throws -> WatchPosition? {
        try writer.read { db in try Self.position(db) }
    }

    /// The position and when the cache last changed (ms since the epoch), read together; `nil`
    /// for a cache never filled.
    public func positionAndAppliedAt() throws -> (position: WatchPosition, appliedAt: Int64)? {
        try writer.read { db in
            try Row.fetchOne(db.cachedStatement(sql: "SELECT storeId, token, appliedAt, filter FROM position")).map {
                (WatchPosition(storeId: $0["storeId"], token: $0["token"], filter: $0["filter"]), $0["appliedAt"])
            }
        }
    }

    private static func position(_ db: Database) throws -> WatchPosition? {
        try Row.fetchOne(db.cachedStatement(sql: "SELECT storeId, token, filter FROM position")).map {
            WatchPosition(storeId: $0["storeId"], token: $0["token"], filter: $0["filter"])
        }
    }

    /// What the cache knows about a transaction before applying it: the rows, as they are now,
    /// of updates and leaves that carry no quake (a later transaction removed it, or it left the
    /// filter). Nil when the cache is not at a position this transaction follows (another store,
    /// or the transaction is already applied): nothing is applied twice.
    public func prepare(_ transaction: IOQuaked.Transaction, storeId: String) throws -> [String: IOQuaked.Quake]? {
        try prepare(page: [transaction][...], storeId: storeId)?.before.first
    }

    /// Applies one history transaction of `storeId` and moves the token to it, atomically.
    /// Returns false, changing nothing, when the cache is not at a position this transaction
    /// follows (see ``prepare(_:storeId:)``).
    ///
    /// `watch` first delivers a transaction (prints it, runs its command), then applies it: a stop
    /// between the two delivers it again on the next run, never not at all.
    ///
    @discardableResult
    public func apply(_ transaction: IOQuaked.Transaction, storeId: String) throws -> Bool {
        try apply(transaction, storeId: storeId, outbox: [])
    }

    /// ``apply(_:storeId:)``, queuing `outbox` in the same SQLite transaction: `watch --exec`'s
    /// changes whose command runs later (`--batch`, `--quiet-hours`), so a change is queued
    /// exactly when it is applied. The outbox is this cache's own: other caches have none.
    @discardableResult
    public func apply(_ transaction: IOQuaked.Transaction, storeId: String, outbox: [OutboxEntry]) throws -> Bool {
        try apply(page: [transaction][...], storeId: storeId, outbox: outbox)
    }

    /// ``prepare(_:storeId:)`` for transactions the cache will commit together
    /// (``apply(page:storeId:outbox:)``, a catch-up's page): the index of the first of them
    /// that follows the cache's position, and from there, for each transaction, the rows its
    /// updates and leaves without a quake find: the cache's, as the page's earlier transactions
    /// leave them (as ``prepare(_:storeId:)`` would read them were each committed in turn). Nil
    /// when the cache is of another store, or has every transaction already.
    public func prepare(page transactions: ArraySlice<IOQuaked.Transaction>, storeId: String) throws -> (
        start: Int, before: [[String: IOQuaked.Quake]]
    )? {
        try writer.read { db in
            guard let position = try Self.position(db), position.storeId == storeId,
                let start = transactions.firstIndex(where: { $0.token > position.token })
            else { return nil }
            let following = transactions[start...]
            var before = [[String: IOQuaked.Quake]](repeating: [:], count: following.count)
            // The quakes a `before` is wanted for; usually none (every change carries its quake).
            // (`quake?.time`, not `quake == nil`, which copies the whole quake to look at it.)
            var wanted = Set<String>()
            for transaction in following {
                transaction.changes.withUnsafeBufferPointer { changes in
                    for i in changes.indices where changes[i].quake?.time == nil {
                        guard changes[i].kind == .update || changes[i].kind == .leave else { continue }
                        wanted.insert(changes[i].quakeId)
                    }
                }
            }
            guard !wanted.isEmpty else { return (start, before) }
            // Those quakes' rows as the page goes: what its transactions so far wrote or removed.
            var written: [String: IOQuaked.Quake?] = [:]
            for (n, transaction) in following.enumerated() {
                try transaction.changes.withUnsafeBufferPointer { changes in
                    for i in changes.indices where changes[i].quake?.time == nil {
                        guard changes[i].kind == .update || changes[i].kind == .leave else { continue }
                        let id = changes[i].quakeId
                        let row = try written[id] ?? Self.quake(db, id: id)
                        if let row { before[n][id] = row }
                    }
                    for i in changes.indices where wanted.contains(changes[i].quakeId) {
                        switch changes[i].kind {
                        case .insert, .update, .enter:
                            if let quake = changes[i].quake { written[changes[i].quakeId] = .some(quake) }
                        case .delete, .leave:
                            written[changes[i].quakeId] = .some(nil)
                        }
                    }
                }
            }
            return (start, before)
        }
    }

    /// Applies `transactions` (consecutive, oldest first) of `storeId` in one SQLite transaction,
    /// queuing `outbox` in it, and moves the token to the last one's. Returns false, changing
    /// nothing, when the cache is not at a position the first follows.
    ///
    /// Each quake is written once, as the last of the transactions' changes to it leaves it (a
    /// row, or none): a history reply carries each quake as it is now, so a quake revised in
    /// several of the page's transactions would otherwise be written again with the same row.
    @discardableResult
    public func apply(page transactions: ArraySlice<IOQuaked.Transaction>, storeId: String, outbox: [OutboxEntry] = [])
        throws -> Bool
    {
        guard let first = transactions.first?.token, let last = transactions.last?.token else { return false }
        let now = QuakeTime.now()
        return try writer.write { db in
            guard let position = try Self.position(db), position.storeId == storeId, position.token < first else {
                return false
            }
            try Self.enqueue(db, outbox)
            var upsert = try Upsert(db, table: "quakes")
            let delete = try db.cachedStatement(sql: "DELETE FROM quakes WHERE id = ?")
            // Each quake's last change that writes (a row, or its removal), found from the end;
            // then written in the page's order.
            var seen = Set<String>()
            var writes: [(transaction: Int, change: Int)] = []
            for t in transactions.indices.reversed() {
                transactions[t].changes.withUnsafeBufferPointer { changes in
                    for i in changes.indices.reversed() {
                        // Without a quake: removed by a later transaction, which removes it here too.
                        guard changes[i].quake?.time != nil || changes[i].kind == .delete || changes[i].kind == .leave,
                            seen.insert(changes[i].quakeId).inserted
                        else { continue }
                        writes.append((t, i))
                    }
                }
            }
            for (t, i) in writes.reversed() {
                try transactions[t].changes.withUnsafeBufferPointer { changes in
                    switch changes[i].kind {
                    case .insert, .update, .enter: try upsert.write(changes[i].quake!)
                    case .delete, .leave: try delete.execute(arguments: [changes[i].quakeId])
                    }
                }
            }
            try db.cachedStatement(sql: "UPDATE position SET token = ?, appliedAt = ?")
                .execute(arguments: [last, now])
            return true
        }
    }

    /// Moves the token on past transactions a filter left out (nothing in them to apply).
    public func advance(storeId: String, to token: Int) throws {
        let now = QuakeTime.now()
        try writer.write { db in
            try db.execute(
                sql: "UPDATE position SET token = ?, appliedAt = ? WHERE storeId = ? AND token < ?",
                arguments: [token, now, storeId, token])
        }
    }

    /// Starts a reset: empties the staging table.
    public func beginReset() throws {
        try writer.write { db in try db.execute(sql: "DELETE FROM staging") }
    }

    /// Adds one snapshot page to the staging table.
    public func stage(_ quakes: [IOQuaked.Quake]) throws {
        try writer.write { db in
            var upsert = try Upsert(db, table: "staging")
            for quake in quakes { try upsert.write(quake) }
        }
    }

    /// Replaces the rows by the staged snapshot and sets the position, in one transaction.
    /// Returns how many quakes the cache now holds.
    @discardableResult
    public func finishReset(storeId: String, token: Int, filter: String? = nil) throws -> Int {
        let now = QuakeTime.now()
        return try writer.write { db in
            try db.execute(sql: "DELETE FROM quakes")
            try db.execute(sql: "INSERT INTO quakes SELECT * FROM staging")
            try db.execute(sql: "DELETE FROM staging")
            try db.execute(
                sql: "INSERT OR REPLACE INTO position (one, storeId, token, appliedAt, filter) VALUES (1, ?, ?, ?, ?)",
                arguments: [storeId, token, now, filter])
            return try Int.fetchOne(db, sql: "SELECT count(*) FROM quakes") ?? 0
        }
    }

    public func count() throws -> Int {
        try writer.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM quakes") ?? 0 }
    }

    public func quake(id: String) throws -> IOQuaked.Quake? {
        try writer.read { db in try Self.quake(db, id: id) }
    }

    /// The `count` newest cached quakes, oldest of them first.
    public func newest(_ count: Int) throws -> [IOQuaked.Quake] {
        try writer.read { db in
            try String.fetchAll(
                db, sql: "SELECT quake FROM quakes ORDER BY time DESC, id DESC LIMIT ?", arguments: [max(0, count)]
            ).map(Self.decode).reversed()
        }
    }

    /// Every cached quake, ordered by id.
    public func allQuakes() throws -> [IOQuaked.Quake] {
        try writer.read { db in
            try String.fetchAll(db, sql: "SELECT quake FROM quakes ORDER BY id").map(Self.decode)
        }
    }

    /// Quakes matching `filter`, newest first, with how many match before `limit`.
    public func query(_ filter: QuakeFilter, limit: Int? = nil) throws -> (quakes: [IOQuaked.Quake], total: Int) {
        try writer.read { db in
            var sql = "SELECT quake FROM quakes WHERE 1"
            var arguments: StatementArguments = []
            if let min = filter.minMagnitude {
                sql += " AND mag >= ?"
                arguments += [min]
            }
            if let since = filter.since {
                sql += " AND time >= ?"
                arguments += [since]
            }
            sql += " ORDER BY time DESC, id"
            let matching = try String.fetchCursor(db, sql: sql, arguments: arguments).map(Self.decode)
                .filter { filter.matches(QuakeImage($0)) }
            var quakes: [IOQuaked.Quake] = []
            var total = 0
            while let quake = try matching.next() {
                total += 1
                if limit.map({ quakes.count < $0 }) ?? true { quakes.append(quake) }
            }
            return (quakes, total)
        }
    }

    private static func quake(_ db: Database, id: String) throws -> IOQuaked.Quake? {
        // Cached: a catch-up reads one row for each change whose quake a later one removed.
        try String.fetchOne(db.cachedStatement(sql: "SELECT quake FROM quakes WHERE id = ?"), arguments: [id]).map(decode)
    }

    /// Writes quakes with their JSON: encoded by the generated type into one reused buffer and
    /// bound through SQLite's C API (a catch-up writes 100,000 of these; GRDB's boxed arguments
    /// and a buffer per quake cost more than the SQL itself).
    struct Upsert {
        let db: Database
        let statement: Statement
        var json = JSONWriter(capacity: 2048)

        init(_ db: Database, table: String) throws {
            self.db = db
            statement = try db.cachedStatement(
                sql: "INSERT OR REPLACE INTO \(table) (id, time, mag, type, lat, lon, quake) VALUES (?, ?, ?, ?, ?, ?, ?)")
        }

        mutating func write(_ quake: IOQuaked.Quake) throws {
            let s = statement.sqliteStatement
            json.bytes.removeAll(keepingCapacity: true)
            quake.write(to: &json)
            Self.bind(s, 1, quake.id)
            sqlite3_bind_int64(s, 2, Int64(quake.time))
            if let mag = quake.mag { sqlite3_bind_double(s, 3, mag) } else { sqlite3_bind_null(s, 3) }
            if let type = quake.type { Self.bind(s, 4, type) } else { sqlite3_bind_null(s, 4) }
            if let lat = quake.lat { sqlite3_bind_double(s, 5, lat) } else { sqlite3_bind_null(s, 5) }
            if let lon = quake.lon { sqlite3_bind_double(s, 6, lon) } else { sqlite3_bind_null(s, 6) }
            // The JSON is bound without a copy (SQLITE_STATIC): the buffer stays as it is until
            // the step is done and the statement reset, which releases it.
            let code = json.bytes.withUnsafeBytes { bytes in
                let base = bytes.baseAddress ?? UnsafeRawPointer(bitPattern: 1)!
                sqlite3_bind_text(s, 7, base.assumingMemoryBound(to: CChar.self), Int32(bytes.count), nil)
                let code = sqlite3_step(s)
                sqlite3_reset(s)
                return code
            }
            guard code == SQLITE_DONE else {
                let message = String(cString: sqlite3_errmsg(db.sqliteConnection))
                throw DatabaseError(resultCode: ResultCode(rawValue: code), message: message, sql: statement.sql)
            }
        }

        private static func bind(_ s: OpaquePointer, _ index: Int32, _ text: String) {
            var text = text
            text.withUTF8 { bind(s, index, UnsafeRawBufferPointer($0)) }
        }

        /// Text, copied by SQLite (SQLITE_TRANSIENT), with its byte count (it may hold U+0000).
        private static func bind(_ s: OpaquePointer, _ index: Int32, _ bytes: UnsafeRawBufferPointer) {
            let base = bytes.baseAddress ?? UnsafeRawPointer(bitPattern: 1)!  // "" is text, not NULL
            sqlite3_bind_text(
                s, index, base.assumingMemoryBound(to: CChar.self), Int32(bytes.count),
                unsafeBitCast(-1, to: sqlite3_destructor_type.self))
        }
    }

    /// A cached quake, as a reply is read: members this build does not know (a cache written
    /// by a newer quakectl, before a downgrade) are skipped.
    private static func decode(_ json: String) throws -> IOQuaked.Quake {
        try IOQuaked.Quake.decode(json: Array(json.utf8), unknownMembers: .skip)
    }
}

extension IOQuaked.Filter {
    /// The filter's canonical form (its JSON, fields in the interface's order), which a cache
    /// records and compares:
    /// nil for no filter, or one that lets every quake through.
    public var key: String? {
        var json = JSONWriter(capacity: 256)
        write(to: &json)
        let text = String(decoding: json.bytes, as: UTF8.self)
        return text == "{}" ? nil : text
    }
}
