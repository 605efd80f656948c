import Foundation
import GRDB
import QuakeFeed
import QuakeModel

/// The database schema, as named migrations.
///
/// This is the one source of truth for the file format documented in docs/operations.md ("The
/// database file"). Migrations are never edited once shipped: change the schema by appending a
/// new one.
enum StoreSchema {
    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1-quakes-history") { db in
            // One row per store: its identity and how far history has been purged.
            try db.execute(
                sql: """
                    CREATE TABLE storeInfo (
                        singleton INTEGER PRIMARY KEY NOT NULL CHECK (singleton = 1),
                        storeId TEXT NOT NULL CHECK (length(storeId) = 36),
                        createdAt INTEGER NOT NULL,
                        -- history at or below this token has been purged: a client whose token is
                        -- older must start over from a snapshot.
                        purgedThrough INTEGER NOT NULL DEFAULT 0 CHECK (purgedThrough >= 0)
                    );
                    """)
            try db.execute(
                sql: "INSERT INTO storeInfo (singleton, storeId, createdAt) VALUES (1, ?, ?)",
                arguments: [UUID().uuidString.lowercased(), QuakeTime.now()])

            // Column names are the feed's property names; times are integer milliseconds.
            try db.execute(
                sql: """
                    CREATE TABLE quakes (
                        id TEXT PRIMARY KEY NOT NULL CHECK (id <> ''),
                        mag REAL, place TEXT,
                        time INTEGER NOT NULL, updated INTEGER, tz INTEGER,
                        url TEXT, detail TEXT, felt INTEGER, cdi REAL, mmi REAL, alert TEXT,
                        status TEXT CHECK (status = lower(status)),
                        tsunami INTEGER, sig INTEGER, net TEXT, code TEXT,
                        ids TEXT, sources TEXT, types TEXT, nst INTEGER,
                        dmin REAL, rms REAL, gap REAL, magType TEXT, type TEXT, title TEXT,
                        lon REAL, lat REAL, depth REAL
                    );
                    CREATE INDEX quakes_time ON quakes (time DESC);
                    CREATE INDEX quakes_mag ON quakes (mag DESC);
                    """)

            // One row per write that changed anything. AUTOINCREMENT: a token is never reused,
            // even after the newest transactions are purged.
            try db.execute(
                sql: """
                    CREATE TABLE historyTransactions (
                        token INTEGER PRIMARY KEY AUTOINCREMENT,
                        author TEXT NOT NULL,
                        timestamp INTEGER NOT NULL,
                        source TEXT,
                        inserted INTEGER NOT NULL DEFAULT 0,
                        updated INTEGER NOT NULL DEFAULT 0,
                        deleted INTEGER NOT NULL DEFAULT 0
                    );
                    CREATE INDEX historyTransactions_timestamp ON historyTransactions (timestamp);
                    CREATE TABLE historyChanges (
                        -- a historyTransactions token; its changes go with it (trigger below: a
                        -- foreign key would cost a parent lookup and a statement journal per row)
                        token INTEGER NOT NULL,
                        quakeId TEXT NOT NULL,
                        kind TEXT NOT NULL CHECK (kind IN ('insert', 'update', 'delete')),
                        -- update: JSON array of {"field", "old", "new"}
                        fields TEXT CHECK ((kind = 'update') = (fields IS NOT NULL)),
                        -- delete: JSON object {"id", "code", "mag", "place", "time"}
                        tombstone TEXT CHECK ((kind = 'delete') = (tombstone IS NOT NULL)),
                        reason TEXT CHECK ((kind = 'delete') = (reason IS NOT NULL)),
                        supersededBy TEXT CHECK (supersededBy IS NULL OR reason = 'superseded'),
                        PRIMARY KEY (token, quakeId)
                    ) WITHOUT ROWID;
                    CREATE TRIGGER historyTransactions_cascade AFTER DELETE ON historyTransactions
                    BEGIN
                        DELETE FROM historyChanges WHERE token = old.token;
                    END;
                    """)
        }
        migrator.registerMigration("v2-clients") { db in
            // Durable client names and the last token each acknowledged: history they still
            // need is kept (up to history-hard-max-age).
            try db.execute(
                sql: """
                    CREATE TABLE clients (
                        name TEXT PRIMARY KEY NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
                        token INTEGER NOT NULL CHECK (token >= 0),
                        lastSeen INTEGER NOT NULL
                    );
                    """)
        }
        migrator.registerMigration("v3-feed-hash") { db in
            // XXH64 of the feature's bytes as last imported (FeedElement.hash, seeded with the
            // decoder's version): a re-import finds an unchanged feature by its id and this hash
            // without decoding it. NULL for rows written before this column existed, which are
            // compared field by field instead.
            try db.execute(sql: "ALTER TABLE quakes ADD COLUMN feedHash INTEGER")
        }
        migrator.registerMigration("v4-history-kind-check") { db in
            // Same table, same rows; only `kind`'s CHECK is spelled without IN: SQLite builds an
            // ephemeral table for `IN (list)` on every statement it checks, which made each
            // change row cost about twice as much to write. Rebuilt as SQLite's ALTER TABLE
            // documentation describes; the trigger that names the table is dropped first and
            // made again, or the rename would fail on it.
            try db.execute(
                sql: """
                    DROP TRIGGER historyTransactions_cascade;
                    CREATE TABLE historyChanges_v4 (
                        token INTEGER NOT NULL,
                        quakeId TEXT NOT NULL,
                        kind TEXT NOT NULL CHECK (kind = 'insert' OR kind = 'update' OR kind = 'delete'),
                        fields TEXT CHECK ((kind = 'update') = (fields IS NOT NULL)),
                        tombstone TEXT CHECK ((kind = 'delete') = (tombstone IS NOT NULL)),
                        reason TEXT CHECK ((kind = 'delete') = (reason IS NOT NULL)),
                        supersededBy TEXT CHECK (supersededBy IS NULL OR reason = 'superseded'),
                        PRIMARY KEY (token, quakeId)
                    ) WITHOUT ROWID;
                    INSERT INTO historyChanges_v4 (token, quakeId, kind, fields, tombstone, reason, supersededBy)
                        SELECT token, quakeId, kind, fields, tombstone, reason, supersededBy FROM historyChanges;
                    DROP TABLE historyChanges;
                    ALTER TABLE historyChanges_v4 RENAME TO historyChanges;
                    CREATE TRIGGER historyTransactions_cascade AFTER DELETE ON historyTransactions
                    BEGIN
                        DELETE FROM historyChanges WHERE token = old.token;
                    END;
                    """)
        }
        migrator.registerMigration("v5-typed-field-values") { db in
            // Update changes' old and new values become the interface's FieldValue objects
            // ({"float": 4.5}, {"int": ...}, {"string": ...}; null leaves the member out), so that
            // FetchHistory sends the stored JSON as it is and it conforms to io.quaked's
            // FieldChange (a bare number or string in an `object` field did not). The tag follows
            // the column's type; `->` keeps each number's text exactly as it was stored.
            let floats = QuakeColumns.realColumns.map { "'\($0)'" }.joined(separator: ", ")
            func tagged(_ member: String) -> String {
                """
                CASE
                    WHEN json_type(e.value, '$.\(member)') IS NULL OR json_type(e.value, '$.\(member)') = 'null' THEN NULL
                    WHEN json_extract(e.value, '$.field') IN (\(floats)) THEN json_object('float', json(e.value -> '$.\(member)'))
                    WHEN json_type(e.value, '$.\(member)') = 'integer' THEN json_object('int', json(e.value -> '$.\(member)'))
                    ELSE json_object('string', e.value ->> '$.\(member)')
                END
                """
            }
            try db.execute(
                sql: """
                    UPDATE historyChanges SET fields = (
                        SELECT json_group_array(json(json_patch(
                            json_object('field', json_extract(e.value, '$.field')),
                            json_object('old', \(tagged("old")), 'new', \(tagged("new"))))))
                        FROM json_each(historyChanges.fields) e)
                    WHERE fields IS NOT NULL
                    """)
        }
        migrator.registerMigration("v6-alias-index") { db in
            // The alias index: every other id a stored row lists in `ids`, pointing to that row.
            // A feature that arrives under an id found here is the listing row's event (newer, or
            // a stale copy), never a second copy of it. Entries leave with their quake (the
            // trigger); the import adds them.
            try db.execute(
                sql: """
                    CREATE TABLE quakeAliases (
                        alias TEXT NOT NULL,
                        quakeId TEXT NOT NULL,
                        PRIMARY KEY (alias, quakeId)
                    ) WITHOUT ROWID;
                    CREATE INDEX quakeAliases_quakeId ON quakeAliases (quakeId);
                    CREATE TRIGGER quakes_aliases_cascade AFTER DELETE ON quakes
                    BEGIN
                        DELETE FROM quakeAliases WHERE quakeId = old.id;
                    END;
                    """)
            let insert = try db.makeStatement(sql: "INSERT OR IGNORE INTO quakeAliases (alias, quakeId) VALUES (?, ?)")
            let rows = try Row.fetchCursor(db, sql: "SELECT id, ids FROM quakes WHERE ids IS NOT NULL ORDER BY id")
            while let row = try rows.next() {
                var feature = FeedFeature(id: row[0], time: 0)
                feature.ids = row[1]
                for alias in feature.otherIDs {
                    try insert.execute(arguments: [alias, feature.id])
                }
            }
        }
        migrator.registerMigration("v7-feed-state") { db in
            // What quaked knows of each feed's server between restarts, by feed URL: the
            // validators (ETag, Last-Modified) of the body last imported, written in the import's
            // own transaction, so they never claim a body the store does not hold; and the
            // backoff of a failing feed. Bookkeeping of the pulls: no history.
            try db.execute(
                sql: """
                    CREATE TABLE feedState (
                        url TEXT PRIMARY KEY NOT NULL CHECK (url <> ''),
                        etag TEXT,
                        lastModified TEXT,
                        -- failed pulls in a row; 0 after a success
                        consecutiveFailures INTEGER NOT NULL DEFAULT 0 CHECK (consecutiveFailures >= 0),
                        -- ms since the epoch: no scheduled pull before this (the backoff after a
                        -- failure, or the server's Retry-After); NULL after a success
                        nextAttempt INTEGER,
                        -- ms since the epoch of the last write of this row
                        updatedAt INTEGER NOT NULL
                    ) WITHOUT ROWID;
                    """)
        }
        migrator.registerMigration("v8-history-images") { db in
            // What a filter looks at, kept with every change: the quake's values after an insert or
            // update, before a delete (`at…`), and for an update the old values of those of them it
            // changed (`atOld`, a JSON object of FieldValues by field, NULL when it changed none).
            // A filtered reader judges each change by the quake as it was then, not as it is now.
            // Rows written before this migration get the quake's values as stored now (inserts,
            // updates) or their tombstone's (deletes): close, not exact, for history older than
            // the upgrade.
            //
            // An import into an empty table (a first import: 100,000 inserts) leaves its inserts'
            // images out, and its token in historyDeferredImages: filling them would cost a random
            // read of every row. Until a later transaction changes such a quake, its row as stored
            // is its image; the transaction that first changes or deletes it fills the image in
            // (from the values before the change: its atOld, or its tombstone).
            // (Its own columns, fixed: QuakeImage.v8Columns; later ones have their own migrations.)
            for (column, source) in zip(QuakeImage.v8HistoryColumns, QuakeImage.v8Columns) {
                let type = ["mag", "lat", "lon"].contains(source) ? "REAL" : source == "time" || source == "tsunami" || source == "sig" ? "INTEGER" : "TEXT"
                try db.execute(sql: "ALTER TABLE historyChanges ADD COLUMN \(column) \(type)")
            }
            try db.execute(sql: "ALTER TABLE historyChanges ADD COLUMN atOld TEXT")
            try db.execute(sql: "CREATE TABLE historyDeferredImages (token INTEGER PRIMARY KEY NOT NULL)")
            let v8 = QuakeImage.v8Columns
            try db.execute(sql: HistoryImages.fillFromQuakes(v8) + " WHERE kind <> 'delete'")
            try db.execute(sql: HistoryImages.fillFromTombstones(v8) + " WHERE kind = 'delete'")
            try db.execute(sql: HistoryImages.fillOldValues(v8) + " WHERE kind = 'update'")
        }
        migrator.registerMigration("v9-client-errors") { db in
            // What a named client last reported it could not do (its `watch --exec` command
            // failing), until it next acknowledges without an error.
            try db.execute(sql: "ALTER TABLE clients ADD COLUMN lastError TEXT")
            try db.execute(sql: "ALTER TABLE clients ADD COLUMN lastErrorAt INTEGER")
        }
        migrator.registerMigration("v10-catalog") { db in
            // Upstream deletions remembered by event id (FeedImport: a lagging copy of a deleted
            // event is not brought back): the deletion's `updated` and the event's `time`, by
            // which the retention pass forgets them.
            try db.execute(
                sql: """
                    CREATE TABLE upstreamDeletions (
                        id TEXT PRIMARY KEY NOT NULL,
                        updated INTEGER NOT NULL,
                        time INTEGER NOT NULL
                    ) WITHOUT ROWID;
                    """)
            // Backfill jobs (quakectl backfill): what was asked, how far the job got, and how it
            // ended. `cursor` is the start of the next window: every event time before it was
            // fetched and imported, and it is written in the same SQLite transaction as the
            // window's import, so a restart (kill -9 included) resumes exactly there.
            try db.execute(
                sql: """
                    CREATE TABLE backfillJobs (
                        id INTEGER PRIMARY KEY AUTOINCREMENT,
                        catalog TEXT NOT NULL CHECK (catalog <> ''),
                        startTime INTEGER NOT NULL,
                        endTime INTEGER NOT NULL CHECK (endTime > startTime),
                        minMagnitude REAL,
                        -- the region: NULL, or CatalogRegion's JSON ({"near":{...}} or {"box":{...}})
                        region TEXT,
                        state TEXT NOT NULL CHECK (state = 'queued' OR state = 'running' OR state = 'done'
                            OR state = 'failed' OR state = 'cancelled'),
                        createdAt INTEGER NOT NULL,
                        finishedAt INTEGER,
                        cursor INTEGER NOT NULL,
                        -- the window length the job last used (ms)
                        span INTEGER NOT NULL CHECK (span > 0),
                        windowsDone INTEGER NOT NULL DEFAULT 0,
                        eventsFetched INTEGER NOT NULL DEFAULT 0,
                        eventsImported INTEGER NOT NULL DEFAULT 0,
                        lastToken INTEGER,
                        error TEXT,
                        CHECK (cursor BETWEEN startTime AND endTime)
                    );
                    """)
            // The incremental catalog sync's position, by catalog URL: the time of the last
            // successful run's first request (the next run asks for events updated after it,
            // less an overlap).
            try db.execute(
                sql: """
                    CREATE TABLE catalogState (
                        url TEXT PRIMARY KEY NOT NULL CHECK (url <> ''),
                        lastSuccess INTEGER NOT NULL,
                        updatedAt INTEGER NOT NULL
                    ) WITHOUT ROWID;
                    """)
        }
        migrator.registerMigration("v11-sources") { db in
            // Every source's reports (QuakeStore+Sources.swift): one agency's current solution for
            // one of its events, by the configured source's name and the agency's id. `links` is a
            // JSON array of strings (the other ids the agency gives the event); `event` is the id
            // of the event (the quake row) the report is associated with.
            try db.execute(
                sql: """
                    CREATE TABLE reports (
                        source TEXT NOT NULL,
                        id TEXT NOT NULL,
                        agency TEXT,
                        time INTEGER NOT NULL,
                        latitude REAL NOT NULL,
                        longitude REAL NOT NULL,
                        depth REAL, magnitude REAL, magnitudeType TEXT, place TEXT, eventType TEXT,
                        evaluationMode TEXT, evaluationStatus TEXT,
                        updated INTEGER,
                        links TEXT NOT NULL DEFAULT '[]',
                        event TEXT NOT NULL,
                        PRIMARY KEY (source, id)
                    ) WITHOUT ROWID;
                    CREATE INDEX reports_event ON reports (event);
                    CREATE INDEX reports_time ON reports (time);
                    """)
            // The associator's events: their ids are the quake rows' ids; `created` is the
            // creation order (Event.created); the preferred report is the one the row shows.
            try db.execute(
                sql: """
                    CREATE TABLE sourceEvents (
                        id TEXT PRIMARY KEY NOT NULL,
                        created INTEGER NOT NULL,
                        preferredSource TEXT,
                        preferredId TEXT
                    ) WITHOUT ROWID;
                    """)
            // Retracted reports: the newest retraction's `updated`, so that an older copy sent
            // again is ignored. Purged 30 days after `updated`.
            try db.execute(
                sql: """
                    CREATE TABLE reportTombstones (
                        source TEXT NOT NULL,
                        id TEXT NOT NULL,
                        updated INTEGER NOT NULL,
                        PRIMARY KEY (source, id)
                    ) WITHOUT ROWID;
                    """)
            // Each source's incremental position (ms: the start of its last successful run) and
            // its last run, for status.
            try db.execute(
                sql: """
                    CREATE TABLE sources (
                        name TEXT PRIMARY KEY NOT NULL,
                        position INTEGER,
                        lastAttempt INTEGER,
                        lastSuccess INTEGER,
                        lastError TEXT,
                        lastQuery TEXT
                    ) WITHOUT ROWID;
                    """)
            // One row: the associator's last creation number, and a generation counted up by every
            // source import, so that a process holding an associator in memory knows whether the
            // tables are still what it was built from.
            try db.execute(
                sql: """
                    CREATE TABLE associationState (
                        singleton INTEGER PRIMARY KEY NOT NULL CHECK (singleton = 1),
                        lastCreated INTEGER NOT NULL DEFAULT 0,
                        generation INTEGER NOT NULL DEFAULT 0
                    );
                    INSERT INTO associationState (singleton) VALUES (1);
                    """)
        }
        migrator.registerMigration("v12-usgs-reports") { db in
            // The USGS feed as the source `usgs` (association mode, QuakeStore+UsgsSource.swift):
            // the feed's rows as FeedImport writes them, with exactly the columns of `quakes` and
            // the feed hash, and their alias index. The published `quakes` rows are then the
            // events, made by the associator. The columns are QuakeRecord's as this migration
            // shipped (its SQL does not change with the declaration: v15 adds later fields).
            let columns = [
                "id TEXT PRIMARY KEY NOT NULL CHECK (id <> '')", "mag REAL", "place TEXT", "time INTEGER NOT NULL",
                "updated INTEGER", "tz INTEGER", "url TEXT", "detail TEXT", "felt INTEGER", "cdi REAL", "mmi REAL",
                "alert TEXT", "status TEXT CHECK (status = lower(status))", "tsunami INTEGER", "sig INTEGER", "net TEXT",
                "code TEXT", "ids TEXT", "sources TEXT", "types TEXT", "nst INTEGER", "dmin REAL", "rms REAL", "gap REAL",
                "magType TEXT", "type TEXT", "title TEXT", "lon REAL", "lat REAL", "depth REAL",
            ]
            try db.execute(
                sql: """
                    CREATE TABLE usgsReports (\(columns.joined(separator: ", ")), feedHash INTEGER);
                    CREATE TABLE usgsReportAliases (
                        alias TEXT NOT NULL,
                        quakeId TEXT NOT NULL,
                        PRIMARY KEY (alias, quakeId)
                    ) WITHOUT ROWID;
                    CREATE INDEX usgsReportAliases_quakeId ON usgsReportAliases (quakeId);
                    -- reports by id alone (any source): the namesakes a published event id has
                    -- (SourceImport.republishNamesakes), looked up for every changed event
                    CREATE INDEX reports_id ON reports (id);
                    CREATE TRIGGER usgsReports_aliases_cascade AFTER DELETE ON usgsReports
                    BEGIN
                        DELETE FROM usgsReportAliases WHERE quakeId = old.id;
                    END;
                    """)
            // Association mode: set by the first source import (or here, for a store that has
            // source state already); from then on every USGS import goes through `usgsReports` and
            // the associator.
            try db.execute(
                sql: """
                    ALTER TABLE associationState ADD COLUMN associated INTEGER NOT NULL DEFAULT 0;
                    UPDATE associationState SET associated =
                        EXISTS (SELECT 1 FROM reports) OR EXISTS (SELECT 1 FROM sources)
                        OR EXISTS (SELECT 1 FROM sourceEvents);
                    """)
        }
        migrator.registerMigration("v13-history-sources") { db in
            // The agencies (`sources`) as a filter image, as v8's: `atSources`, the quake's
            // `sources` after an insert or update, before a delete, and in an update's `atOld` when
            // it changed them. No agencies are kept as '' (a quake's NULL `sources`): a NULL
            // `atSources` means unknown, and a filtered reader then does not judge that change by
            // agency conditions at all (its other conditions still apply): it sends a change it
            // cannot rule out rather than miss one (a delete, say, that would leave the reader a
            // quake that is gone).
            // Rows written before this migration: non-deletes get the quake's agencies as stored
            // now (NULL when the quake is gone), deletes their tombstone's (NULL for tombstones
            // written before agency filters, which kept none); updates' atOld is written again
            // with `sources`. Deferred inserts (atTime NULL) stay deferred: the row as stored is
            // their image until a later change fills it in (HistoryImages.fillDeferred).
            try db.execute(sql: "ALTER TABLE historyChanges ADD COLUMN atSources TEXT")
            let sources = ["sources"]
            try db.execute(sql: HistoryImages.fillFromQuakes(sources) + " WHERE kind <> 'delete' AND atTime IS NOT NULL")
            try db.execute(sql: HistoryImages.fillFromTombstones(sources) + " WHERE kind = 'delete'")
            try db.execute(sql: HistoryImages.fillOldValues(QuakeImage.columns) + " WHERE kind = 'update'")
        }
        migrator.registerMigration("v14-source-backfill") { db in
            // Backfill of an fdsn source (`quakectl backfill --source NAME`): the job imports as
            // that source's reports; NULL is a USGS backfill, as before. The association's running
            // counts (reports that joined an event, events created, merged and split), kept with
            // the rest of its state.
            try db.execute(
                sql: """
                    ALTER TABLE backfillJobs ADD COLUMN source TEXT;
                    ALTER TABLE associationState ADD COLUMN joined INTEGER NOT NULL DEFAULT 0;
                    ALTER TABLE associationState ADD COLUMN created INTEGER NOT NULL DEFAULT 0;
                    ALTER TABLE associationState ADD COLUMN merged INTEGER NOT NULL DEFAULT 0;
                    ALTER TABLE associationState ADD COLUMN split INTEGER NOT NULL DEFAULT 0;
                    """)
        }
        migrator.registerMigration("v15-contributors") { db in
            // `agency` (the preferred report's) and `contributors` (every report of the event as
            // the canonical JSON of io.quaked's []Contributor), on `quakes` and, as usgsReports
            // keeps exactly the columns of quakes, on `usgsReports` (where they stay NULL). Plain
            // mode leaves them NULL.
            try db.execute(
                sql: """
                    ALTER TABLE quakes ADD COLUMN agency TEXT;
                    ALTER TABLE quakes ADD COLUMN contributors TEXT;
                    ALTER TABLE usgsReports ADD COLUMN agency TEXT;
                    ALTER TABLE usgsReports ADD COLUMN contributors TEXT;
                    """)
            // A store in association mode: each event's row gets its reports, without history
            // (a client that follows history sees them from the event's next change, or a
            // snapshot).
            let update = try db.makeStatement(sql: "UPDATE quakes SET agency = ?, contributors = ? WHERE id = ?")
            var event: String?
            var preferred: SourceReport?
            var members: [SourceReport] = []
            func fill() throws {
                guard let event, let preferred else { return }
                let (agency, contributors) = QuakeStore.contributorFields(preferred: preferred, members: members)
                try update.execute(arguments: [agency, contributors, event])
            }
            let rows = try Row.fetchCursor(
                db,
                sql: """
                    SELECT r.source, r.id, r.agency, r.time, r.latitude, r.longitude, r.depth, r.magnitude,
                        r.magnitudeType, r.evaluationMode, r.evaluationStatus, r.updated, r.event,
                        (r.source = e.preferredSource AND r.id = e.preferredId) AS preferred
                    FROM reports r JOIN sourceEvents e ON e.id = r.event
                    ORDER BY r.event, preferred DESC, r.source, r.id
                    """)
            while let row = try rows.next() {
                let id: String = row[12]
                if id != event {
                    try fill()
                    (event, preferred, members) = (id, nil, [])
                }
                let report = SourceReport(
                    source: row[0], id: row[1], agency: row[2], time: row[3], latitude: row[4], longitude: row[5],
                    depth: row[6], magnitude: row[7], magnitudeType: row[8],
                    evaluationMode: (row[9] as String?).flatMap(SourceReport.EvaluationMode.init(rawValue:)),
                    evaluationStatus: (row[10] as String?).flatMap(SourceReport.EvaluationStatus.init(rawValue:)),
                    updated: row[11])
                if row[13] as Bool { preferred = report }
                members.append(report)
            }
            try fill()
        }
        migrator.registerMigration("v16-history-quake-index") { db in
            // HistoryImages.fillDeferred finds a changed quake's deferred inserts by quake: without
            // this index SQLite probed historyChanges once per deferred token (one a transaction
            // that inserted, kept until history's purge) for every changed quake.
            try db.execute(sql: "CREATE INDEX historyChanges_quakeId ON historyChanges (quakeId, token)")
        }
        migrator.registerMigration("v17-association-parts") { db in
            // A source import associates a part of the store read from the tables (the whole
            // connected components its items touch: QuakeStore+AssociationPart.swift), not an
            // associator in memory holding every report. It follows id links both ways: the
            // reports whose `links` name an id come from this index of each report's links (its
            // own id and empty ids left out, as the associator leaves them out). Whoever writes
            // `reports` writes it (``ReportLinks``), not triggers: a trigger makes every report's
            // INSERT OR REPLACE keep a statement journal, which with 16 KiB pages spills to a
            // temporary file (ten writes a report). checkIntegrity compares it with `reports`.
            try db.execute(
                sql: """
                    CREATE TABLE reportLinks (
                        link TEXT NOT NULL,
                        source TEXT NOT NULL,
                        id TEXT NOT NULL,
                        PRIMARY KEY (link, source, id)
                    ) WITHOUT ROWID;
                    CREATE INDEX reportLinks_report ON reportLinks (source, id);
                    INSERT OR IGNORE INTO reportLinks (link, source, id)
                        SELECT l.value, r.source, r.id FROM reports r, json_each(r.links) l
                        WHERE r.links <> '[]' AND l.type = 'text' AND l.value <> '' AND l.value <> r.id;
                    """)
            // The configuration the stored events were grouped under (associate-time,
            // associate-distance, the preferences and the rules' version): an import under another
            // regroups the whole store once, then associates parts again. NULL, a store from
            // before this migration (whose associator was rebuilt in memory at each start): the
            // next import regroups the whole store. (`generation` is no longer counted or read: nothing
            // in memory needs to know whether the tables changed under it. The column stays.)
            try db.execute(sql: "ALTER TABLE associationState ADD COLUMN configuration TEXT")
        }
        return migrator
    }
}

/// The SQL that writes history's filter images (migration v8): each statement ends before its
/// WHERE, which the caller adds.
enum HistoryImages {
    /// The quake's value of image column `column` as history keeps it: no agencies as '' (a NULL
    /// `atSources` is unknown, migration v13).
    static func stored(_ column: String, from expression: String) -> String {
        storesNullAsEmpty(column) ? "coalesce(\(expression), '')" : expression
    }

    /// ``stored(_:from:)`` for a value in hand (the recorder's images).
    static func stored(_ column: String, value: DatabaseValue) -> DatabaseValue {
        storesNullAsEmpty(column) && value.isNull ? "".databaseValue : value
    }

    private static func storesNullAsEmpty(_ column: String) -> Bool { column == "sources" }

    static func assigned(_ columns: [String]) -> String {
        "(" + columns.map(QuakeImage.historyColumn).joined(separator: ", ") + ")"
    }

    /// Inserts and updates: the quake as stored (at the end of the transaction).
    static let fillFromQuakes = fillFromQuakes(QuakeImage.columns)
    static func fillFromQuakes(_ columns: [String]) -> String {
        """
        UPDATE historyChanges SET \(assigned(columns)) = (SELECT \(columns.map { stored($0, from: $0) }.joined(separator: ", "))
            FROM quakes WHERE quakes.id = historyChanges.quakeId)
        """
    }

    /// Deletes: the tombstone. (A tombstone without `sources` leaves `atSources` NULL: unknown.)
    static let fillFromTombstones = fillFromTombstones(QuakeImage.columns)
    static func fillFromTombstones(_ columns: [String]) -> String {
        """
        UPDATE historyChanges SET \(assigned(columns)) = (\(columns.map { "tombstone ->> '\($0)'" }.joined(separator: ", ")))
        """
    }

    /// The inserts of deferred-image transactions (see migration v8) whose quake the transaction
    /// `?1` changes or deletes: their images become the values before that change. Each changed
    /// quake's rows are found by the index on (quakeId, token) (migration v16), the deferred
    /// tokens only a filter on them (`+h.token`: not the loop, which probed every deferred token).
    static let fillDeferred: String = {
        let before = zip(QuakeImage.historyColumns, QuakeImage.columns).map { column, field in
            // atOld holds FieldValues: the member is the field's kind's (QuakeRecord.fields).
            let member = FieldValue.member(of: QuakeRecord.fields[QuakeRecord.index(of: field)!].kind)
            let old = stored(field, from: "json_extract(c.atOld, '$.\(field).\(member)')")
            return """
                CASE WHEN c.kind = 'update' AND json_type(c.atOld, '$.\(field)') IS NOT NULL
                    THEN \(old) ELSE c.\(column) END
                """
        }
        return """
            UPDATE historyChanges AS h SET \(assigned(QuakeImage.columns)) = (\(before.joined(separator: ", ")))
            FROM historyChanges AS c
            WHERE c.token = ?1 AND c.kind <> 'insert' AND h.quakeId = c.quakeId
                AND +h.token IN (SELECT token FROM historyDeferredImages) AND h.atTime IS NULL
            """
    }()

    /// Updates: the old values of the filter's fields the update changed (migrations; the
    /// recorder writes them with each update).
    static func fillOldValues(_ columns: [String]) -> String {
        "UPDATE historyChanges SET atOld = (\(oldValues(columns, of: "historyChanges")))"
    }

    /// The `atOld` of the update row `table` (its name or alias) from its `fields`. The recorder
    /// writes it directly (``HistoryRecorder/oldValuesJSON(_:)``); this is for migrations, and for
    /// debug builds to check the recorder against.
    static func oldValues(_ columns: [String], of table: String) -> String {
        """
        SELECT NULLIF(json_group_object(e.value ->> 'field', json(e.value -> 'old')), '{}')
            FROM json_each(\(table).fields) e
            WHERE e.value ->> 'field' IN (\(columns.map { "'\($0)'" }.joined(separator: ", ")))
        """
    }
}
