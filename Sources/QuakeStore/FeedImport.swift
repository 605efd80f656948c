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
    private let db: Database
    private var recorder: HistoryRecorder
    private(set) var report: ImportReport
    private let select: RawStatement
    private let insert: RawStatement
    private let update: RawStatement
    private let delete: RawStatement
    /// Whether the previous feature was new (see `apply`).
    private var expectNew = true
    /// Features judged against a row that this import may still change or remove: the ones that
    /// lost to it, and the rows superseded. Judged again at the end (``settle()``).
    private var undecided = Undecided()
    /// The position in `features` of the element being applied.
    private var position = 0
    /// The secondary indexes of `quakes` dropped for this import, to build again at its end.
    private let deferredIndexes: [String]
    private let setHash: RawStatement
    private let selectHash: RawStatement
    private let selectAliasOwner: RawStatement
    /// Whether the alias index may have entries (it had at the start, or this import added some).
    private var aliasesPossible: Bool
    private let insertAlias: RawStatement
    private let deleteAliases: RawStatement
    /// Features with an earlier event time (ms) are expired (`Int64.min`: no retention).
    private let expireBefore: Int64
    /// Features left out as expired; `report.skipped["expired"]` at the end.
    private var expired = 0
    /// Whether `upstreamDeletions` may have entries (it had at the start, or this import added some).
    private var deletionsPossible: Bool
    private let selectDeletion: RawStatement
    private let insertDeletion: RawStatement
    private let deleteDeletion: RawStatement

    init(
        db: Database, report: ImportReport, now: Date, expireBefore: Int64 = .min, author: HistoryAuthor = .import,
        commitSignal: CommitSignal
    ) throws {
        self.db = db
        self.report = report
        self.expireBefore = expireBefore
        self.recorder = try HistoryRecorder(
            db: db, author: author, source: report.source, now: now, commitSignal: commitSignal)
        // Before the statements are prepared: a schema change makes them prepare again.
        let startsEmpty = try Bool.fetchOne(db, sql: "SELECT NOT EXISTS (SELECT 1 FROM quakes)") == true
        deferredIndexes = startsEmpty ? try Self.dropSecondaryIndexes(db) : []
        // Into an empty table, the import's history is exactly one insert per row it leaves
        // (an insert then an update is an insert; an insert then a delete is nothing): written
        // at the end in one statement, in key order, instead of one change row per feature.
        recorder.recordsInsertsOfTableAtFinish = startsEmpty
        // `feedHash` last: column 30, after the 30 columns `QuakeColumns.feature(from:)` reads.
        select = try RawStatement(db, sql: "SELECT \(QuakeColumns.list), feedHash FROM quakes WHERE id = ?")
        // OR IGNORE: a statement that cannot abort halfway needs no statement journal (a copy of
        // every page it touches). Only called when the id is not stored, so nothing is ignored
        // but a CHECK failure, which `insertRow` turns back into an error.
        insert = try RawStatement(
            db,
            sql:
                "INSERT OR IGNORE INTO quakes (\(QuakeColumns.list), feedHash) VALUES (\(QuakeColumns.placeholders), ?)"
        )
        // An INSERT ... SELECT ... WHERE NOT EXISTS (alias) in one statement would write a statement
        // journal for every row (it may insert several): a separate lookup, only once the index
        // has entries, costs far less.
        aliasesPossible = try Bool.fetchOne(db, sql: "SELECT EXISTS (SELECT 1 FROM quakeAliases)") == true
        // Parameters in column order, `id` first, so one bind function serves insert and update.
        update = try RawStatement(
            db, sql: "UPDATE quakes SET \(QuakeColumns.assignments), feedHash = ?31 WHERE id = ?1")
        delete = try RawStatement(db, sql: "DELETE FROM quakes WHERE id = ?")
        setHash = try RawStatement(db, sql: "UPDATE quakes SET feedHash = ? WHERE id = ?")
        selectHash = try RawStatement(db, sql: "SELECT feedHash, time FROM quakes WHERE id = ?")
        selectAliasOwner = try RawStatement(db, sql: "SELECT quakeId FROM quakeAliases WHERE alias = ?")
        insertAlias = try RawStatement(db, sql: "INSERT OR IGNORE INTO quakeAliases (alias, quakeId) VALUES (?, ?)")
        deleteAliases = try RawStatement(db, sql: "DELETE FROM quakeAliases WHERE quakeId = ?")
        deletionsPossible = try Bool.fetchOne(db, sql: "SELECT EXISTS (SELECT 1 FROM upstreamDeletions)") == true
        selectDeletion = try RawStatement(db, sql: "SELECT updated FROM upstreamDeletions WHERE id = ?")
        insertDeletion = try RawStatement(
            db, sql: "INSERT OR REPLACE INTO upstreamDeletions (id, updated, time) VALUES (?, ?, ?)")
        deleteDeletion = try RawStatement(db, sql: "DELETE FROM upstreamDeletions WHERE id = ?")
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

    /// Judges the undecided features again against the rows as the document left them, until a
    /// round changes nothing (at most four rounds: ties can in theory chase each other).
    ///
    /// A feature that lost to a row, or a row that another id superseded, is decided by what that
    /// row was at the time. When a later feature of the same document changes that row (a newer
    /// version that no longer lists the id) or removes it (supersedes it), the decision would differ
    /// against the rows the document leaves, and importing the document again would change the
    /// store. Judged again here, the import ends where a second import of it would: importing the
    /// same document again changes nothing. `stale` and `unchanged` keep counting each feature as
    /// it was judged where it stood in the document. A feature stale against its own id's row is
    /// judged again only when that row is gone, so the usual stale feature costs one lookup.
    private mutating func settle() throws {
        var rounds = 0
        while !undecided.entries.isEmpty && rounds < 4 {
            rounds += 1
            let pending = undecided.entries
            undecided.entries = []
            let changesBefore = db.totalChangesCount
            let (stale, unchanged, byHash, skipped) = (
                report.stale, report.unchanged, report.unchangedByHash, report.skipped
            )
            for entry in pending {
                // A row from before that was superseded comes back only when the document has no
                // word on its id: otherwise that word decides (it is an entry itself). While its id
                // is stored, only a feature that lost to another id's row is judged again (a stored
                // id was last written by its own version, which stands), and not against a later
                // version of the id in the document unless strictly newer than it (as in the
                // document: the newer wins, and on a tie the later one).
                if entry.kind == .superseded && undecided.documentSpeaks(of: entry.feature.id) { continue }
                if entry.kind == .staleDeletion {
                    position = entry.position
                    try applyDeletion(entry.feature)
                    continue
                }
                let own = try fetch(entry.feature.id)
                if let own {
                    guard entry.kind == .lostToRival || entry.kind == .deletedCopy else { continue }
                    if undecided.laterVersionSeen(of: entry) && !Self.isOlder(own, than: entry.feature) { continue }
                }
                position = entry.position
                _ = try apply(entry.feature, hash: entry.hash)
            }
            (report.stale, report.unchanged, report.unchangedByHash, report.skipped) = (stale, unchanged, byHash, skipped)
            if db.totalChangesCount == changesBefore { break }
        }
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
                let stored = try id.withUTF8({ try storedHashAndTime(of: UnsafeRawBufferPointer($0)) })
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
            let (buffer, range) =
                switch location {
                case .chunk(let range): (batch.chunk, range)
                case .copied(let range): (batch.bytes, range)
                }
            let (decoded, texts) = try buffer.withUnsafeBytes { buffer in
                try FeedParser.decodeElement(
                    UnsafeRawBufferPointer(rebasing: buffer[range]), index: element.index, base: offset)
            }
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
            if try !isIndexedAlias(id), try !isDeletedUpstream(id) {
                try QuakeColumns.bindAndStep(record, arena: arena, hash: hash, insert)
                if sqlite3_changes(db.sqliteConnection) == 1 {
                    try recorder.recordInsert(id: id)
                    return false
                }
            }
            expectNew = false
        }
        if !record.hasAliases, try storedHash(of: id) == hash {
            return countUnchangedByHash()
        }
        return try apply(record.feature(in: arena), hash: hash)
    }

    /// Counts a feature found unchanged by its hash; returns `true` (see `apply`).
    private mutating func countUnchangedByHash() -> Bool {
        report.unchanged += 1
        report.unchangedByHash += 1
        return true
    }

    /// The `feedHash` and `time` of the row stored under `id` (UTF-8), if one is.
    private func storedHashAndTime(of id: UnsafeRawBufferPointer) throws -> (hash: UInt64?, time: Int64)? {
        let s = selectHash.handle
        sqlite3_reset(s)
        selectHash.bindStatic(1, id)
        defer { sqlite3_reset(s) }  // no statement stays mid-step across the commit
        guard try selectHash.step() else { return nil }
        return (selectHash.int64(0).map { UInt64(bitPattern: $0) }, selectHash.int64(1) ?? 0)
    }

    /// The `feedHash` of the row stored under `id` (UTF-8), if any.
    private func storedHash(of id: UnsafeRawBufferPointer) throws -> UInt64? {
        let s = selectHash.handle
        sqlite3_reset(s)
        selectHash.bindStatic(1, id)
        defer { sqlite3_reset(s) }  // no statement stays mid-step across the commit
        guard try selectHash.step() else { return nil }
        return selectHash.int64(0).map { UInt64(bitPattern: $0) }
    }

    /// The long way for one feature whose bytes hash to `hash` (a stored row that differs, aliases,
    /// a conflict on insert): look the row up, compare, and insert, update or skip. Returns `true`
    /// when the stored row was written from the same bytes.
    private mutating func apply(_ incoming: FeedFeature, hash: UInt64) throws -> Bool {
        if incoming.status == Self.deletedStatus {
            try applyDeletion(incoming)
            return false
        }
        // Whether the feature is newer than an upstream deletion of its event: if it is stored,
        // the event was brought back upstream, and the deletion is forgotten.
        var reinstates = false
        if deletionsPossible, let deletedAt = try ([incoming.id] + incoming.otherIDs).compactMap(upstreamDeletion).max() {
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
        select.reset()
        select.bind(1, incoming.id)
        if try select.step() {
            defer { select.reset() }  // no statement stays mid-step across the commit
            if others.isEmpty, select.int64(30).map({ UInt64(bitPattern: $0) }) == hash {
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
            try recordHash(hash, of: incoming.id)
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
                deleteDeletion.reset()
                deleteDeletion.bind(1, id)
                try deleteDeletion.step()
            }
        }
        guard let stored else {
            expectNew = true
            try bindAndStep(incoming, hash: hash, insert)
            if sqlite3_changes(db.sqliteConnection) == 0 {
                throw DatabaseError(
                    resultCode: .SQLITE_CONSTRAINT, message: "quake \(incoming.id) violates a constraint of quakes")
            }
            try index(others, of: incoming.id)
            try recorder.recordInsert(id: incoming.id)
            return false
        }
        if stored == incoming {
            report.unchanged += 1
            try recordHash(hash, of: incoming.id)
            // The superseded rows' index entries went with them; some may be ids this row lists.
            if !rivals.isEmpty { try index(others, of: incoming.id) }
            return false
        }
        try bindAndStep(incoming, hash: hash, update)
        if stored.ids != incoming.ids {
            deleteAliases.reset()
            deleteAliases.bind(1, incoming.id)
            try deleteAliases.step()
            try index(others, of: incoming.id)
        }
        try recorder.recordUpdate(id: incoming.id, fields: QuakeColumns.changes(from: stored, to: incoming))
        return false
    }

    /// A feature whose status is `deleted`: removes the stored rows of its event (its own, and its
    /// aliases') with the reason `deleted-upstream`, unless one of them is newer than the deletion
    /// (then the deletion is stale: the event came back upstream), and
    /// remembers the deletion under each of the event's ids, the feature's and those of the rows it
    /// removes (see the type's documentation).
    private mutating func applyDeletion(_ incoming: FeedFeature) throws {
        var rows: [FeedFeature] = []
        if let own = try fetch(incoming.id) { rows.append(own) }
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
            deletionsPossible = true
            insertDeletion.reset()
            insertDeletion.bind(1, id)
            // Without `updated` it deletes whatever is stored, and holds against every later version.
            insertDeletion.bind(2, incoming.updated ?? .max)
            insertDeletion.bind(3, incoming.time)
            try insertDeletion.step()
        }
        guard !current.isEmpty else {
            report.skipped[ImportReport.deletedReason, default: 0] += 1
            return
        }
        for row in current {
            try recorder.recordDelete(Self.tombstone(of: row), reason: .deletedUpstream, row: row)
            delete.reset()
            delete.bind(1, row.id)
            try delete.step()  // the trigger takes its aliases out of the index
        }
    }

    /// The `updated` of the upstream deletion remembered for `id`, if any.
    private func upstreamDeletion(of id: String) throws -> Int64? {
        selectDeletion.reset()
        selectDeletion.bind(1, id)
        defer { selectDeletion.reset() }
        guard try selectDeletion.step() else { return nil }
        return selectDeletion.int64(0)
    }

    /// Whether an upstream deletion is remembered for the UTF-8 `id`.
    private func isDeletedUpstream(_ id: UnsafeRawBufferPointer) throws -> Bool {
        guard deletionsPossible else { return false }
        let s = selectDeletion.handle
        sqlite3_reset(s)
        selectDeletion.bindStatic(1, id)
        defer { sqlite3_reset(s) }
        return try selectDeletion.step()
    }

    /// The `status` of an event the catalog deleted (normalised to lower case by the decoder).
    static let deletedStatus = "deleted"

    static func isDeletedStatus(_ status: UnsafeRawBufferPointer) -> Bool {
        status.elementsEqual(deletedStatus.utf8)
    }

    /// Deletes `row` as superseded by the event stored (or about to be) under `winner`.
    private mutating func supersede(_ row: FeedFeature, by winner: String) throws {
        // Back if its superseder changes. A row this import wrote is the document's word on its
        // id; one from before is not, and gives way to one that is.
        let written = try recorder.recordsInsertsOfTableAtFinish || recorder.hasChange(of: row.id)
        undecided.add(row, hash: 0, as: written ? .supersededWritten : .superseded, position: position)
        // Recorded first: the recorder reads what it needs of the row before it goes.
        try recorder.recordDelete(Self.tombstone(of: row), reason: .superseded, supersededBy: winner, row: row)
        delete.reset()
        delete.bind(1, row.id)
        try delete.step()  // the trigger takes its aliases out of the index
    }

    /// The stored rows other than its own that are the same event as `incoming` (see the type's
    /// documentation): the rows that list its id, and the rows stored under an id it lists.
    private func sameEvent(as incoming: FeedFeature, others: [String]) throws -> [FeedFeature] {
        var seen: Set<String> = [incoming.id]
        var rows: [FeedFeature] = []
        func add(_ id: String) throws {
            guard seen.insert(id).inserted, let row = try fetch(id) else { return }
            rows.append(row)
        }
        for owner in try aliasOwners(of: incoming.id) { try add(owner) }
        for other in others { try add(other) }
        return rows
    }

    /// Whether the alias index has the UTF-8 `id`.
    private func isIndexedAlias(_ id: UnsafeRawBufferPointer) throws -> Bool {
        guard aliasesPossible else { return false }
        let s = selectAliasOwner.handle
        sqlite3_reset(s)
        selectAliasOwner.bindStatic(1, id)
        defer { sqlite3_reset(s) }
        return try selectAliasOwner.step()
    }

    /// The stored rows whose `ids` lists `alias`, by the alias index.
    private func aliasOwners(of alias: String) throws -> [String] {
        selectAliasOwner.reset()
        selectAliasOwner.bind(1, alias)
        defer { selectAliasOwner.reset() }
        var owners: [String] = []
        while try selectAliasOwner.step() {
            if let owner = selectAliasOwner.string(0) { owners.append(owner) }
        }
        return owners
    }

    /// Adds the other ids a stored row lists to the alias index.
    private mutating func index(_ others: [String], of id: String) throws {
        for other in others {
            aliasesPossible = true
            insertAlias.reset()
            insertAlias.bind(1, other)
            insertAlias.bind(2, id)
            try insertAlias.step()
        }
    }

    /// Binds a feature of the slow paths (an update, an insert after aliases) and steps.
    private func bindAndStep(_ feature: FeedFeature, hash: UInt64, _ statement: RawStatement) throws {
        var arena: [UInt8] = []
        let record = FeatureRecord(feature, arena: &arena)
        try arena.withUnsafeBytes { try QuakeColumns.bindAndStep(record, arena: $0, hash: hash, statement) }
    }

    /// The row holds the incoming values but came from other bytes (formatted differently, or
    /// written before `feedHash` existed): remember these bytes, so that the next import of them
    /// finds the row unchanged without decoding. Not a change of the quake: no history.
    private func recordHash(_ hash: UInt64, of id: String) throws {
        setHash.reset()
        setHash.bind(1, Int64(bitPattern: hash))
        setHash.bind(2, id)
        try setHash.step()
    }

    private func fetch(_ id: String) throws -> FeedFeature? {
        select.reset()
        select.bind(1, id)
        guard try select.step() else { return nil }
        defer { select.reset() }  // no statement stays mid-step across the commit
        return QuakeColumns.feature(from: select)
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

/// The features an import judges again at its end (see `FeedImport.settle()`), and which of their
/// ids came again later in the document.
struct Undecided {
    struct Entry {
        enum Kind {
            /// A feature of the document that lost to a row of another id.
            case lostToRival
            /// A feature of the document older than its own id's row.
            case staleAgainstOwnRow
            /// A row from before this import, superseded by it.
            case superseded
            /// A row this import wrote (a feature of the document) and then superseded.
            case supersededWritten
            /// A feature of the document skipped as a copy of an event deleted upstream.
            case deletedCopy
            /// A deletion of the document that a newer stored version of its event made stale.
            case staleDeletion
        }

        var feature: FeedFeature
        var hash: UInt64
        var kind: Kind
        /// Where in the document it was decided.
        var position: Int
    }

    /// Keeps the list small when a lagging document is stale throughout: past it, features stale
    /// against their own row are not kept (such a document may take a second import to settle).
    static let maxOwnRowStale = 10_000
    var entries: [Entry] = []
    private var ids: Set<String> = []
    private var spoken: Set<String> = []
    private var lastSeen: [String: Int] = [:]

    /// Whether elements' ids need to be reported with ``saw(_:at:)``.
    var isTracking: Bool { !ids.isEmpty }

    mutating func add(_ feature: FeedFeature, hash: UInt64, as kind: Entry.Kind, position: Int) {
        if kind == .staleAgainstOwnRow && entries.count >= Self.maxOwnRowStale { return }
        entries.append(Entry(feature: feature, hash: hash, kind: kind, position: position))
        ids.insert(feature.id)
        if kind != .superseded { spoken.insert(feature.id) }
    }

    /// Whether a feature of the document with this id is undecided.
    func documentSpeaks(of id: String) -> Bool {
        spoken.contains(id)
    }

    /// An element with this id is at `position` of the document.
    mutating func saw(_ id: String, at position: Int) {
        if ids.contains(id) { lastSeen[id] = position }
    }

    func laterVersionSeen(of entry: Entry) -> Bool {
        (lastSeen[entry.feature.id] ?? -1) > entry.position
    }
}
