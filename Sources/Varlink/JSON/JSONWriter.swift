/// Writes JSON straight to bytes: what generated types encode with, so a reply is built once,
/// without an intermediate tree or Foundation's encoder.
///
/// Commas are placed by looking at the last byte written (`{` or `[` means "first member"), so
/// writing an object is `beginObject()`, then `key(_:)` and a value per member, then `endObject()`.
public struct JSONWriter: Sendable {
    public var bytes: [UInt8]

    public init(capacity: Int = 256) {
        bytes = []
        bytes.reserveCapacity(capacity)
    }

    @inlinable public mutating func beginObject() { bytes.append(UInt8(ascii: "{")) }
    @inlinable public mutating func endObject() { bytes.append(UInt8(ascii: "}")) }
    @inlinable public mutating func beginArray() { bytes.append(UInt8(ascii: "[")) }
    @inlinable public mutating func endArray() { bytes.append(UInt8(ascii: "]")) }

    /// Before a member or an element: a comma unless it is the first.
    @inlinable public mutating func separator() {
        if let last = bytes.last, last != UInt8(ascii: "{") && last != UInt8(ascii: "[") {
            bytes.append(UInt8(ascii: ","))
        }
    }

    /// `"name":` (with the comma before it when needed). Names are plain ASCII identifiers.
    @inlinable public mutating func key(_ name: StaticString) {
        separator()
        bytes.append(UInt8(ascii: "\""))
        name.withUTF8Buffer { bytes.append(contentsOf: $0) }
        bytes.append(UInt8(ascii: "\""))
        bytes.append(UInt8(ascii: ":"))
    }

    /// `"name":` for a name known only at run time (escaped).
    public mutating func key(_ name: String) {
        separator()
        string(name)
        bytes.append(UInt8(ascii: ":"))
    }

    /// Bytes that are already JSON (a stored value passed through as it is).
    @inlinable public mutating func raw(_ json: some Collection<UInt8>) { bytes.append(contentsOf: json) }
    @inlinable public mutating func raw(_ json: StaticString) { json.withUTF8Buffer { bytes.append(contentsOf: $0) } }

    @inlinable public mutating func null() { raw("null") }
    @inlinable public mutating func bool(_ value: Bool) { value ? raw("true") : raw("false") }

    public mutating func int(_ value: Int) {
        if value == 0 {
            bytes.append(UInt8(ascii: "0"))
            return
        }
        var magnitude = value.magnitude
        if value < 0 { bytes.append(UInt8(ascii: "-")) }
        var digits: (UInt64, UInt64, UInt64) = (0, 0, 0)  // 24 bytes: enough for 20 digits
        var count = 0
        withUnsafeMutableBytes(of: &digits) { buffer in
            while magnitude > 0 {
                buffer[23 - count] = UInt8(ascii: "0") + UInt8(magnitude % 10)
                magnitude /= 10
                count += 1
            }
            bytes.append(contentsOf: buffer[(24 - count)...])
        }
    }

    /// The shortest text that reads back as the same Double. JSON has no NaN or infinity:
    /// those are written as null (no value quaked stores can be one).
    public mutating func double(_ value: Double) {
        guard value.isFinite else { return null() }
        if value == value.rounded(.towardZero), abs(value) < 1e15 {
            // Integral values: Swift's description would say "4.0"; "4" is shorter and the same number.
            int(Int(value))
            return
        }
        var text = value.description
        text.withUTF8 { bytes.append(contentsOf: $0) }
    }

    /// A JSON string: `"`, `\` and control characters escaped, everything else as UTF-8.
    public mutating func string(_ value: String) {
        var value = value
        value.withUTF8 { string(utf8: UnsafeRawBufferPointer($0)) }
    }

    public mutating func string(utf8 text: UnsafeRawBufferPointer) {
        bytes.append(UInt8(ascii: "\""))
        var start = 0
        for i in 0..<text.count {
            let byte = text[i]
            guard byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") else { continue }
            bytes.append(contentsOf: UnsafeRawBufferPointer(rebasing: text[start..<i]))
            switch byte {
            case UInt8(ascii: "\""): raw(#"\""#)
            case UInt8(ascii: "\\"): raw(#"\\"#)
            case 0x0A: raw(#"\n"#)
            case 0x0D: raw(#"\r"#)
            case 0x09: raw(#"\t"#)
            default:
                let hex = Array("0123456789abcdef".utf8)
                raw(#"\u00"#)
                bytes.append(hex[Int(byte >> 4)])
                bytes.append(hex[Int(byte & 0xF)])
            }
            start = i + 1
        }
        bytes.append(contentsOf: UnsafeRawBufferPointer(rebasing: text[start..<text.count]))
        bytes.append(UInt8(ascii: "\""))
    }
}

extension JSONWriter {
    /// A member's key as written, `"name":` (quotes and colon included), with the comma before it
    /// when needed: what generated `Members` appends write before a value.
    @inlinable public mutating func member(_ quotedKey: StaticString) {
        separator()
        raw(quotedKey)
    }

    /// A stored scalar, for a member of the interface type `kind`: an integer, a real or a text as
    /// stored, the way the member's own type writes it (an integer for a `bool` is `true` or `false`).
    /// A value whose storage does not fit the type is a programming error, checked in debug builds.
    @inlinable public mutating func scalar(_ value: JSONScalar, as kind: JSONScalar.Kind) {
        switch value {
        case .null: null()
        case .integer(let integer):
            assert(kind != .string, "an integer for a string member")
            kind == .bool ? bool(integer != 0) : int(Int(integer))
        case .real(let real):
            assert(kind == .float, "a real for a \(kind) member")
            double(real)
        case .text(let text):
            assert(kind == .string || kind == .json, "a text for a \(kind) member")
            kind == .json ? raw(text) : string(utf8: text)
        }
    }

    /// Inserts members at `position` (a ``bytes`` count taken earlier, inside the same object):
    /// members known only after what follows them was written, such as a count of the elements
    /// of an array streamed after it. Commas are placed as if they had been written there.
    public mutating func insert(at position: Int, _ members: (inout JSONWriter) -> Void) {
        bytes.insert(contentsOf: insertion(at: position, members), at: position)
    }

    /// The bytes ``insert(at:_:)`` would insert at `position`, for a caller that joins the pieces
    /// itself (into a buffer it sends, without moving what follows).
    public func insertion(at position: Int, _ members: (inout JSONWriter) -> Void) -> ArraySlice<UInt8> {
        var inserted = JSONWriter(capacity: 128)
        // What precedes the position decides the first comma, as it would have.
        if position > 0 { inserted.bytes.append(bytes[position - 1]) }
        members(&inserted)
        let start = position > 0 ? 1 : 0
        guard inserted.bytes.count > start else { return [] }
        // What follows was written as a first member; it now comes after one.
        if position < bytes.count, bytes[position] != UInt8(ascii: ","), bytes[position] != UInt8(ascii: "}") {
            inserted.bytes.append(UInt8(ascii: ","))
        }
        return inserted.bytes[start...]
    }
}

/// One stored value, as a database row holds it (texts are the row's own UTF-8 bytes, valid
/// while the row is).
public enum JSONScalar {
    case null
    case integer(Int64)
    case real(Double)
    case text(UnsafeRawBufferPointer)

    /// The interface's scalar types, and `json`: a text that is the member's JSON (an array of
    /// structs kept as its JSON), written as it is.
    public enum Kind: Sendable { case bool, int, float, string, json }

    @inlinable public var isNull: Bool {
        if case .null = self { return true }
        return false
    }
}

/// A row of stored values read by column, as generated `Members.appendMembers(from:to:)` reads
/// a struct of scalar members: column `i` is member `i` in the interface's order.
public protocol JSONScalarRow {
    func scalar(at index: Int) -> JSONScalar
}
