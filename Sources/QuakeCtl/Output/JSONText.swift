import QuakeClient
import QuakeProtocol
import Foundation

/// JSON output: Codable for small replies, and a hand-written writer for the hot export path.
public enum JSONText {
    /// One value as compact JSON with sorted keys.
    public static func encode(_ value: some Encodable) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return (try? String(decoding: encoder.encode(value), as: UTF8.self)) ?? "{}"
    }

    /// Appends `s` as a JSON string (RFC 8259 escaping).
    public static func appendString(_ s: String, to out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        for byte in s.utf8 {
            switch byte {
            case UInt8(ascii: "\""): out.append(contentsOf: [92, 34])
            case UInt8(ascii: "\\"): out.append(contentsOf: [92, 92])
            case 0x0A: out.append(contentsOf: [92, UInt8(ascii: "n")])
            case 0x0D: out.append(contentsOf: [92, UInt8(ascii: "r")])
            case 0x09: out.append(contentsOf: [92, UInt8(ascii: "t")])
            case 0..<0x20:
                let hex = Array("0123456789abcdef".utf8)
                out.append(contentsOf: [92, UInt8(ascii: "u"), 48, 48, hex[Int(byte >> 4)], hex[Int(byte & 15)]])
            default: out.append(byte)
            }
        }
        out.append(UInt8(ascii: "\""))
    }

    /// Appends a number: integers without a fraction, others in the shortest form that reads back
    /// as the same Double.
    public static func appendNumber(_ d: Double, to out: inout [UInt8]) {
        guard d.isFinite else {
            out.append(contentsOf: Array("null".utf8))
            return
        }
        if d.rounded() == d && abs(d) < 1e15 {
            out.append(contentsOf: Array(String(Int64(d)).utf8))
        } else {
            out.append(contentsOf: Array(d.description.utf8))
        }
    }

    public static func appendValue(_ value: QuakeValue, to out: inout [UInt8]) {
        switch value {
        case .null: out.append(contentsOf: Array("null".utf8))
        case .integer(let i): out.append(contentsOf: Array(String(i).utf8))
        case .real(let d): appendNumber(d, to: &out)
        case .text(let s): appendString(s, to: &out)
        }
    }
}

/// One field value of a quake.
public enum QuakeValue: Sendable, Hashable {
    case null
    case integer(Int)
    case real(Double)
    case text(String)
}

/// The fields of the interface's `Quake` type, in its order.
public enum QuakeFields {
    public static let names = [
        "id", "mag", "place", "time", "updated", "tz", "url", "detail", "felt", "cdi", "mmi", "alert", "status",
        "tsunami", "sig", "net", "code", "ids", "sources", "types", "nst", "dmin", "rms", "gap", "magType", "type",
        "title", "lon", "lat", "depth",
    ]

    /// The values of `q`, in the order of ``names``.
    public static func values(_ q: IOQuaked.Quake) -> [QuakeValue] {
        func s(_ v: String?) -> QuakeValue { v.map(QuakeValue.text) ?? .null }
        func i(_ v: Int?) -> QuakeValue { v.map(QuakeValue.integer) ?? .null }
        func d(_ v: Double?) -> QuakeValue { v.map(QuakeValue.real) ?? .null }
        return [
            .text(q.id), d(q.mag), s(q.place), .integer(q.time), i(q.updated), i(q.tz), s(q.url), s(q.detail),
            i(q.felt), d(q.cdi), d(q.mmi), s(q.alert), s(q.status), i(q.tsunami), i(q.sig), s(q.net), s(q.code),
            s(q.ids), s(q.sources), s(q.types), i(q.nst), d(q.dmin), d(q.rms), d(q.gap), s(q.magType), s(q.type),
            s(q.title), d(q.lon), d(q.lat), d(q.depth),
        ]
    }
}
