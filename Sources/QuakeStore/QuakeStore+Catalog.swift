import Foundation
import GRDB
import QuakeAssociation
import QuakeFeed
import QuakeModel

/// A backfill job as the store keeps it (table `backfillJobs`).
public struct BackfillJobRecord: Sendable, Hashable {
    public enum State: String, Sendable, Hashable, CaseIterable {
        /// Waiting for the job before it (jobs run one at a time).
        case queued
        case running
        /// Every window up to `endTime` was imported.
        case done
        /// A window kept failing, or the catalog refused the query; `error` says why.
        case failed
        case cancelled

        /// Whether the job has ended (done, failed or cancelled).
        public var isFinished: Bool { self == .done || self == .failed || self == .cancelled }
    }

    public var id: Int64
    /// The FDSN event service's base URL (ending in `/`; `query` and `count` are appended).
    public var catalog: String
    /// Event times from `startTime` (inclusive) to `endTime` (exclusive), ms since the epoch.
    public var startTime: Int64
    public var endTime: Int64
    public var minMagnitude: Double?
    public var region: CatalogRegion?
    public var state: State
    public var createdAt: Int64
    public var finishedAt: Int64?
    /// The start of the next window: every event time before it was fetched and imported.
    public var cursor: Int64
    /// The window length the job last used (ms).
    public var span: Int64
    public var windowsDone: Int
    /// Features the catalog sent, over all windows done.
    public var eventsFetched: Int
    /// Of those, the ones that changed the store (inserted, updated or deleted).
    public var eventsImported: Int
    /// The newest history token a window of this job made.
    public var lastToken: HistoryToken?
    public var error: String?
    /// The configured fdsn source the job pages (`quakectl backfill --source NAME`): its windows
    /// are that source's reports. Nil for a USGS backfill (the `catalog`'s GeoJSON).
    public var source: String?
}

extension QuakeStore {
    // MARK: Backfill jobs

    /// Creates a backfill job in state `queued`, its cursor at `start`.
    public func createBackfillJob(
        catalog: String, start: Int64, end: Int64, minMagnitude: Double?, region: CatalogRegion?, span: Int64,
        source: String? = nil, now: Date = Date()
    ) async throws -> BackfillJobRecord {
        let regionJSON = try region.map { String(decoding: try JSONEncoder().encode($0), as: UTF8.self) }
        let id = try await pool.write { db in
            try db.execute(
                sql: """
                    INSERT INTO backfillJobs (catalog, startTime, endTime, minMagnitude, region, state, createdAt,
                        cursor, span, source)
                    VALUES (?, ?, ?, ?, ?, 'queued', ?, ?, ?, ?)
                    """,
                arguments: [
                    catalog, start, end, minMagnitude, regionJSON, Self.milliseconds(now), start, max(span, 1), source,
                ])
            return db.lastInsertedRowID
        }
        return try backfillJob(id: id)!
    }

    /// One job by id.
    public func backfillJob(id: Int64) throws -> BackfillJobRecord? {
        try pool.read { db in
            try Row.fetchOne(db, sql: "SELECT * FROM backfillJobs WHERE id = ?", arguments: [id]).map(Self.job)
        }
    }

    /// The newest `limit` jobs, newest first.
    public func backfillJobs(limit: Int = 100) throws -> [BackfillJobRecord] {
        try pool.read { db in
            try Row.fetchAll(db, sql: "SELECT * FROM backfillJobs ORDER BY id DESC LIMIT ?", arguments: [limit])
                .map(Self.job)
        }
    }

    /// The jobs that have not ended, oldest first: the order they run in.
    public func unfinishedBackfillJobs() throws -> [BackfillJobRecord] {
        try pool.read { db in
            try Row.fetchAll(
                db, sql: "SELECT * FROM backfillJobs WHERE state IN ('queued', 'running') ORDER BY id"
            ).map(Self.job)
        }
    }

    /// Sets a job's state (and its error); a finished state sets `finishedAt`. A job that already
    /// ended keeps its state: returns `false` then.
    @discardableResult
    public func setBackfillState(
        id: Int64, _ state: BackfillJobRecord.State, error: String? = nil, now: Date = Date()
    ) async throws -> Bool {
        try await pool.write { db in
            try db.execute(
                sql: """
                    UPDATE backfillJobs SET state = ?, error = ?, finishedAt = ?
                    WHERE id = ? AND state IN ('queued', 'running')
                    """,
                arguments: [
                    state.rawValue, error, state.isFinished ? Self.milliseconds(now) : nil, id,
                ])
            return db.changesCount > 0
        }
    }

    /// Records the window length a job now uses (after the catalog refused a window as too large,
    /// or after a sparse one).
    public func setBackfillSpan(id: Int64, span: Int64) async throws {
        try await pool.write { db in
            try db.execute(sql: "UPDATE backfillJobs SET span = ? WHERE id = ?", arguments: [max(span, 1), id])
        }
    }

    /// Imports one window of a backfill job as one history transaction (author `backfill`,
    /// source the query URL), and in the same SQLite transaction moves the job's cursor to
    /// `windowEnd` and adds the window to its counts: a restart resumes at the next window, and
    /// nothing is imported twice. Throws ``ImportError`` as ``importFeed(source:maxBytes:now:expiringBefore:feed:produce:)``
    /// does, leaving store and job untouched.
    public func importBackfillWindow(
        job id: Int64, windowEnd: Int64, span: Int64, source: String, maxBytes: Int? = nil, now: Date = Date(),
        expiringBefore: Date? = nil, association: AssociationConfiguration? = nil,
        produce: @escaping @Sendable (FeedSink) async throws -> Void
    ) async throws -> ImportReport {
        try await importDocument(
            source: source, author: .backfill, maxBytes: maxBytes, now: now, expiringBefore: expiringBefore,
            association: association, produce: produce
        ) { db, report in
            try Self.recordBackfillWindow(
                db, job: id, windowEnd: windowEnd, span: span, fetched: report.features,
                imported: report.inserted + report.updated + report.deleted, token: report.token)
        }
    }

    /// Imports one window of a backfill job of source `name` (``BackfillJobRecord/source``): its
    /// items as that source's reports, associated as its runs' are
    /// (``importSource(_:items:position:query:association:now:expiringBefore:)``), as one history
    /// transaction (author `backfill`, source the query URL), and in the same SQLite transaction
    /// moves the job's cursor to `windowEnd` and adds the window to its counts. The source's
    /// incremental position and its last run (``SourceState``) are left as they were: a backfill
    /// is not a run. A failure leaves store, job and associator untouched.
    public func importSourceBackfillWindow(
        job id: Int64, windowEnd: Int64, span: Int64, source name: String, items: [SourceItem], query: String,
        association: AssociationConfiguration, now: Date = Date(), expiringBefore: Date? = nil
    ) async throws -> SourceImportReport {
        let settings = sourceImportSettings
        let commitSignal = commitSignal
        return try await pool.write { db in
            let run = try Row.fetchOne(
                db, sql: "SELECT lastAttempt, lastSuccess, lastError, lastQuery FROM sources WHERE name = ?",
                arguments: [name])
            var recorder = try HistoryRecorder(
                db: db, author: .backfill, source: query, now: now, commitSignal: commitSignal)
            let report = try db.associateSourceItems(
                name, batches: [items], position: nil, query: query, association: association, now: now,
                expireBefore: expiringBefore.map(Self.milliseconds), settings: settings, recorder: &recorder)
            // The source's last run stays the last run's (NULL when it has not run yet).
            try db.execute(
                sql: "UPDATE sources SET lastAttempt = ?, lastSuccess = ?, lastError = ?, lastQuery = ? WHERE name = ?",
                arguments: [run?[0] as Int64?, run?[1] as Int64?, run?[2] as String?, run?[3] as String?, name])
            try Self.recordBackfillWindow(
                db, job: id, windowEnd: windowEnd, span: span, fetched: report.items, imported: report.applied,
                token: report.token)
            return report
        }
    }

    /// Moves backfill job `id`'s cursor to `windowEnd`, keeps the window length, and adds the
    /// window to its counts (`fetched` events read, `imported` applied; `token` the window's
    /// history transaction, if it changed anything), in the window's import transaction.
    static func recordBackfillWindow(
        _ db: Database, job id: Int64, windowEnd: Int64, span: Int64, fetched: Int, imported: Int,
        token: HistoryToken?
    ) throws {
        try db.execute(
            sql: """
                UPDATE backfillJobs SET cursor = ?, span = ?, windowsDone = windowsDone + 1,
                    eventsFetched = eventsFetched + ?, eventsImported = eventsImported + ?,
                    lastToken = coalesce(?, lastToken)
                WHERE id = ?
                """,
            arguments: [windowEnd, max(span, 1), fetched, imported, token, id])
    }

    static func job(_ row: Row) throws -> BackfillJobRecord {
        let regionText: String? = row["region"]
        return BackfillJobRecord(
            id: row["id"], catalog: row["catalog"], startTime: row["startTime"], endTime: row["endTime"],
            minMagnitude: row["minMagnitude"],
            region: try regionText.map { try JSONDecoder().decode(CatalogRegion.self, from: Data($0.utf8)) },
            state: BackfillJobRecord.State(rawValue: row["state"]) ?? .failed, createdAt: row["createdAt"],
            finishedAt: row["finishedAt"], cursor: row["cursor"], span: row["span"], windowsDone: row["windowsDone"],
            eventsFetched: row["eventsFetched"], eventsImported: row["eventsImported"], lastToken: row["lastToken"],
            error: row["error"], source: row["source"])
    }

    // MARK: Incremental catalog sync

    /// Imports one window of an incremental catalog sync as one history transaction (author
    /// `catalog`, source the query URL). Features whose status is `deleted` remove their event
    /// (reason `deleted-upstream`).
    public func importCatalogWindow(
        source: String, maxBytes: Int? = nil, now: Date = Date(), expiringBefore: Date? = nil,
        association: AssociationConfiguration? = nil, produce: @escaping @Sendable (FeedSink) async throws -> Void
    ) async throws -> ImportReport {
        try await importDocument(
            source: source, author: .catalog, maxBytes: maxBytes, now: now, expiringBefore: expiringBefore,
            association: association, produce: produce, finish: { _, _ in })
    }

    /// The last successful catalog sync of `url`: the time (ms) its first request was made.
    public func catalogPosition(url: String) throws -> Int64? {
        try pool.read { db in
            try Int64.fetchOne(db, sql: "SELECT lastSuccess FROM catalogState WHERE url = ?", arguments: [url])
        }
    }

    /// Records a successful catalog sync of `url` that began at `startedAt` (ms).
    public func recordCatalogSuccess(url: String, startedAt: Int64, now: Date = Date()) async throws {
        try await pool.write { db in
            try db.execute(
                sql: """
                    INSERT INTO catalogState (url, lastSuccess, updatedAt) VALUES (?, ?, ?)
                    ON CONFLICT (url) DO UPDATE SET lastSuccess = excluded.lastSuccess, updatedAt = excluded.updatedAt
                    """,
                arguments: [url, startedAt, Self.milliseconds(now)])
        }
    }

    /// The event times the store covers: its oldest and newest quake's (ms), or nil when empty.
    public func eventTimeSpan() throws -> (oldest: Int64, newest: Int64)? {
        try pool.read { db in
            guard let row = try Row.fetchOne(db, sql: "SELECT min(time), max(time) FROM quakes"),
                let oldest = row[0] as Int64?, let newest = row[1] as Int64?
            else { return nil }
            return (oldest, newest)
        }
    }
}
