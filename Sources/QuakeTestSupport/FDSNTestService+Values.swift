import Foundation
import QuakeModel

extension FDSNTestService {
    /// A JSON value for ``update(id:properties:updated:)``; literals work (`"deleted"`, `4.5`, `3`, `nil`).
    public enum PropertyValue: Sendable, Hashable, ExpressibleByStringLiteral, ExpressibleByIntegerLiteral,
        ExpressibleByFloatLiteral, ExpressibleByBooleanLiteral, ExpressibleByNilLiteral
    {
        /// A JSON string.
        case string(String)
        /// A JSON integer.
        case int(Int64)
        /// A JSON number (non-finite values are written as `null`).
        case double(Double)
        /// `true` or `false`.
        case bool(Bool)
        /// `null`.
        case null
        /// Any JSON text, written as given (it must be valid JSON).
        case raw(String)

        /// A string literal is a ``string(_:)``.
        public init(stringLiteral value: String) { self = .string(value) }
        /// An integer literal is an ``int(_:)``.
        public init(integerLiteral value: Int64) { self = .int(value) }
        /// A floating-point literal is a ``double(_:)``.
        public init(floatLiteral value: Double) { self = .double(value) }
        /// `true` and `false` are a ``bool(_:)``.
        public init(booleanLiteral value: Bool) { self = .bool(value) }
        /// `nil` is ``null``.
        public init(nilLiteral: ()) { self = .null }

        /// The value as JSON text.
        public var json: String {
            switch self {
            case .string(let text): return FDSNTestService.jsonString(text)
            case .int(let number): return "\(number)"
            case .double(let number): return number.isFinite ? "\(number)" : "null"
            case .bool(let flag): return flag ? "true" : "false"
            case .null: return "null"
            case .raw(let text): return text
            }
        }
    }

    // MARK: Helpers

    /// Great-circle distance in km between two points (haversine, sphere of ``earthRadiusKm``).
    public static func distanceKm(
        latitude: Double, longitude: Double, _ otherLatitude: Double, _ otherLongitude: Double
    ) -> Double {
        let radians = Double.pi / 180
        let dLat = (otherLatitude - latitude) * radians
        let dLon = (otherLongitude - longitude) * radians
        let a =
            sin(dLat / 2) * sin(dLat / 2) + cos(latitude * radians) * cos(otherLatitude * radians) * sin(dLon / 2)
            * sin(dLon / 2)
        return 2 * earthRadiusKm * asin(min(1, a.squareRoot()))
    }

    /// Milliseconds since 1970 of an FDSN time (`2024-01-02`, `2024-01-02T03:04:05`, a space for the `T`,
    /// an optional `.SSS…` fraction (digits beyond milliseconds are dropped) and an optional `Z`; UTC),
    /// or `nil` if `text` is not one.
    public static func parseTime(_ text: String) -> Int64? {
        let b = Array(text.utf8)
        var i = 0
        func digits(_ count: Int) -> Int? {
            guard i + count <= b.count else { return nil }
            var value = 0
            for _ in 0..<count {
                let c = b[i]
                guard c >= UInt8(ascii: "0"), c <= UInt8(ascii: "9") else { return nil }
                value = value * 10 + Int(c - UInt8(ascii: "0"))
                i += 1
            }
            return value
        }
        func expect(_ c: Character) -> Bool {
            guard i < b.count, b[i] == c.asciiValue! else { return false }
            i += 1
            return true
        }
        guard let year = digits(4), expect("-"), let month = digits(2), expect("-"), let day = digits(2),
            (1...12).contains(month), day >= 1, day <= daysIn(month: month, year: year)
        else { return nil }
        var seconds = 0
        var milliseconds = 0
        if i < b.count, b[i] == UInt8(ascii: "T") || b[i] == UInt8(ascii: " ") {
            i += 1
            guard let hour = digits(2), expect(":"), let minute = digits(2), expect(":"), let second = digits(2),
                hour < 24, minute < 60, second < 60
            else { return nil }
            seconds = hour * 3600 + minute * 60 + second
            if i < b.count, b[i] == UInt8(ascii: ".") {
                i += 1
                var count = 0
                while i < b.count, b[i] >= UInt8(ascii: "0"), b[i] <= UInt8(ascii: "9") {
                    if count < 3 { milliseconds = milliseconds * 10 + Int(b[i] - UInt8(ascii: "0")) }
                    count += 1
                    i += 1
                }
                guard count > 0 else { return nil }
                if count < 3 { for _ in count..<3 { milliseconds *= 10 } }
            }
            if i < b.count, b[i] == UInt8(ascii: "Z") { i += 1 }
        }
        guard i == b.count else { return nil }
        let days = CivilDate.days(year: year, month: month, day: day)
        return (Int64(days) * 86400 + Int64(seconds)) * 1000 + Int64(milliseconds)
    }

    /// `ms` as an FDSN time, `YYYY-MM-DDTHH:MM:SS.SSS` (UTC), which ``parseTime(_:)`` reads back exactly.
    public static func formatTime(_ ms: Int64) -> String {
        QuakeTime.utcText(ms)
    }

    private static func daysIn(month: Int, year: Int) -> Int {
        switch month {
        case 2: return (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 ? 29 : 28
        case 4, 6, 9, 11: return 30
        default: return 31
        }
    }

    /// `text` as a JSON string literal.
    static func jsonString(_ text: String) -> String {
        var result = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": result += "\\\""
            case "\\": result += "\\\\"
            case "\n": result += "\\n"
            case "\r": result += "\\r"
            case "\t": result += "\\t"
            case _ where scalar.value < 0x20:
                let hex = String(scalar.value, radix: 16)
                result += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: result.unicodeScalars.append(scalar)
            }
        }
        return result + "\""
    }
}
