import Foundation
import GRDB
import QuakeFeed

extension QuakeStore {
    /// Whether each write checks, before it commits, that its history transaction is consistent
    /// with the rows (``checkTransaction(_:token:)``): on in debug builds, and in any build with
    /// `QUAKED_CHECK_HISTORY=1` in the environment. A failed check fails the write, which rolls
    /// back: history never records what the rows did not do.
    static let checksHistory: Bool = {
        #if DEBUG
            true
        #else
            ProcessInfo.processInfo.environment["QUAKED_CHECK_HISTORY"] == "1"
        #endif
    }()

    /// Checks the whole store, in the style of SQLite's `PRAGMA integrity_check`: the SQLite file,
    /// then that history replays to the rows. Returns the problems found (at most `limit`), or
    /// an empty array when there are none.
    ///
    /// - the file passes `PRAGMA quick_check`;
    /// - the head token is the newest transaction's, or the last purged one when none is left;
    /// - every transaction has changes, and its counts are its change rows, by kind;
    /// - replayed in token order, each quake's changes are a valid sequence (an insert only when
    ///   it is absent, an update or a delete only when present), and the last one agrees with the
    ///   rows: stored after an insert or update, absent after a delete; with nothing purged, every
    ///   stored quake has changes;
    /// - the alias index holds exactly the other ids the stored rows list, each pointing to the
    ///   rows that list it, and no stored row's own id (that would be one event stored twice);
    /// - the source reports agree with their events (``checkSourceIntegrity(_:into:)``).
    ///
    /// One read transaction; it reads every row of history and of the store, so it takes about as
    /// long as reading them (about a second per million change rows).
    public func checkIntegrity(limit: Int = 100) throws -> [String] {
        try pool.read { db in
            var problems = IntegrityProblems(limit: limit)
            try Self.checkIntegrity(db, into: &problems)
            return problems.messages
        }
    }

    /// Checks one transaction before it commits: its change rows agree with the rows now.
    /// Throws when they do not.
    static func checkTransaction(_ db: Database, token: HistoryToken) throws {
        let wrong = try String.fetchAll(
            db,
            sql: """
                SELECT c.kind || ' ' || c.quakeId FROM historyChanges c
                WHERE c.token = ? AND (c.kind = 'delete') = EXISTS (SELECT 1 FROM quakes WHERE id = c.quakeId)
                LIMIT 5
                """,
            arguments: [token])
        if !wrong.isEmpty {
            throw DatabaseError(
                resultCode: .SQLITE_INTERNAL,
                message: "history transaction \(token) disagrees with the rows: \(wrong.joined(separator: ", "))")
        }
    }

    static func checkIntegrity(_ db: Database, into problems: inout IntegrityProblems) throws {
        for message in try String.fetchAll(db, sql: "PRAGMA quick_check") where message != "ok" {
            problems.add("sqlite: \(message)")
        }
        guard problems.isEmpty else { return }  // the rest reads a damaged file

        let head = try Self.head(db)
        let purged = try Self.purgedThrough(db)
        let bounds = try Row.fetchOne(db, sql: "SELECT min(token), max(token) FROM historyTransactions")!
        if let newest: HistoryToken = bounds[1] {
            if newest != head { problems.add("head token \(head) is not the newest transaction, \(newest)") }
            if let oldest: HistoryToken = bounds[0], oldest <= purged {
                problems.add("transaction \(oldest) is at or below the purged token \(purged)")
            }
        } else if head != purged {
            problems.add("head token \(head) has no transaction and is not the last purged token, \(purged)")
        }

        let counts = try Row.fetchCursor(
            db,
            sql: """
                SELECT t.token, t.inserted, t.updated, t.deleted,
                    coalesce(c.i, 0), coalesce(c.u, 0), coalesce(c.d, 0)
                FROM historyTransactions t LEFT JOIN (
                    SELECT token, total(kind = 'insert') AS i, total(kind = 'update') AS u,
                        total(kind = 'delete') AS d
                    FROM historyChanges GROUP BY token) c USING (token)
                WHERE t.inserted <> coalesce(c.i, 0) OR t.updated <> coalesce(c.u, 0)
                    OR t.deleted <> coalesce(c.d, 0) OR coalesce(c.i + c.u + c.d, 0) = 0
                ORDER BY t.token
                """)
        while let row = try counts.next() {
            let token: HistoryToken = row[0]
            let (i, u, d): (Int, Int, Int) = (row[4], row[5], row[6])
            if i + u + d == 0 {
                problems.add("transaction \(token) has no changes")
            } else {
                problems.add(
                    "transaction \(token) counts \(row[1] as Int)/\(row[2] as Int)/\(row[3] as Int) inserted/updated/deleted, its changes are \(i)/\(u)/\(d)"
                )
            }
        }
        for token in try HistoryToken.fetchAll(
            db,
            sql: """
                SELECT DISTINCT token FROM historyChanges
                WHERE token NOT IN (SELECT token FROM historyTransactions) ORDER BY token
                """)
        {
            problems.add("changes of token \(token) have no transaction")
        }

        // Replay, one quake at a time.
        let replay = try Row.fetchCursor(
            db,
            sql: """
                SELECT quakeId, token, kind,
                    lag(kind) OVER w AS previous,
                    lead(token) OVER w IS NULL AS last,
                    EXISTS (SELECT 1 FROM quakes WHERE id = quakeId) AS stored
                FROM historyChanges WINDOW w AS (PARTITION BY quakeId ORDER BY token)
                ORDER BY quakeId, token
                """)
        while let row = try replay.next() {
            let id: String = row[0]
            let token: HistoryToken = row[1]
            let kind: String = row[2]
            let previous: String? = row[3]
            let present = previous.map { $0 != "delete" }  // nil: unknown (purged) or never stored
            let wasPresent = present ?? (purged == 0 ? false : nil)
            if kind == "insert", wasPresent == true {
                problems.add("transaction \(token) inserts quake \(id), which is stored")
            } else if kind != "insert", wasPresent == false {
                problems.add("transaction \(token) \(kind)s quake \(id), which is not stored")
            }
            if row[4] as Bool {
                let stored: Bool = row[5]
                if stored != (kind != "delete") {
                    problems.add(
                        stored
                            ? "quake \(id) is stored, but history's last change (token \(token)) deletes it"
                            : "history's last change to quake \(id) (token \(token)) is an \(kind), but it is not stored"
                    )
                }
            }
        }
        if purged == 0 {
            for id in try String.fetchAll(
                db,
                sql: """
                    SELECT id FROM quakes q WHERE NOT EXISTS (SELECT 1 FROM historyChanges WHERE quakeId = q.id)
                    ORDER BY id LIMIT 20
                    """)
            {
                problems.add("quake \(id) is stored, but history never inserted it")
            }
        }

        // The alias index against the rows' `ids`.
        for row in try Row.fetchAll(
            db,
            sql: """
                SELECT a.alias, a.quakeId, q.id IS NOT NULL, EXISTS (SELECT 1 FROM quakes WHERE id = a.alias)
                FROM quakeAliases a LEFT JOIN quakes q ON q.id = a.quakeId
                WHERE q.id IS NULL OR instr(',' || coalesce(q.ids, '') || ',', ',' || a.alias || ',') = 0
                    OR EXISTS (SELECT 1 FROM quakes WHERE id = a.alias)
                ORDER BY a.alias LIMIT 20
                """)
        {
            let (alias, owner): (String, String) = (row[0], row[1])
            if !(row[2] as Bool) {
                problems.add("alias \(alias) points to quake \(owner), which is not stored")
            } else if row[3] as Bool {
                problems.add("alias \(alias) of quake \(owner) is also stored as a quake of its own")
            } else {
                problems.add("alias \(alias) points to quake \(owner), which does not list it")
            }
        }
        let indexed = try db.makeStatement(sql: "SELECT 1 FROM quakeAliases WHERE alias = ? AND quakeId = ?")
        let rows = try Row.fetchCursor(db, sql: "SELECT id, ids FROM quakes WHERE ids IS NOT NULL ORDER BY id")
        while let row = try rows.next(), !problems.isFull {
            var feature = FeedFeature(id: row[0], time: 0)
            feature.ids = row[1]
            for alias in feature.otherIDs where try Bool.fetchOne(indexed, arguments: [alias, feature.id]) != true {
                problems.add("quake \(feature.id) lists \(alias), which the alias index lacks")
            }
        }
        try checkSourceIntegrity(db, into: &problems)
    }
}

/// Problems found by ``QuakeStore/checkIntegrity(limit:)``, up to a limit.
struct IntegrityProblems {
    let limit: Int
    private(set) var messages: [String] = []

    var isEmpty: Bool { messages.isEmpty }
    var isFull: Bool { messages.count >= limit }

    mutating func add(_ message: String) {
        if !isFull { messages.append(message) }
    }
}
