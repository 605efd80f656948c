import GRDB
import GRDBSQLite
import QuakeFeed

/// The upstream deletions the store remembers (`upstreamDeletions`), as the import reads and
/// writes them: the `updated` of each deletion, under each of its event's ids (see ``FeedImport``
/// on upstream deletions).
struct UpstreamDeletions {
    private let select: RawStatement
    private let insert: RawStatement
    private let delete: RawStatement
    /// Whether the table may have entries (it had at the start, or this import added some).
    private(set) var possible: Bool

    init(_ db: Database) throws {
        possible = try Bool.fetchOne(db, sql: "SELECT EXISTS (SELECT 1 FROM upstreamDeletions)") == true
        select = try RawStatement(db, sql: "SELECT updated FROM upstreamDeletions WHERE id = ?")
        insert = try RawStatement(
            db, sql: "INSERT OR REPLACE INTO upstreamDeletions (id, updated, time) VALUES (?, ?, ?)")
        delete = try RawStatement(db, sql: "DELETE FROM upstreamDeletions WHERE id = ?")
    }

    /// The `updated` of the upstream deletion remembered for `id`, if any.
    func updated(of id: String) throws -> Int64? {
        select.reset()
        select.bind(1, id)
        defer { select.reset() }
        guard try select.step() else { return nil }
        return select.int64(0)
    }

    /// Whether an upstream deletion is remembered for the UTF-8 `id`.
    func has(_ id: UnsafeRawBufferPointer) throws -> Bool {
        guard possible else { return false }
        let s = select.handle
        sqlite3_reset(s)
        select.bindStatic(1, id)
        defer { sqlite3_reset(s) }
        return try select.step()
    }

    /// Remembers a deletion of `id`'s event (replacing one remembered before).
    mutating func remember(_ id: String, updated: Int64, time: Int64) throws {
        possible = true
        insert.reset()
        insert.bind(1, id)
        insert.bind(2, updated)
        insert.bind(3, time)
        try insert.step()
    }

    /// Forgets the deletion remembered for `id`: the event is back upstream.
    func forget(_ id: String) throws {
        delete.reset()
        delete.bind(1, id)
        try delete.step()
    }
}

extension FeedImport {
    /// The `status` of an event the catalog deleted (normalised to lower case by the decoder).
    static let deletedStatus = "deleted"

    static func isDeletedStatus(_ status: UnsafeRawBufferPointer) -> Bool {
        status.elementsEqual(deletedStatus.utf8)
    }

    /// A feature whose status is `deleted`: removes the stored rows of its event (its own, and its
    /// aliases') with the reason `deleted-upstream`, unless one of them is newer than the deletion
    /// (then the deletion is stale: the event came back upstream), and
    /// remembers the deletion under each of the event's ids, the feature's and those of the rows it
    /// removes (see the type's documentation).
    mutating func applyDeletion(_ incoming: FeedFeature) throws {
        var rows: [FeedFeature] = []
        if let own = try statements.fetch(incoming.id) { rows.append(own) }
        rows += try sameEvent(as: incoming, others: incoming.otherIDs)
        if rows.contains(where: { Self.isOlder(incoming, than: $0) }) {
            // A stored version is newer than the deletion: the event came back upstream since. That
            // row may yet change in this document: judged again at the end.
            report.stale += 1
            undecided.add(incoming, hash: 0, as: .staleDeletion, position: position)
            return
        }
        let current = rows
        // Every id of the event: the deletion's, and those of the rows it removes (the same event).
        var ids = [incoming.id] + incoming.otherIDs
        for row in current { ids += [row.id] + row.otherIDs }
        for id in Set(ids) {
            // Without `updated` it deletes whatever is stored, and holds against every later version.
            try deletions.remember(id, updated: incoming.updated ?? .max, time: incoming.time)
        }
        guard !current.isEmpty else {
            report.skipped[ImportReport.deletedReason, default: 0] += 1
            return
        }
        for row in current {
            try recorder.recordDelete(Self.tombstone(of: row), reason: .deletedUpstream, row: row)
            try statements.deleteRow(row.id)  // the trigger takes its aliases out of the index
        }
    }
}
