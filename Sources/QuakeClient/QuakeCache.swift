import Foundation
import GRDB
import GRDBSQLite
import QuakeProtocol
import Varlink

/// `watch`'s local copy of the store: the merged rows, the store id and the last applied token.
///
/// Every applied history transaction is one SQLite transaction that changes rows and token
/// together, so a crash never leaves them out of step. A reset (after an expired token or a
/// replaced store) streams the snapshot into a staging table, page by page, and swaps it in with
/// the new position in one final transaction: until then the old cache stays whole.
public struct QuakeCache: Sendable {
    /// Where the cache is, and which store and token its rows are as of.
    public struct Position: Sendable, Hashable {
        public var storeId: String
        public var token: Int
        /// When the cache last changed (ms since the epoch).
        public var appliedAt: Int64
    }

    public let path: String
    private let writer: any DatabaseWriter

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
        writer = try DatabasePool(path: path, configuration: configuration)
        self.path = path
        try Self.migrator.migrate(writer)
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
        return migrator
    }

    public func close() throws {
        try writer.close()
    }

    /// The store and token the rows are as of; `nil` for a cache never filled.
    public func position() throws -> Position? {
        try writer.read { db in try Self.position(db) }
    }

    private static func position(_ db: Database) throws -> Position? {
        try Row.fetchOne(db, sql: "SELECT storeId, token, appliedAt FROM position").map {
            Position(storeId: $0["storeId"], token: $0["token"], appliedAt: $0["appliedAt"])
        }
    }

    /// Applies one history transaction of `storeId` and moves the token to it, atomically.
    ///
    /// Returns what callers need to describe the change and that only the cache knows: the rows,
    /// as they were before, of updates that carry no quake (a later transaction removed it). Nil
    /// when the cache is not at a position this transaction follows (another store, or the
    /// transaction is already applied): nothing is applied twice.
    public func apply(_ transaction: IOQuaked.Transaction, storeId: String, now: Date = Date()) throws
        -> [String: IOQuaked.Quake]?
    {
        try writer.write { db in
            guard let position = try Self.position(db), position.storeId == storeId,
                position.token < transaction.token
            else { return nil }
            var before: [String: IOQuaked.Quake] = [:]
            var upsert = try Upsert(db, table: "quakes")
            let delete = try db.cachedStatement(sql: "DELETE FROM quakes WHERE id = ?")
            for change in transaction.changes {
                switch change.kind {
                case .insert, .update:
                    if let quake = change.quake {
                        try upsert.write(quake)
                    } else if change.kind == .update, let old = try Self.quake(db, id: change.quakeId) {
                        // Removed by a later transaction, which removes it here too when applied.
                        before[change.quakeId] = old
                    }
                case .delete:
                    try delete.execute(arguments: [change.quakeId])
                }
            }
            try db.execute(
                sql: "UPDATE position SET token = ?, appliedAt = ?",
                arguments: [transaction.token, Self.milliseconds(now)])
            return before
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
    public func finishReset(storeId: String, token: Int, now: Date = Date()) throws -> Int {
        try writer.write { db in
            try db.execute(sql: "DELETE FROM quakes")
            try db.execute(sql: "INSERT INTO quakes SELECT * FROM staging")
            try db.execute(sql: "DELETE FROM staging")
            try db.execute(
                sql: "INSERT OR REPLACE INTO position (one, storeId, token, appliedAt) VALUES (1, ?, ?, ?)",
                arguments: [storeId, token, Self.milliseconds(now)])
            return try Int.fetchOne(db, sql: "SELECT count(*) FROM quakes") ?? 0
        }
    }

    public func count() throws -> Int {
        try writer.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM quakes") ?? 0 }
    }

    public func quake(id: String) throws -> IOQuaked.Quake? {
        try writer.read { db in try Self.quake(db, id: id) }
    }

    /// Every cached quake, ordered by id.
    public func allQuakes() throws -> [IOQuaked.Quake] {
        try writer.read { db in
            try String.fetchAll(db, sql: "SELECT quake FROM quakes ORDER BY id").map(Self.decode)
        }
    }

    /// Quakes matching the filters, newest first, with how many match before `limit`.
    public func query(_ filter: QuakeFilter) throws -> (quakes: [IOQuaked.Quake], total: Int) {
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
            if let type = filter.type {
                sql += " AND type = ?"
                arguments += [type]
            }
            sql += " ORDER BY time DESC, id"
            let matching = try String.fetchCursor(db, sql: sql, arguments: arguments).map(Self.decode)
                .filter { filter.matchesNear($0) }
            var quakes: [IOQuaked.Quake] = []
            var total = 0
            while let quake = try matching.next() {
                total += 1
                if filter.limit.map({ quakes.count < $0 }) ?? true { quakes.append(quake) }
            }
            return (quakes, total)
        }
    }

    private static func quake(_ db: Database, id: String) throws -> IOQuaked.Quake? {
        try String.fetchOne(db, sql: "SELECT quake FROM quakes WHERE id = ?", arguments: [id]).map(decode)
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
            sqlite3_reset(s)
            sqlite3_clear_bindings(s)
            json.bytes.removeAll(keepingCapacity: true)
            quake.write(to: &json)
            Self.bind(s, 1, quake.id)
            sqlite3_bind_int64(s, 2, Int64(quake.time))
            if let mag = quake.mag { sqlite3_bind_double(s, 3, mag) }
            if let type = quake.type { Self.bind(s, 4, type) }
            if let lat = quake.lat { sqlite3_bind_double(s, 5, lat) }
            if let lon = quake.lon { sqlite3_bind_double(s, 6, lon) }
            json.bytes.withUnsafeBytes { Self.bind(s, 7, $0) }
            let code = sqlite3_step(s)
            guard code == SQLITE_DONE else {
                let message = String(cString: sqlite3_errmsg(db.sqliteConnection))
                sqlite3_reset(s)
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

    private static func decode(_ json: String) throws -> IOQuaked.Quake {
        try IOQuaked.Quake.decode(json: Array(json.utf8))
    }

    static func milliseconds(_ date: Date) -> Int64 {
        Int64((date.timeIntervalSince1970 * 1000).rounded())
    }
}

/// The filters of `list`, applied by the daemon (Query) or by the cache.
public struct QuakeFilter: Sendable, Hashable {
    public var minMagnitude: Double?
    /// ms since the epoch.
    public var since: Int?
    public var type: String?
    public var near: IOQuaked.Near?
    public var limit: Int?

    public init(
        minMagnitude: Double? = nil, since: Int? = nil, type: String? = nil, near: IOQuaked.Near? = nil,
        limit: Int? = nil
    ) {
        self.minMagnitude = minMagnitude
        self.since = since
        self.type = type
        self.near = near
        self.limit = limit
    }

    func matchesNear(_ quake: IOQuaked.Quake) -> Bool {
        guard let near else { return true }
        guard let lat = quake.lat, let lon = quake.lon else { return false }
        return Geodesy.distanceKm(lat1: near.lat, lon1: near.lon, lat2: lat, lon2: lon) <= near.radiusKm
    }
}

/// Great-circle distances on a spherical Earth (haversine, mean radius 6371.0088 km).
public enum Geodesy {
    public static func distanceKm(lat1: Double, lon1: Double, lat2: Double, lon2: Double) -> Double {
        let r = 6371.0088
        let toRad = Double.pi / 180
        let dLat = (lat2 - lat1) * toRad
        let dLon = (lon2 - lon1) * toRad
        let a = pow(sin(dLat / 2), 2) + cos(lat1 * toRad) * cos(lat2 * toRad) * pow(sin(dLon / 2), 2)
        return 2 * r * asin(min(1, sqrt(a)))
    }
}
