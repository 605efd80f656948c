import Foundation
import GRDB
import QuakeAssociation

/// The association's running counts (`associationState.joined`, `created`, `merged`, `split`,
/// migration v14), kept since the store entered association mode, across restarts: GetStatus's
/// `association` and the `quaked_association_*` metrics.
public struct AssociationCounts: Sendable, Hashable {
    /// Reports that joined an event another source had already reported.
    public var joined: Int64
    /// Events created (a report that matched none, or the part of an event that split off).
    public var created: Int64
    /// Events merged into another (deleted as superseded).
    public var merged: Int64
    /// Events whose reports no longer matched one another and went to two or more events.
    public var split: Int64
    /// Events (quake rows made from reports) and the reports they group, now.
    public var events: Int
    public var reports: Int

    public init(
        joined: Int64 = 0, created: Int64 = 0, merged: Int64 = 0, split: Int64 = 0, events: Int = 0, reports: Int = 0
    ) {
        self.joined = joined
        self.created = created
        self.merged = merged
        self.split = split
        self.events = events
        self.reports = reports
    }
}

extension QuakeStore {
    /// The association's counts, or nil while the store is not in association mode (no source
    /// has imported yet).
    public func associationCounts() throws -> AssociationCounts? {
        try pool.read { db in
            guard try Self.isAssociationMode(db),
                let row = try Row.fetchOne(
                    db,
                    sql: """
                        SELECT joined, created, merged, split,
                            (SELECT count(*) FROM sourceEvents), (SELECT count(*) FROM reports)
                        FROM associationState
                        """)
            else { return nil }
            return AssociationCounts(
                joined: row[0], created: row[1], merged: row[2], split: row[3], events: row[4], reports: row[5])
        }
    }
}

extension Database {
    /// Counts what one source import's items did to the grouping, in the import's transaction:
    /// called by ``associateSourceItems(_:batches:position:query:association:now:expireBefore:cache:recorder:usgsSupersededBy:)``
    /// after the associator applied the items (`changes`, `associator` as they are after them) and
    /// before the import writes the reports, so that the `reports` table still holds each report's
    /// event before the items.
    ///
    /// - new: each created event;
    /// - merged: each event deleted as superseded by another;
    /// - split: each event that existed before whose remaining reports are now in two or more
    ///   events;
    /// - joined: each report now in an event that existed before and that it was not in, which
    ///   holds a report of another source that was already in it.
    ///
    /// A regroup at start-up or after other association settings (``Associator/restore``) is not
    /// counted: no report arrived.
    func countAssociationChanges(_ changes: [EventChange], associator: Associator) throws {
        guard !changes.isEmpty else { return }
        var created = Set<String>()
        var merged = 0
        var touched: [String] = []
        var seen = Set<String>()
        for change in changes {
            switch change {
            case .created(let event):
                created.insert(event.id)
            case .updated:
                break
            case .deleted(_, let survivor):
                if survivor != nil { merged += 1 }
            }
            if seen.insert(change.eventID).inserted { touched.append(change.eventID) }
        }
        // Each touched event's members before the items, and each report's event before them.
        var membersBefore: [String: [ReportKey]] = [:]
        var eventBefore: [ReportKey: String] = [:]
        let members = try RawStatement(self, sql: "SELECT source, id FROM reports WHERE event = ?")
        for id in touched where !created.contains(id) {
            var keys: [ReportKey] = []
            try members.forEachRow([id]) { keys.append(AssociationPartReader.key($0)) }
            membersBefore[id] = keys
            for key in keys { eventBefore[key] = id }
        }
        var split = 0
        for (_, keys) in membersBefore {
            let now = Set(keys.compactMap { associator.event(containing: $0)?.id })
            if now.count >= 2 { split += 1 }
        }
        var joined = 0
        for id in touched where !created.contains(id) {
            guard let event = associator.event(id: id), let before = membersBefore[id] else { continue }
            for key in event.reports where eventBefore[key] != id {
                if before.contains(where: { $0.source != key.source }) { joined += 1 }
            }
        }
        try cachedStatement(
            sql: """
                UPDATE associationState SET joined = joined + ?, created = created + ?, merged = merged + ?,
                    split = split + ?
                """
        ).execute(arguments: [joined, created.count, merged, split])
    }
}

