import GRDB
import QuakeFeed
import QuakeModel

/// One stored value of a quake field, as history records it: what an update changed from and to.
///
/// A typed column value, not a JSON value: stored in history (and sent by FetchHistory as it is)
/// in the interface's FieldValue form, an object with the one member that matches the column's
/// type: `{"float": 4.5}`, `{"int": 1700000000000}`, `{"string": "reviewed"}`, and for the field
/// `contributors` (a text column holding JSON, QuakeField's `jsonType`) the typed array itself,
/// `{"contributors": [{"source": "emsc", ...}]}`, never a JSON string. Null is the absence of the
/// value (FieldChange leaves out `old` or `new`).
public enum FieldValue: Sendable, Hashable, Codable, CustomStringConvertible {
    case null
    case integer(Int64)
    case real(Double)
    case text(String)
    /// The field `contributors`: its canonical JSON text (``Contributor/json(_:)``), as the column
    /// keeps it.
    case contributors(String)

    init(_ value: DatabaseValue) {
        switch value.storage {
        case .null: self = .null
        case .int64(let i): self = .integer(i)
        case .double(let d): self = .real(d)
        case .string(let s): self = .text(s)
        case .blob: self = .null  // the quakes table holds no blobs
        }
    }

    /// The value of column `field` (a JSON field's text is its typed value).
    init(_ value: DatabaseValue, field: String) {
        if field == FieldValue.contributorsField, case .string(let s) = value.storage {
            self = .contributors(s)
        } else {
            self.init(value)
        }
    }

    /// The one field whose values are ``contributors(_:)``.
    static let contributorsField = "contributors"

    /// The column value this is.
    var databaseValue: DatabaseValue {
        switch self {
        case .null: .null
        case .integer(let i): i.databaseValue
        case .real(let d): d.databaseValue
        case .text(let s), .contributors(let s): s.databaseValue
        }
    }

    private enum Member: String, CodingKey {
        case int, float, string, contributors
    }

    /// The member a value of a field of `kind` is stored under (`"float"` for a real field; a
    /// JSON field's values are not, see ``contributors(_:)``).
    static func member(of kind: QuakeField.Kind) -> String {
        switch kind {
        case .integer: Member.int.rawValue
        case .real: Member.float.rawValue
        case .text: Member.string.rawValue
        }
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: Member.self)
        if let i = try c.decodeIfPresent(Int64.self, forKey: .int) {
            self = .integer(i)
        } else if let d = try c.decodeIfPresent(Double.self, forKey: .float) {
            self = .real(d)
        } else if let s = try c.decodeIfPresent(String.self, forKey: .string) {
            self = .text(s)
        } else if let list = try c.decodeIfPresent([Contributor].self, forKey: .contributors) {
            self = .contributors(Contributor.json(list))
        } else {
            self = .null
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: Member.self)
        switch self {
        case .null: break
        case .integer(let i): try c.encode(i, forKey: .int)
        case .real(let d): try c.encode(d, forKey: .float)
        case .text(let s): try c.encode(s, forKey: .string)
        case .contributors(let json):
            guard let list = Contributor.decode(json: json) else {
                throw EncodingError.invalidValue(
                    json, .init(codingPath: encoder.codingPath, debugDescription: "contributors that are not their JSON"))
            }
            try c.encode(list, forKey: .contributors)
        }
    }

    public var description: String {
        switch self {
        case .null: "null"
        case .integer(let i): String(i)
        case .real(let d): String(d)
        case .text(let s), .contributors(let s): s
        }
    }
}

/// One field an update changed. Encodes without `old` or `new` when that value is null.
public struct FieldChange: Sendable, Hashable, Codable {
    public var field: String
    public var old: FieldValue
    public var new: FieldValue

    public init(field: String, old: FieldValue, new: FieldValue) {
        self.field = field
        self.old = old
        self.new = new
    }

    private enum CodingKeys: String, CodingKey {
        case field, old, new
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        field = try c.decode(String.self, forKey: .field)
        old = try c.decodeIfPresent(FieldValue.self, forKey: .old) ?? .null
        new = try c.decodeIfPresent(FieldValue.self, forKey: .new) ?? .null
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(field, forKey: .field)
        if old != .null { try c.encode(old, forKey: .old) }
        if new != .null { try c.encode(new, forKey: .new) }
    }
}

/// What history keeps of a deleted quake: enough to name it, and the values a ``QuakeFilter``
/// looks at, so that a filtered reader can tell whether the quake was one of its own. (Tombstones
/// written before quaked 0.7 hold only id, code, mag, place and time.)
public struct Tombstone: Sendable, Hashable, Codable {
    public var id: String
    public var code: String?
    public var mag: Double?
    public var place: String?
    public var time: Int64
    public var lat: Double?
    public var lon: Double?
    public var depth: Double?
    public var type: String?
    public var alert: String?
    public var status: String?
    public var tsunami: Int64?
    public var sig: Int64?
    /// The contributing agencies (`sources`, `,emsc,ingv,`). Tombstones written before
    /// `--agency` filters were added lack it.
    public var sources: String?

    public init(id: String, code: String?, mag: Double?, place: String?, time: Int64) {
        self.id = id
        self.code = code
        self.mag = mag
        self.place = place
        self.time = time
    }

    /// The tombstone of a whole quake.
    public init(of q: FeedFeature) {
        self.init(id: q.id, code: q.code, mag: q.mag, place: q.place, time: q.time)
        lat = q.lat
        lon = q.lon
        depth = q.depth
        type = q.type
        alert = q.alert
        status = q.status
        tsunami = q.tsunami
        sig = q.sig
        sources = q.sources
    }

    /// The values a filter looks at.
    public var image: QuakeImage {
        QuakeImage(
            mag: mag, lat: lat, lon: lon, time: time, type: type, alert: alert, tsunami: tsunami, status: status,
            sig: sig, sources: sources)
    }
}

extension FeedFeature {
    /// Every stored field of the quake, by column name in table order, valued as history records
    /// them (``FieldChange``): what a reader checks an update's old and new values against.
    public var storedFields: [(name: String, value: FieldValue)] {
        zip(QuakeColumns.names, QuakeColumns.values(of: self)).map { ($0, FieldValue($1, field: $0)) }
    }
}
