import Foundation
import GRDB
import GRDBSQLite
import QuakeFeed

/// The body of one import: runs inside a single write transaction, parsing chunks as they arrive
/// and applying each feature before reading the next, so memory holds one feature at a time.
///
/// Policy per feature (Apple's sample calls the overwrite rule "object trump"):
/// - stored under its `id` and the incoming `updated` is older: `stale`, ignored;
/// - stored and some field differs: overwritten whole, history records the changed fields;
/// - stored and identical: `unchanged`, nothing written;
/// - not stored: inserted.
///
/// Aliases. An event keeps the ids it was known by in `ids`, and the alias index (`quakeAliases`)
/// maps each of those other ids to the stored rows that list it. A feature is the same event as
/// a stored row under another id when one names the other: the feature lists the row's id (the
/// row is the event under its previous preferred id), or the row lists the feature's id (the
/// feature is a copy of the event under an id it had before, as a lagging feed sends it). Against
/// each such row, the feature wins (``supersedes(_:_:)``) when its `updated` is newer (or, on a
/// tie, when it lists more ids, then when its id is greater). If it wins
/// against all of them, each is deleted as `superseded` (by the feature's id) before the feature
/// is stored. If it loses to one, it is `stale`; and if its id is stored as an older row of its
/// own, that row is superseded by the winner: the newest word on the id says it is the winner's
/// event.
///
/// Features that only share a third id, neither naming the other, stay separate events: real
/// feeds carry two quakes hours apart that both list one tsunami-centre id. So when one document
/// carries Y (",Y,X,") and Z (",Z,X,") and X is stored, whichever comes first supersedes X (if
/// newer), and the other is stored beside it, as its own event.
///
/// Event retention. A feature whose event `time` is before `expireBefore` is left out before
/// anything else (one integer comparison), counted as skipped for the reason `expired`: stored
/// or not, the import does not touch it, so it never brings back a quake the retention pass
/// deleted, and a feed window longer than the retention makes no churn of inserts and deletes.
///
/// Upstream deletions. A feature whose `status` is `deleted` (an FDSN query with
/// `includedeleted=true` returns the events the USGS deleted that way) removes the stored rows of
/// its event, its own and those of its aliases, with the reason `deleted-upstream`, unless one of
/// them is newer than the deletion (the event came back upstream: the deletion is stale). A deletion of an event the store
/// does not hold is skipped for the reason `deleted`. Either way the deletion is remembered in
/// `upstreamDeletions` under each of the event's ids: a later feature of any of them no newer than
/// the deletion (a lagging copy of a summary feed, which never shows deletions) is skipped as
/// `deleted` rather than bringing the event back; a newer one is the event brought back upstream,
/// and is imported as usual. The retention pass forgets deletions of expired events.
struct FeedImport {
    let db: Database
    var recorder: HistoryRecorder
    var report: ImportReport
    /// The prepared statements on `quakes` (ImportStatements.swift).
    let statements: ImportStatements
    /// The alias index (AliasIndex.swift).
    var aliases: AliasIndex
    /// The upstream deletions remembered (UpstreamDeletions.swift).
    var deletions: UpstreamDeletions
    /// Whether the previous feature was new (see `apply`).
    var expectNew = true
    /// Features judged against a row that this import may still change or remove: the ones that
    /// lost to it, and the rows superseded. Judged again at the end (``settle()``, in
    /// FeedImport+Settle.swift).
    var undecided = Undecided()
    /// The position in `features` of the element being applied.
    var position = 0
    /// The secondary indexes of `quakes` dropped for this import, to build again at its end.
    private let deferredIndexes: [String]
    /// Features with an earlier event time (ms) are expired (`Int64.min`: no retention).
    private let expireBefore: Int64
    /// Features left out as expired; `report.skipped["expired"]` at the end.
    private var expired = 0

    init(
        db: Database, report: ImportReport, now: Date, expireBefore: Int64 = .min, author: HistoryAuthor = .import,
        commitSignal: CommitSignal, tables: ImportTables = .quakes
    ) throws {
        self.db = db
        self.report = report
        self.expireBefore = expireBefore
        self.recorder = try HistoryRecorder(
            db: db, author: author, source: report.source, now: now, commitSignal: commitSignal)
        if tables == .quakes {
            // Before the statements are prepared: a schema change makes them prepare again.
            let startsEmpty = try Bool.fetchOne(db, sql: "SELECT NOT EXISTS (SELECT 1 FROM quakes)") == true
            deferredIndexes = startsEmpty ? try Self.dropSecondaryIndexes(db) : []
            // Into an empty table, the import's history is exactly one insert per row it leaves
            // (an insert then an update is an insert; an insert then a delete is nothing): written
            // at the end in one statement, in key order, instead of one change row per feature.
            recorder.recordsInsertsOfTableAtFinish = startsEmpty
        } else {
            // The USGS source's reports (association mode): no history here, the changed ids
            // collected for the associator (QuakeStore+UsgsSource.swift).
            deferredIndexes = []
            recorder.collected = CollectedChanges()
        }
        statements = try ImportStatements(db, tables: tables)
        aliases = try AliasIndex(db, tables: tables)
        deletions = try UpstreamDeletions(db)
    }

    /// Applies the parsed document from `pipe` (parsed on the producer's side). Throws ``ImportError``.
    mutating func run(pipe: ChunkPipe) throws -> ImportReport {
        var bytesConsumed = 0
        var featureCount = 0
        do {
            while let batch = try pipe.receive() {
                var decoded = 0
                try batch.arena.withUnsafeBytes { arena in
                    try batch.elements.withUnsafeBufferPointer { elements in
                        for i in elements.indices {  // borrowed in place, not copied
                            featureCount = elements[i].index + 1
                            if try !apply(elements[i], arena: arena, batch: batch) { decoded += 1 }
                        }
                    }
                }
                // Mostly unchanged features: let the producer stop decoding them (see `apply`).
                pipe.decodeEagerly = decoded * 2 > batch.elements.count
                bytesConsumed = batch.bytesConsumed
                featureCount = batch.featureCount
            }
        } catch let error as FeedError {
            throw ImportError(error)
        } catch let error as FeedSink.TooLarge {
            throw ImportError(error)
        } catch let error as ImportError {
            throw error
        } catch let error as DatabaseError where error.resultCode == .SQLITE_INTERRUPT {
            // GRDB interrupts SQLite when the importing task is cancelled.
            throw ImportError(
                kind: .cancelled, message: "the import was cancelled", byteOffset: bytesConsumed,
                featureIndex: featureCount)
        } catch is CancellationError {
            throw ImportError(
                kind: .cancelled, message: "the import was cancelled", byteOffset: bytesConsumed,
                featureIndex: featureCount)
        } catch let error as DatabaseError {
            throw ImportError(
                kind: .storage, message: "SQLite refused the write: \(error.message ?? "\(error)")",
                byteOffset: bytesConsumed, featureIndex: featureCount)
        } catch let error as FileFeedError {
            // It names the file, the reason and what to check: said as it is, not wrapped again.
            throw ImportError(
                kind: .source, message: error.description, byteOffset: bytesConsumed, featureIndex: featureCount)
        } catch {
            throw ImportError(
                kind: .source, message: "reading the feed failed: \(error)", byteOffset: bytesConsumed,
                featureIndex: featureCount)
        }
        report.features = featureCount
        report.bytes = bytesConsumed
        if expired > 0 { report.skipped[ImportReport.expiredReason, default: 0] += expired }
        try settle()
        for sql in deferredIndexes { try db.execute(sql: sql) }
        // Inserted, updated and superseded are what the transaction holds, counted when it
        // finishes, not what was done on the way (an insert that a later feature superseded, an
        // update undone by a duplicate, cancel out).
        let committed = try recorder.finish()
        report.token = committed.token
        report.inserted = committed.inserted
        report.updated = committed.updated
        report.superseded = committed.superseded
        report.deleted = committed.deletedUpstream
        return report
    }

    /// For the first import into an empty table: drops the secondary indexes of `quakes` (time,
    /// magnitude: everything but the primary key, which dedupe needs) and returns their SQL.
    ///
    /// Building an index once from the finished table (one sort) costs far less than inserting
    /// 100,000 entries into it in random order. It all happens inside the import's transaction:
    /// readers never see the table without its indexes, and a failed import rolls the drop back.
    static func dropSecondaryIndexes(_ db: Database) throws -> [String] {
        let indexes = try Row.fetchAll(
            db,
            sql: "SELECT name, sql FROM sqlite_schema WHERE type = 'index' AND tbl_name = 'quakes' AND sql IS NOT NULL")
        for index in indexes {
            try db.execute(sql: "DROP INDEX \((index["name"] as String).quotedDatabaseIdentifier)")
        }
        return indexes.map { $0["sql"] }
    }

    /// Applies one element. Returns `true` when it was found unchanged by its hash alone, without
    /// decoding: the stored row was written from the very same bytes.
    private mutating func apply(_ element: ParsedElement, arena: UnsafeRawBufferPointer, batch: ParsedBatch) throws
        -> Bool
    {
        position = element.index
        switch element.content {
        case .record(let record):
            return try apply(record, arena: arena, hash: element.hash)
        case .skipped(let reason):
            report.skipped[reason.rawValue, default: 0] += 1
            return false
        case .raw(let id, let hasAliases, let location, let offset):
            // A feature listing other ids goes the long way: an alias may have been stored since.
            if let id, !hasAliases {
                var id = id
                let stored = try id.withUTF8({ try statements.storedHashAndTime(of: UnsafeRawBufferPointer($0)) })
                if let stored, stored.hash == element.hash {
                    // The stored row holds these very bytes, so its time is the feature's.
                    if stored.time < expireBefore {
                        expired += 1
                        return true
                    }
                    if undecided.isTracking { undecided.saw(id, at: position) }
                    return countUnchangedByHash()
                }
            }
            let (decoded, texts) = try batch.decode(location, index: element.index, offset: offset)
            switch decoded {
            case .record(let record):
                return try texts.withUnsafeBytes { try apply(record, arena: $0, hash: element.hash) }
            case .skipped(let reason, _):
                report.skipped[reason.rawValue, default: 0] += 1
                return false
            }
        }
    }

    /// Applies one decoded record: the two common cases (a new quake, a quake stored from the same
    /// bytes) straight from its arena, anything else as a ``FeedFeature``. An expired one is left
    /// out before anything else.
    private mutating func apply(_ record: FeatureRecord, arena: UnsafeRawBufferPointer, hash: UInt64) throws -> Bool {
        if record.time < expireBefore {
            expired += 1
            return false
        }
        // An upstream deletion goes the long way (see the type's documentation).
        if Self.isDeletedStatus(FeatureRecord.bytes(record.status, in: arena)) {
            return try apply(record.feature(in: arena), hash: hash)
        }
        let id = FeatureRecord.bytes(record.id, in: arena)
        // Only the features the import applies are the document's word on their id.
        if undecided.isTracking { undecided.saw(String(decoding: id, as: UTF8.self), at: position) }
        // A feature is most likely new when the previous one was: then try the insert first (its
        // unique index finds an existing row anyway) and skip the lookup. On a conflict, or when
        // most features already exist (a re-import), look first.
        // Never under an id the alias index gives to a stored row: that is the row's event, which
        // the long way judges.
        if expectNew && !record.hasAliases {
            if try !aliases.has(id), try !deletions.has(id) {
                try QuakeColumns.bindAndStep(record, arena: arena, hash: hash, statements.insert)
                if sqlite3_changes(db.sqliteConnection) == 1 {
                    try recorder.recordInsert(id: id)
                    return false
                }
            }
            expectNew = false
        }
        if !record.hasAliases, try statements.storedHash(of: id) == hash {
            return countUnchangedByHash()
        }
        return try apply(record.feature(in: arena), hash: hash)
    }

    /// Counts a feature found unchanged by its hash; returns `true` (see `apply`).
    mutating func countUnchangedByHash() -> Bool {
        report.unchanged += 1
        report.unchangedByHash += 1
        return true
    }
}
