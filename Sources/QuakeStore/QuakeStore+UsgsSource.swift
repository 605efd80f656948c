import Foundation
import GRDB
import QuakeAssociation
import QuakeFeed
import QuakeModel

/// The USGS feed as the source `usgs` (docs/design/agencies.md, step 2).
///
/// Plain mode (a store that never had source state): the feed's imports write `quakes` directly,
/// as they always did. Association mode (`associationState.associated`, set by the first
/// ``QuakeStore/importSource(_:items:position:query:association:now:expiringBefore:)``): every
/// USGS import (feed, catalog, backfill) runs ``FeedImport`` against `usgsReports` (the same
/// columns and rules, its own alias index) with a recorder that writes no history but collects the
/// ids it changed; each becomes an item of source `usgs` (a report, or a retraction when the row
/// went), associated and published by the same core as a source import, in the same transaction.
/// An event with a usgs member takes the USGS-only fields from its `usgsReports` row; an event
/// whose only member is a usgs report publishes that row as it is.
extension QuakeStore {
    /// The source name of the USGS feed's reports.
    public static let usgsSource = "usgs"

    /// Whether the store is in association mode (see the extension's documentation).
    public func isAssociationMode() throws -> Bool {
        try pool.read { db in try Self.isAssociationMode(db) }
    }

    static func isAssociationMode(_ db: Database) throws -> Bool {
        try Bool.fetchOne(db.cachedStatement(sql: "SELECT associated FROM associationState")) == true
    }

    /// Enters association mode, once: the USGS rows of a plain-mode store become `usgs` reports,
    /// each its own event under its own id (``bootstrapUsgsReports(_:)``). Returns whether it did
    /// (the caller then publishes every event: the rows gain `agency` and `contributors`).
    @discardableResult
    static func enterAssociationMode(_ db: Database) throws -> Bool {
        guard try !isAssociationMode(db) else { return false }
        try bootstrapUsgsReports(db)
        try db.execute(sql: "UPDATE associationState SET associated = 1")
        return true
    }

    /// Copies the `quakes` rows (all the USGS feed's, in plain mode) into `usgsReports` and their
    /// alias index, and registers each as a `usgs` report that is its own event under the row's id.
    /// No history here: no row clients read changes yet; the caller then publishes the events,
    /// whose rows gain `agency` and `contributors` as updates. A row without a position (no report
    /// can be made of it) is copied but has no report, and keeps both null.
    static func bootstrapUsgsReports(_ db: Database) throws {
        try db.execute(
            sql: """
                INSERT INTO usgsReports (\(QuakeColumns.list), feedHash) SELECT \(QuakeColumns.list), feedHash FROM quakes;
                INSERT OR IGNORE INTO usgsReportAliases (alias, quakeId) SELECT alias, quakeId FROM quakeAliases;
                """)
        var created = try Int64.fetchOne(db, sql: "SELECT lastCreated FROM associationState") ?? 0
        let insertReport = try db.makeStatement(
            sql: """
                INSERT OR REPLACE INTO reports (source, id, agency, time, latitude, longitude, depth, magnitude,
                    magnitudeType, place, eventType, evaluationMode, evaluationStatus, updated, links, event)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """)
        let insertEvent = try db.makeStatement(
            sql: "INSERT OR REPLACE INTO sourceEvents (id, created, preferredSource, preferredId) VALUES (?, ?, ?, ?)")
        let rows = try Row.fetchCursor(db, sql: "SELECT \(QuakeColumns.list) FROM quakes ORDER BY time, id")
        while let row = try rows.next() {
            guard let report = usgsReport(from: QuakeColumns.feature(from: row)) else { continue }
            created += 1
            try insertReport.execute(arguments: [
                report.source, report.id, report.agency, report.time, report.latitude, report.longitude,
                report.depth, report.magnitude, report.magnitudeType, report.place, report.eventType,
                report.evaluationMode?.rawValue, report.evaluationStatus?.rawValue, report.updated,
                SourceImport.linksJSON(report.links), report.id,
            ])
            try insertEvent.execute(arguments: [report.id, created, usgsSource, report.id])
        }
        try ReportLinks.indexAll(db)
        try db.execute(
            sql: "UPDATE associationState SET lastCreated = max(lastCreated, ?)",
            arguments: [created])
    }

    /// The `usgs` report of a USGS row, or nil when it has no position.
    static func usgsReport(from row: FeedFeature) -> SourceReport? {
        guard let latitude = row.lat, let longitude = row.lon else { return nil }
        let reviewed = row.status == "reviewed"
        return SourceReport(
            source: usgsSource, id: row.id, agency: row.net?.uppercased() ?? "US", time: row.time,
            latitude: latitude, longitude: longitude, depth: row.depth, magnitude: row.mag,
            magnitudeType: row.magType, place: row.place, eventType: row.type,
            evaluationMode: reviewed ? nil : .automatic, evaluationStatus: reviewed ? .reviewed : nil,
            updated: row.updated, links: row.otherIDs)
    }

    /// The comma list `first` (",a,b,") followed by the entries of `then` it lacks, other than
    /// `leaving`; nil when empty.
    static func merged(_ first: String?, _ then: String?, leaving: String? = nil) -> String? {
        var entries = (first ?? "").split(separator: ",").map(String.init)
        for entry in (then ?? "").split(separator: ",").map(String.init)
        where entry != leaving && !entries.contains(entry) {
            entries.append(entry)
        }
        return entries.isEmpty ? nil : "," + entries.joined(separator: ",") + ","
    }

    /// The comma list `ids` (",a,b,") without the entries `isOtherEvent` names, other than
    /// `keeping`; nil when none is left.
    static func withoutOtherEvents(_ ids: String?, keeping: String, isOtherEvent: (String) -> Bool) -> String? {
        guard let ids else { return nil }
        let entries = ids.split(separator: ",").map(String.init)
        let kept = entries.filter { $0 == keeping || !isOtherEvent($0) }
        if kept.count == entries.count { return ids }
        return kept.isEmpty ? nil : "," + kept.joined(separator: ",") + ","
    }

    /// The `usgsReports` row `id`.
    static func usgsReportRow(_ db: Database, id: String) throws -> FeedFeature? {
        try Row.fetchOne(
            db.cachedStatement(sql: "SELECT \(QuakeColumns.list) FROM usgsReports WHERE id = ?"), arguments: [id]
        )
        .map { QuakeColumns.feature(from: $0) }
    }

    /// An event's row (`feature`, made by ``feature(of:members:now:isOtherEvent:)``) with the
    /// USGS-only fields of its usgs member's row; the row itself (under the event's id) when that
    /// report is the event's only member, and its `net`, `code` and `ids` too when it is the
    /// preferred one, and its `sources` followed by the other members' agencies.
    ///
    /// As for the members' ids, an id of the feed's `ids` that is another event's id
    /// (`isOtherEvent`) is left out: no row lists another row's id as its alias.
    static func feature(
        _ feature: FeedFeature, withUsgsRow row: FeedFeature, onlyMember: Bool, preferred: Bool,
        isOtherEvent: (String) -> Bool = { _ in false }
    ) -> FeedFeature {
        var row = row
        row.ids = withoutOtherEvents(row.ids, keeping: feature.id, isOtherEvent: isOtherEvent)
        if onlyMember {
            var own = row
            own.id = feature.id
            return own
        }
        var result = feature
        result.takeUsgsOnlyFields(of: row)
        if preferred {
            result.net = row.net
            result.code = row.code
            // The feed's ids and contributors, then the other members' (as `feature(of:)` names
            // them, so never another event's id): a second agency joining is an update clients
            // see, and its id names the event as the USGS's ids do.
            result.ids = merged(row.ids, feature.ids)
            result.sources = merged(row.sources, feature.sources, leaving: row.net)
        }
        return result
    }
}

extension Database {
    /// Association mode's second half of a USGS import: the rows the ``FeedImport`` into
    /// `usgsReports` changed (`collected`) become items of source `usgs` (retractions first, then
    /// reports, so that a report superseding another under a new id founds its own event as in
    /// plain mode), associated and published with the transaction's history (`author`, `source`).
    /// Returns `report` with the counts of the published history (see
    /// ``associateSourceItems(_:batches:position:query:association:now:expireBefore:settings:recorder:usgsSupersededBy:)``).
    func associateUsgsChanges(
        _ collected: CollectedChanges, report: ImportReport, author: HistoryAuthor, now: Date,
        expireBefore: Int64?, association: AssociationConfiguration, settings: SourceImportSettings,
        commitSignal: CommitSignal
    ) throws -> ImportReport {
        var retractions: [SourceItem] = []
        var reports: [SourceItem] = []
        for id in collected.ids.sorted() {
            if let row = try QuakeStore.usgsReportRow(self, id: id) {
                if let sourceReport = QuakeStore.usgsReport(from: row) {
                    reports.append(.report(sourceReport))
                } else {
                    retractions.append(.retraction(source: QuakeStore.usgsSource, id: id, updated: row.updated))
                }
            } else {
                // The version deleted: a copy no newer is not taken again, a newer one is.
                retractions.append(
                    .retraction(source: QuakeStore.usgsSource, id: id, updated: collected.deletedUpdated[id]))
            }
        }
        var recorder = try HistoryRecorder(
            db: self, author: author, source: report.source, now: now, commitSignal: commitSignal)
        let published = try associateSourceItems(
            QuakeStore.usgsSource, batches: [retractions, reports], position: nil, query: report.source,
            association: association, now: now, expireBefore: expireBefore, settings: settings, recorder: &recorder,
            usgsSupersededBy: collected.supersededBy)
        var report = report
        report.token = published.token
        report.inserted = published.created
        report.updated = published.updated
        report.superseded = published.superseded
        report.deleted = published.deleted - published.superseded
        return report
    }
}
