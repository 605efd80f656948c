import Foundation
import QuakeModel

/// Parsers for configuration values.
public enum ConfigValue {
    /// Why a value does not parse.
    public struct Problem: Error, Sendable {
        public var message: String

        public init(message: String) {
            self.message = message
        }
    }

    /// `90`, `90s`, `1500ms`, `5m`, `2h`, `7d`, `1w`: a bare number is seconds. QuakeModel's
    /// grammar (``QuakeDuration``), the one quakectl's options use too.
    public static func duration(_ text: String, minimum: Duration = .zero) throws -> Duration {
        guard let duration = QuakeDuration.parse(text) else {
            throw Problem(message: "'\(text)' is not a duration (e.g. 90s, 1500ms, 5m, 2h, 7d)")
        }
        guard duration >= minimum else { throw Problem(message: "'\(text)' is shorter than the minimum of \(minimum)") }
        return duration
    }

    /// A duration as ``duration(_:minimum:)`` reads it, in the largest unit that keeps it a
    /// whole number (`15m`, `7d`, `1500ms`), except that up to two minutes whole seconds stay
    /// seconds (`60s`, `120s`, as timeouts are usually written).
    public static func text(duration: Duration) -> String { QuakeDuration.text(duration) }

    /// A size as ``size(_:)`` reads it, in the largest unit that keeps it whole (`256M`, `1500`).
    public static func text(size: Int) -> String {
        for (suffix, unit) in [("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)] where size % unit == 0 {
            return "\(size / unit)\(suffix)"
        }
        return "\(size)"
    }

    /// A plain stored value in configuration syntax: durations as ``text(duration:)``, nil as
    /// `none`, anything else as it prints.
    public static func text(of value: Any) -> String {
        let mirror = Mirror(reflecting: value)
        if mirror.displayStyle == .optional {
            guard let wrapped = mirror.children.first?.value else { return "none" }
            return text(of: wrapped)
        }
        if let duration = value as? Duration { return text(duration: duration) }
        return "\(value)"
    }

    /// A region: `LAT,LON,KM` (a circle) or `MINLAT,MINLON,MAXLAT,MAXLON` (a box, across the
    /// antimeridian when MINLON > MAXLON), as quakectl's `--near`/`--radius` and `--box` take
    /// them; empty or `none` for none.
    public static func region(_ text: String) throws -> CatalogRegion? {
        if text.isEmpty || text == "none" { return nil }
        let numbers = text.split(separator: ",").map { Double($0.trimmingCharacters(in: .whitespaces)) }
        let usage = "'\(text)' is not a region: LAT,LON,KM (a circle) or MINLAT,MINLON,MAXLAT,MAXLON (a box)"
        guard numbers.allSatisfy({ $0?.isFinite == true }) else { throw Problem(message: usage) }
        let n = numbers.map { $0! }
        func latitude(_ v: Double) -> Bool { (-90...90).contains(v) }
        func longitude(_ v: Double) -> Bool { (-180...180).contains(v) }
        switch n.count {
        case 3:
            guard latitude(n[0]), longitude(n[1]), n[2] > 0, n[2] <= 20_038 else {
                throw Problem(message: "'\(text)': latitude -90 to 90, longitude -180 to 180, radius 0 to 20038 km")
            }
            return .near(lat: n[0], lon: n[1], radiusKm: n[2])
        case 4:
            guard latitude(n[0]), latitude(n[2]), longitude(n[1]), longitude(n[3]), n[0] <= n[2], n[1] != n[3] else {
                throw Problem(
                    message: "'\(text)': latitudes -90 to 90 with MINLAT <= MAXLAT, longitudes -180 to 180 and not equal")
            }
            return .box(minLat: n[0], maxLat: n[2], minLon: n[1], maxLon: n[3])
        default:
            throw Problem(message: usage)
        }
    }

    /// A region as ``region(_:)`` reads it.
    public static func text(region: CatalogRegion) -> String {
        func n(_ v: Double) -> String { v == v.rounded() && abs(v) < 1e15 ? String(Int64(v)) : "\(v)" }
        switch region {
        case .near(let lat, let lon, let radiusKm): return "\(n(lat)),\(n(lon)),\(n(radiusKm))"
        case .box(let minLat, let maxLat, let minLon, let maxLon):
            return "\(n(minLat)),\(n(minLon)),\(n(maxLat)),\(n(maxLon))"
        }
    }

    /// `1048576`, `512K`, `256M`, `1G` (powers of 1024).
    public static func size(_ text: String) throws -> Int {
        let units: [Character: Int] = ["K": 1 << 10, "M": 1 << 20, "G": 1 << 30]
        var digits = Substring(text)
        var factor = 1
        if let last = text.last?.uppercased().first, let f = units[last] {
            digits = text.dropLast()
            factor = f
        }
        guard let value = Int(digits), value > 0, value <= Int.max / factor else {
            throw Problem(message: "'\(text)' is not a size (e.g. 256M, 1G, or bytes)")
        }
        return value * factor
    }
}
