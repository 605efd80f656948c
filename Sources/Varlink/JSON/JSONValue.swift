/// Any JSON value, for the parts of a Varlink message whose shape depends on the method.
public enum JSONValue: Sendable, Hashable, Codable {
    case null
    case bool(Bool)
    case number(Double)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])

    public init(from decoder: any Decoder) throws {
        let c = try decoder.singleValueContainer()
        if c.decodeNil() {
            self = .null
        } else if let b = try? c.decode(Bool.self) {
            self = .bool(b)
        } else if let n = try? c.decode(Double.self) {
            self = .number(n)
        } else if let s = try? c.decode(String.self) {
            self = .string(s)
        } else if let a = try? c.decode([JSONValue].self) {
            self = .array(a)
        } else {
            self = .object(try c.decode([String: JSONValue].self))
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.singleValueContainer()
        switch self {
        case .null: try c.encodeNil()
        case .bool(let b): try c.encode(b)
        case .number(let n):
            if n.rounded() == n, abs(n) < 9.0e15 { try c.encode(Int64(n)) } else { try c.encode(n) }
        case .string(let s): try c.encode(s)
        case .array(let a): try c.encode(a)
        case .object(let o): try c.encode(o)
        }
    }

    public subscript(key: String) -> JSONValue? {
        if case .object(let o) = self { return o[key] }
        return nil
    }
}

extension JSONValue: VarlinkValue {
    /// Any JSON value (Varlink's `object` type is `[String: JSONValue]`, which takes objects only).
    public init(json: inout JSONScanner) throws(VarlinkParameterError) {
        json.skipSpaceForValue()
        switch json.peekByteForValue() {
        case UInt8(ascii: "{"): self = .object(try [String: JSONValue](json: &json))
        case UInt8(ascii: "["): self = .array(try [JSONValue](json: &json))
        case UInt8(ascii: "\""): self = .string(try json.readString())
        case UInt8(ascii: "t"), UInt8(ascii: "f"): self = .bool(try json.readBool())
        case UInt8(ascii: "n"):
            _ = try json.readNull()
            self = .null
        default: self = .number(try json.readDouble())
        }
    }

    public func write(to writer: inout JSONWriter) {
        switch self {
        case .null: writer.null()
        case .bool(let b): writer.bool(b)
        case .number(let n): writer.double(n)
        case .string(let s): writer.string(s)
        case .array(let a): a.write(to: &writer)
        case .object(let o): o.write(to: &writer)
        }
    }
}

extension JSONScanner {
    mutating func skipSpaceForValue() { skipSpace() }
    func peekByteForValue() -> UInt8? { peekByte() }
}
