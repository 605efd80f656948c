import QuakeFeed
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
struct SummaryGeoJSON {
    /// The USGS's `metadata.api` of the summary format this writes.
    static let apiVersion = "1.10.3"

    let generated: Int64
    let url: String
    let title: String
    private var bounds: (minLon: Double, minLat: Double, minDepth: Double, maxLon: Double, maxLat: Double, maxDepth: Double)?
    private var written = 0

    init(generated: Int64, url: String, title: String) {
        self.generated = generated
        self.url = url
        self.title = title
    }

    func appendHeader(count: Int, to out: inout [UInt8]) {
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

    mutating func append(_ q: FeedFeature, to out: inout [UInt8]) {
        if written > 0 { out.append(UInt8(ascii: ",")) }
        written += 1
        out.append(contentsOf: #"{"type":"Feature","properties":{"mag":"#.utf8)
        real(q.mag, &out)
        key("place", &out)
        text(q.place, &out)
        key("time", &out)
        CanonicalJSON.integer(q.time, to: &out)
        key("updated", &out)
        integer(q.updated, &out)
        key("tz", &out)
        integer(q.tz, &out)
        key("url", &out)
        text(q.url, &out)
        key("detail", &out)
        text(q.detail, &out)
        key("felt", &out)
        integer(q.felt, &out)
        key("cdi", &out)
        real(q.cdi, &out)
        key("mmi", &out)
        real(q.mmi, &out)
        key("alert", &out)
        text(q.alert, &out)
        key("status", &out)
        text(q.status, &out)
        key("tsunami", &out)
        integer(q.tsunami, &out)
        key("sig", &out)
        integer(q.sig, &out)
        key("net", &out)
        text(q.net, &out)
        key("code", &out)
        text(q.code, &out)
        key("ids", &out)
        text(q.ids, &out)
        key("sources", &out)
        text(q.sources, &out)
        key("types", &out)
        text(q.types, &out)
        key("nst", &out)
        integer(q.nst, &out)
        key("dmin", &out)
        real(q.dmin, &out)
        key("rms", &out)
        real(q.rms, &out)
        key("gap", &out)
        real(q.gap, &out)
        key("magType", &out)
        text(q.magType, &out)
        key("type", &out)
        text(q.type, &out)
        key("title", &out)
        text(q.title, &out)
        Self.appendContributors(of: q, to: &out)
        out.append(contentsOf: #"},"geometry":"#.utf8)
        if let lon = q.lon, let lat = q.lat {
            out.append(contentsOf: #"{"type":"Point","coordinates":["#.utf8)
            CanonicalJSON.double(lon, to: &out)
            out.append(UInt8(ascii: ","))
            CanonicalJSON.double(lat, to: &out)
            out.append(UInt8(ascii: ","))
            real(q.depth, &out)
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

    func appendFooter(to out: inout [UInt8]) {
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

    private func key(_ name: StaticString, _ out: inout [UInt8]) {
        out.append(contentsOf: [UInt8(ascii: ","), UInt8(ascii: "\"")])
        name.withUTF8Buffer { out.append(contentsOf: $0) }
        out.append(contentsOf: [UInt8(ascii: "\""), UInt8(ascii: ":")])
    }

    private func text(_ value: String?, _ out: inout [UInt8]) {
        if let value { CanonicalJSON.string(value, to: &out) } else { out.append(contentsOf: "null".utf8) }
    }

    private func integer(_ value: Int64?, _ out: inout [UInt8]) {
        if let value { CanonicalJSON.integer(value, to: &out) } else { out.append(contentsOf: "null".utf8) }
    }

    private func real(_ value: Double?, _ out: inout [UInt8]) {
        if let value { CanonicalJSON.double(value, to: &out) } else { out.append(contentsOf: "null".utf8) }
    }
}
