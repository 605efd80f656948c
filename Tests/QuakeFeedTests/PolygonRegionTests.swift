import Foundation
import QuakeFeed
import Testing

@Suite("Polygon regions")
struct PolygonRegionTests {
    typealias P = PolygonRegion.Point

    /// A ring from (lat, lon) pairs, closed by repeating the first.
    static func ring(_ pairs: [(Double, Double)]) -> [P] {
        let points = pairs.map { P(lat: $0.0, lon: $0.1) }
        return points + [points[0]]
    }

    static func region(_ rings: [(Double, Double)]...) -> PolygonRegion {
        PolygonRegion(polygons: [rings.map(ring)])
    }

    static let square = region([(0, 0), (0, 10), (10, 10), (10, 0)])

    @Test("inside, outside, on an edge and on a corner: edges and corners are inside")
    func edges() throws {
        let r = Self.square
        try r.validate()
        #expect(r.contains(lat: 5, lon: 5))
        #expect(!r.contains(lat: 5, lon: 10.000001))
        #expect(!r.contains(lat: -0.000001, lon: 5))
        #expect(r.contains(lat: 0, lon: 5), "bottom edge")
        #expect(r.contains(lat: 5, lon: 10), "right edge")
        #expect(r.contains(lat: 10, lon: 10), "corner")
        #expect(r.contains(lat: 0, lon: 0), "first corner")
        #expect(!r.contains(lat: 20, lon: 5))
    }

    @Test("a hole excludes its inside but not its edge")
    func holes() throws {
        let r = Self.region([(0, 0), (0, 10), (10, 10), (10, 0)], [(4, 4), (4, 6), (6, 6), (6, 4)])
        try r.validate()
        #expect(!r.contains(lat: 5, lon: 5))
        #expect(r.contains(lat: 4, lon: 5), "on the hole's edge")
        #expect(r.contains(lat: 2, lon: 2))
    }

    @Test("the winding order does not matter")
    func winding() throws {
        let clockwise = Self.region([(0, 0), (10, 0), (10, 10), (0, 10)])
        try clockwise.validate()
        for (lat, lon) in [(5.0, 5.0), (0, 5), (11, 5), (5, -1)] {
            #expect(clockwise.contains(lat: lat, lon: lon) == Self.square.contains(lat: lat, lon: lon))
        }
    }

    /// The Aleutian arc and the Bering Sea, written as one draws it: longitudes jump from
    /// 172 E to 160 W at the antimeridian.
    static let aleutians = region([
        (50.5, 172.0), (51.2, 178.5), (51.0, -178.0), (51.5, -172.0), (52.5, -166.0), (54.0, -162.0),
        (56.0, -158.5), (57.5, -160.5), (55.5, -166.0), (54.0, -172.0), (53.0, -178.5), (53.2, 176.0),
        (52.5, 172.0),
    ])

    @Test("a coastline-like ring across the antimeridian: Adak in, Anchorage and Kamchatka out")
    func antimeridian() throws {
        let r = Self.aleutians
        try r.validate()
        #expect(r.contains(lat: 51.9, lon: -176.6), "Adak")
        #expect(r.contains(lat: 52.0, lon: 179.9), "just west of the antimeridian")
        #expect(r.contains(lat: 52.0, lon: -179.9), "just east of it")
        #expect(r.contains(lat: 52.0, lon: 180), "on it, as 180")
        #expect(r.contains(lat: 52.0, lon: -180), "on it, as -180")
        #expect(!r.contains(lat: 61.2, lon: -149.9), "Anchorage")
        #expect(!r.contains(lat: 53.0, lon: 158.6), "Petropavlovsk-Kamchatsky")
        #expect(!r.contains(lat: 52.0, lon: 0), "the other side of the globe")
        #expect(r.latitudeBounds == 50.5...57.5)
    }

    /// A rough outline of California's coast and eastern border: the coast is a coastline's
    /// zig-zag, the border two straight lines.
    static let california = region([
        (42.0, -124.2), (40.4, -124.4), (38.9, -123.7), (37.8, -122.5), (36.6, -121.9), (35.7, -121.3),
        (34.5, -120.5), (34.0, -118.5), (33.2, -117.3), (32.5, -117.1), (32.7, -114.7), (35.0, -114.6),
        (39.0, -120.0), (42.0, -120.0),
    ])

    @Test("a coastline-like ring: California's cities in, Nevada's and the ocean out")
    func coastline() throws {
        let r = Self.california
        try r.validate()
        #expect(r.contains(lat: 37.77, lon: -122.42), "San Francisco")
        #expect(r.contains(lat: 34.05, lon: -118.24), "Los Angeles")
        #expect(r.contains(lat: 36.6, lon: -121.9), "Monterey, a corner")
        #expect(!r.contains(lat: 36.17, lon: -115.14), "Las Vegas")
        #expect(!r.contains(lat: 39.53, lon: -119.81), "Reno")
        #expect(!r.contains(lat: 36.0, lon: -123.5), "the Pacific off Big Sur")
    }

    @Test("a MultiPolygon: in either polygon")
    func multi() throws {
        let r = PolygonRegion(polygons: [
            [Self.ring([(0, 0), (0, 1), (1, 1), (1, 0)])], [Self.ring([(10, 10), (10, 11), (11, 11), (11, 10)])],
        ])
        try r.validate()
        #expect(r.contains(lat: 0.5, lon: 0.5) && r.contains(lat: 10.5, lon: 10.5))
        #expect(!r.contains(lat: 5, lon: 5))
    }

    @Test(
        "malformed rings are refused with the reason",
        arguments: [
            ([P(lat: 0, lon: 0), P(lat: 0, lon: 1), P(lat: 0, lon: 0)], "at least 4"),
            ([P(lat: 0, lon: 0), P(lat: 0, lon: 1), P(lat: 1, lon: 1), P(lat: 1, lon: 0)], "not closed"),
            (ring([(0, 0), (1, 1), (1, 0), (0, 1)]), "crosses or touches itself"),
            (ring([(0, 0), (0, 4), (2, 4), (0, 2), (-2, 2)]), "crosses or touches itself"),
            (ring([(0, 0), (0, 1), (0, 2)]), "no area"),
            (ring([(0, 0), (0, 1), (91, 1)]), "not a latitude,longitude"),
            (ring([(0, 0), (0, Double.nan), (1, 1)]), "not a latitude,longitude"),
            (ring([(80, -180), (80, -60), (80, 60)]), "round a pole"),
        ])
    func malformed(points: [P], reason: String) {
        let r = PolygonRegion(polygons: [[points]])
        #expect {
            try r.validate()
        } throws: { error in
            "\(error)".contains(reason) && "\(error)".contains("polygon 1, ring 1")
        }
    }

    @Test("no polygon, a polygon without rings, and too many points are refused")
    func limits() {
        #expect(throws: PolygonRegion.Problem.self) { try PolygonRegion(polygons: []).validate() }
        #expect(throws: PolygonRegion.Problem.self) { try PolygonRegion(polygons: [[]]).validate() }
        let many = (0..<PolygonRegion.maxPointsPerRing).map { i in
            P(lat: sin(Double(i) / 1000) * 10, lon: cos(Double(i) / 1000) * 10)
        }
        #expect(throws: PolygonRegion.Problem.self) { try PolygonRegion(polygons: [[many + [many[0]]]]).validate() }
    }

    @Test("the same polygons judge quakes alike in a filter, and survive the interface's JSON")
    func filter() throws {
        let filter = QuakeFilter(minMagnitude: 2, region: .polygons(Self.aleutians))
        try filter.validate()
        #expect(filter.matches(QuakeImage(mag: 3, lat: 51.9, lon: -176.6)))
        #expect(!filter.matches(QuakeImage(mag: 1, lat: 51.9, lon: -176.6)))
        #expect(!filter.matches(QuakeImage(mag: 3, lat: nil, lon: nil)))
        let decoded = try JSONDecoder().decode(QuakeFilter.self, from: JSONEncoder().encode(filter))
        #expect(decoded == filter)
        #expect(decoded.matches(QuakeImage(mag: 3, lat: 52.0, lon: 179.9)))
    }

    @Test("GeoJSON: Polygon, MultiPolygon, Feature and FeatureCollection; altitudes ignored")
    func geoJSON() throws {
        let polygon = #"{"type":"Polygon","coordinates":[[[0,0],[10,0],[10,10,5],[0,10],[0,0]]]}"#
        let parsed = try GeoJSONRegion.parse(Data(polygon.utf8))
        try parsed.validate()
        #expect(parsed.contains(lat: 5, lon: 5) && !parsed.contains(lat: 5, lon: 11))
        let multi = #"{"type":"MultiPolygon","coordinates":[[[[0,0],[1,0],[1,1],[0,0]]],[[[5,5],[6,5],[6,6],[5,5]]]]}"#
        #expect(try GeoJSONRegion.parse(Data(multi.utf8)).polygons.count == 2)
        let collection = #"{"type":"FeatureCollection","features":[{"type":"Feature","geometry":\#(polygon),"properties":{}},{"type":"Feature","geometry":\#(multi)}]}"#
        #expect(try GeoJSONRegion.parse(Data(collection.utf8)).polygons.count == 3)
    }

    @Test(
        "GeoJSON that is not polygons says where and why",
        arguments: [
            ("nonsense", "not JSON"),
            (#"{"coordinates":[]}"#, "no \"type\""),
            (#"{"type":"Point","coordinates":[1,2]}"#, "no area"),
            (#"{"type":"Feature","geometry":null}"#, "without a geometry"),
            (#"{"type":"Polygon","coordinates":[[[0,0],[1,"x"],[1,1],[0,0]]]}"#, "position 2 of ring 1"),
            (#"{"type":"FeatureCollection","features":[]}"#, "no polygon"),
            (#"{"type":"Circle"}"#, "not GeoJSON"),
        ])
    func badGeoJSON(text: String, reason: String) {
        #expect {
            _ = try GeoJSONRegion.parse(Data(text.utf8))
        } throws: { error in
            "\(error)".contains(reason)
        }
    }
}

extension PolygonRegionTests {
    @Test("true and false are not coordinates")
    func booleans() {
        #expect(throws: GeoJSONRegion.Problem.self) {
            _ = try GeoJSONRegion.parse(Data(#"{"type":"Polygon","coordinates":[[[0,0],[true,1],[1,1],[0,0]]]}"#.utf8))
        }
    }
}

/// Inputs the `geojson-region` fuzz target found.
@Suite struct PolygonFuzzFindingTests {
    @Test func aVertexAtTheFarEndOfALongEdgeIsInside() throws {
        let json = #"{"type":"Polygon","coordinates":[[[-124.4,42.0],[-120.0,42.0],[0.6,34.5],[-124.4,40.4],[-124.4,42.0]]]}"#
        let region = try GeoJSONRegion.parse(Data(json.utf8))
        try region.validate()
        for point in region.polygons[0][0] {
            #expect(region.contains(lat: point.lat, lon: point.lon), "vertex \(point.lat), \(point.lon)")
        }
    }
}
