import ArgumentParser
import Foundation
import GRDBSQLite
import QuakeFeed
import QuakeAssociation
import QuakeModel
import QuakeSources
import QuakeStore

/// The child side of `quake-bench quakeml`: one reader over one file in a fresh process, so that
/// its peak RSS is its own. Prints one JSON line: `{"events", "retractions", "skipped", "seconds"}`.
///
/// - `quakeml-store FILE DB`: QuakeMLReader in 64 KiB chunks, each report inserted into a plain
///   table (the peer's: id, time, lat, lon, depth, mag) through the SQLite C API, one transaction;
/// - `quakeml-parse FILE`: the same reader, the items only counted;
/// - `quakeml-import FILE DIR`: the same reader into a fresh quaked store in DIR through
///   `QuakeStore.importSource`, as one source (`fdsn`) whose runs give `--batch` items each (one
///   transaction per run, with association and history, as `SourceSync` imports an answer); prints
///   also `transactions` and `quakes` (the store's quake rows at the end);
/// - `geojson-store FEED DB`, `geojson-parse FEED`: the same with QuakeFeed's FeedParser (every
///   feature decoded into a `FeedFeature`, its texts copied out as strings, as the reader's
///   `SourceReport` has them).
struct QuakeMLChild: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "quakeml-child", abstract: "One reader of the quakeml benchmark, in a process of its own.",
        shouldDisplay: false)

    enum Mode: String, ExpressibleByArgument {
        case quakemlStore = "quakeml-store"
        case quakemlParse = "quakeml-parse"
        case geojsonStore = "geojson-store"
        case geojsonParse = "geojson-parse"
        case quakemlImport = "quakeml-import"
    }

    @Argument var mode: Mode
    @Argument var file: String
    @Argument var database: String?

    @Option(help: "quakeml-import: the items of one source run (one importSource transaction).")
    var batch = QuakeMLBenchmark.defaultBatch

    @Option(help: "quakeml-import: the items the store applies at a time within a run's transaction.")
    var sliceItems = QuakeStore.defaultSourceImportSliceItems

    func run() async throws {
        if mode == .quakemlImport {
            try await importIntoStore()
            return
        }
        let started = ContinuousClock.now
        let table: PlainTable?
        switch mode {
        case .quakemlImport:
            return
        case .quakemlStore, .geojsonStore:
            guard let database else { throw ValidationError("\(mode.rawValue) needs a database path") }
            table = try PlainTable(path: database)
        case .quakemlParse, .geojsonParse:
            table = nil
        }
        let input = try FileHandle(forReadingFrom: URL(fileURLWithPath: file))
        defer { try? input.close() }
        var events = 0
        var retractions = 0
        var skipped = 0
        switch mode {
        case .quakemlStore, .quakemlParse, .quakemlImport:
            let reader = QuakeMLReader(source: "bench")
            let body: (SourceItem) throws -> Void = { item in
                switch item {
                case .report(let report):
                    events += 1
                    try table?.insert(
                        id: report.id, time: report.time, lat: report.latitude, lon: report.longitude,
                        depth: report.depth, mag: report.magnitude)
                case .retraction(_, let id, _):
                    retractions += 1
                    try table?.delete(id: id)
                }
            }
            while let chunk = try input.read(upToCount: QuakeMLBenchmark.chunkBytes), !chunk.isEmpty {
                try reader.consume([UInt8](chunk), body)
            }
            try reader.finish(body)
            skipped = reader.skippedCount
        case .geojsonStore, .geojsonParse:
            var parser = FeedParser()
            let body: (FeedItem) throws -> Void = { item in
                switch item {
                case .feature(let feature, _):
                    events += 1
                    try table?.insert(
                        id: feature.id, time: feature.time, lat: feature.lat, lon: feature.lon, depth: feature.depth,
                        mag: feature.mag)
                case .skipped:
                    skipped += 1
                }
            }
            while let chunk = try input.read(upToCount: QuakeMLBenchmark.chunkBytes), !chunk.isEmpty {
                try parser.consume([UInt8](chunk), body)
            }
            try parser.finish()
        }
        try table?.commit()
        let seconds = (ContinuousClock.now - started).inSeconds
        print(
            "{\"events\":\(events),\"retractions\":\(retractions),\"skipped\":\(skipped),\"seconds\":\(seconds)}")
    }

    /// `quakeml-import`: the file through QuakeMLReader (64 KiB chunks) into a fresh store, one
    /// `importSource` of source `fdsn` per `batch` items (the last run takes the rest). `events`
    /// is the quake rows the runs inserted less those they deleted; `quakes` the rows at the end.
    func importIntoStore() async throws {
        guard let database else { throw ValidationError("quakeml-import needs a store directory") }
        guard batch >= 1 else { throw ValidationError("--batch must be at least 1") }
        let started = ContinuousClock.now
        let store = try QuakeStore(directory: URL(fileURLWithPath: database))
        store.sourceImportSliceItems = sliceItems
        let name = "fdsn"
        let association = AssociationConfiguration(sourceOrder: [name])
        let input = try FileHandle(forReadingFrom: URL(fileURLWithPath: file))
        defer { try? input.close() }
        let reader = QuakeMLReader(source: name)
        var pending: [SourceItem] = []
        pending.reserveCapacity(min(batch, 1 << 20))
        var totals = SourceImportReport()
        var transactions = 0
        var retractions = 0
        func runs(all: Bool) async throws {
            while pending.count >= batch || (all && !pending.isEmpty) {
                let take = min(batch, pending.count)
                let items = Array(pending[..<take])
                pending.removeFirst(take)
                let report = try await store.importSource(
                    name, items: items, position: nil, query: nil, association: association)
                transactions += 1
                totals.items += report.items
                totals.applied += report.applied
                totals.ignored += report.ignored
                totals.created += report.created
                totals.updated += report.updated
                totals.deleted += report.deleted
            }
        }
        let body: (SourceItem) throws -> Void = { item in
            if case .retraction = item { retractions += 1 }
            pending.append(item)
        }
        while let chunk = try input.read(upToCount: QuakeMLBenchmark.chunkBytes), !chunk.isEmpty {
            try reader.consume([UInt8](chunk), body)
            try await runs(all: false)
        }
        try reader.finish(body)
        try await runs(all: true)
        let quakes = try store.count()
        try store.close()
        let seconds = (ContinuousClock.now - started).inSeconds
        print(
            "{\"events\":\(totals.created - totals.deleted),\"quakes\":\(quakes),\"items\":\(totals.items),"
                + "\"applied\":\(totals.applied),\"ignored\":\(totals.ignored),\"updated\":\(totals.updated),"
                + "\"retractions\":\(retractions),\"skipped\":\(reader.skippedCount),"
                + "\"transactions\":\(transactions),\"seconds\":\(seconds)}")
    }
}

/// The benchmark's plain table, as the ObsPy peer makes it (WAL, synchronous NORMAL, one
/// transaction), driven through the SQLite C API.
final class PlainTable {
    private var db: OpaquePointer?
    private var insertStatement: OpaquePointer?
    private var deleteStatement: OpaquePointer?
    private static let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)

    init(path: String) throws {
        guard sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nil) == SQLITE_OK else {
            throw error("open")
        }
        try exec("PRAGMA journal_mode=WAL")
        try exec("PRAGMA synchronous=NORMAL")
        try exec(
            "CREATE TABLE quakes (id TEXT PRIMARY KEY NOT NULL, time INTEGER NOT NULL, lat REAL, lon REAL, depth REAL, mag REAL)"
        )
        try exec("BEGIN")
        guard
            sqlite3_prepare_v2(db, "INSERT INTO quakes VALUES (?, ?, ?, ?, ?, ?)", -1, &insertStatement, nil)
                == SQLITE_OK,
            sqlite3_prepare_v2(db, "DELETE FROM quakes WHERE id = ?", -1, &deleteStatement, nil) == SQLITE_OK
        else { throw error("prepare") }
    }

    deinit {
        sqlite3_finalize(insertStatement)
        sqlite3_finalize(deleteStatement)
        sqlite3_close_v2(db)
    }

    func insert(id: String, time: Int64, lat: Double?, lon: Double?, depth: Double?, mag: Double?) throws {
        let s = insertStatement
        bind(s, 1, id)
        sqlite3_bind_int64(s, 2, time)
        for (index, value) in [(3, lat), (4, lon), (5, depth), (6, mag)] as [(Int32, Double?)] {
            if let value { sqlite3_bind_double(s, index, value) } else { sqlite3_bind_null(s, index) }
        }
        try step(s)
    }

    func delete(id: String) throws {
        bind(deleteStatement, 1, id)
        try step(deleteStatement)
    }

    func commit() throws {
        try exec("COMMIT")
    }

    private func bind(_ statement: OpaquePointer?, _ index: Int32, _ text: String) {
        var text = text
        text.withUTF8 { utf8 in
            let base = utf8.baseAddress.map(UnsafeRawPointer.init) ?? UnsafeRawPointer(bitPattern: 1)!
            _ = sqlite3_bind_text(
                statement, index, base.assumingMemoryBound(to: CChar.self), Int32(utf8.count), Self.transient)
        }
    }

    private func step(_ statement: OpaquePointer?) throws {
        defer { sqlite3_reset(statement) }
        guard sqlite3_step(statement) == SQLITE_DONE else { throw error("step") }
    }

    private func exec(_ sql: String) throws {
        guard sqlite3_exec(db, sql, nil, nil, nil) == SQLITE_OK else { throw error(sql) }
    }

    private func error(_ what: String) -> ValidationError {
        ValidationError("SQLite \(what): \(db.map { String(cString: sqlite3_errmsg($0)) } ?? "cannot open")")
    }
}
