import Foundation
import GRDB
import NIOConcurrencyHelpers
import QuakeAssociation
import QuakeFeed
import QuakeModel

/// The result of ``QuakeStore/importSource(_:items:position:query:association:now:)``.
public struct SourceImportReport: Sendable, Hashable {
    /// The history token of the import's transaction, or `nil` when no quake row changed.
    public var token: HistoryToken?
    /// How many items the run gave.
    public var items: Int
    /// Reports stored (new or replacing an older solution) and retractions that removed a report.
    public var applied: Int
    /// Items that changed nothing: stale copies (an older `updated` than the stored report or
    /// than its retraction), copies equal to the stored report, retractions of no stored report
    /// and retractions older than the stored report.
    public var ignored: Int
    /// Quake rows (events) inserted.
    public var created: Int
    /// Quake rows updated.
    public var updated: Int
    /// Quake rows deleted: events merged into another (`superseded`) or whose every report was
    /// retracted (`deleted-upstream`).
    public var deleted: Int
    /// Of `deleted`, the events merged into another.
    public var superseded: Int

    public init(
        token: HistoryToken? = nil, items: Int = 0, applied: Int = 0, ignored: Int = 0, created: Int = 0,
        updated: Int = 0, deleted: Int = 0, superseded: Int = 0
    ) {
        self.token = token
        self.items = items
        self.applied = applied
        self.ignored = ignored
        self.created = created
        self.updated = updated
        self.deleted = deleted
        self.superseded = superseded
    }
}

/// What the store keeps of one source's runs (table `sources`), for the next incremental run and
/// for status.
public struct SourceState: Sendable, Hashable {
    /// The configured source's name.
    public var name: String
    /// Milliseconds since the epoch: the start of the last successful run, from which the next
    /// incremental run asks (less an overlap). Nil before the first run that gave one.
    public var position: Int64?
    /// When the last run, successful or not, ended (ms since the epoch).
    public var lastAttempt: Int64?
    /// When the last successful run was imported (ms since the epoch).
    public var lastSuccess: Int64?
    /// Why the last run failed; nil when it succeeded.
    public var lastError: String?
    /// The last successful run's query (its URL), as the caller gave it.
    public var lastQuery: String?
    /// How many current reports the source has in the store.
    public var reportCount: Int

    public init(
        name: String, position: Int64? = nil, lastAttempt: Int64? = nil, lastSuccess: Int64? = nil,
        lastError: String? = nil, lastQuery: String? = nil, reportCount: Int = 0
    ) {
        self.name = name
        self.position = position
        self.lastAttempt = lastAttempt
        self.lastSuccess = lastSuccess
        self.lastError = lastError
        self.lastQuery = lastQuery
        self.reportCount = reportCount
    }
}

/// What the source imports of one ``QuakeStore`` value (and its copies) share in memory: the
/// association configuration the last one ran under, and a test hook. The associator itself is
/// not kept: each import restores the part of the store it touches from the tables (see
/// ``AssociationPart``), so nothing in memory outlives its transaction.
final class SourceImportSettings: Sendable {
    private let state = NIOLockedValueBox<
        (configuration: AssociationConfiguration?, failBeforeCommit: Bool, lastRestore: Restore?, sliceItems: Int)
    >((nil, false, nil, QuakeStore.defaultSourceImportSliceItems))

    /// How many of a run's items are applied at a time within its transaction (see
    /// ``QuakeStore/sourceImportSliceItems``).
    var sliceItems: Int {
        get { state.withLockedValue { $0.sliceItems } }
        set { state.withLockedValue { $0.sliceItems = max(1, newValue) } }
    }

    /// What an import restored its associator from: how many reports, and whether the whole
    /// store (the stored events were grouped under another configuration) or a part.
    struct Restore: Sendable, Hashable {
        var reports: Int
        var wholeStore: Bool
    }

    /// What the last source import of this store value restored (tests and benchmarks).
    var lastRestore: Restore? {
        get { state.withLockedValue { $0.lastRestore } }
        set { state.withLockedValue { $0.lastRestore = newValue } }
    }

    /// The configuration the last source import ran under: a USGS feed import given none
    /// associates with it (the default before any).
    var configuration: AssociationConfiguration? {
        get { state.withLockedValue { $0.configuration } }
        set { state.withLockedValue { $0.configuration = newValue } }
    }

    /// Tests: when set, the next source import throws after it has written everything, just before
    /// its transaction would commit (so it rolls back), and the flag clears.
    var failNextImportBeforeCommit: Bool {
        get { state.withLockedValue { $0.failBeforeCommit } }
        set { state.withLockedValue { $0.failBeforeCommit = newValue } }
    }

    func takeFailure() -> Bool {
        state.withLockedValue { state in
            defer { state.failBeforeCommit = false }
            return state.failBeforeCommit
        }
    }
}

/// The error the test hook ``SourceImportSettings/failNextImportBeforeCommit`` throws.
struct InjectedSourceImportFailure: Error {}

extension QuakeStore {
    /// The default of ``sourceImportSliceItems``. Measured (docs/benchmarks.md, quakeml): runs of
    /// 10,000 QuakeML events peaked at 88 to 89 MiB applied whole, at 65.6 MiB in slices of 2,000
    /// and at 61 MiB in slices of 1,000, which took some 10% longer than whole runs.
    public static let defaultSourceImportSliceItems = 1_000

    /// How many of a source run's items ``importSource(_:items:position:query:association:now:expiringBefore:)``
    /// applies at a time, all within the run's one transaction: each slice restores the part of
    /// the store it touches, applies its items and writes them, so the import's memory follows
    /// the slice rather than the run (an FDSN answer may hold 20,000 events). Clients see the
    /// run as one transaction either way. Tests set it small to cross slice boundaries.
    public var sourceImportSliceItems: Int {
        get { sourceImportSettings.sliceItems }
        nonmutating set { sourceImportSettings.sliceItems = newValue }
    }

    /// How long a retraction is remembered: tombstones whose `updated` is older than this before
    /// `now` are purged by each source import (after which an older copy would be taken again).
    public static let reportTombstoneRetention: Int64 = 30 * 24 * 3600 * 1000

    /// Applies one run of source `name`: its items, in one write transaction with the new position.
    ///
    /// Each item revises the stored reports (a report replaces the one with its source and id
    /// unless it is older; a retraction removes it and is remembered, see `Associator`), the
    /// store's `Associator` regroups the reports it touched, and each event that changed becomes a
    /// change of its quake row, in the transaction's history (author `import`, source `query`,
    /// or `source NAME` without one): a created event an insert, an updated one an update with its
    /// field changes, an event merged into another a delete with reason `superseded` naming the
    /// survivor, and an event whose reports were all retracted a delete with reason
    /// `deleted-upstream`. An event's row is made from its reports (see
    /// ``feature(of:members:now:isOtherEvent:)``).
    ///
    /// The source's row of `sources` is written in the same transaction: `position` (kept when
    /// nil), the attempt and success times and `query`, the error cleared. Retraction tombstones
    /// older than ``reportTombstoneRetention`` are purged.
    ///
    /// The associator is restored from the tables for each import, from the part of the store
    /// the items touch (``AssociationPart``: the whole connected components of their reports,
    /// before and after), so that memory follows the run, not the store. When `association` is
    /// not the configuration the stored events were grouped under (`associationState.configuration`,
    /// NULL in a store from before it was kept), the whole store is restored and regrouped once
    /// under it, and the changes the regrouping finds are applied and published in this
    /// transaction. When the transaction fails, the tables and the quake rows are left as they
    /// were, and the error (SQLite's) is thrown; the caller records it with
    /// ``recordSourceFailure(_:error:now:)``.
    ///
    /// The first source import enters association mode (QuakeStore+UsgsSource.swift): the USGS
    /// feed's rows stored until then become reports of source `usgs`, each its own event under its
    /// own id, without history; from then on the feed's imports are associated with the sources'
    /// reports. Report items whose time is before `expiringBefore` (event retention) are left out,
    /// counted as ignored, so that a copy of an expired event's report does not bring it back
    /// (``applyRetention(maxAge:now:)`` removes an expired event's reports with its row).
    public func importSource(
        _ name: String, items: [SourceItem], position: Int64?, query: String?,
        association: AssociationConfiguration, now: Date = Date(), expiringBefore: Date? = nil
    ) async throws -> SourceImportReport {
        let settings = sourceImportSettings
        let commitSignal = commitSignal
        return try await pool.write { db in
            var recorder = try HistoryRecorder(
                db: db, author: .import, source: query ?? "source \(name)", now: now, commitSignal: commitSignal)
            return try db.associateSourceItems(
                name, batches: [items], position: position, query: query, association: association, now: now,
                expireBefore: expiringBefore.map(Self.milliseconds), settings: settings, recorder: &recorder)
        }
    }

    /// Keeps a failed run's error for status (lastAttempt, lastError); the position stays.
    ///
    /// No history: the quakes did not change. The next successful run clears the error.
    public func recordSourceFailure(_ name: String, error: String, now: Date = Date()) async throws {
        let nowMilliseconds = Self.milliseconds(now)
        try await pool.write { db in
            try db.execute(
                sql: """
                    INSERT INTO sources (name, lastAttempt, lastError) VALUES (?, ?, ?)
                    ON CONFLICT (name) DO UPDATE SET lastAttempt = excluded.lastAttempt, lastError = excluded.lastError
                    """,
                arguments: [name, nowMilliseconds, error])
        }
    }

    /// Every source the store has a run of (successful or not), sorted by name, with its number of
    /// current reports.
    public func sourceStates() throws -> [SourceState] {
        try pool.read { db in
            try Row.fetchAll(
                db,
                sql: """
                    SELECT name, position, lastAttempt, lastSuccess, lastError, lastQuery,
                        (SELECT count(*) FROM reports WHERE reports.source = sources.name)
                    FROM sources ORDER BY name
                    """
            ).map { row in
                SourceState(
                    name: row[0], position: row[1], lastAttempt: row[2], lastSuccess: row[3], lastError: row[4],
                    lastQuery: row[5], reportCount: row[6])
            }
        }
    }

    /// The position of source `name` (the start of its last successful run, ms since the epoch),
    /// or nil when it has none yet.
    public func sourcePosition(_ name: String) throws -> Int64? {
        try pool.read { db in
            try Row.fetchOne(db, sql: "SELECT position FROM sources WHERE name = ?", arguments: [name])
                .flatMap { $0[0] as Int64? }
        }
    }

    /// The reports of the event (quake) `id`, preferred first, then by source and id; empty when
    /// no source reported it (a quake only the USGS feed has, or none).
    public func reports(ofEvent id: String) throws -> [SourceReport] {
        try pool.read { db in
            try Row.fetchAll(
                db,
                sql: """
                    SELECT \(Self.reportColumns),
                        (r.source = e.preferredSource AND r.id = e.preferredId) AS preferred
                    FROM reports r LEFT JOIN sourceEvents e ON e.id = r.event
                    WHERE r.event = ?
                    ORDER BY preferred DESC, r.source, r.id
                    """,
                arguments: [id]
            ).map(Self.sourceReport(from:))
        }
    }

    /// Part of ``checkIntegrity(limit:)``: every report is in a stored event, every event has
    /// reports and its preferred report among them, each event's row has its reports as
    /// `contributors` and the preferred one's `agency`, no retraction tombstone is kept for a key
    /// that has a report, and the USGS rows of association mode and the `usgs` reports match.
    static func checkSourceIntegrity(_ db: Database, into problems: inout IntegrityProblems) throws {
        for row in try Row.fetchAll(
            db,
            sql: """
                SELECT source, id, event FROM reports
                WHERE NOT EXISTS (SELECT 1 FROM sourceEvents e WHERE e.id = reports.event)
                ORDER BY source, id LIMIT 20
                """)
        {
            problems.add(
                "report \(row[0] as String):\(row[1] as String) is in event \(row[2] as String), which is not stored")
        }
        for id in try String.fetchAll(
            db,
            sql: """
                SELECT id FROM sourceEvents e WHERE NOT EXISTS (SELECT 1 FROM reports r WHERE r.event = e.id)
                ORDER BY id LIMIT 20
                """)
        {
            problems.add("event \(id) has no reports")
        }
        for id in try String.fetchAll(
            db,
            sql: """
                SELECT id FROM sourceEvents e WHERE NOT EXISTS (
                    SELECT 1 FROM reports r WHERE r.event = e.id AND r.source = e.preferredSource AND r.id = e.preferredId)
                    AND EXISTS (SELECT 1 FROM reports r WHERE r.event = e.id)
                ORDER BY id LIMIT 20
                """)
        {
            problems.add("event \(id)'s preferred report is not one of its reports")
        }
        for row in try Row.fetchAll(
            db,
            sql: """
                SELECT t.source, t.id FROM reportTombstones t JOIN reports r ON r.source = t.source AND r.id = t.id
                ORDER BY t.source, t.id LIMIT 20
                """)
        {
            problems.add("report \(row[0] as String):\(row[1] as String) has a retraction tombstone")
        }
        // The link index (migration v17) is the reports' links.
        for row in try Row.fetchAll(
            db, sql: "SELECT link, source, id FROM reportLinks EXCEPT \(ReportLinks.derived) ORDER BY 1, 2, 3 LIMIT 20")
        {
            problems.add("reportLinks lists \(row[0] as String) for \(row[1] as String):\(row[2] as String), which does not link it")
        }
        for row in try Row.fetchAll(
            db, sql: "\(ReportLinks.derived) EXCEPT SELECT link, source, id FROM reportLinks ORDER BY 1, 2, 3 LIMIT 20")
        {
            problems.add("report \(row[1] as String):\(row[2] as String) links \(row[0] as String), which reportLinks lacks")
        }
        // Each event's row carries its reports as contributors, the preferred first, and the
        // preferred one's agency.
        var members: [SourceReport] = []
        var preferred: SourceReport?
        var event: String?
        var mismatched = 0
        func checkEvent() throws {
            guard let id = event, let preferred, mismatched < 20 else { return }
            let (agency, contributors) = contributorFields(preferred: preferred, members: members)
            guard
                let row = try Row.fetchOne(
                    db, sql: "SELECT agency, contributors FROM quakes WHERE id = ?", arguments: [id])
            else { return }
            if row[1] as String? != contributors {
                mismatched += 1
                problems.add("event \(id)'s contributors are not its reports: \(row[1] as String? ?? "null")")
            } else if row[0] as String? != agency {
                mismatched += 1
                problems.add("event \(id)'s agency \(row[0] as String? ?? "null") is not its preferred report's")
            }
        }
        let reports = try Row.fetchCursor(
            db,
            sql: """
                SELECT \(reportColumns), r.event, (r.source = e.preferredSource AND r.id = e.preferredId) AS preferred
                FROM reports r JOIN sourceEvents e ON e.id = r.event
                ORDER BY r.event, preferred DESC, r.source, r.id
                """)
        while let row = try reports.next() {
            let id: String = row[15]
            if id != event {
                try checkEvent()
                event = id
                members = []
                preferred = nil
            }
            let report = sourceReport(from: row)
            if row[16] as Bool { preferred = report }
            members.append(report)
        }
        try checkEvent()
        // Only an event's row has them (a plain-mode store has none).
        for id in try String.fetchAll(
            db,
            sql: """
                SELECT id FROM quakes q
                WHERE (q.contributors IS NOT NULL OR q.agency IS NOT NULL)
                    AND NOT EXISTS (SELECT 1 FROM sourceEvents e WHERE e.id = q.id)
                ORDER BY id LIMIT 20
                """)
        {
            problems.add("quake \(id) has an agency or contributors but no reports")
        }
        // The USGS feed's rows (association mode) and the `usgs` reports made of them.
        for id in try String.fetchAll(
            db,
            sql: """
                SELECT u.id FROM usgsReports u
                WHERE u.lat IS NOT NULL AND u.lon IS NOT NULL
                    AND NOT EXISTS (SELECT 1 FROM reports r WHERE r.source = 'usgs' AND r.id = u.id)
                ORDER BY u.id LIMIT 20
                """)
        {
            problems.add("USGS row \(id) has no usgs report")
        }
        for id in try String.fetchAll(
            db,
            sql: """
                SELECT r.id FROM reports r
                WHERE r.source = 'usgs' AND NOT EXISTS (SELECT 1 FROM usgsReports u WHERE u.id = r.id)
                ORDER BY r.id LIMIT 20
                """)
        {
            problems.add("usgs report \(id) has no USGS row")
        }
    }

    // MARK: - Implementation

    static let reportColumns = """
        r.source, r.id, r.agency, r.time, r.latitude, r.longitude, r.depth, r.magnitude, r.magnitudeType,
        r.place, r.eventType, r.evaluationMode, r.evaluationStatus, r.updated, r.links
        """

    static func sourceReport(from row: Row) -> SourceReport {
        let links: [String] =
            (row[14] as String?).flatMap { try? JSONDecoder().decode([String].self, from: Data($0.utf8)) } ?? []
        return SourceReport(
            source: row[0], id: row[1], agency: row[2], time: row[3], latitude: row[4], longitude: row[5],
            depth: row[6], magnitude: row[7], magnitudeType: row[8], place: row[9], eventType: row[10],
            evaluationMode: (row[11] as String?).flatMap(SourceReport.EvaluationMode.init(rawValue:)),
            evaluationStatus: (row[12] as String?).flatMap(SourceReport.EvaluationStatus.init(rawValue:)),
            updated: row[13], links: links)
    }

    /// What the tables hold, as the Associator restores it.
    static func associationSnapshot(_ db: Database) throws -> AssociationSnapshot {
        var reports: [SourceReport] = []
        var members: [String: [ReportKey]] = [:]
        let rows = try Row.fetchCursor(
            db, sql: "SELECT \(reportColumns), r.event FROM reports r ORDER BY r.source, r.id")
        while let row = try rows.next() {
            let report = sourceReport(from: row)
            reports.append(report)
            members[row[15], default: []].append(ReportKey(report))
        }
        let events = try Row.fetchAll(
            db, sql: "SELECT id, created, preferredSource, preferredId FROM sourceEvents ORDER BY id"
        ).map { row -> AssociationSnapshot.StoredEvent in
            let id: String = row[0]
            let created: Int64 = row[1]
            let preferred: ReportKey? =
                if let source = row[2] as String?, let preferredID = row[3] as String? {
                    ReportKey(source: source, id: preferredID)
                } else { nil }
            return AssociationSnapshot.StoredEvent(
                id: id, members: members[id] ?? [], created: UInt64(max(0, created)), preferred: preferred)
        }
        let tombstones = try Row.fetchAll(
            db, sql: "SELECT source, id, updated FROM reportTombstones ORDER BY source, id"
        ).map { AssociationSnapshot.Tombstone(key: ReportKey(source: $0[0], id: $0[1]), updated: $0[2]) }
        let lastCreated = try Int64.fetchOne(db, sql: "SELECT lastCreated FROM associationState") ?? 0
        return AssociationSnapshot(
            reports: reports, events: events, tombstones: tombstones, lastCreated: UInt64(max(0, lastCreated)))
    }

    /// An event row's `agency` (the preferred report's) and `contributors` (every member, the
    /// preferred first, then by source and id, as canonical JSON): what association mode adds to
    /// every row it publishes, and what ``checkIntegrity(limit:)`` expects of each event's row.
    static func contributorFields(preferred: SourceReport, members: [SourceReport]) -> (String?, String) {
        (preferred.agency, Contributor.json(Contributor.of(preferred: preferred, members: members)))
    }

    /// The quake row of an event: the preferred report's time, position, depth, magnitude, place
    /// and type (`earthquake` when it gives none); `status` `reviewed` when the preferred report
    /// is reviewed (or manual), else `automatic`; `updated` the newest among the members' (`now`
    /// when none gives one); `net` the preferred report's agency in lower case (its source's name
    /// without one) and `code` its id; `ids` every member's id and `sources` every member's agency
    /// (or source name), each sorted and unique, in the feed's `,a,b,` form; `title`
    /// `M 4.2 - PLACE` when magnitude and place are known. The USGS-only fields stay nil, and so
    /// do `agency` and `contributors` (``contributorFields(preferred:members:)``, set last).
    ///
    /// A member's id that is another event's id (`isOtherEvent`) is left out of `ids`: the
    /// Associator can give an event's id to the part of it that no longer holds the report that
    /// founded it (a split), and then that report's own id names the other row, which `ids`, and
    /// the alias index built from it, must not claim. With no member id left, `ids` is nil.
    static func feature(
        of event: Event, members: [SourceReport], now: Int64, isOtherEvent: (String) -> Bool = { _ in false }
    ) -> FeedFeature {
        let preferred = event.preferred
        var feature = FeedFeature(id: event.id, time: preferred.time)
        feature.lat = preferred.latitude
        feature.lon = preferred.longitude
        feature.depth = preferred.depth
        feature.mag = preferred.magnitude
        feature.magType = preferred.magnitudeType
        feature.place = preferred.place
        feature.type = preferred.eventType ?? "earthquake"
        feature.status = preferred.isReviewed ? "reviewed" : "automatic"
        feature.updated = members.compactMap(\.updated).max() ?? now
        feature.net = preferred.agency.map { $0.lowercased() } ?? preferred.source
        feature.code = preferred.id
        func list(_ values: [String]) -> String {
            "," + Set(values).sorted().joined(separator: ",") + ","
        }
        let ids = members.map(\.id).filter { $0 == event.id || !isOtherEvent($0) }
        feature.ids = ids.isEmpty ? nil : list(ids)
        feature.sources = list(members.map { $0.agency?.lowercased() ?? $0.source })
        if let magnitude = preferred.magnitude, let place = preferred.place {
            feature.title = "M \(oneDecimal(magnitude)) - \(place)"
        }
        return feature
    }

    /// `String(format: "%.1f", value)`, through the C library's formatting (the same digits)
    /// without Foundation's format parsing; non-finite values go through Foundation as before.
    static func oneDecimal(_ value: Double) -> String {
        guard value.isFinite, abs(value) < 1e15 else { return String(format: "%.1f", value) }
        return withUnsafeTemporaryAllocation(of: CChar.self, capacity: 32) { buffer in
            let count = withVaList([value]) { vsnprintf(buffer.baseAddress!, 32, "%.1f", $0) }
            return String(
                decoding: UnsafeRawBufferPointer(start: buffer.baseAddress!, count: Int(count)), as: UTF8.self)
        }
    }
}

extension Database {
    /// The body of a source import, shared by ``QuakeStore/importSource(_:items:position:query:association:now:expiringBefore:)``
    /// and the USGS feed's imports in association mode (QuakeStore+UsgsSource.swift): enters
    /// association mode (bootstrapping the USGS rows, see ``QuakeStore/bootstrapUsgsReports(_:)``),
    /// applies `batches` of source `name` to the associator, in order, writes the reports and
    /// events, publishes the changed events' rows through `recorder` (which it finishes), and
    /// writes the source's row. Report items whose time is before `expireBefore` are left out
    /// (counted as ignored). `usgsSupersededBy` names, for a usgs report deleted as superseded,
    /// the usgs report that superseded it: an event deleted because it lost that report is
    /// published as superseded by the event now holding the winner.
    ///
    /// The associator is restored from the part of the store the items touch (``AssociationPart``),
    /// or from the whole store when the stored events were grouped under another configuration
    /// (or none is recorded) and when entering association mode, and dropped with the transaction.
    func associateSourceItems(
        _ name: String, batches: [[SourceItem]], position: Int64?, query: String?,
        association: AssociationConfiguration, now: Date, expireBefore: Int64?, settings: SourceImportSettings,
        recorder: inout HistoryRecorder, usgsSupersededBy: [String: String] = [:]
    ) throws -> SourceImportReport {
        let db = self
        var importer = try SourceImport(db: db, name: name, now: now)
        importer.usgsSupersededBy = usgsSupersededBy
        let nowMilliseconds = QuakeStore.milliseconds(now)
        let bootstrapped = try QuakeStore.enterAssociationMode(db)
        settings.configuration = association
        let sliceItems = settings.sliceItems

        // The items, counted against the reports as they were before them.
        var report = SourceImportReport(items: batches.reduce(0) { $0 + $1.count })
        var batches = batches
        if let expireBefore {
            for i in batches.indices {
                let before = batches[i].count
                batches[i].removeAll {
                    if case .report(let r) = $0 { return r.time < expireBefore }
                    return false
                }
                report.ignored += before - batches[i].count
            }
        }

        // The items are applied a slice at a time (``QuakeStore/sourceImportSliceItems``), all in
        // this transaction: each slice restores its own part of the store (the tables as the slices
        // before it left them), so memory follows the slice, not the run. Several batches (the
        // USGS feed's retractions, then its reports: a retraction and the report superseding it
        // are published as one supersede only when applied together) are one slice. A run with
        // no items is one empty slice (a changed configuration still regroups, entering
        // association mode still republishes).
        var slices: [[ArraySlice<SourceItem>]] = [batches.map { $0[...] }]
        if batches.count == 1, let batch = batches.first, batch.count > sliceItems {
            slices = stride(from: 0, to: batch.count, by: sliceItems).map { start in
                [batch[start..<min(batch.count, start + sliceItems)]]
            }
        }
        for (number, slice) in slices.enumerated() {
            try db.associateSlice(
                slice, importer: &importer, report: &report, association: association,
                enteringAssociationMode: bootstrapped && number == 0, settings: settings, recorder: &recorder)
        }

        // Retractions are remembered for the retention horizon.
        let cutoff = nowMilliseconds - QuakeStore.reportTombstoneRetention
        try db.cachedStatement(sql: "DELETE FROM reportTombstones WHERE updated < ?").execute(arguments: [cutoff])

        try db.cachedStatement(
            sql: """
                INSERT INTO sources (name, position, lastAttempt, lastSuccess, lastError, lastQuery)
                VALUES (?1, ?2, ?3, ?3, NULL, ?4)
                ON CONFLICT (name) DO UPDATE SET position = coalesce(excluded.position, position),
                    lastAttempt = excluded.lastAttempt, lastSuccess = excluded.lastSuccess, lastError = NULL,
                    lastQuery = excluded.lastQuery
                """
        ).execute(arguments: [name, position, nowMilliseconds, query])

        let committed = try recorder.finish()
        report.token = committed.token
        report.created = committed.inserted
        report.updated = committed.updated
        report.deleted = committed.deleted
        report.superseded = committed.superseded
        if settings.takeFailure() { throw InjectedSourceImportFailure() }
        return report
    }

    /// One slice of a source import's items (see ``associateSourceItems``): restores the
    /// associator from the part of the store the slice touches (or the whole store, under a new
    /// configuration), applies the slice, and writes its reports, events and quake rows.
    fileprivate func associateSlice(
        _ slice: [ArraySlice<SourceItem>], importer: inout SourceImport, report: inout SourceImportReport,
        association: AssociationConfiguration, enteringAssociationMode: Bool, settings: SourceImportSettings,
        recorder: inout HistoryRecorder
    ) throws {
        let db = self
        importer.beginSlice()
        // The associator: the part of the store the items touch, when the stored events were
        // grouped under this configuration; else the whole store, regrouped under it.
        let fingerprint = association.fingerprint
        let grouped = try String.fetchOne(db.cachedStatement(sql: "SELECT configuration FROM associationState"))
        var associator: Associator
        let outside: OutsideEvents
        if enteringAssociationMode || grouped != fingerprint {
            outside = OutsideEvents()
            let snapshot = try QuakeStore.associationSnapshot(db)
            settings.lastRestore = .init(reports: snapshot.reports.count, wholeStore: true)
            let restored = Associator.restore(snapshot, configuration: association)
            associator = restored.associator
            try importer.publish(restored.changes, associator: associator, outside: outside, recorder: &recorder)
            try db.cachedStatement(sql: "UPDATE associationState SET configuration = ?").execute(arguments: [
                fingerprint
            ])
        } else {
            let reader = try AssociationPartReader(db, configuration: association)
            let part = try reader.part(for: slice.joined())
            settings.lastRestore = .init(reports: part.snapshot.reports.count, wholeStore: false)
            outside = OutsideEvents(reader: reader, inside: part.eventIDs)
            let restored = Associator.restore(part.snapshot, configuration: association, isTaken: outside.has)
            try outside.check()
            associator = restored.associator
            // Empty unless the tables disagree with the rules (a repair, as a whole restore makes).
            try importer.publish(restored.changes, associator: associator, outside: outside, recorder: &recorder)
        }
        if enteringAssociationMode {
            // The USGS rows are events now: each gains its agency and contributors, an update
            // clients follow like any other (once, on entering association mode).
            try importer.republishAll(associator: associator, outside: outside, recorder: &recorder)
        }

        // The items, counted against the reports as they were before them (the associator's,
        // before it applies them), by the revision rule the associator applies; kept per key only
        // what the writes below need (nothing per item: a run may be tens of thousands).
        var keys: [ReportKey] = []
        var seen = Set<ReportKey>()
        var repeated = Set<ReportKey>()
        for item in slice.joined() {
            let key = ReportKey(item)
            if seen.insert(key).inserted { keys.append(key) } else { repeated.insert(key) }
        }
        seen = []
        // Keys with neither a report nor a tombstone before (nothing stored to replace), and keys
        // whose report the items change (or remove).
        var newKeys = Set<ReportKey>()
        var revised: [ReportKey] = []
        // The repeated keys' report before the run and their state so far.
        var running: [ReportKey: (initial: SourceReport?, kept: Associator.Revision)] = [:]
        for item in slice.joined() {
            let key = ReportKey(item)
            let initial: SourceReport?
            var kept: Associator.Revision
            if let state = running[key] {
                (initial, kept) = state
            } else {
                kept = (associator.report(key), associator.tombstone(key))
                initial = kept.report
                if kept.report == nil && kept.tombstone == nil { newKeys.insert(key) }
            }
            if Associator.revise(&kept, with: item) {
                report.applied += 1
            } else {
                report.ignored += 1
            }
            if repeated.contains(key) {
                running[key] = (initial, kept)
            } else if kept.report != initial {
                revised.append(key)
            }
        }
        for (key, state) in running where state.kept.report != state.initial { revised.append(key) }
        running = [:]

        var changes: [EventChange] = []
        for batch in slice where !batch.isEmpty {
            changes += associator.apply(batch, isTaken: outside.has)
        }
        try outside.check()
        try db.countAssociationChanges(changes, associator: associator)
        for key in keys {
            try importer.write(
                key, report: associator.report(key), event: associator.event(containing: key)?.id,
                tombstone: associator.tombstone(key), isNew: newKeys.contains(key))
        }
        // Rows the rebuild (or entering association mode) wrote show the reports before the
        // items: they count as written no more, so that the republishing below writes them again
        // when a revised member or a namesake changed them.
        importer.forgetPublished()
        try importer.publish(changes, associator: associator, outside: outside, recorder: &recorder)
        // A revised report that is not its event's preferred one leaves the event as the
        // associator sees it (same members, same preferred report), but not its row: the
        // contributors carry every member's solution.
        try importer.republishEvents(of: revised, associator: associator, outside: outside, recorder: &recorder)
        try importer.republishNamesakes(associator: associator, outside: outside, recorder: &recorder)
        try outside.check()

        // The next slice's associator names its new events after this one's.
        try db.cachedStatement(sql: "UPDATE associationState SET lastCreated = max(lastCreated, ?)").execute(
            arguments: [importer.lastCreated])
    }
}

/// The writes of one source import's transaction: reports, tombstones, events and quake rows.
struct SourceImport {
    let db: Database
    let name: String
    let now: Int64
    /// The largest creation number of the events this transaction created.
    private(set) var lastCreated: Int64 = 0
    /// The events whose rows this transaction wrote, and the ids of every event it created,
    /// updated or deleted (see ``republishNamesakes(associator:recorder:)``).
    private var published: Set<String> = []
    private var changedIDs: Set<String> = []
    /// Usgs reports deleted as superseded, and the usgs report that superseded each (see
    /// ``Database/associateSourceItems(_:batches:position:query:association:now:expireBefore:settings:recorder:usgsSupersededBy:)``).
    var usgsSupersededBy: [String: String] = [:]
    /// The per-report and per-event statements, prepared once (cached by the connection) and
    /// driven through the SQLite C API (see ``RawStatement``).
    private let statements: SourceStatements
    /// The reports ``write(_:report:event:tombstone:isNew:)`` wrote, and the event each names in
    /// the table now (kept when ``publish`` moves one).
    private var writtenInEvent: [ReportKey: String] = [:]

    init(db: Database, name: String, now: Date) throws {
        self.db = db
        self.name = name
        self.now = QuakeTime.milliseconds(now)
        self.statements = try SourceStatements(db)
    }

    /// Writes what the associator keeps for `key`: its report (in `event`) or none, its tombstone
    /// or none. `isNew`: the associator had neither a report nor a tombstone for `key` before this
    /// run, so the tables have neither (the associator is theirs): nothing to delete.
    mutating func write(_ key: ReportKey, report: SourceReport?, event: String?, tombstone: Int64?, isNew: Bool)
        throws
    {
        if let report, let event {
            let links = Self.linksJSON(report.links)
            try statements.insertReport.run([
                report.source.databaseValue, report.id.databaseValue, report.agency.databaseValue,
                report.time.databaseValue, report.latitude.databaseValue, report.longitude.databaseValue,
                report.depth.databaseValue, report.magnitude.databaseValue, report.magnitudeType.databaseValue,
                report.place.databaseValue, report.eventType.databaseValue,
                report.evaluationMode?.rawValue.databaseValue ?? .null,
                report.evaluationStatus?.rawValue.databaseValue ?? .null, report.updated.databaseValue,
                links.databaseValue, event.databaseValue,
            ])
            writtenInEvent[key] = event
            if !isNew { try statements.deleteLinks.run(key.source, key.id) }
            for link in ReportLinks.links(of: report) {
                try statements.insertLink.run(link, key.source, key.id)
            }
        } else if !isNew {
            try statements.deleteReport.run(key.source, key.id)
            try statements.deleteLinks.run(key.source, key.id)
        }
        if let tombstone {
            try statements.insertTombstone.run(key.source, key.id, tombstone)
        } else if !isNew {
            try statements.deleteTombstone.run(key.source, key.id)
        }
    }

    /// A report's `links` as the JSON array of strings a `JSONEncoder` wrote (decoded alike).
    static func linksJSON(_ links: [String]) -> String {
        if links.isEmpty { return "[]" }
        var out: [UInt8] = [UInt8(ascii: "[")]
        for (i, link) in links.enumerated() {
            if i > 0 { out.append(UInt8(ascii: ",")) }
            CanonicalJSON.string(link, to: &out)
        }
        out.append(UInt8(ascii: "]"))
        return String(decoding: out, as: UTF8.self)
    }

    /// Writes each changed event and its quake row, recording the row's change.
    mutating func publish(
        _ changes: [EventChange], associator: Associator, outside: OutsideEvents, recorder: inout HistoryRecorder
    ) throws {
        for change in changes {
            changedIDs.insert(change.eventID)
            switch change {
            case .created(let event), .updated(let event):
                if case .created = change { lastCreated = max(lastCreated, Int64(clamping: event.created)) }
                try statements.insertEvent.run(
                    event.id, Int64(clamping: event.created), event.preferred.source, event.preferred.id)
                var members: [SourceReport] = []
                members.reserveCapacity(event.reports.count)
                for key in event.reports {
                    // A report this transaction wrote (``write``) or moved already names its event.
                    if writtenInEvent[key] != event.id {
                        try statements.setReportEvent.run(event.id, key.source, key.id, event.id)
                        // A later slice may move it again, or back (see associateSourceItems).
                        if writtenInEvent[key] != nil { writtenInEvent[key] = event.id }
                    }
                    if let report = associator.report(key) { members.append(report) }
                }
                try publish(
                    event, members: members, associator: associator, outside: outside, recorder: &recorder,
                    isCreated: { if case .created = change { true } else { false } }())
            case .deleted(let id, var survivor):
                if survivor == nil, let winner = usgsSupersededBy[id] {
                    // The usgs report that named this event was superseded by another usgs
                    // report: the event is that one's (as in plain mode).
                    survivor = associator.event(containing: ReportKey(source: QuakeStore.usgsSource, id: winner))?.id
                    if survivor == id { survivor = nil }
                }
                try statements.deleteEvent.run(id)
                guard let quake = try statements.quake(id) else { continue }
                try recorder.recordDelete(
                    Tombstone(of: quake), reason: survivor == nil ? .deletedUpstream : .superseded,
                    supersededBy: survivor, row: quake)
                try statements.deleteQuake.run(id)
            }
        }
    }

    /// Writes the rows of the events not written yet that hold a report whose id is the id of an
    /// event this transaction created, updated or deleted: their `ids` leave out a member id while
    /// another event has it (``QuakeStore/feature(of:members:now:isOtherEvent:)``), so they change
    /// when such an event comes or goes. Such an event may be outside the part of the store the
    /// associator holds: the tables say which (they name the associator's events by now) and
    /// give its members.
    mutating func republishNamesakes(
        associator: Associator, outside: OutsideEvents, recorder: inout HistoryRecorder
    ) throws {
        var holders = Set<String>()
        for id in changedIDs.sorted() {
            holders.formUnion(associator.events(holdingReportID: id))
            if let reader = outside.reader { holders.formUnion(try reader.events(holdingReportID: id)) }
            holders.remove(id)
        }
        for id in holders.subtracting(published).sorted() {
            if let event = associator.event(id: id) {
                try publish(
                    event, members: event.reports.compactMap { associator.report($0) }, associator: associator,
                    outside: outside, recorder: &recorder)
            } else if let reader = outside.reader, !outside.inside.contains(id),
                let (event, members) = try reader.storedEvent(id)
            {
                try publish(event, members: members, associator: associator, outside: outside, recorder: &recorder)
            }
        }
    }

    /// Forgets which rows were written so far (the rebuild's, written before the items applied).
    mutating func forgetPublished() { published.removeAll() }

    /// Forgets what the slice before wrote and changed: the next slice's associator is restored
    /// from the tables, which say it, and its namesakes are those of its own changes (the slice
    /// before republished its own). What is kept for the whole run stays (``lastCreated``,
    /// ``usgsSupersededBy``), so memory follows the slice.
    mutating func beginSlice() {
        published.removeAll()
        changedIDs.removeAll()
        writtenInEvent.removeAll()
    }

    /// Writes the rows, not written yet, of the events that hold `keys` (reports revised without
    /// changing their event as the associator compares them: see ``Event``).
    mutating func republishEvents(
        of keys: [ReportKey], associator: Associator, outside: OutsideEvents, recorder: inout HistoryRecorder
    ) throws {
        let ids = Set(keys.compactMap { associator.event(containing: $0)?.id }).subtracting(published)
        for id in ids.sorted() {
            guard let event = associator.event(id: id) else { continue }
            try publish(
                event, members: event.reports.compactMap { associator.report($0) }, associator: associator,
                outside: outside, recorder: &recorder)
        }
    }

    /// Writes every event's row (entering association mode: see ``QuakeStore/enterAssociationMode(_:)``).
    mutating func republishAll(associator: Associator, outside: OutsideEvents, recorder: inout HistoryRecorder)
        throws
    {
        for event in associator.events {
            try publish(
                event, members: event.reports.compactMap { associator.report($0) }, associator: associator,
                outside: outside, recorder: &recorder)
        }
    }

    private mutating func publish(
        _ event: Event, members: [SourceReport], associator: Associator, outside: OutsideEvents,
        recorder: inout HistoryRecorder, isCreated: Bool = false
    ) throws {
        published.insert(event.id)
        // Another event has the id: one the associator holds, or a stored one outside its part.
        let isOtherEvent = { (id: String) in associator.event(id: id) != nil || outside.has(id) }
        var feature = QuakeStore.feature(of: event, members: members, now: now, isOtherEvent: isOtherEvent)
        if let usgs = members.first(where: { $0.source == QuakeStore.usgsSource }),
            let row = try statements.usgsRow(usgs.id)
        {
            feature = QuakeStore.feature(
                feature, withUsgsRow: row, onlyMember: members.count == 1,
                preferred: event.preferred.source == QuakeStore.usgsSource, isOtherEvent: isOtherEvent)
        }
        (feature.agency, feature.contributors) = QuakeStore.contributorFields(
            preferred: event.preferred, members: members)
        try publish(feature, recorder: &recorder, isCreated: isCreated)
    }

    /// Inserts the row, or updates the stored one when a field differs. `isCreated`: the event is
    /// new, so its row most likely is too: the insert is tried first (`OR IGNORE`: when a row has
    /// the id, or a CHECK fails, nothing is inserted and the row is looked up as for any other).
    private func publish(_ feature: FeedFeature, recorder: inout HistoryRecorder, isCreated: Bool) throws {
        let values = QuakeColumns.values(of: feature)
        if isCreated {
            try statements.insertQuakeIfNew.run(values)
            if db.changesCount == 1 {
                try indexAliases(of: feature, replacing: nil)
                try recorder.recordInsert(id: feature.id)
                return
            }
        }
        if let stored = try statements.quake(feature.id) {
            let fields = QuakeColumns.changes(from: QuakeColumns.values(of: stored), to: values)
            guard !fields.isEmpty else { return }
            try statements.updateQuake.run(values)
            if stored.ids != feature.ids { try indexAliases(of: feature, replacing: stored) }
            try recorder.recordUpdate(id: feature.id, fields: fields, row: values)
        } else {
            try statements.insertQuake.run(values)
            try indexAliases(of: feature, replacing: nil)
            try recorder.recordInsert(id: feature.id)
        }
    }

    /// The alias index (`quakeAliases`) keeps every other id a row lists. `stored`: the row this
    /// one replaces, whose entries are there: only the ids one lists and the other not change
    /// (an event that gains a report keeps its entries and gains one).
    private func indexAliases(of feature: FeedFeature, replacing stored: FeedFeature?) throws {
        let aliases = feature.otherIDs
        guard let stored else {
            for alias in aliases { try statements.insertAlias.run(alias, feature.id) }
            return
        }
        let storedAliases = stored.otherIDs
        let before = Set(storedAliases)
        let after = Set(aliases)
        for alias in storedAliases where !after.contains(alias) {
            try statements.deleteAlias.run(alias, feature.id)
        }
        for alias in aliases where !before.contains(alias) {
            try statements.insertAlias.run(alias, feature.id)
        }
    }
}

/// The statements of a ``SourceImport``, each the connection's cached statement, bound and stepped
/// through the SQLite C API: the same SQL the import ran through GRDB's arguments and rows.
struct SourceStatements {
    let insertReport: RawStatement
    let deleteReport: RawStatement
    let insertLink: RawStatement
    let deleteLinks: RawStatement
    let insertTombstone: RawStatement
    let deleteTombstone: RawStatement
    let insertEvent: RawStatement
    let deleteEvent: RawStatement
    let setReportEvent: RawStatement
    private let selectQuake: RawStatement
    let insertQuake: RawStatement
    let insertQuakeIfNew: RawStatement
    let updateQuake: RawStatement
    let deleteQuake: RawStatement
    let deleteAlias: RawStatement
    let insertAlias: RawStatement
    private let selectUsgsRow: RawStatement

    init(_ db: Database) throws {
        insertReport = try RawStatement(
            db,
            sql: """
                INSERT OR REPLACE INTO reports (source, id, agency, time, latitude, longitude, depth, magnitude,
                    magnitudeType, place, eventType, evaluationMode, evaluationStatus, updated, links, event)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """)
        deleteReport = try RawStatement(db, sql: "DELETE FROM reports WHERE source = ? AND id = ?")
        insertLink = try RawStatement(db, sql: "INSERT OR IGNORE INTO reportLinks (link, source, id) VALUES (?, ?, ?)")
        deleteLinks = try RawStatement(db, sql: "DELETE FROM reportLinks WHERE source = ? AND id = ?")
        insertTombstone = try RawStatement(
            db, sql: "INSERT OR REPLACE INTO reportTombstones (source, id, updated) VALUES (?, ?, ?)")
        deleteTombstone = try RawStatement(db, sql: "DELETE FROM reportTombstones WHERE source = ? AND id = ?")
        insertEvent = try RawStatement(
            db,
            sql: """
                INSERT INTO sourceEvents (id, created, preferredSource, preferredId) VALUES (?, ?, ?, ?)
                ON CONFLICT (id) DO UPDATE SET created = excluded.created,
                    preferredSource = excluded.preferredSource, preferredId = excluded.preferredId
                WHERE (created, preferredSource, preferredId)
                    IS NOT (excluded.created, excluded.preferredSource, excluded.preferredId)
                """)
        deleteEvent = try RawStatement(db, sql: "DELETE FROM sourceEvents WHERE id = ?")
        setReportEvent = try RawStatement(
            db, sql: "UPDATE reports SET event = ? WHERE source = ? AND id = ? AND event <> ?")
        selectQuake = try RawStatement(db, sql: "SELECT \(QuakeColumns.list) FROM quakes WHERE id = ?")
        insertQuake = try RawStatement(
            db, sql: "INSERT INTO quakes (\(QuakeColumns.list)) VALUES (\(QuakeColumns.placeholders))")
        insertQuakeIfNew = try RawStatement(
            db, sql: "INSERT OR IGNORE INTO quakes (\(QuakeColumns.list)) VALUES (\(QuakeColumns.placeholders))")
        updateQuake = try RawStatement(
            db, sql: "UPDATE quakes SET \(QuakeColumns.assignments), feedHash = NULL WHERE id = ?1")
        deleteQuake = try RawStatement(db, sql: "DELETE FROM quakes WHERE id = ?")
        deleteAlias = try RawStatement(db, sql: "DELETE FROM quakeAliases WHERE alias = ? AND quakeId = ?")
        insertAlias = try RawStatement(db, sql: "INSERT OR IGNORE INTO quakeAliases (alias, quakeId) VALUES (?, ?)")
        selectUsgsRow = try RawStatement(db, sql: "SELECT \(QuakeColumns.list) FROM usgsReports WHERE id = ?")
    }

    /// The quake row stored under `id`, if any (``QuakeStore/fetchQuake(_:id:)``).
    func quake(_ id: String) throws -> FeedFeature? {
        try row(selectQuake, id)
    }

    /// The USGS feed's row `id` in association mode (``QuakeStore/usgsReportRow(_:id:)``).
    func usgsRow(_ id: String) throws -> FeedFeature? {
        try row(selectUsgsRow, id)
    }

    private func row(_ statement: RawStatement, _ id: String) throws -> FeedFeature? {
        statement.reset()
        statement.bind(1, id)
        defer { statement.reset() }  // no statement stays mid-step across the commit
        guard try statement.step() else { return nil }
        return QuakeColumns.feature(from: statement)
    }
}
