import Foundation

/// Reads the polygons of a GeoJSON document (RFC 7946) as a ``PolygonRegion``: a Polygon or a
/// MultiPolygon, a Feature with one of them as its geometry, a GeometryCollection or a
/// FeatureCollection of them (the region is then all their polygons). Positions are
/// `[longitude, latitude]`, an altitude after them is ignored. Anything else (another geometry
/// type, a position that is not two numbers) is an error that says where.
public enum GeoJSONRegion {
    public struct Problem: Error, Sendable, Hashable, CustomStringConvertible {
        public var description: String
    }

    public static func parse(_ data: Data) throws(Problem) -> PolygonRegion {
        let object: Any
        do {
            object = try JSONSerialization.jsonObject(with: data)
        } catch {
            throw Problem(description: "not JSON (\(error.localizedDescription))")
        }
        var polygons: [[[PolygonRegion.Point]]] = []
        try collect(object, at: "the document", into: &polygons)
        guard !polygons.isEmpty else { throw Problem(description: "the document holds no polygon") }
        return PolygonRegion(polygons: polygons)
    }

    private static func collect(_ object: Any, at place: String, into polygons: inout [[[PolygonRegion.Point]]])
        throws(Problem)
    {
        guard let dictionary = object as? [String: Any], let type = dictionary["type"] as? String else {
            throw Problem(description: "\(place) is not a GeoJSON object (no \"type\")")
        }
        switch type {
        case "Polygon":
            polygons.append(try polygon(dictionary["coordinates"], at: "\(place)'s coordinates"))
        case "MultiPolygon":
            guard let list = dictionary["coordinates"] as? [Any] else {
                throw Problem(description: "\(place)'s coordinates are not a list of polygons")
            }
            for (i, item) in list.enumerated() {
                polygons.append(try polygon(item, at: "polygon \(i + 1) of \(place)"))
            }
        case "Feature":
            guard let geometry = dictionary["geometry"], !(geometry is NSNull) else {
                throw Problem(description: "\(place) is a Feature without a geometry")
            }
            try collect(geometry, at: place, into: &polygons)
        case "FeatureCollection", "GeometryCollection":
            let key = type == "FeatureCollection" ? "features" : "geometries"
            guard let list = dictionary[key] as? [Any] else { throw Problem(description: "\(place) has no \(key) list") }
            for (i, item) in list.enumerated() {
                try collect(item, at: "\(type == "FeatureCollection" ? "feature" : "geometry") \(i + 1)", into: &polygons)
            }
        case "Point", "MultiPoint", "LineString", "MultiLineString":
            throw Problem(description: "\(place) is a \(type), which has no area; give a Polygon or MultiPolygon")
        default:
            throw Problem(description: "\(place) has the type \"\(type)\", which is not GeoJSON")
        }
    }

    /// A JSON number (not `true` or `false`, which Foundation also hands over as NSNumber).
    private static func number(_ value: Any) -> Double? {
        guard let number = value as? NSNumber, String(cString: number.objCType) != "c" else { return nil }
        return number.doubleValue
    }

    private static func polygon(_ value: Any?, at place: String) throws(Problem) -> [[PolygonRegion.Point]] {
        guard let rings = value as? [Any] else { throw Problem(description: "\(place) are not a list of rings") }
        var result: [[PolygonRegion.Point]] = []
        for (r, ring) in rings.enumerated() {
            guard let positions = ring as? [Any] else {
                throw Problem(description: "ring \(r + 1) of \(place) is not a list of positions")
            }
            var points: [PolygonRegion.Point] = []
            for (p, position) in positions.enumerated() {
                guard let numbers = position as? [Any], numbers.count >= 2, let lon = number(numbers[0]),
                    let lat = number(numbers[1])
                else {
                    throw Problem(description: "position \(p + 1) of ring \(r + 1) of \(place) is not [longitude, latitude]")
                }
                points.append(.init(lat: lat, lon: lon))
            }
            result.append(points)
        }
        return result
    }
}
