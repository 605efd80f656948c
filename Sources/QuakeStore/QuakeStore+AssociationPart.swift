import Foundation
import GRDB
import QuakeAssociation
import QuakeModel

/// The part of the tables one source import associates: the whole connected components of the
/// candidate graph (see `Associator`) that its items touch, before and after they apply.
///
/// A change regroups only the component of the changed report, as it was and as it becomes, and
/// a component's edges are id links and candidate pairs (reports of other sources within
/// `associate-time` and `associate-distance`). So an import restores an `Associator` from these
/// components alone, applies its items to it, writes what changed and drops it: memory follows
/// the import's items and their neighbourhoods, not the store. Whole components only: `restore`
/// checks a stored grouping by recomputing it, and a component cut in two would recompute
/// differently.
struct AssociationPart {
    /// The components' reports and events, the tombstones of the items' keys and the store's
    /// last creation number.
    var snapshot: AssociationSnapshot
    /// The ids of the stored events the part holds: every other stored event is outside it, and
    /// unchanged by the import until its rows are written.
    var eventIDs: Set<String>
}

/// Reads an ``AssociationPart`` and answers, for the import, what a part cannot know: whether an
/// event outside it has an id. Its statements are the connection's cached statements.
struct AssociationPartReader {
    let configuration: AssociationConfiguration
    private let db: Database
    private let byKey: RawStatement
    private let byTime: RawStatement
    private let byID: RawStatement
    private let linking: RawStatement
    private let byEvent: RawStatement
    private let event: RawStatement
    private let tombstone: RawStatement
    private let eventExists: RawStatement

    init(_ db: Database, configuration: AssociationConfiguration) throws {
        self.configuration = configuration
        self.db = db
        let columns = "\(QuakeStore.reportColumns), r.event"
        byKey = try RawStatement(db, sql: "SELECT \(columns) FROM reports r WHERE r.source = ? AND r.id = ?")
        byTime = try RawStatement(db, sql: "SELECT \(columns) FROM reports r WHERE r.time BETWEEN ? AND ?")
        byID = try RawStatement(db, sql: "SELECT \(columns) FROM reports r WHERE r.id = ?")
        linking = try RawStatement(
            db,
            sql: """
                SELECT \(columns) FROM reportLinks l JOIN reports r ON r.source = l.source AND r.id = l.id
                WHERE l.link = ?
                """)
        byEvent = try RawStatement(db, sql: "SELECT \(columns) FROM reports r WHERE r.event = ?")
        event = try RawStatement(
            db, sql: "SELECT created, preferredSource, preferredId FROM sourceEvents WHERE id = ?")
        tombstone = try RawStatement(db, sql: "SELECT updated FROM reportTombstones WHERE source = ? AND id = ?")
        eventExists = try RawStatement(db, sql: "SELECT 1 FROM sourceEvents WHERE id = ?")
    }

    /// The components of the reports `items` name (their stored versions) and of the reports
    /// they bring (the stored reports each would join by an id link or a candidate pair), with
    /// every member of each component's stored events, read until nothing new comes.
    func part(for items: some Sequence<SourceItem>) throws -> AssociationPart {
        var loaded: [ReportKey: (report: SourceReport, event: String)] = [:]
        var pending: [SourceReport] = []
        var events = Set<String>()

        // A row's key is read first: most rows found are reports loaded already (an event's
        // members are each other's neighbours), and a whole report is built only for a new one.
        func read(_ statement: RawStatement, _ values: String...) throws {
            try statement.forEachRow(values) { row in
                let key = Self.key(row)
                guard loaded[key] == nil else { return }
                let report = Self.report(row)
                loaded[key] = (report, row.string(15) ?? "")
                pending.append(report)
            }
        }
        /// The stored reports `report` is joined to: id links both ways, and the reports of other
        /// sources within both windows (read by time, then matched as the associator matches).
        func neighbours(of report: SourceReport) throws {
            if !report.id.isEmpty {
                try read(byID, report.id)
                try read(linking, report.id)
            }
            for link in Set(report.links) where !link.isEmpty && link != report.id {
                try read(byID, link)
            }
            let window = configuration.associateTimeMilliseconds
            byTime.reset()
            byTime.bind(1, report.time &- window)
            byTime.bind(2, report.time &+ window)
            defer { byTime.reset() }
            while try byTime.step() {
                let key = Self.key(byTime)
                guard key.source != report.source, loaded[key] == nil else { continue }
                // Matched on the fields the match reads (key, time, position), as the associator
                // matches the whole reports.
                let position = SourceReport(
                    source: key.source, id: key.id, time: byTime.int64(3) ?? 0, latitude: byTime.double(4) ?? 0,
                    longitude: byTime.double(5) ?? 0)
                guard configuration.match(report, position).within else { continue }
                let other = Self.report(byTime)
                loaded[key] = (other, byTime.string(15) ?? "")
                pending.append(other)
            }
        }

        var keys: [ReportKey] = []
        var seenKeys = Set<ReportKey>()
        for item in items {
            let key = ReportKey(item)
            if seenKeys.insert(key).inserted {
                keys.append(key)
                try read(byKey, key.source, key.id)
            }
            if case .report(let report) = item { try neighbours(of: report) }
        }
        while let report = pending.popLast() {
            try neighbours(of: report)
            let event = loaded[ReportKey(report)]!.event
            if events.insert(event).inserted { try read(byEvent, event) }
        }

        var members: [String: [ReportKey]] = [:]
        for (key, value) in loaded { members[value.event, default: []].append(key) }
        var storedEvents: [AssociationSnapshot.StoredEvent] = []
        for id in events.sorted() {
            // A report in no stored event (no row here) is regrouped.
            try event.forEachRow([id]) { row in
                let preferred: ReportKey? =
                    if let source = row.string(1), let preferredID = row.string(2) {
                        ReportKey(source: source, id: preferredID)
                    } else { nil }
                storedEvents.append(
                    AssociationSnapshot.StoredEvent(
                        id: id, members: members[id] ?? [], created: UInt64(max(0, row.int64(0) ?? 0)),
                        preferred: preferred))
            }
        }
        var tombstones: [AssociationSnapshot.Tombstone] = []
        for key in keys.sorted() {
            try tombstone.forEachRow([key.source, key.id]) { row in
                if let updated = row.int64(0) {
                    tombstones.append(AssociationSnapshot.Tombstone(key: key, updated: updated))
                }
            }
        }
        let lastCreated = try Int64.fetchOne(
            db.cachedStatement(sql: "SELECT lastCreated FROM associationState")) ?? 0
        return AssociationPart(
            snapshot: AssociationSnapshot(
                reports: loaded.keys.sorted().map { loaded[$0]!.report }, events: storedEvents,
                tombstones: tombstones, lastCreated: UInt64(max(0, lastCreated))),
            eventIDs: events)
    }

    /// Whether a stored event has the id `id`: asked of the ids of events outside the part.
    func isStoredEvent(_ id: String) throws -> Bool {
        var found = false
        try eventExists.forEachRow([id]) { _ in found = true }
        return found
    }

    /// The key of the report of a row whose first columns are `source, id` (as
    /// ``QuakeStore/reportColumns`` begin).
    static func key(_ row: RawStatement) -> ReportKey {
        ReportKey(source: row.string(0) ?? "", id: row.string(1) ?? "")
    }

    /// The report of a row whose first columns are ``QuakeStore/reportColumns``.
    static func report(_ row: RawStatement) -> SourceReport {
        let linksText = row.string(14)
        let links: [String] =
            if let linksText, linksText != "[]" {
                (try? JSONDecoder().decode([String].self, from: Data(linksText.utf8))) ?? []
            } else { [] }
        return SourceReport(
            source: row.string(0) ?? "", id: row.string(1) ?? "", agency: row.string(2), time: row.int64(3) ?? 0,
            latitude: row.double(4) ?? 0, longitude: row.double(5) ?? 0, depth: row.double(6),
            magnitude: row.double(7), magnitudeType: row.string(8), place: row.string(9),
            eventType: row.string(10),
            evaluationMode: row.string(11).flatMap(SourceReport.EvaluationMode.init(rawValue:)),
            evaluationStatus: row.string(12).flatMap(SourceReport.EvaluationStatus.init(rawValue:)),
            updated: row.int64(13), links: links)
    }
}

extension AssociationPartReader {
    /// The ids of the stored events holding a report whose id is `id`.
    func events(holdingReportID id: String) throws -> Set<String> {
        var result = Set<String>()
        try byID.forEachRow([id]) { result.insert($0.string(15) ?? "") }
        return result
    }

    /// A stored event outside the part, as the import publishes its row: its members (by key)
    /// and its preferred report (the stored one, else the one the configuration prefers).
    func storedEvent(_ id: String) throws -> (event: Event, members: [SourceReport])? {
        var members: [SourceReport] = []
        try byEvent.forEachRow([id]) { members.append(Self.report($0)) }
        guard !members.isEmpty else { return nil }
        members.sort { ReportKey($0) < ReportKey($1) }
        var created: UInt64 = 0
        var preferredKey: ReportKey?
        try event.forEachRow([id]) { row in
            created = UInt64(max(0, row.int64(0) ?? 0))
            if let source = row.string(1), let preferredID = row.string(2) {
                preferredKey = ReportKey(source: source, id: preferredID)
            }
        }
        let preferred = members.first { ReportKey($0) == preferredKey } ?? configuration.preferred(members)
        return (Event(id: id, reports: members.map(ReportKey.init), preferred: preferred, created: created), members)
    }
}

/// What an import that associates a part of the store asks of the events outside it: whether
/// one has an id (``has(_:)``, for the associator's naming and the rows' `ids`), and which hold
/// a report named like an event the import changed. An import that restored the whole store
/// has none outside. Lookups that fail answer "taken" (nothing is named twice) and keep the
/// error for ``check()``, which the import calls before it writes.
final class OutsideEvents {
    let reader: AssociationPartReader?
    let inside: Set<String>
    private var error: (any Error)?

    /// The whole store is in memory: no event is outside.
    init() {
        reader = nil
        inside = []
    }

    init(reader: AssociationPartReader, inside: Set<String>) {
        self.reader = reader
        self.inside = inside
    }

    /// Whether a stored event outside the part has the id `id`.
    func has(_ id: String) -> Bool {
        guard let reader, !inside.contains(id) else { return false }
        do {
            return try reader.isStoredEvent(id)
        } catch {
            if self.error == nil { self.error = error }
            return true
        }
    }

    func check() throws {
        if let error { throw error }
    }
}

/// The `reportLinks` index (migration v17): for each report, each id its `links` name but its
/// own and the empty one, as the associator's id links take them. Written beside every write of
/// `reports` (by ``SourceImport``, the USGS bootstrap and deletes); `checkIntegrity` compares it
/// with the reports.
enum ReportLinks {
    /// The ids a report's links join it to.
    static func links(of report: SourceReport) -> [String] {
        Set(report.links).filter { !$0.isEmpty && $0 != report.id }.sorted()
    }

    /// What the index should hold, from `reports`: `link, source, id` rows (for SQL).
    static let derived = """
        SELECT DISTINCT l.value AS link, r.source AS source, r.id AS id FROM reports r, json_each(r.links) l
        WHERE r.links <> '[]' AND l.type = 'text' AND l.value <> '' AND l.value <> r.id
        """

    /// Indexes the links of every stored report (a store from before the index, and the USGS
    /// bootstrap's reports).
    static func indexAll(_ db: Database) throws {
        try db.execute(sql: "INSERT OR IGNORE INTO reportLinks (link, source, id) \(derived)")
    }

    /// Drops the links of the reports of event `id` (before they are deleted).
    static func deleteLinks(ofEvent id: String, _ db: Database) throws {
        try db.execute(
            sql: """
                DELETE FROM reportLinks WHERE (source, id) IN (SELECT source, id FROM reports WHERE event = ?)
                """, arguments: [id])
    }
}
