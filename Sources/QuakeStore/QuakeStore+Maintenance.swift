import Foundation
import GRDB
import QuakeFeed
import QuakeModel

/// The result of ``QuakeStore/delete(ids:now:)``.
public struct DeleteReport: Sendable, Hashable, Codable {
    /// The history token of the delete, or `nil` when none of the ids was stored.
    public var token: HistoryToken?
    public var deleted: [String]
    public var notFound: [String]
}

/// The result of ``QuakeStore/purgeHistory(olderThan:keepingAfter:now:)``.
public struct PurgeReport: Sendable, Hashable, Codable {
    /// Transactions removed.
    public var removed: Int
    /// History after this token is still complete.
    public var oldestToken: HistoryToken
}

extension QuakeStore {
    /// Deletes quakes by id as one history transaction (author `delete`, reason `deleted-by-user`).
    /// Ids that are not stored are reported, not an error. A later import brings back an event the
    /// feed still carries, as a new insert.
    ///
    /// In association mode (QuakeStore+UsgsSource.swift) an event's reports go with its row, in
    /// the same transaction, each leaving a retraction tombstone at its `updated` (and a usgs
    /// report an upstream deletion, see ``FeedImport``): a copy no newer than the deleted report,
    /// sent again by its source or the feed, does not bring the event back; a newer one does.
    public func delete(ids: [String], now: Date = Date()) async throws -> DeleteReport {
        try await pool.write { db in
            var recorder = try HistoryRecorder(
                db: db, author: .delete, source: nil, now: now, commitSignal: commitSignal)
            let associated = try Self.isAssociationMode(db)
            var deleted: [String] = []
            var notFound: [String] = []
            for id in Self.unique(ids) {
                guard let quake = try Self.fetchQuake(db, id: id) else {
                    notFound.append(id)
                    continue
                }
                try db.execute(sql: "DELETE FROM quakes WHERE id = ?", arguments: [id])
                try recorder.recordDelete(FeedImport.tombstone(of: quake), reason: .deletedByUser)
                if associated { try Self.removeEvent(db, id: id, tombstonesAt: Self.milliseconds(now)) }
                deleted.append(id)
            }
            return DeleteReport(token: try recorder.finish().token, deleted: deleted, notFound: notFound)
        }
    }

    /// Event retention: deletes quakes whose event `time` is older than `maxAge`, as one history
    /// transaction (author `retention`, reason `expired`). Returns its token, or `nil` when none expired.
    ///
    /// In association mode an expired event's reports (and their `usgsReports` rows) and its event
    /// go with its row; imports given `expiringBefore` do not bring them back.
    @discardableResult
    public func applyRetention(maxAge: Duration, now: Date = Date()) async throws -> HistoryToken? {
        let cutoff = Self.milliseconds(now) - Self.milliseconds(maxAge)
        return try await pool.write { db in
            var recorder = try HistoryRecorder(
                db: db, author: .retention, source: nil, now: now, commitSignal: commitSignal)
            let expired = try Row.fetchCursor(
                db, sql: "SELECT \(QuakeColumns.list) FROM quakes WHERE time < ?", arguments: [cutoff])
            var tombstones: [Tombstone] = []
            while let row = try expired.next() {
                tombstones.append(FeedImport.tombstone(of: QuakeColumns.feature(from: row)))
            }
            let associated = try Self.isAssociationMode(db)
            for tombstone in tombstones {
                try db.execute(sql: "DELETE FROM quakes WHERE id = ?", arguments: [tombstone.id])
                try recorder.recordDelete(tombstone, reason: .expired)
                if associated { try Self.removeEvent(db, id: tombstone.id, tombstonesAt: nil) }
            }
            // Upstream deletions of expired events: the import skips those events anyway.
            try db.execute(sql: "DELETE FROM upstreamDeletions WHERE time < ?", arguments: [cutoff])
            return try recorder.finish().token
        }
    }

    /// Removes history transactions older than `maxAge`, oldest first, but never one after
    /// `keepingAfter` (a named client still needs those). Afterwards, asking for history after a
    /// purged token gives ``HistoryError/tokenExpired(after:oldest:head:)``.
    @discardableResult
    public func purgeHistory(olderThan maxAge: Duration, keepingAfter: HistoryToken? = nil, now: Date = Date())
        async throws -> PurgeReport
    {
        let cutoff = Self.milliseconds(now) - Self.milliseconds(maxAge)
        return try await pool.write { db in
            let current = try Self.purgedThrough(db)
            // History is purged as a prefix, so that "complete after the oldest token" stays true
            // even if clocks moved backwards between transactions.
            var through =
                try HistoryToken.fetchOne(
                    db, sql: "SELECT max(token) FROM historyTransactions WHERE timestamp < ?", arguments: [cutoff])
                ?? current
            if let keepingAfter { through = min(through, keepingAfter) }
            guard through > current else { return PurgeReport(removed: 0, oldestToken: current) }
            try db.execute(sql: "DELETE FROM historyTransactions WHERE token <= ?", arguments: [through])
            let removed = db.changesCount
            try db.execute(sql: "DELETE FROM historyDeferredImages WHERE token <= ?", arguments: [through])
            try db.execute(sql: "UPDATE storeInfo SET purgedThrough = ?", arguments: [through])
            return PurgeReport(removed: removed, oldestToken: through)
        }
    }

    /// Association mode: removes the event `id` (its row is being deleted), its reports and
    /// their `usgsReports` rows. With `tombstonesAt` (now, ms), each report leaves a retraction
    /// tombstone at its `updated` (`now` without one), and a usgs report an upstream deletion
    /// under its ids, so that no copy but a newer one brings it back.
    static func removeEvent(_ db: Database, id: String, tombstonesAt now: Int64?) throws {
        let members = try Row.fetchAll(
            db, sql: "SELECT source, id, updated, time, links FROM reports WHERE event = ?", arguments: [id])
        for member in members {
            let source: String = member[0]
            let reportID: String = member[1]
            let updated: Int64? = member[2]
            if source == usgsSource {
                try db.execute(sql: "DELETE FROM usgsReports WHERE id = ?", arguments: [reportID])
            }
            guard let now else { continue }
            try db.execute(
                sql: "INSERT OR REPLACE INTO reportTombstones (source, id, updated) VALUES (?, ?, ?)",
                arguments: [source, reportID, updated ?? now])
            if source == usgsSource {
                let links: [String] =
                    (member[4] as String?).flatMap { try? JSONDecoder().decode([String].self, from: Data($0.utf8)) }
                    ?? []
                for deletedID in [reportID] + links {
                    try db.execute(
                        sql: "INSERT OR REPLACE INTO upstreamDeletions (id, updated, time) VALUES (?, ?, ?)",
                        arguments: [deletedID, updated ?? now, member[3] as Int64])
                }
            }
        }
        try ReportLinks.deleteLinks(ofEvent: id, db)
        try db.execute(sql: "DELETE FROM reports WHERE event = ?", arguments: [id])
        try db.execute(sql: "DELETE FROM sourceEvents WHERE id = ?", arguments: [id])
    }

    static func fetchQuake(_ db: Database, id: String) throws -> FeedFeature? {
        try Row.fetchOne(
            db.cachedStatement(sql: "SELECT \(QuakeColumns.list) FROM quakes WHERE id = ?"), arguments: [id]
        )
        .map { QuakeColumns.feature(from: $0) }
    }

    static func unique(_ ids: [String]) -> [String] {
        var seen = Set<String>()
        return ids.filter { seen.insert($0).inserted }
    }

    static func milliseconds(_ date: Date) -> Int64 {
        QuakeTime.milliseconds(date)
    }

    static func milliseconds(_ duration: Duration) -> Int64 {
        let (seconds, attoseconds) = duration.components
        return seconds * 1000 + attoseconds / 1_000_000_000_000_000
    }
}
