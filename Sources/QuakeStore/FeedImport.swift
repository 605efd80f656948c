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
/// Before that, every other id the feature lists in `ids` that is stored as its own row is the same
/// event under its previous preferred id: that row is deleted as `superseded` (unless it is newer
/// than the incoming feature, which makes the feature stale).
struct FeedImport {
    private let db: Database
    private var recorder: HistoryRecorder
    private(set) var report: ImportReport
    private let select: RawStatement
    private let insert: RawStatement
    private let update: RawStatement
    private let delete: RawStatement
    /// Whether the previous feature was new (see `apply`).
    private var expectNew = true

    init(db: Database, report: ImportReport, now: Date) throws {
        self.db = db
        self.report = report
        self.recorder = try HistoryRecorder(db: db, author: .import, source: report.source, now: now)
        select = try RawStatement(db, sql: "SELECT \(QuakeColumns.list) FROM quakes WHERE id = ?")
        // OR IGNORE: a statement that cannot abort halfway needs no statement journal (a copy of
        // every page it touches). Only called when the id is not stored, so nothing is ignored
        // but a CHECK failure, which `insertRow` turns back into an error.
        insert = try RawStatement(
            db, sql: "INSERT OR IGNORE INTO quakes (\(QuakeColumns.list)) VALUES (\(QuakeColumns.placeholders))")
        // Parameters in column order, `id` first, so one bind function serves insert and update.
        update = try RawStatement(db, sql: "UPDATE quakes SET \(QuakeColumns.assignments) WHERE id = ?1")
        delete = try RawStatement(db, sql: "DELETE FROM quakes WHERE id = ?")
    }

    /// Applies the parsed document from `pipe` (parsed on the producer's side). Throws ``ImportError``.
    mutating func run(pipe: ChunkPipe) throws -> ImportReport {
        var bytesConsumed = 0
        var featureCount = 0
        do {
            while let batch = try pipe.receive() {
                for item in batch.items {
                    featureCount = item.index + 1
                    try apply(item)
                }
                bytesConsumed = batch.bytesConsumed
                featureCount = batch.featureCount
            }
        } catch let error as FeedError {
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
        } catch {
            throw ImportError(
                kind: .source, message: "reading the feed failed: \(error)", byteOffset: bytesConsumed,
                featureIndex: featureCount)
        }
        report.features = featureCount
        report.bytes = bytesConsumed
        report.token = try recorder.finish()
        return report
    }

    private mutating func apply(_ item: FeedItem) throws {
        switch item {
        case .skipped(let reason, _, _):
            report.skipped[reason.rawValue, default: 0] += 1
        case .feature(let feature, _):
            try apply(feature)
        }
    }

    private mutating func apply(_ incoming: FeedFeature) throws {
        let hasAliases = Self.hasAliases(incoming)
        // A feature is most likely new when the previous one was: then try the insert first (its
        // unique index finds an existing row anyway) and skip the lookup. On a conflict, or when
        // most features already exist (a re-import), take the lookup path below.
        if expectNew && !hasAliases {
            try QuakeColumns.bindAndStep(incoming, insert)
            if sqlite3_changes(db.sqliteConnection) == 1 {
                try recorder.recordInsert(id: incoming.id)
                report.inserted += 1
                return
            }
            expectNew = false
        }
        let stored: FeedFeature?
        select.reset()
        select.bind(1, incoming.id)
        if try select.step() {
            defer { select.reset() }  // no statement stays mid-step across the commit
            // The common re-import case, checked in place without decoding the row.
            if !hasAliases, QuakeColumns.storedRowMatches(incoming, select) {
                report.unchanged += 1
                return
            }
            stored = QuakeColumns.feature(from: select)
        } else {
            stored = nil
        }
        if let stored, Self.isOlder(incoming, than: stored) {
            report.stale += 1
            return
        }
        let aliases = try storedAliases(of: incoming)
        if aliases.contains(where: { Self.isOlder(incoming, than: $0) }) {
            report.stale += 1
            return
        }
        for alias in aliases {
            delete.reset()
            delete.bind(1, alias.id)
            try delete.step()
            try recorder.recordDelete(Self.tombstone(of: alias), reason: .superseded, supersededBy: incoming.id)
            report.superseded += 1
        }
        guard let stored else {
            expectNew = true
            try QuakeColumns.bindAndStep(incoming, insert)
            if sqlite3_changes(db.sqliteConnection) == 0 {
                throw DatabaseError(
                    resultCode: .SQLITE_CONSTRAINT, message: "quake \(incoming.id) violates a constraint of quakes")
            }
            try recorder.recordInsert(id: incoming.id)
            report.inserted += 1
            return
        }
        if stored == incoming {
            report.unchanged += 1
            return
        }
        let values = QuakeColumns.values(of: incoming)
        let old = QuakeColumns.values(of: stored)
        var changes: [FieldChange] = []
        for i in values.indices where values[i] != old[i] {
            changes.append(
                FieldChange(field: QuakeColumns.names[i], old: FieldValue(old[i]), new: FieldValue(values[i])))
        }
        try QuakeColumns.bindAndStep(incoming, update)
        try recorder.recordUpdate(id: incoming.id, fields: changes)
        report.updated += 1
    }

    private func fetch(_ id: String) throws -> FeedFeature? {
        select.reset()
        select.bind(1, id)
        guard try select.step() else { return nil }
        defer { select.reset() }  // no statement stays mid-step across the commit
        return QuakeColumns.feature(from: select)
    }

    /// Rows stored under the other ids the feature lists in `ids`.
    private func storedAliases(of feature: FeedFeature) throws -> [FeedFeature] {
        guard Self.hasAliases(feature) else { return [] }
        var rows: [FeedFeature] = []
        for alias in feature.aliasIDs where alias != feature.id {
            if let row = try fetch(alias) { rows.append(row) }
        }
        return rows
    }

    /// Whether `ids` may list other ids than the feature's own. Most features list only
    /// themselves (",id,"); this is `false` for them without splitting the list.
    static func hasAliases(_ feature: FeedFeature) -> Bool {
        guard let ids = feature.ids else { return false }
        return ids.utf8.dropFirst().dropLast().contains(UInt8(ascii: ","))
    }

    /// An incoming version is older only when both carry `updated` and the incoming one is smaller:
    /// a lagging CDN copy must never roll data back.
    static func isOlder(_ incoming: FeedFeature, than stored: FeedFeature) -> Bool {
        guard let new = incoming.updated, let old = stored.updated else { return false }
        return new < old
    }

    static func tombstone(of quake: FeedFeature) -> Tombstone {
        Tombstone(id: quake.id, code: quake.code, mag: quake.mag, place: quake.place, time: quake.time)
    }
}
