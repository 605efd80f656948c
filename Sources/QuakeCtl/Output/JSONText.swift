import QuakeClient
import QuakeModel
import QuakeProtocol
import Foundation
import Varlink

/// JSON output: Codable for small replies, and a hand-written writer for the hot export path.
public enum JSONText {
    /// One value as compact JSON with sorted keys.
    public static func encode(_ value: some Encodable) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return (try? String(decoding: encoder.encode(value), as: UTF8.self)) ?? "{}"
    }

    /// Appends `s` as a JSON string (RFC 8259 escaping), with the protocol's writer.
    public static func appendString(_ s: String, to out: inout [UInt8]) {
        withWriter(&out) { $0.string(s) }
    }

    /// Appends a number: integers without a fraction, others in the shortest form that reads back
    /// as the same Double (null for NaN and infinities, which JSON lacks).
    public static func appendNumber(_ d: Double, to out: inout [UInt8]) {
        withWriter(&out) { $0.double(d) }
    }

    /// Runs `body` on a JSONWriter that appends to `out` (the buffer is moved, not copied).
    private static func withWriter(_ out: inout [UInt8], _ body: (inout JSONWriter) -> Void) {
        var writer = JSONWriter(capacity: 0)
        swap(&writer.bytes, &out)
        body(&writer)
        swap(&writer.bytes, &out)
    }

    /// Appends a field's value; with `json`, a text value is the field's JSON (``QuakeField/jsonType``:
    /// `contributors`, an array), written as it is rather than as a string.
    public static func appendValue(_ value: QuakeValue, json: Bool = false, to out: inout [UInt8]) {
        switch value {
        case .null: out.append(contentsOf: Array("null".utf8))
        case .integer(let i): out.append(contentsOf: Array(String(i).utf8))
        case .real(let d): appendNumber(d, to: &out)
        case .text(let s) where json: out.append(contentsOf: Array(s.utf8))
        case .text(let s): appendString(s, to: &out)
        }
    }
}

/// The fields of the interface's `Quake` type, in its order: QuakeModel's declaration.
public enum QuakeFields {
    public static let names = QuakeRecord.names

    /// The values of `q`, in the order of ``names``.
    public static func values(_ q: IOQuaked.Quake) -> [QuakeValue] { q.values }
}
