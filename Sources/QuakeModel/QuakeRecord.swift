/// One field of a quake: the one declaration every layer derives its copy from.
///
/// A field's name is the USGS GeoJSON summary feed's property name, the store's column, the
/// io.quaked `Quake` field and the JSON key of every export. Its kind is how it is stored (SQLite
/// INTEGER, REAL or TEXT), carried (int, float, string) and decoded (strictly: a number where a
/// number is expected). From ``QuakeRecord/fields`` come, at build time through the
/// QuakeModelGenerator plugin, the feed's `FeedFeature` and `FeatureRecord`, the decoder's key
/// table, the store's column binding and row mapping, and the conversions to and from io.quaked's
/// `Quake`; and at run time the column lists, JSON, CSV and KML exports and the PostgreSQL table.
public struct QuakeField: Sendable, Hashable {
    public enum Kind: String, Sendable, Hashable {
        /// A string (SQLite TEXT).
        case text
        /// A 64-bit integer (SQLite INTEGER).
        case integer
        /// A float (SQLite REAL).
        case real
    }

    /// Where the feed carries it.
    public enum Origin: Sendable, Hashable {
        /// The feature's own `id`.
        case featureID
        /// A member of `properties`.
        case property
        /// An element of `geometry.coordinates` (0 longitude, 1 latitude, 2 depth).
        case coordinate(Int)
        /// Not in the feed: the store derives it (from the reports of association mode). The
        /// feed decoder does not read it, and a feature decoded from the feed has it null.
        case derived
    }

    /// What a number means, where it is more than a count.
    public enum Unit: String, Sendable, Hashable {
        /// Milliseconds since the Unix epoch, UTC: a `timestamptz` in PostgreSQL.
        case epochMilliseconds = "ms since the epoch"
        /// Minutes from UTC.
        case minutes
        case degrees
        case kilometres = "km"
        case seconds = "s"
    }

    public let name: String
    public let kind: Kind
    public let origin: Origin
    /// Every feature has it (`id`, `time`); every other field may be null.
    public let isRequired: Bool
    public let unit: Unit?
    /// One line on what it holds.
    public let doc: String
    /// The USGS's summary feed gives it and the other agencies' reports do not (its DYFI, ShakeMap
    /// and PAGER figures, the stations, the event's page and title): an event with a `usgs` member
    /// takes it from that member's row; without one it is null (`title` is then made from the
    /// preferred report's magnitude and place). The other fields come from the preferred report.
    public let isUsgsOnly: Bool
    /// For a text field that holds JSON: the io.quaked type of that JSON (`[]Contributor`), its
    /// type on the wire. The text is the value's canonical JSON, exactly what the generated type's
    /// `write(to:)` writes (compact, members in the interface's order, nulls left out). Nil for a
    /// plain value, whose wire type is its kind's (int, float, string).
    public let jsonType: String?

    public init(
        _ name: String, _ kind: Kind, origin: Origin = .property, required: Bool = false, unit: Unit? = nil,
        usgsOnly: Bool = false, json jsonType: String? = nil, _ doc: String
    ) {
        precondition(jsonType == nil || kind == .text, "\(name): JSON is held in a text field")
        self.name = name
        self.kind = kind
        self.origin = origin
        self.isRequired = required
        self.unit = unit
        self.isUsgsOnly = usgsOnly
        self.jsonType = jsonType
        self.doc = doc
    }

    /// Whether the value is JSON held as text (``jsonType``).
    public var isJSON: Bool { jsonType != nil }

    /// The name in snake case, for SQL outside the store (`magType` is `mag_type`).
    public var snakeCaseName: String {
        var out = ""
        for c in name {
            if c.isUppercase {
                out += "_" + c.lowercased()
            } else {
                out.append(c)
            }
        }
        return out
    }

    /// Whether the value is an instant (epoch milliseconds).
    public var isTime: Bool { unit == .epochMilliseconds }
}

/// The quake record: its fields, in the order of the store's columns, the interface's `Quake`
/// type and every export.
///
/// Adding a field is a line here, its line in io.quaked.varlink's `Quake` (a test compares the
/// two) and a store migration that adds the column. Fields the feed does not carry (`agency`,
/// `contributors`) have origin ``QuakeField/Origin/derived``: the store sets them.
public enum QuakeRecord {
    public static let fields: [QuakeField] = [
        QuakeField("id", .text, origin: .featureID, required: true, "the event's preferred id (net + code), the identity quaked dedupes on"),
        QuakeField("mag", .real, "magnitude"),
        QuakeField("place", .text, "a description of the region, often \"8 km W of Town, Region\""),
        QuakeField("time", .integer, required: true, unit: .epochMilliseconds, "origin time"),
        QuakeField("updated", .integer, unit: .epochMilliseconds, "when the event was last changed"),
        QuakeField("tz", .integer, unit: .minutes, usgsOnly: true, "time zone offset of the epicentre (old events only)"),
        QuakeField("url", .text, usgsOnly: true, "the event's page"),
        QuakeField("detail", .text, usgsOnly: true, "the event's GeoJSON detail feed"),
        QuakeField("felt", .integer, usgsOnly: true, "number of Did You Feel It? reports"),
        QuakeField("cdi", .real, usgsOnly: true, "maximum reported intensity (DYFI)"),
        QuakeField("mmi", .real, usgsOnly: true, "maximum estimated instrumental intensity (ShakeMap)"),
        QuakeField("alert", .text, usgsOnly: true, "PAGER alert level: green, yellow, orange or red"),
        QuakeField("status", .text, "automatic, reviewed or deleted (lower case)"),
        QuakeField("tsunami", .integer, usgsOnly: true, "1 for large events in oceanic regions, else 0"),
        QuakeField("sig", .integer, usgsOnly: true, "significance, 0 to about 1000"),
        QuakeField("net", .text, "the preferred contributor's network"),
        QuakeField("code", .text, "the event's code at that network"),
        QuakeField("ids", .text, "every id of the event, as a comma list with leading and trailing commas"),
        QuakeField("sources", .text, "the contributing networks, as a comma list"),
        QuakeField("types", .text, usgsOnly: true, "the product types of the event, as a comma list"),
        QuakeField("nst", .integer, usgsOnly: true, "number of stations used for the location"),
        QuakeField("dmin", .real, unit: .degrees, usgsOnly: true, "horizontal distance to the nearest station"),
        QuakeField("rms", .real, unit: .seconds, usgsOnly: true, "root-mean-square travel time residual"),
        QuakeField("gap", .real, unit: .degrees, usgsOnly: true, "largest azimuthal gap between stations"),
        QuakeField("magType", .text, "how the magnitude was computed (ml, mb, mww, ...)"),
        QuakeField("type", .text, "earthquake, quarry blast, explosion, ..."),
        QuakeField("title", .text, usgsOnly: true, "a title for the event"),
        QuakeField("lon", .real, origin: .coordinate(0), unit: .degrees, "longitude of the epicentre"),
        QuakeField("lat", .real, origin: .coordinate(1), unit: .degrees, "latitude of the epicentre"),
        QuakeField("depth", .real, origin: .coordinate(2), unit: .kilometres, "depth of the hypocentre; negative above sea level"),
        QuakeField("agency", .text, origin: .derived, "the agency whose solution the values are (the preferred contributor's); null without sources"),
        QuakeField(
            "contributors", .text, origin: .derived, json: "[]Contributor",
            "every source's solution, the preferred first, then by source (canonical JSON); null without sources"),
    ]

    /// The names, in order.
    public static let names: [String] = fields.map(\.name)

    /// The position of the field called `name`.
    public static func index(of name: String) -> Int? {
        names.firstIndex(of: name)
    }
}

/// A value of one quake field, of its kind or null: how the layers that need no field names
/// (exports, the PostgreSQL table, field changes) carry a record.
public enum QuakeValue: Sendable, Hashable {
    case null
    case text(String)
    case integer(Int64)
    case real(Double)

    public init(_ value: String?) { self = value.map(QuakeValue.text) ?? .null }
    public init(_ value: Int64?) { self = value.map(QuakeValue.integer) ?? .null }
    public init(_ value: Int?) { self = value.map { .integer(Int64($0)) } ?? .null }
    public init(_ value: Double?) { self = value.map(QuakeValue.real) ?? .null }

    public var text: String? { if case .text(let v) = self { v } else { nil } }
    public var integer: Int64? { if case .integer(let v) = self { v } else { nil } }
    public var real: Double? { if case .real(let v) = self { v } else { nil } }
    public var isNull: Bool { self == .null }
}
