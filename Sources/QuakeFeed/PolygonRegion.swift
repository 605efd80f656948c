import Foundation

/// A region bounded by polygons (a multipolygon, as GeoJSON has it): a quake is in it when it is in
/// any of the polygons, and in a polygon when it is inside or on its outer ring and not strictly
/// inside one of its holes. Points on an edge are inside.
///
/// Edges are straight lines in longitude and latitude, as GeoJSON's are (not great circles). A
/// ring may cross the antimeridian: between two consecutive points, the longitude takes the
/// shorter way round (179 to -179 is 2 degrees east, not 358 west), so a ring around Fiji is
/// written as it would be drawn. A ring that goes all the way round a pole is refused (split it).
///
/// ``validate()`` refuses, with the reason: a ring with fewer than 4 points, one whose last point
/// is not its first (unclosed), one with no area, one that crosses or touches itself, points off
/// the globe, and more than ``maxPointsPerRing`` points in a ring or ``maxPoints`` in all.
/// Self-intersecting rings are refused, never repaired: a repaired ring would be a region the
/// user did not draw. Either winding order is accepted; a hole outside its polygon excludes
/// nothing.
public struct PolygonRegion: Sendable, Hashable, Codable {
    public struct Point: Sendable, Hashable, Codable {
        public var lat: Double
        public var lon: Double

        public init(lat: Double, lon: Double) {
            self.lat = lat
            self.lon = lon
        }
    }

    /// Each polygon: its outer ring, then its holes; each ring closed (its last point repeats
    /// its first).
    public let polygons: [[[Point]]]
    /// The rings with their longitudes made continuous, and their bounds: what ``contains(lat:lon:)``
    /// reads. Derived from `polygons`; not part of equality or coding.
    private let prepared: [[Ring]]

    public static let maxPointsPerRing = 5_000
    public static let maxPoints = 50_000

    public init(polygons: [[[Point]]]) {
        self.polygons = polygons
        self.prepared = polygons.map { $0.map(Ring.init) }
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        self.init(polygons: try container.decode([[[Point]]].self))
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(polygons)
    }

    public static func == (a: Self, b: Self) -> Bool { a.polygons == b.polygons }
    public func hash(into hasher: inout Hasher) { hasher.combine(polygons) }

    /// The latitudes every polygon lies within, for narrowing a search.
    public var latitudeBounds: ClosedRange<Double> {
        let outer = prepared.compactMap(\.first)
        guard let low = outer.map(\.minLat).min(), let high = outer.map(\.maxLat).max() else { return 0...0 }
        return low...high
    }

    /// A problem with one ring: which (0-based polygon and ring, ring 0 being the outer one), and why.
    public struct Problem: Error, Sendable, Hashable, CustomStringConvertible {
        public var polygon: Int
        public var ring: Int?
        public var problem: String
        public var description: String {
            ring.map { "polygon \(polygon + 1), ring \($0 + 1): \(problem)" } ?? "polygon \(polygon + 1): \(problem)"
        }
    }

    /// Throws ``Problem`` for the first thing wrong, or when there is no polygon at all.
    public func validate() throws(Problem) {
        guard !polygons.isEmpty else { throw Problem(polygon: 0, ring: nil, problem: "there is no polygon") }
        var total = 0
        for (p, rings) in polygons.enumerated() {
            guard !rings.isEmpty else { throw Problem(polygon: p, ring: nil, problem: "a polygon needs an outer ring") }
            for (r, points) in rings.enumerated() {
                func fail(_ problem: String) -> Problem { Problem(polygon: p, ring: r, problem: problem) }
                total += points.count
                guard points.count <= Self.maxPointsPerRing, total <= Self.maxPoints else {
                    throw fail(
                        "more than \(Self.maxPointsPerRing) points in a ring or \(Self.maxPoints) in all; simplify it")
                }
                for point in points {
                    guard point.lat.isFinite, (-90...90).contains(point.lat), point.lon.isFinite,
                        (-180...180).contains(point.lon)
                    else {
                        throw fail("\(point.lat),\(point.lon) is not a latitude,longitude on the globe")
                    }
                }
                guard points.count >= 4 else {
                    throw fail("\(points.count) points; a ring needs at least 4 (3 corners and the first again)")
                }
                guard points.first == points.last else {
                    throw fail("the ring is not closed: its last point must repeat its first")
                }
                let ring = prepared[p][r]
                guard ring.closesWithoutWinding else {
                    throw fail("the ring goes all the way round a pole; split it at the antimeridian")
                }
                // Crossings first: a bow tie's two lobes cancel out to no area.
                if let crossing = ring.selfIntersection() {
                    throw fail("the ring crosses or touches itself near \(crossing.lat),\(crossing.lon)")
                }
                guard ring.points.count >= 4, abs(ring.signedArea) > 1e-12 else { throw fail("the ring has no area") }
            }
        }
    }

    /// Whether the point is in the region (edges included).
    public func contains(lat: Double, lon: Double) -> Bool {
        prepared.contains { rings in
            guard let outer = rings.first, outer.contains(lat: lat, lon: lon, edge: true) else { return false }
            return !rings.dropFirst().contains { $0.contains(lat: lat, lon: lon, edge: false) }
        }
    }

    /// One ring, its longitudes unwrapped (each step the shorter way round), with its bounds.
    struct Ring: Sendable {
        /// (x: unwrapped longitude, y: latitude), consecutive repeats dropped.
        let points: [(x: Double, y: Double)]
        let minX, maxX, minLat, maxLat: Double
        /// False when unwrapping ends a multiple of 360 degrees from where it began: the ring
        /// winds round a pole.
        let closesWithoutWinding: Bool

        init(_ raw: [Point]) {
            var points: [(x: Double, y: Double)] = []
            points.reserveCapacity(raw.count)
            var previous: Point?
            var x = 0.0
            for point in raw {
                if let previous {
                    var step = point.lon - previous.lon
                    if step > 180 { step -= 360 } else if step < -180 { step += 360 }
                    // The point's own longitude plus whole turns, not a running sum of steps:
                    // sums drift (a vertex 0.6 came out 0.59999999999999), and a ring that never
                    // crosses 180 keeps its longitudes exactly.
                    x = point.lon + ((x + step - point.lon) / 360).rounded() * 360
                    if point == previous { continue }
                } else {
                    x = point.lon
                }
                previous = point
                points.append((x, point.lat))
            }
            self.points = points
            minX = points.map(\.x).min() ?? 0
            maxX = points.map(\.x).max() ?? 0
            minLat = points.map(\.y).min() ?? 0
            maxLat = points.map(\.y).max() ?? 0
            closesWithoutWinding = points.count < 2 || abs(points[points.count - 1].x - points[0].x) < 1e-9
        }

        /// Twice the area, signed by winding (shoelace), in square degrees.
        var signedArea: Double {
            var sum = 0.0
            for i in 0..<max(0, points.count - 1) {
                sum += points[i].x * points[i + 1].y - points[i + 1].x * points[i].y
            }
            return sum
        }

        /// Whether the point is inside, or on an edge when `edge`: the longitude is tried as given
        /// and a turn either way, since the ring's longitudes may run past ±180.
        func contains(lat: Double, lon: Double, edge: Bool) -> Bool {
            let slack = Self.tolerance * max(1, maxX - minX)
            guard lat >= minLat - slack, lat <= maxLat + slack else { return false }
            for x in [lon, lon + 360, lon - 360] where x >= minX - slack && x <= maxX + slack {
                if onEdge(x: x, y: lat) { return edge }
                if inside(x: x, y: lat) { return true }
            }
            return false
        }

        /// Even-odd rule: a ray eastwards from the point crosses the ring an odd number of times.
        private func inside(x: Double, y: Double) -> Bool {
            var inside = false
            var j = points.count - 1
            for i in 0..<points.count {
                let (xi, yi) = points[i]
                let (xj, yj) = points[j]
                if (yi > y) != (yj > y), x < (xj - xi) * (y - yi) / (yj - yi) + xi {
                    inside.toggle()
                }
                j = i
            }
            return inside
        }

        private func onEdge(x: Double, y: Double) -> Bool {
            for i in 0..<max(0, points.count - 1) where Self.onSegment(points[i], points[i + 1], (x, y)) {
                return true
            }
            return false
        }

        static let tolerance = 1e-9

        static func onSegment(_ a: (x: Double, y: Double), _ b: (x: Double, y: Double), _ p: (x: Double, y: Double)) -> Bool {
            guard p.x >= min(a.x, b.x) - tolerance, p.x <= max(a.x, b.x) + tolerance,
                p.y >= min(a.y, b.y) - tolerance, p.y <= max(a.y, b.y) + tolerance
            else { return false }
            let cross = (b.x - a.x) * (p.y - a.y) - (b.y - a.y) * (p.x - a.x)
            let length = max(abs(b.x - a.x), abs(b.y - a.y), tolerance)
            return abs(cross) <= tolerance * length
        }

        /// Where two edges that are not neighbours meet (cross, touch or overlap), or nil.
        func selfIntersection() -> (lat: Double, lon: Double)? {
            let n = points.count - 1  // edges
            guard n >= 3 else { return nil }
            for i in 0..<n {
                let a = points[i], b = points[i + 1]
                let (loX, hiX) = (min(a.x, b.x), max(a.x, b.x))
                let (loY, hiY) = (min(a.y, b.y), max(a.y, b.y))
                for j in stride(from: i + 2, to: n, by: 1) where !(i == 0 && j == n - 1) {
                    let c = points[j], d = points[j + 1]
                    if max(c.x, d.x) < loX || min(c.x, d.x) > hiX || max(c.y, d.y) < loY || min(c.y, d.y) > hiY {
                        continue
                    }
                    if Self.segmentsMeet(a, b, c, d) {
                        var lon = c.x
                        while lon > 180 { lon -= 360 }
                        while lon < -180 { lon += 360 }
                        return (c.y, lon)
                    }
                }
            }
            return nil
        }

        static func segmentsMeet(
            _ a: (x: Double, y: Double), _ b: (x: Double, y: Double), _ c: (x: Double, y: Double),
            _ d: (x: Double, y: Double)
        ) -> Bool {
            func orientation(_ p: (x: Double, y: Double), _ q: (x: Double, y: Double), _ r: (x: Double, y: Double)) -> Int {
                let value = (q.x - p.x) * (r.y - p.y) - (q.y - p.y) * (r.x - p.x)
                return abs(value) <= 1e-12 ? 0 : (value > 0 ? 1 : -1)
            }
            let o1 = orientation(a, b, c), o2 = orientation(a, b, d)
            let o3 = orientation(c, d, a), o4 = orientation(c, d, b)
            if o1 != o2 && o3 != o4 && o1 != 0 && o2 != 0 && o3 != 0 && o4 != 0 { return true }
            return onSegment(a, b, c) || onSegment(a, b, d) || onSegment(c, d, a) || onSegment(c, d, b)
        }
    }
}
