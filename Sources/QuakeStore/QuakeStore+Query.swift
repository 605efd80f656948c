import Foundation
import GRDB
import QuakeFeed
import QuakeModel

/// Filters for ``QuakeStore/query(_:)``; every filter that is set must match.
public struct QuakeQuery: Sendable, Hashable, Codable {
    public enum Order: String, Sendable, Codable {
        /// Newest first.
        case time
        /// Largest first; unknown magnitudes last.
        case magnitude
    }

    public var minMagnitude: Double?
    /// Event time at or after, in milliseconds since the Unix epoch.
    public var since: Int64?
    public var type: String?
    public var near: Near?
    public var limit: Int?
    public var order: Order = .time
    /// Applied with the conditions above (all must hold).
    public var filter: QuakeFilter?

    public struct Near: Sendable, Hashable, Codable {
        public var lat: Double
        public var lon: Double
        public var radiusKm: Double
        public init(lat: Double, lon: Double, radiusKm: Double) {
            self.lat = lat
            self.lon = lon
            self.radiusKm = radiusKm
        }
    }

    public init(
        minMagnitude: Double? = nil, since: Int64? = nil, type: String? = nil, near: Near? = nil, limit: Int? = nil,
        order: Order = .time
    ) {
        self.minMagnitude = minMagnitude
        self.since = since
        self.type = type
        self.near = near
        self.limit = limit
        self.order = order
    }
}

/// What ``QuakeStore/query(_:)`` found.
public struct QuakeQueryResult: Sendable, Hashable {
    public var quakes: [FeedFeature]
    /// Matches before `limit`.
    public var total: Int
    public var head: HistoryToken
}

/// A consistent page-by-page read of every stored quake (see ``QuakeStore/snapshot()``).
public final class QuakeSnapshot: Sendable {
    private let snapshot: DatabaseSnapshot
    /// The head token the snapshot is as of.
    public let token: HistoryToken
    public let storeID: String

    init(snapshot: DatabaseSnapshot, token: HistoryToken, storeID: String) {
        self.snapshot = snapshot
        self.token = token
        self.storeID = storeID
    }

    /// Ends the snapshot's read transaction and closes its connection now (otherwise when the
    /// snapshot is released).
    public func close() {
        try? snapshot.close()
    }

    /// Up to `limit` quakes with ids after `afterID`, ordered by id; with a filter, only those
    /// it matches.
    public func page(after afterID: String?, limit: Int, filter: QuakeFilter? = nil) throws -> [FeedFeature] {
        let limit = max(1, limit)
        guard let filter, !filter.isEmpty else {
            return try snapshot.read { db in
                try Row.fetchAll(
                    db,
                    sql: "SELECT \(QuakeColumns.list) FROM quakes WHERE id > ? ORDER BY id LIMIT ?",
                    arguments: [afterID ?? "", limit]
                ).map { QuakeColumns.feature(from: $0) }
            }
        }
        let narrowing = filter.narrowingSQL()
        return try snapshot.read { db in
            let rows = try Row.fetchCursor(
                db,
                sql: "SELECT \(QuakeColumns.list) FROM quakes WHERE id > ? AND \(narrowing.sql) ORDER BY id",
                arguments: StatementArguments([afterID ?? ""] + narrowing.arguments.map { $0 as any DatabaseValueConvertible }))
            var page: [FeedFeature] = []
            while page.count < limit, let row = try rows.next() {
                let quake = QuakeColumns.feature(from: row)
                if filter.matches(quake) { page.append(quake) }
            }
            return page
        }
    }
}

extension QuakeStore {
    /// Quakes matching `query`.
    public func query(_ query: QuakeQuery) throws -> QuakeQueryResult {
        var conditions: [String] = []
        var arguments: [any DatabaseValueConvertible] = []
        if let minMagnitude = query.minMagnitude {
            conditions.append("mag >= ?")
            arguments.append(minMagnitude)
        }
        if let since = query.since {
            conditions.append("time >= ?")
            arguments.append(since)
        }
        if let type = query.type {
            conditions.append("type = ?")
            arguments.append(type)
        }
        if let near = query.near {
            // A bounding box in SQL narrows the rows; the great-circle distance decides.
            let latDelta = near.radiusKm / 111.2
            let cosLat = max(cos(near.lat * .pi / 180), 0.01)
            let lonDelta = min(near.radiusKm / (111.2 * cosLat), 360)
            conditions.append("lat BETWEEN ? AND ?")
            arguments += [near.lat - latDelta, near.lat + latDelta]
            if lonDelta < 180 {
                let west = near.lon - lonDelta
                let east = near.lon + lonDelta
                if west < -180 || east > 180 {
                    conditions.append("(lon >= ? OR lon <= ?)")
                    arguments += [west < -180 ? west + 360 : west, east > 180 ? east - 360 : east]
                } else {
                    conditions.append("lon BETWEEN ? AND ?")
                    arguments += [west, east]
                }
            }
        }
        let orderClause = query.order == .time ? "ORDER BY time DESC, id" : "ORDER BY mag IS NULL, mag DESC, time DESC"
        let limit = query.limit.map { max(0, $0) }
        if let filter = query.filter, !filter.isEmpty {
            let narrowing = filter.narrowingSQL()
            conditions.append(narrowing.sql)
            arguments += narrowing.arguments.map { $0 as any DatabaseValueConvertible }
        }
        let whereClause = conditions.isEmpty ? "" : "WHERE " + conditions.joined(separator: " AND ")
        return try pool.read { db in
            let head = try Self.head(db)
            if query.near != nil || !(query.filter?.isEmpty ?? true) {
                let rows = try Row.fetchCursor(
                    db, sql: "SELECT \(QuakeColumns.list) FROM quakes \(whereClause) \(orderClause)",
                    arguments: StatementArguments(arguments))
                var matches: [FeedFeature] = []
                var total = 0
                while let row = try rows.next() {
                    let quake = QuakeColumns.feature(from: row)
                    if let near = query.near {
                        guard let lat = quake.lat, let lon = quake.lon,
                            Self.distanceKm(lat, lon, near.lat, near.lon) <= near.radiusKm
                        else { continue }
                    }
                    if let filter = query.filter, !filter.matches(quake) { continue }
                    total += 1
                    if limit == nil || matches.count < limit! { matches.append(quake) }
                }
                return QuakeQueryResult(quakes: matches, total: total, head: head)
            }
            let total =
                try Int.fetchOne(
                    db, sql: "SELECT count(*) FROM quakes \(whereClause)", arguments: StatementArguments(arguments))
                ?? 0
            let limitClause = limit.map { "LIMIT \($0)" } ?? ""
            let quakes = try Row.fetchAll(
                db, sql: "SELECT \(QuakeColumns.list) FROM quakes \(whereClause) \(orderClause) \(limitClause)",
                arguments: StatementArguments(arguments)
            ).map { QuakeColumns.feature(from: $0) }
            return QuakeQueryResult(quakes: quakes, total: total, head: head)
        }
    }

    /// Great-circle distance (haversine, mean Earth radius 6,371 km).
    static func distanceKm(_ lat1: Double, _ lon1: Double, _ lat2: Double, _ lon2: Double) -> Double {
        Geodesy.distanceKm(lat1, lon1, lat2, lon2)
    }

    /// A read of every stored quake as of one token, taken page by page without holding up
    /// imports (WAL: the snapshot keeps its own read transaction).
    public func snapshot() throws -> QuakeSnapshot {
        let snapshot = try pool.makeSnapshot()
        let token = try snapshot.read { db in try Self.head(db) }
        return QuakeSnapshot(snapshot: snapshot, token: token, storeID: storeID)
    }

    /// The time the last import that changed anything was made.
    public func lastChange() throws -> Date? {
        try pool.read { db in
            try Int64.fetchOne(db, sql: "SELECT max(timestamp) FROM historyTransactions WHERE author = 'import'")
                .map { QuakeTime.date($0) }
        }
    }
}
