import Foundation

/// The part of the world a map shows, in an equirectangular projection: longitudes from `west`
/// eastwards to `east` (past 180 when it crosses the antimeridian), latitudes `south` to `north`.
public struct Viewport: Sendable, Hashable, CustomStringConvertible {
    public var west: Double
    public var east: Double
    public var south: Double
    public var north: Double

    public static let world = Viewport(west: -180, east: 180, south: -90, north: 90)

    public init(west: Double, east: Double, south: Double, north: Double) {
        self.west = west
        self.east = east
        self.south = south
        self.north = north
    }

    /// `--box MINLAT,MINLON,MAXLAT,MAXLON`: crossing the antimeridian when minLon > maxLon. Nil
    /// for a box of no area or out of range.
    public init?(minLat: Double, minLon: Double, maxLat: Double, maxLon: Double) {
        guard [minLat, minLon, maxLat, maxLon].allSatisfy(\.isFinite), (-90...90).contains(minLat),
            (-90...90).contains(maxLat), (-180...180).contains(minLon), (-180...180).contains(maxLon),
            maxLat > minLat, minLon != maxLon
        else { return nil }
        self.init(west: minLon, east: maxLon > minLon ? maxLon : maxLon + 360, south: minLat, north: maxLat)
    }

    /// `--near LAT,LON --radius KM`: the box around the circle (a kilometre is 1/111.195 of a
    /// degree of latitude; longitudes widen towards the poles).
    public init?(lat: Double, lon: Double, radiusKm: Double) {
        guard lat.isFinite, lon.isFinite, radiusKm.isFinite, radiusKm > 0, (-90...90).contains(lat),
            (-180...180).contains(lon)
        else { return nil }
        let dLat = radiusKm / 111.195
        // A circle over a pole takes in every longitude.
        let overPole = lat + dLat >= 90 || lat - dLat <= -90
        let dLon = overPole ? 180 : min(180, dLat / max(cos(lat * .pi / 180), 0.01))
        var west = lon - dLon
        if dLon >= 180 { west = -180 } else if west < -180 { west += 360 }
        self.init(west: west, east: west + 2 * dLon, south: max(-90, lat - dLat), north: min(90, lat + dLat))
    }

    public var width: Double { east - west }
    public var height: Double { north - south }

    public var description: String {
        String(format: "%.2f,%.2f,%.2f,%.2f", south, west > 180 ? west - 360 : west, north, east > 180 ? east - 360 : east)
    }

    /// Grown (never shrunk) to `aspect`, degrees of longitude per degree of latitude, about its
    /// centre, so that a map of that shape is not stretched; latitudes stay within ±90 and
    /// longitudes within one turn.
    public func fitted(aspect: Double) -> Viewport {
        guard aspect.isFinite, aspect > 0 else { return self }
        var fitted = self
        if width / height < aspect {
            let grown = min(360, height * aspect)
            let centre = (west + east) / 2
            fitted.west = centre - grown / 2
            fitted.east = centre + grown / 2
            if grown >= 360 {
                fitted.west = -180
                fitted.east = 180
            } else if fitted.west < -180 {
                fitted.west += 360
                fitted.east += 360
            }
        } else {
            let grown = min(180, width / aspect)
            var south = (self.south + north) / 2 - grown / 2
            south = min(max(south, -90), 90 - grown)
            fitted.south = south
            fitted.north = south + grown
        }
        return fitted
    }

    /// `lon` moved by whole turns into [west, west + 360).
    public func unwrap(_ lon: Double) -> Double {
        var lon = lon
        while lon < west { lon += 360 }
        while lon >= west + 360 { lon -= 360 }
        return lon
    }

    /// Where a point falls, its longitude already unwrapped by the caller, unbounded: x from 0
    /// (west) to 1 (east), y from 0 (north) to 1 (south), and beyond them outside the viewport.
    public func fraction(lat: Double, unwrappedLon lon: Double) -> (x: Double, y: Double) {
        ((lon - west) / width, (north - lat) / height)
    }

    /// Where a point falls: x from 0 (west) to 1 (east), y from 0 (north) to 1 (south); nil
    /// outside the viewport. Points on its edges are inside.
    public func position(lat: Double, lon: Double) -> (x: Double, y: Double)? {
        guard lat.isFinite, lon.isFinite else { return nil }
        let unwrapped = unwrap(lon)
        var (x, y) = fraction(lat: lat, unwrappedLon: unwrapped)
        // A map all the way round: its east edge (180 in a world map) unwraps to its west edge.
        if width >= 360, unwrapped == west, lon > west { x = 1 }
        guard (0...1).contains(x), (0...1).contains(y) else { return nil }
        return (x, y)
    }
}
