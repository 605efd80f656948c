import GRDB

/// One stored value of a quake field, as history records it: what an update changed from and to.
///
/// Encodes as the plain JSON value (`null`, a number or a string), so history reads naturally in
/// JSON and in the database file.
public enum FieldValue: Sendable, Hashable, Codable, CustomStringConvertible {
    case null
    case integer(Int64)
    case real(Double)
    case text(String)

    init(_ value: DatabaseValue) {
        switch value.storage {
        case .null: self = .null
        case .int64(let i): self = .integer(i)
        case .double(let d): self = .real(d)
        case .string(let s): self = .text(s)
        case .blob: self = .null  // the quakes table holds no blobs
        }
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.singleValueContainer()
        if c.decodeNil() {
            self = .null
        } else if let i = try? c.decode(Int64.self) {
            self = .integer(i)
        } else if let d = try? c.decode(Double.self) {
            self = .real(d)
        } else {
            self = .text(try c.decode(String.self))
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.singleValueContainer()
        switch self {
        case .null: try c.encodeNil()
        case .integer(let i): try c.encode(i)
        case .real(let d): try c.encode(d)
        case .text(let s): try c.encode(s)
        }
    }

    public var description: String {
        switch self {
        case .null: "null"
        case .integer(let i): String(i)
        case .real(let d): String(d)
        case .text(let s): s
        }
    }
}

/// One field an update changed.
public struct FieldChange: Sendable, Hashable, Codable {
    public var field: String
    public var old: FieldValue
    public var new: FieldValue

    public init(field: String, old: FieldValue, new: FieldValue) {
        self.field = field
        self.old = old
        self.new = new
    }
}

/// What history keeps of a deleted quake.
public struct Tombstone: Sendable, Hashable, Codable {
    public var id: String
    public var code: String?
    public var mag: Double?
    public var place: String?
    public var time: Int64

    public init(id: String, code: String?, mag: Double?, place: String?, time: Int64) {
        self.id = id
        self.code = code
        self.mag = mag
        self.place = place
        self.time = time
    }
}
