import Foundation
import GRDB
import QuakeFeed

/// The SQL of a selection: its conditions and its order.
extension QuakeSelection {
    /// The SQL conditions (a superset of the matches when ``isExactInSQL`` is false) and their
    /// arguments.
    func conditions() -> (sql: String, arguments: [any DatabaseValueConvertible]) {
        let narrowing = filter.narrowingSQL()
        var sql = [narrowing.sql]
        var arguments: [any DatabaseValueConvertible] = narrowing.arguments.map { $0 as any DatabaseValueConvertible }
        if let minSignificance = filter.minSignificance {
            sql.append("sig >= ?")
            arguments.append(minSignificance)
        }
        if let until {
            sql.append("time <= ?")
            arguments.append(until)
        }
        if let updatedAfter {
            sql.append("updated > ?")
            arguments.append(updatedAfter)
        }
        if let eventID {
            sql.append("(id = ? OR instr(ids, ?) > 0)")
            arguments += [eventID, "," + eventID + ","]
        }
        if requirePosition {
            sql.append("lat IS NOT NULL AND lon IS NOT NULL")
        }
        return (sql.joined(separator: " AND "), arguments)
    }

    /// Whether the SQL conditions alone decide (no region, type, agency... to judge in Swift).
    var isExactInSQL: Bool {
        var rest = filter
        rest.minMagnitude = nil
        rest.maxMagnitude = nil
        rest.since = nil
        rest.minSignificance = nil
        return rest.isEmpty && minDistanceKm == nil
    }

    var orderSQL: String {
        switch order {
        case .timeDescending: "ORDER BY time DESC, id"
        case .timeAscending: "ORDER BY time ASC, id"
        case .magnitudeDescending: "ORDER BY mag IS NULL, mag DESC, time DESC, id"
        case .magnitudeAscending: "ORDER BY mag IS NULL, mag ASC, time DESC, id"
        }
    }
}

/// What a selection holds, as of one state of the store: the head token and how many quakes it
/// returns (after its offset and limit).
public struct QuakeSelectionCount: Sendable, Hashable {
    public var storeID: String
    public var token: HistoryToken
    /// The quakes returned: the matches after ``QuakeSelection/offset``, at most its limit.
    public var count: Int
    /// Every match, before offset and limit.
    public var matching: Int
}

extension QuakeStore {
    /// How many quakes `selection` returns, and the head token, read in one transaction.
    public func count(_ selection: QuakeSelection) async throws -> QuakeSelectionCount {
        let storeID = storeID
        return try await pool.read { db in
            try Self.count(db, selection, storeID: storeID)
        }
    }

    /// Streams the quakes of `selection`, in flat memory: one read transaction on a connection of
    /// its own (a snapshot: imports go on meanwhile, and the answer is the store as of one token).
    ///
    /// `start` is called first with the count and token of that state (the one the batches
    /// are), then `batch` with up to `batchSize` quakes at a time, in order, until the end or
    /// until either returns false. Both run on the reading thread, which is not one of Swift's
    /// cooperative threads: they may block there to hold the reading back until the quakes
    /// are written (back pressure), and the store reads no further meanwhile.
    public func stream(
        _ selection: QuakeSelection, batchSize: Int = 256,
        start: @escaping @Sendable (QuakeSelectionCount) throws -> Bool,
        batch: @escaping @Sendable ([FeedFeature]) throws -> Bool
    ) async throws {
        let snapshot = try pool.makeSnapshot()
        defer { try? snapshot.close() }
        let storeID = storeID
        let size = max(1, batchSize)
        try await snapshot.read { db in
            let counted = try Self.count(db, selection, storeID: storeID)
            guard try start(counted), counted.count > 0 else { return }
            let conditions = selection.conditions()
            let exact = selection.isExactInSQL
            let paging = exact ? "LIMIT \(selection.limit.map { max(0, $0) } ?? -1) OFFSET \(max(0, selection.offset))" : ""
            let rows = try Row.fetchCursor(
                db,
                sql: "SELECT \(QuakeColumns.list) FROM quakes WHERE \(conditions.sql) \(selection.orderSQL) \(paging)",
                arguments: StatementArguments(conditions.arguments))
            var skipped = exact ? selection.offset : 0
            var sent = 0
            var pending: [FeedFeature] = []
            pending.reserveCapacity(size)
            while sent + pending.count < counted.count, let row = try rows.next() {
                let quake = QuakeColumns.feature(from: row)
                if !exact {
                    guard selection.matches(QuakeImage(quake)) else { continue }
                    if skipped < selection.offset {
                        skipped += 1
                        continue
                    }
                }
                pending.append(quake)
                if pending.count == size {
                    sent += pending.count
                    guard try batch(pending) else { return }
                    pending.removeAll(keepingCapacity: true)
                }
            }
            if !pending.isEmpty { _ = try batch(pending) }
        }
    }

    static func count(_ db: Database, _ selection: QuakeSelection, storeID: String) throws -> QuakeSelectionCount {
        let token = try head(db)
        let conditions = selection.conditions()
        let matching: Int
        if selection.isExactInSQL {
            matching =
                try Int.fetchOne(
                    db, sql: "SELECT count(*) FROM quakes WHERE \(conditions.sql)",
                    arguments: StatementArguments(conditions.arguments)) ?? 0
        } else {
            // Only the values the filter judges, not whole rows.
            let rows = try Row.fetchCursor(
                db,
                sql: "SELECT mag, lat, lon, time, type, alert, tsunami, status, sig, sources FROM quakes WHERE \(conditions.sql)",
                arguments: StatementArguments(conditions.arguments))
            var n = 0
            while let row = try rows.next() {
                let image = QuakeImage(
                    mag: row[0], lat: row[1], lon: row[2], time: row[3], type: row[4], alert: row[5], tsunami: row[6],
                    status: row[7], sig: row[8], sources: row[9])
                if selection.matches(image) { n += 1 }
            }
            matching = n
        }
        var count = max(0, matching - max(0, selection.offset))
        if let limit = selection.limit { count = min(count, max(0, limit)) }
        return QuakeSelectionCount(storeID: storeID, token: token, count: count, matching: matching)
    }
}

extension QuakeStore {
    /// Every agency the stored quakes name (entries of their `sources` and their `agency`), once
    /// each, sorted.
    public func agencies() async throws -> [String] {
        try await pool.read { db in
            var names: Set<String> = []
            for sources in try String.fetchAll(db, sql: "SELECT DISTINCT sources FROM quakes WHERE sources IS NOT NULL") {
                for agency in QuakeImage.agencies(sources) { names.insert(String(agency)) }
            }
            return names.sorted()
        }
    }
}
