import Foundation
import GRDB
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

    init(db: Database, report: ImportReport, now: Date) throws {
        self.db = db
        self.report = report
        self.recorder = try HistoryRecorder(db: db, author: .import, source: report.source, now: now)
        select = try RawStatement(db, sql: "SELECT \(QuakeColumns.list) FROM quakes WHERE id = ?")
        insert = try RawStatement(
            db, sql: "INSERT INTO quakes (\(QuakeColumns.list)) VALUES (\(QuakeColumns.placeholders))")
        // Parameters in column order, `id` first, so one bind function serves insert and update.
        update = try RawStatement(db, sql: "UPDATE quakes SET \(QuakeColumns.assignments) WHERE id = ?1")
        delete = try RawStatement(db, sql: "DELETE FROM quakes WHERE id = ?")
    }

    /// Reads the whole document from `pipe` and applies it. Throws ``ImportError``.
    mutating func run(pipe: ChunkPipe, maxBytes: Int?) throws -> ImportReport {
        var parser = FeedParser()
        do {
            while let chunk = try pipe.receive() {
                if let maxBytes, parser.bytesConsumed + chunk.count > maxBytes {
                    throw ImportError(
                        kind: .tooLarge,
                        message: "the feed is larger than the maximum of \(maxBytes) bytes",
                        byteOffset: maxBytes, featureIndex: parser.featureCount)
                }
                try parser.consume(chunk) { item in try apply(item) }
            }
            try parser.finish()
        } catch let error as FeedError {
            throw ImportError(error)
        } catch let error as ImportError {
            throw error
        } catch is CancellationError {
            throw ImportError(
                kind: .cancelled, message: "the import was cancelled", byteOffset: parser.bytesConsumed,
                featureIndex: parser.featureCount)
        } catch let error as DatabaseError {
            throw ImportError(
                kind: .storage, message: "SQLite refused the write: \(error.message ?? "\(error)")",
                byteOffset: parser.bytesConsumed, featureIndex: parser.featureCount)
        } catch {
            throw ImportError(
                kind: .source, message: "reading the feed failed: \(error)", byteOffset: parser.bytesConsumed,
                featureIndex: parser.featureCount)
        }
        report.features = parser.featureCount
        report.bytes = parser.bytesConsumed
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
        let stored = try fetch(incoming.id)
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
            insert.reset()
            QuakeColumns.bind(incoming, to: insert)
            try insert.step()
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
            changes.append(FieldChange(field: QuakeColumns.names[i], old: FieldValue(old[i]), new: FieldValue(values[i])))
        }
        update.reset()
        QuakeColumns.bind(incoming, to: update)
        try update.step()
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
        // Fast path: most features list only themselves (",id,").
        guard let ids = feature.ids, ids.utf8.dropFirst().dropLast().contains(UInt8(ascii: ",")) else { return [] }
        var rows: [FeedFeature] = []
        for alias in feature.aliasIDs where alias != feature.id {
            if let row = try fetch(alias) { rows.append(row) }
        }
        return rows
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
