import QuakeModel

/// The USGS summary GeoJSON format, written a quake at a time: what
/// https://earthquake.usgs.gov/earthquakes/feed/v1.0/geojson.php describes and every USGS feed
/// reader (and quaked's own feed parser) reads.
///
/// ```json
/// {"type":"FeatureCollection","metadata":{"generated":…,"url":…,"title":…,"status":200,"api":…,"count":N},
///  "features":[{"type":"Feature","properties":{"mag":…,…,"title":…},"geometry":{"type":"Point","coordinates":[lon,lat,depth]},"id":…},…],
///  "bbox":[minlon,minlat,mindepth,maxlon,maxlat,maxdepth]}
/// ```
///
/// A feature's properties are the USGS's 26, in the USGS's order, nulls written (`ids`, `sources`
/// and `net` name the agencies of a merged event); then, when the store has them, the extra
/// `contributors`: every agency's solution, as an array of objects (io.quaked's `Contributor`).
/// `bbox` comes last, as the USGS writes it, and only when some quake has a position.
public struct SummaryGeoJSON {
    /// The USGS's `metadata.api` of the summary format this writes.
    public static let apiVersion = "1.10.3"

    public let generated: Int64
    public let url: String
    public let title: String
    private var bounds: (minLon: Double, minLat: Double, minDepth: Double, maxLon: Double, maxLat: Double, maxDepth: Double)?
    private var written = 0

    public init(generated: Int64, url: String, title: String) {
        self.generated = generated
        self.url = url
        self.title = title
    }

    public func appendHeader(count: Int, to out: inout [UInt8]) {
        out.append(contentsOf: #"{"type":"FeatureCollection","metadata":{"generated":"#.utf8)
        CanonicalJSON.integer(generated, to: &out)
        out.append(contentsOf: #","url":"#.utf8)
        CanonicalJSON.string(url, to: &out)
        out.append(contentsOf: #","title":"#.utf8)
        CanonicalJSON.string(title, to: &out)
        out.append(contentsOf: #","status":200,"api":"#.utf8)
        CanonicalJSON.string(Self.apiVersion, to: &out)
        out.append(contentsOf: #","count":"#.utf8)
        CanonicalJSON.integer(Int64(count), to: &out)
        out.append(contentsOf: #"},"features":["#.utf8)
    }

    public mutating func append(_ q: FeedFeature, to out: inout [UInt8]) {
        if written > 0 { out.append(UInt8(ascii: ",")) }
        written += 1
        out.append(contentsOf: #"{"type":"Feature","properties":{"#.utf8)
        // The USGS's properties are the declared fields the feed carries, in the declaration's
        // order (the USGS's); `id` and the coordinates go elsewhere.
        let values = q.values
        for (n, (index, key)) in Self.properties.enumerated() {
            if n > 0 { out.append(UInt8(ascii: ",")) }
            out.append(contentsOf: key)
            switch values[index] {
            case .null: out.append(contentsOf: "null".utf8)
            case .text(let value): CanonicalJSON.string(value, to: &out)
            case .integer(let value): CanonicalJSON.integer(value, to: &out)
            case .real(let value): CanonicalJSON.double(value, to: &out)
            }
        }
        Self.appendContributors(of: q, to: &out)
        out.append(contentsOf: #"},"geometry":"#.utf8)
        if let lon = q.lon, let lat = q.lat {
            out.append(contentsOf: #"{"type":"Point","coordinates":["#.utf8)
            CanonicalJSON.double(lon, to: &out)
            out.append(UInt8(ascii: ","))
            CanonicalJSON.double(lat, to: &out)
            out.append(UInt8(ascii: ","))
            if let depth = q.depth {
                CanonicalJSON.double(depth, to: &out)
            } else {
                out.append(contentsOf: "null".utf8)
            }
            out.append(contentsOf: "]}".utf8)
            let depth = q.depth.flatMap { $0.isFinite ? $0 : nil }
            if lon.isFinite && lat.isFinite {
                if var b = bounds {
                    b.minLon = min(b.minLon, lon)
                    b.maxLon = max(b.maxLon, lon)
                    b.minLat = min(b.minLat, lat)
                    b.maxLat = max(b.maxLat, lat)
                    if let depth {
                        b.minDepth = b.minDepth.isNaN ? depth : min(b.minDepth, depth)
                        b.maxDepth = b.maxDepth.isNaN ? depth : max(b.maxDepth, depth)
                    }
                    bounds = b
                } else {
                    bounds = (lon, lat, depth ?? .nan, lon, lat, depth ?? .nan)
                }
            }
        } else {
            out.append(contentsOf: "null".utf8)
        }
        out.append(contentsOf: #","id":"#.utf8)
        CanonicalJSON.string(q.id, to: &out)
        out.append(UInt8(ascii: "}"))
    }

    public func appendFooter(to out: inout [UInt8]) {
        out.append(UInt8(ascii: "]"))
        if let b = bounds {
            out.append(contentsOf: #","bbox":["#.utf8)
            let values = [b.minLon, b.minLat, b.minDepth.isNaN ? 0 : b.minDepth, b.maxLon, b.maxLat, b.maxDepth.isNaN ? 0 : b.maxDepth]
            for (i, v) in values.enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                CanonicalJSON.double(v, to: &out)
            }
            out.append(UInt8(ascii: "]"))
        }
        out.append(contentsOf: "}\n".utf8)
    }

    /// The extra `contributors` property: the store's canonical JSON of io.quaked's
    /// `[]Contributor`, as it is (nothing when the quake has none: a store without sources).
    static func appendContributors(of q: FeedFeature, to out: inout [UInt8]) {
        guard let json = q.contributors, json.utf8.first == UInt8(ascii: "["), json.utf8.last == UInt8(ascii: "]") else {
            return
        }
        out.append(contentsOf: #","contributors":"#.utf8)
        out.append(contentsOf: json.utf8)
    }

    /// The USGS's properties: each declared field the feed carries as a property, with its
    /// position in ``QuakeRecord/fields`` and its key (`"mag":`).
    static let properties: [(index: Int, key: [UInt8])] = QuakeRecord.fields.enumerated().compactMap { i, field in
        guard case .property = field.origin else { return nil }
        return (i, Array("\"\(field.name)\":".utf8))
    }
}
