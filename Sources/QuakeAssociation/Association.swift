import Foundation
import QuakeFeed
import QuakeModel

/// Association of reports into events: which agencies' reports describe one physical quake.
///
/// `Associator` holds the current reports and the events they form, and keeps both in step
/// with each `SourceItem` it is given, returning the `EventChange`s for the history. The
/// grouping itself is a pure function of the current set of reports (see `Associator`), so it
/// never depends on the order the reports arrived in.
public enum Association {
    /// The Earth's mean radius, in kilometres, for great-circle (haversine) distances.
    public static let earthRadiusKm = 6371.0

    /// The great-circle distance between two epicentres, in kilometres (haversine).
    public static func distanceKm(_ latitude1: Double, _ longitude1: Double, _ latitude2: Double, _ longitude2: Double)
        -> Double
    {
        let radians = Double.pi / 180
        let phi1 = latitude1 * radians
        let phi2 = latitude2 * radians
        let dPhi = (latitude2 - latitude1) * radians
        let dLambda = (longitude2 - longitude1) * radians
        let sinPhi = sin(dPhi / 2)
        let sinLambda = sin(dLambda / 2)
        let a = sinPhi * sinPhi + cos(phi1) * cos(phi2) * sinLambda * sinLambda
        return 2 * earthRadiusKm * asin(min(1, a.squareRoot()))
    }
}

/// A report's identity: the configured source's name and the agency's id for the event.
/// Ordered by source, then id; written `source:id`.
public struct ReportKey: Hashable, Comparable, Sendable, CustomStringConvertible {
    public var source: String
    public var id: String

    public init(source: String, id: String) {
        self.source = source
        self.id = id
    }

    /// The key an item names: its report's, or its retraction's.
    public init(_ item: SourceItem) {
        switch item {
        case .report(let report): self.init(report)
        case .retraction(let source, let id, _): self.init(source: source, id: id)
        }
    }

    public init(_ report: SourceReport) {
        self.init(source: report.source, id: report.id)
    }

    public static func < (lhs: ReportKey, rhs: ReportKey) -> Bool {
        lhs.source != rhs.source ? lhs.source < rhs.source : lhs.id < rhs.id
    }

    public var description: String { "\(source):\(id)" }
}

/// A region on the globe, for a regional authority (`prefer = AGENCY region=...`).
public enum Region: Sendable, Hashable {
    /// Within `radiusKm` great-circle kilometres of a centre.
    case circle(lat: Double, lon: Double, radiusKm: Double)
    /// Latitudes `minLat...maxLat` and longitudes from `minLon` eastwards to `maxLon`, all
    /// inclusive (as QuakeFeed's `QuakeFilter.Region`): when `minLon > maxLon` the box crosses
    /// the antimeridian (`box(minLat: -50, maxLat: -30, minLon: 170, maxLon: -175)` holds 175
    /// and -178, not 0).
    case box(minLat: Double, maxLat: Double, minLon: Double, maxLon: Double)
    /// Inside the polygons of a GeoJSON file (QuakeFeed's `PolygonRegion`, as `quakectl --region`
    /// and filters read them): the same point-in-polygon rule as a filter's, edges included, holes
    /// excluded, rings crossing the antimeridian the short way. Give a validated region
    /// (`PolygonRegion.validate()`): an invalid one holds what its rings happen to enclose.
    case polygon(PolygonRegion)

    public func contains(latitude: Double, longitude: Double) -> Bool {
        switch self {
        case .circle(let centreLatitude, let centreLongitude, let radiusKm):
            return Association.distanceKm(centreLatitude, centreLongitude, latitude, longitude) <= radiusKm
        case .box(let minLatitude, let maxLatitude, let minLongitude, let maxLongitude):
            guard latitude >= minLatitude, latitude <= maxLatitude else { return false }
            if minLongitude <= maxLongitude {
                return longitude >= minLongitude && longitude <= maxLongitude
            }
            return longitude >= minLongitude || longitude <= maxLongitude
        case .polygon(let polygons):
            return polygons.contains(lat: latitude, lon: longitude)
        }
    }
}

/// `prefer = AGENCY[,AGENCY...] region=...`: in the region, these agencies' reports are
/// preferred (after reviewed beats automatic, before the order of the sources).
public struct RegionalPreference: Sendable, Hashable {
    /// Matched against a report's `agency`, and against its `source` name (either matches),
    /// ignoring ASCII case: `INGV` matches the agency `INGV` and the source `ingv`.
    public var agencies: [String]
    public var region: Region

    public init(agencies: [String], region: Region) {
        self.agencies = agencies
        self.region = region
    }

    /// Whether `agency` names the report: its agency or its source, ASCII case ignored.
    static func names(_ agency: String, _ report: SourceReport) -> Bool {
        sameName(agency, report.source) || report.agency.map { sameName(agency, $0) } == true
    }

    /// `a` and `b` equal but for ASCII case (no allocation: ranking compares often).
    static func sameName(_ a: String, _ b: String) -> Bool {
        var left = a.utf8.makeIterator()
        var right = b.utf8.makeIterator()
        while true {
            switch (left.next(), right.next()) {
            case (nil, nil): return true
            case (let x?, let y?):
                if x == y { continue }
                let lx = (0x41...0x5A).contains(x) ? x | 0x20 : x
                let ly = (0x41...0x5A).contains(y) ? y | 0x20 : y
                if lx != ly { return false }
            default: return false
            }
        }
    }
}

/// The association's settings.
public struct AssociationConfiguration: Sendable, Hashable {
    /// `associate-time`: origin times at most this far apart may associate (USGS PDL's 16 s).
    public var associateTimeMilliseconds: Int64
    /// `associate-distance`: epicentres at most this far apart may associate (PDL's 100 km).
    public var associateDistanceKm: Double
    /// The configured sources' names in configuration order: earlier is preferred.
    public var sourceOrder: [String]
    /// Regional authorities, in configuration order: an earlier declaration ranks first.
    public var regionalPreferences: [RegionalPreference]

    public init(
        associateTimeMilliseconds: Int64 = 16_000, associateDistanceKm: Double = 100, sourceOrder: [String] = [],
        regionalPreferences: [RegionalPreference] = []
    ) {
        precondition(associateTimeMilliseconds > 0 && associateDistanceKm > 0, "the windows must be positive")
        self.associateTimeMilliseconds = associateTimeMilliseconds
        self.associateDistanceKm = associateDistanceKm
        self.sourceOrder = sourceOrder
        self.regionalPreferences = regionalPreferences
    }

    /// Whether two reports are within both windows, and their normalized distance
    /// sqrt((dt/associate-time)² + (dd/associate-distance)²). The source is not looked at.
    public func match(_ a: SourceReport, _ b: SourceReport) -> (within: Bool, distance: Double) {
        let dt = a.time > b.time ? a.time - b.time : b.time - a.time
        guard dt <= associateTimeMilliseconds else { return (false, .infinity) }
        // Computed in key order, so the figure is the same bits whichever report comes first.
        let aFirst = a.source != b.source ? a.source < b.source : a.id < b.id
        let (p, q) = aFirst ? (a, b) : (b, a)
        let dd = Association.distanceKm(p.latitude, p.longitude, q.latitude, q.longitude)
        guard dd <= associateDistanceKm else { return (false, .infinity) }
        let nt = Double(dt) / Double(associateTimeMilliseconds)
        let nd = dd / associateDistanceKm
        return (true, (nt * nt + nd * nd).squareRoot())
    }

    /// The regional rank of a report: the first declaration (then the first agency in it) whose
    /// agency is the report's agency or source (ASCII case ignored) and whose region holds the
    /// report's epicentre.
    func regionalRank(_ report: SourceReport) -> Int {
        var rank = 0
        for preference in regionalPreferences {
            for agency in preference.agencies {
                if RegionalPreference.names(agency, report),
                    preference.region.contains(latitude: report.latitude, longitude: report.longitude)
                {
                    return rank
                }
                rank += 1
            }
        }
        return Int.max
    }

    /// Whether `a` is preferred to `b`, by the rules in order: reviewed or manual beats
    /// automatic; a regional authority (earlier declaration first); the order of the sources
    /// (an unlisted source after every listed one); the most recently updated (unknown is
    /// oldest); then the key (source name, then id), smaller first.
    public func prefers(_ a: SourceReport, _ b: SourceReport) -> Bool {
        if a.isReviewed != b.isReviewed { return a.isReviewed }
        let ra = regionalRank(a)
        let rb = regionalRank(b)
        if ra != rb { return ra < rb }
        let sa = sourceOrder.firstIndex(of: a.source) ?? Int.max
        let sb = sourceOrder.firstIndex(of: b.source) ?? Int.max
        if sa != sb { return sa < sb }
        let ua = a.updated ?? Int64.min
        let ub = b.updated ?? Int64.min
        if ua != ub { return ua > ub }
        return ReportKey(a) < ReportKey(b)
    }

    /// The preferred report among `reports` (not empty).
    public func preferred(_ reports: some Sequence<SourceReport>) -> SourceReport {
        var best: SourceReport?
        for report in reports where best == nil || prefers(report, best!) { best = report }
        return best!
    }
}

/// One physical quake: the reports associated with it (at most one per source, except
/// reports joined by an id link) and the one preferred among them.
public struct Event: Sendable, Hashable, CustomStringConvertible {
    /// Stable while the event lives: the own id of the report that founded it (its preferred
    /// report when it was created: `us7000abcd`), or, when a live event already had that id or
    /// it was empty, that report's key `source:id` (then `#2`, `#3`...); kept through later
    /// changes.
    public var id: String
    /// The member reports' keys, sorted.
    public var reports: [ReportKey]
    /// The report that gives the event's time, position, depth, magnitude, type and place.
    public var preferred: SourceReport
    /// The creation order: larger than that of every event alive when it was created, fixed
    /// while it lives. It breaks ties when a regroup matches groups to old events (the event
    /// created first keeps its id); a store persists it and gives it back on restore.
    public var created: UInt64

    public init(id: String, reports: [ReportKey], preferred: SourceReport, created: UInt64 = 0) {
        self.id = id
        self.reports = reports
        self.preferred = preferred
        self.created = created
    }

    public var preferredKey: ReportKey { ReportKey(preferred) }
    public var time: Int64 { preferred.time }
    public var latitude: Double { preferred.latitude }
    public var longitude: Double { preferred.longitude }
    public var depth: Double? { preferred.depth }
    public var magnitude: Double? { preferred.magnitude }
    public var magnitudeType: String? { preferred.magnitudeType }
    public var place: String? { preferred.place }
    public var eventType: String? { preferred.eventType }

    public var description: String {
        "\(id) [\(reports.map(\.description).joined(separator: " "))] preferred \(preferredKey)"
    }
}

/// What one `apply` changed, for the history.
public enum EventChange: Sendable, Hashable, CustomStringConvertible {
    case created(Event)
    /// Its reports, its preferred report or the preferred report's contents changed.
    case updated(Event)
    /// Gone: merged into `supersededBy` (the event that took most of its reports), or, when
    /// nil, every report of it was retracted.
    case deleted(String, supersededBy: String?)

    public var eventID: String {
        switch self {
        case .created(let event), .updated(let event): return event.id
        case .deleted(let id, _): return id
        }
    }

    public var description: String {
        switch self {
        case .created(let event): return "created \(event)"
        case .updated(let event): return "updated \(event)"
        case .deleted(let id, let survivor): return "deleted \(id)" + (survivor.map { " superseded by \($0)" } ?? "")
        }
    }
}

extension AssociationConfiguration {
    /// The version of the rules `Associator` groups, names and prefers by: counted up whenever a
    /// change to them would group a store's reports differently, so that a store grouped under
    /// older rules is regrouped whole (see ``fingerprint``).
    public static let rulesVersion = 1

    /// A text that is the same for two configurations exactly when they group, name and prefer
    /// alike under these rules: what a store keeps beside its events, to know whether they were
    /// grouped under the configuration it imports with.
    public var fingerprint: String { "rules \(Self.rulesVersion); \(String(reflecting: self))" }
}
