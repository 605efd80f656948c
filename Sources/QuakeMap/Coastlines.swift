import Foundation

/// A point in degrees.
public struct GeoPoint: Sendable, Hashable {
    public var lon: Double
    public var lat: Double

    public init(lon: Double, lat: Double) {
        self.lon = lon
        self.lat = lat
    }

    /// The change of longitude from `self` to `next` the shorter way round (179 to -179 is +2):
    /// how a line between them is drawn.
    public func eastwardStep(to next: GeoPoint) -> Double {
        let step = next.lon - lon
        return step > 180 ? step - 360 : step < -180 ? step + 360 : step
    }
}

/// The world's coastlines: Natural Earth's 1:110m coastline (public domain), shipped in
/// `CoastlineData.swift` (see `NATURAL_EARTH.md` for the source and version). Nothing is
/// downloaded at run time.
public enum Coastlines {
    /// Every polyline, decoded once.
    public static let lines: [[GeoPoint]] = decode(encoded)

    /// The encoding `scripts/gen-coastlines` writes, as base64 (line breaks ignored): for each
    /// polyline, an unsigned LEB128 point count, then each point as two zigzag LEB128 integers,
    /// longitude then latitude in 0.01°, the first absolute and each later one the difference
    /// from the point before. A malformed text decodes as far as it is whole.
    public static func decode(_ base64: String) -> [[GeoPoint]] {
        guard let data = Data(base64Encoded: base64, options: .ignoreUnknownCharacters) else { return [] }
        let bytes = [UInt8](data)
        var index = 0
        func varint() -> UInt64? {
            var value: UInt64 = 0
            var shift: UInt64 = 0
            while index < bytes.count, shift < 64 {
                let byte = bytes[index]
                index += 1
                value |= UInt64(byte & 0x7F) << shift
                if byte & 0x80 == 0 { return value }
                shift += 7
            }
            return nil
        }
        func signed() -> Int64? {
            guard let raw = varint() else { return nil }
            return Int64(bitPattern: raw >> 1) ^ -Int64(bitPattern: raw & 1)
        }
        var lines: [[GeoPoint]] = []
        while index < bytes.count {
            guard let count = varint(), count >= 2, count <= UInt64(bytes.count) else { break }
            var line: [GeoPoint] = []
            line.reserveCapacity(Int(count))
            var lon: Int64 = 0
            var lat: Int64 = 0
            for _ in 0..<count {
                guard let dLon = signed(), let dLat = signed() else { return lines }
                lon += dLon
                lat += dLat
                line.append(GeoPoint(lon: Double(lon) / 100, lat: Double(lat) / 100))
            }
            lines.append(line)
        }
        return lines
    }
}
