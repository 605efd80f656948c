import Foundation

/// Which quakes a client wants: every condition that is set must hold.
///
/// The daemon applies one filter the same way everywhere it serves quakes (Snapshot, Query, export,
/// FetchHistory, Subscribe), through ``matches(_:)`` alone, so a client that starts from a
/// filtered snapshot and follows the filtered history always holds exactly the filter applied to
/// the store. A quake missing a value a condition needs (no magnitude under `minMagnitude`, no
/// position under a region) does not match.
public struct QuakeFilter: Sendable, Hashable, Codable {
    public var minMagnitude: Double?
    public var maxMagnitude: Double?
    public var region: Region?
    /// Event types (`earthquake`, `quarry blast`, ...): the quake's type must be one of them.
    public var types: [String]?
    /// The PAGER alert level must be at least this.
    public var minAlert: AlertLevel?
    /// true: only quakes with the tsunami flag; false: only quakes without it.
    public var tsunami: Bool?
    /// Only quakes whose status is `reviewed`.
    public var reviewedOnly: Bool
    /// The significance (`sig`) must be at least this.
    public var minSignificance: Int64?
    /// Event time at or after, in milliseconds since the Unix epoch.
    public var since: Int64?
    /// Agencies (`us`, `emsc`, ...): the quake has a report from one of them, an entry of its
    /// `sources` matching one, ignoring case.
    public var agencies: [String]?
    /// The quake has reports from at least this many agencies: entries of its `sources` (a quake
    /// without `sources` counts none).
    public var minAgencies: Int64?

    public enum Region: Sendable, Hashable, Codable {
        /// Within `radiusKm` of a point, by great-circle distance.
        case circle(lat: Double, lon: Double, radiusKm: Double)
        /// Latitude and longitude ranges, both inclusive. The box crosses the antimeridian when
        /// `minLon > maxLon`.
        case box(minLat: Double, maxLat: Double, minLon: Double, maxLon: Double)
        /// Inside one of these polygons, edges included (see ``PolygonRegion``).
        case polygons(PolygonRegion)
    }

    /// PAGER's alert levels, in order.
    public enum AlertLevel: String, Sendable, Hashable, Codable, CaseIterable, Comparable {
        case green, yellow, orange, red

        var rank: Int {
            switch self {
            case .green: 0
            case .yellow: 1
            case .orange: 2
            case .red: 3
            }
        }

        public static func < (a: Self, b: Self) -> Bool { a.rank < b.rank }
    }

    public init(
        minMagnitude: Double? = nil, maxMagnitude: Double? = nil, region: Region? = nil, types: [String]? = nil,
        minAlert: AlertLevel? = nil, tsunami: Bool? = nil, reviewedOnly: Bool = false, minSignificance: Int64? = nil,
        since: Int64? = nil, agencies: [String]? = nil, minAgencies: Int64? = nil
    ) {
        self.minMagnitude = minMagnitude
        self.maxMagnitude = maxMagnitude
        self.region = region
        self.types = types
        self.minAlert = minAlert
        self.tsunami = tsunami
        self.reviewedOnly = reviewedOnly
        self.minSignificance = minSignificance
        self.since = since
        self.agencies = agencies
        self.minAgencies = minAgencies
    }

    /// Whether the filter lets every quake through.
    public var isEmpty: Bool { self == QuakeFilter() }

    /// A filter that cannot be applied: which field (named as in io.quaked's `Filter`, e.g.
    /// `box.minLat`), and why.
    public struct Invalid: Error, Sendable, Hashable, CustomStringConvertible {
        public var field: String
        public var problem: String
        public var description: String { "\(field): \(problem)" }

        public init(field: String, problem: String) {
            self.field = field
            self.problem = problem
        }
    }

    /// Throws ``Invalid`` for a malformed or impossible filter (one no quake could match).
    public func validate() throws {
        func fail(_ field: String, _ problem: String) -> Invalid { Invalid(field: field, problem: problem) }
        func finite(_ value: Double?, _ field: String) throws {
            if let value, !value.isFinite { throw fail(field, "must be a finite number") }
        }
        func latitude(_ value: Double, _ field: String) throws {
            guard value.isFinite, (-90...90).contains(value) else {
                throw fail(field, "\(value) is not a latitude (-90 to 90)")
            }
        }
        func longitude(_ value: Double, _ field: String) throws {
            guard value.isFinite, (-180...180).contains(value) else {
                throw fail(field, "\(value) is not a longitude (-180 to 180)")
            }
        }
        try finite(minMagnitude, "minMagnitude")
        try finite(maxMagnitude, "maxMagnitude")
        if let minMagnitude, let maxMagnitude, maxMagnitude < minMagnitude {
            throw fail("maxMagnitude", "\(maxMagnitude) is below minMagnitude \(minMagnitude): nothing could match")
        }
        switch region {
        case .circle(let lat, let lon, let radiusKm):
            try latitude(lat, "near.lat")
            try longitude(lon, "near.lon")
            guard radiusKm.isFinite, radiusKm >= 0 else {
                throw fail("near.radiusKm", "\(radiusKm) is not a distance (0 or more kilometres)")
            }
        case .box(let minLat, let maxLat, let minLon, let maxLon):
            try latitude(minLat, "box.minLat")
            try latitude(maxLat, "box.maxLat")
            try longitude(minLon, "box.minLon")
            try longitude(maxLon, "box.maxLon")
            if maxLat < minLat {
                throw fail("box.maxLat", "\(maxLat) is south of minLat \(minLat): nothing could match")
            }
        case .polygons(let region):
            do {
                try region.validate()
            } catch {
                let ring = error.ring.map { ".rings[\($0)]" } ?? ""
                throw fail("polygons[\(error.polygon)]\(ring)", error.problem)
            }
        case nil:
            break
        }
        if let types {
            if types.isEmpty { throw fail("types", "an empty list matches nothing; leave it out for every type") }
            if types.contains(where: \.isEmpty) { throw fail("types", "an event type cannot be empty") }
        }
        if let minSignificance, minSignificance < 0 {
            throw fail("minSignificance", "\(minSignificance) is below 0")
        }
        if let agencies {
            if agencies.isEmpty { throw fail("agencies", "an empty list matches nothing; leave it out for every agency") }
            if let bad = agencies.first(where: { $0.isEmpty || $0.contains(",") }) {
                throw fail("agencies", "\"\(bad)\" is not an agency (a name without commas)")
            }
        }
        if let minAgencies, minAgencies < 1 {
            throw fail("minAgencies", "\(minAgencies) is below 1")
        }
    }

    /// Whether a quake with these values passes.
    public func matches(_ q: QuakeImage) -> Bool {
        if let minMagnitude {
            guard let mag = q.mag, mag >= minMagnitude else { return false }
        }
        if let maxMagnitude {
            guard let mag = q.mag, mag <= maxMagnitude else { return false }
        }
        if let since {
            guard let time = q.time, time >= since else { return false }
        }
        if let minSignificance {
            guard let sig = q.sig, sig >= minSignificance else { return false }
        }
        if reviewedOnly, q.status != "reviewed" { return false }
        if let tsunami, ((q.tsunami ?? 0) != 0) != tsunami { return false }
        if let minAlert {
            guard let alert = q.alert.flatMap(AlertLevel.init(rawValue:)), alert >= minAlert else { return false }
        }
        if let types {
            guard let type = q.type, types.contains(type) else { return false }
        }
        if let minAgencies, QuakeImage.agencyCount(q.sources) < minAgencies { return false }
        if let agencies {
            guard let sources = q.sources, QuakeImage.agencies(sources).contains(where: { source in
                agencies.contains { $0.caseInsensitiveCompare(source) == .orderedSame }
            })
            else { return false }
        }
        switch region {
        case nil:
            break
        case .circle(let lat, let lon, let radiusKm):
            guard let qLat = q.lat, let qLon = q.lon, Geodesy.distanceKm(qLat, qLon, lat, lon) <= radiusKm else {
                return false
            }
        case .box(let minLat, let maxLat, let minLon, let maxLon):
            guard let qLat = q.lat, let qLon = q.lon, qLat >= minLat, qLat <= maxLat else { return false }
            let inLon = minLon <= maxLon ? (qLon >= minLon && qLon <= maxLon) : (qLon >= minLon || qLon <= maxLon)
            if !inLon { return false }
        case .polygons(let region):
            guard let qLat = q.lat, let qLon = q.lon, region.contains(lat: qLat, lon: qLon) else { return false }
        }
        return true
    }

    public func matches(_ quake: FeedFeature) -> Bool { matches(QuakeImage(quake)) }
}

/// The values of a quake that a ``QuakeFilter`` looks at. History keeps them for every change
/// (the quake after an insert or update, before a delete), so a filter can judge any change at the
/// time it was made.
public struct QuakeImage: Sendable, Hashable {
    public var mag: Double?
    public var lat: Double?
    public var lon: Double?
    public var time: Int64?
    public var type: String?
    public var alert: String?
    public var tsunami: Int64?
    public var status: String?
    public var sig: Int64?
    /// The contributing agencies as the quake's `sources` field lists them (`,us,ak,`).
    public var sources: String?

    public init(
        mag: Double? = nil, lat: Double? = nil, lon: Double? = nil, time: Int64? = nil, type: String? = nil,
        alert: String? = nil, tsunami: Int64? = nil, status: String? = nil, sig: Int64? = nil,
        sources: String? = nil
    ) {
        self.mag = mag
        self.lat = lat
        self.lon = lon
        self.time = time
        self.type = type
        self.alert = alert
        self.tsunami = tsunami
        self.status = status
        self.sig = sig
        self.sources = sources
    }

    public init(_ q: FeedFeature) {
        self.init(
            mag: q.mag, lat: q.lat, lon: q.lon, time: q.time, type: q.type, alert: q.alert, tsunami: q.tsunami,
            status: q.status, sig: q.sig, sources: q.sources)
    }

    /// The entries of a `sources` list (`,us,ak,` gives `us`, `ak`), empty ones left out.
    public static func agencies(_ sources: String) -> [Substring] {
        sources.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces)[...] }.filter { !$0.isEmpty }
    }

    /// How many agencies a `sources` list names, each once whatever its case (none for nil).
    public static func agencyCount(_ sources: String?) -> Int64 {
        guard let sources else { return 0 }
        return Int64(Set(agencies(sources).map { $0.lowercased() }).count)
    }
}

/// Great-circle distances on a spherical Earth (haversine, mean radius 6,371 km): the one
/// distance the daemon's filters and the client's use.
public enum Geodesy {
    public static func distanceKm(_ lat1: Double, _ lon1: Double, _ lat2: Double, _ lon2: Double) -> Double {
        let r = Double.pi / 180
        let dLat = (lat2 - lat1) * r
        let dLon = (lon2 - lon1) * r
        let a = sin(dLat / 2) * sin(dLat / 2) + cos(lat1 * r) * cos(lat2 * r) * sin(dLon / 2) * sin(dLon / 2)
        return 2 * 6371 * asin(min(1, sqrt(a)))
    }
}
