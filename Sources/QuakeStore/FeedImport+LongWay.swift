import GRDB
import GRDBSQLite
import QuakeFeed

extension FeedImport {
    /// The long way for one feature whose bytes hash to `hash` (a stored row that differs, aliases,
    /// a conflict on insert): look the row up, compare, and insert, update or skip. Returns `true`
    /// when the stored row was written from the same bytes.
    mutating func apply(_ incoming: FeedFeature, hash: UInt64) throws -> Bool {
        if incoming.status == Self.deletedStatus {
            try applyDeletion(incoming)
            return false
        }
        // Whether the feature is newer than an upstream deletion of its event: if it is stored,
        // the event was brought back upstream, and the deletion is forgotten.
        var reinstates = false
        if deletions.possible,
            let deletedAt = try ([incoming.id] + incoming.otherIDs).compactMap(deletions.updated(of:)).max()
        {
            // Under any of its ids, a version no newer than the deletion is a copy of the deleted
            // event.
            guard let updated = incoming.updated, updated > deletedAt else {
                report.skipped[ImportReport.deletedReason, default: 0] += 1
                // A later feature of the document may bring the event back: judged again at the end.
                undecided.add(incoming, hash: hash, as: .deletedCopy, position: position)
                return false
            }
            reinstates = true
        }
        let others = incoming.otherIDs
        let stored: FeedFeature?
        var sameValues = false
        let select = statements.select
        select.reset()
        select.bind(1, incoming.id)
        if try select.step() {
            defer { select.reset() }  // no statement stays mid-step across the commit
            if others.isEmpty, select.int64(QuakeColumns.feedHashColumn).map({ UInt64(bitPattern: $0) }) == hash {
                return countUnchangedByHash()
            }
            // Checked in place without decoding the row.
            sameValues = others.isEmpty && QuakeColumns.storedRowMatches(incoming, select)
            stored = sameValues ? nil : QuakeColumns.feature(from: select)
        } else {
            stored = nil
        }
        if sameValues {
            // Stored under its own id, so no other row claims that id (the alias index).
            report.unchanged += 1
            try statements.recordHash(hash, of: incoming.id)
            return false
        }
        if let stored, Self.isOlder(incoming, than: stored) {
            report.stale += 1
            // Its row may yet be superseded in this document. (A lagging copy of a whole feed
            // makes many of these: past the bound, they are not kept, and such a document may
            // need a second import to settle.)
            undecided.add(incoming, hash: hash, as: .staleAgainstOwnRow, position: position)
            return false
        }
        let rivals = try sameEvent(as: incoming, others: others)
        if let winner = rivals.first(where: { !Self.supersedes(incoming, $0) }) {
            report.stale += 1
            undecided.add(incoming, hash: hash, as: .lostToRival, position: position)  // the rival may yet change
            // The newest word on this id says it is the winner's event, and the winner is newer:
            // the id's own older row is a second copy of that event.
            if let stored { try supersede(stored, by: winner.id) }
            return false
        }
        for rival in rivals {
            try supersede(rival, by: incoming.id)
        }
        if reinstates {
            // It stands: the event is back upstream, under each of its ids.
            for id in [incoming.id] + incoming.otherIDs {
                try deletions.forget(id)
            }
        }
        guard let stored else {
            expectNew = true
            try statements.bindAndStep(incoming, hash: hash, statements.insert)
            if sqlite3_changes(db.sqliteConnection) == 0 {
                throw DatabaseError(
                    resultCode: .SQLITE_CONSTRAINT, message: "quake \(incoming.id) violates a constraint of quakes")
            }
            try aliases.add(others, of: incoming.id)
            try recorder.recordInsert(id: incoming.id)
            return false
        }
        if stored == incoming {
            report.unchanged += 1
            try statements.recordHash(hash, of: incoming.id)
            // The superseded rows' index entries went with them; some may be ids this row lists.
            if !rivals.isEmpty { try aliases.add(others, of: incoming.id) }
            return false
        }
        try statements.bindAndStep(incoming, hash: hash, statements.update)
        if stored.ids != incoming.ids {
            try aliases.removeEntries(of: incoming.id)
            try aliases.add(others, of: incoming.id)
        }
        try recorder.recordUpdate(id: incoming.id, fields: QuakeColumns.changes(from: stored, to: incoming))
        return false
    }

    /// An incoming version is older only when both carry `updated` and the incoming one is smaller:
    /// a lagging CDN copy must never roll data back.
    static func isOlder(_ incoming: FeedFeature, than stored: FeedFeature) -> Bool {
        guard let new = incoming.updated, let old = stored.updated else { return false }
        return new < old
    }

    /// Whether `incoming` wins against `rival`, a stored row of the same event under another id.
    ///
    /// A strict total order on versions of an event, so that winning is never true both ways and
    /// never goes round in a circle (which would make the outcome depend on the order of a
    /// document): the newer `updated` wins (a version without one is older than any with one);
    /// then the version listing more ids (the USGS adds ids to an event as it associates them, so
    /// that is the later association: ",Y,X," over ",X,"); then the greater id.
    static func supersedes(_ incoming: FeedFeature, _ rival: FeedFeature) -> Bool {
        func key(_ f: FeedFeature) -> (Int64, Int, String) {
            (f.updated ?? .min, f.otherIDs.count, f.id)
        }
        return key(incoming) > key(rival)
    }

    static func tombstone(of quake: FeedFeature) -> Tombstone {
        Tombstone(of: quake)
    }
}
