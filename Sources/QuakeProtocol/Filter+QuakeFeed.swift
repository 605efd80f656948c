import QuakeFeed
import Varlink

extension QuakeFilter {
    /// The filter an io.quaked `Filter` describes, validated. Throws ``QuakeFilter/Invalid``
    /// naming the field as the interface spells it (`box.minLat`), for a malformed or impossible
    /// filter, or one with more than one region.
    public init(_ filter: IOQuaked.Filter) throws {
        var region: Region?
        if let near = filter.near { region = .circle(lat: near.lat, lon: near.lon, radiusKm: near.radiusKm) }
        if let box = filter.box {
            guard region == nil else { throw Invalid(field: "box", problem: "give one region: near or box") }
            region = .box(minLat: box.minLat, maxLat: box.maxLat, minLon: box.minLon, maxLon: box.maxLon)
        }
        if let polygons = filter.polygons {
            guard region == nil else {
                throw Invalid(field: "polygons", problem: "give one region: near, box or polygons")
            }
            region = .polygons(
                PolygonRegion(
                    polygons: polygons.map { $0.rings.map { $0.points.map { .init(lat: $0.lat, lon: $0.lon) } } }))
        }
        self.init(
            minMagnitude: filter.minMagnitude, maxMagnitude: filter.maxMagnitude, region: region, types: filter.types,
            minAlert: filter.minAlert.flatMap { AlertLevel(rawValue: $0.rawValue) }, tsunami: filter.tsunami,
            reviewedOnly: filter.reviewed ?? false, minSignificance: filter.minSignificance.map(Int64.init),
            since: filter.since.map(Int64.init), agencies: filter.agencies,
            minAgencies: filter.minAgencies.map(Int64.init))
        try validate()
    }
}

extension IOQuaked.Filter {
    /// The interface's form of a filter.
    public init(_ filter: QuakeFilter) {
        var near: IOQuaked.Near?
        var box: IOQuaked.Box?
        var polygons: [IOQuaked.Polygon]?
        switch filter.region {
        case .circle(let lat, let lon, let radiusKm): near = IOQuaked.Near(lat: lat, lon: lon, radiusKm: radiusKm)
        case .box(let minLat, let maxLat, let minLon, let maxLon):
            box = IOQuaked.Box(minLat: minLat, maxLat: maxLat, minLon: minLon, maxLon: maxLon)
        case .polygons(let region):
            polygons = region.polygons.map { rings in
                IOQuaked.Polygon(rings: rings.map { IOQuaked.Ring(points: $0.map { IOQuaked.LatLon(lat: $0.lat, lon: $0.lon) }) })
            }
        case nil: break
        }
        self.init(
            minMagnitude: filter.minMagnitude, maxMagnitude: filter.maxMagnitude, near: near, box: box,
            polygons: polygons,
            types: filter.types, minAlert: filter.minAlert.flatMap { IOQuaked.AlertLevel(rawValue: $0.rawValue) },
            tsunami: filter.tsunami, reviewed: filter.reviewedOnly ? true : nil,
            minSignificance: filter.minSignificance.map(Int.init), since: filter.since.map(Int.init),
            agencies: filter.agencies, minAgencies: filter.minAgencies.map(Int.init))
    }
}

extension QuakeImage {
    /// The values of a quake that a filter looks at.
    public init(_ q: IOQuaked.Quake) {
        self.init(
            mag: q.mag, lat: q.lat, lon: q.lon, time: Int64(q.time), type: q.type, alert: q.alert,
            tsunami: q.tsunami.map(Int64.init), status: q.status, sig: q.sig.map(Int64.init), sources: q.sources)
    }
}
