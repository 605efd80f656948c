import GRDB
import GRDBSQLite
import QuakeFeed

/// The alias index (`quakeAliases`) as the import reads and writes it: each other id a stored row
/// lists in `ids`, mapped to that row (see ``FeedImport`` on aliases). A row's entries go with it
/// (a trigger on `quakes`).
struct AliasIndex {
    private let selectOwner: RawStatement
    private let insert: RawStatement
    private let deleteOwned: RawStatement
    /// Whether the index may have entries (it had at the start, or this import added some).
    private var entriesPossible: Bool

    init(_ db: Database, tables: ImportTables = .quakes) throws {
        let index = tables.aliases
        // An INSERT ... SELECT ... WHERE NOT EXISTS (alias) in one statement would write a statement
        // journal for every row (it may insert several): a separate lookup, only once the index
        // has entries, costs far less.
        entriesPossible = try Bool.fetchOne(db, sql: "SELECT EXISTS (SELECT 1 FROM \(index))") == true
        selectOwner = try RawStatement(db, sql: "SELECT quakeId FROM \(index) WHERE alias = ?")
        insert = try RawStatement(db, sql: "INSERT OR IGNORE INTO \(index) (alias, quakeId) VALUES (?, ?)")
        deleteOwned = try RawStatement(db, sql: "DELETE FROM \(index) WHERE quakeId = ?")
    }

    /// Whether the index has the UTF-8 `id`.
    func has(_ id: UnsafeRawBufferPointer) throws -> Bool {
        guard entriesPossible else { return false }
        let s = selectOwner.handle
        sqlite3_reset(s)
        selectOwner.bindStatic(1, id)
        defer { sqlite3_reset(s) }
        return try selectOwner.step()
    }

    /// The stored rows whose `ids` lists `alias`.
    func owners(of alias: String) throws -> [String] {
        selectOwner.reset()
        selectOwner.bind(1, alias)
        defer { selectOwner.reset() }
        var owners: [String] = []
        while try selectOwner.step() {
            if let owner = selectOwner.string(0) { owners.append(owner) }
        }
        return owners
    }

    /// Adds the other ids a stored row lists to the index.
    mutating func add(_ others: [String], of id: String) throws {
        for other in others {
            entriesPossible = true
            insert.reset()
            insert.bind(1, other)
            insert.bind(2, id)
            try insert.step()
        }
    }

    /// Removes the entries of the row stored under `id` (before its `ids` are indexed again).
    func removeEntries(of id: String) throws {
        deleteOwned.reset()
        deleteOwned.bind(1, id)
        try deleteOwned.step()
    }
}

/// The same event under other ids (see ``FeedImport`` on aliases).
extension FeedImport {
    /// Deletes `row` as superseded by the event stored (or about to be) under `winner`.
    mutating func supersede(_ row: FeedFeature, by winner: String) throws {
        // Back if its superseder changes. A row this import wrote is the document's word on its
        // id; one from before is not, and gives way to one that is.
        let written = try recorder.recordsInsertsOfTableAtFinish || recorder.hasChange(of: row.id)
        undecided.add(row, hash: 0, as: written ? .supersededWritten : .superseded, position: position)
        // Recorded first: the recorder reads what it needs of the row before it goes.
        try recorder.recordDelete(Self.tombstone(of: row), reason: .superseded, supersededBy: winner, row: row)
        try statements.deleteRow(row.id)  // the trigger takes its aliases out of the index
    }

    /// The stored rows other than its own that are the same event as `incoming` (see the type's
    /// documentation): the rows that list its id, and the rows stored under an id it lists.
    func sameEvent(as incoming: FeedFeature, others: [String]) throws -> [FeedFeature] {
        var seen: Set<String> = [incoming.id]
        var rows: [FeedFeature] = []
        func add(_ id: String) throws {
            guard seen.insert(id).inserted, let row = try statements.fetch(id) else { return }
            rows.append(row)
        }
        for owner in try aliases.owners(of: incoming.id) { try add(owner) }
        for other in others { try add(other) }
        return rows
    }
}
