import NIOCore
import PostgresNIO
import QuakeFeed
import QuakeModel
import QuakeProtocol

/// The sink's table: one column per field of the quake record (QuakeModel's declaration, the
/// interface's `Quake`), in its order, named in snake case (`magType` is `mag_type`), with the times (`time`, `updated`: milliseconds in the
/// store) as `timestamptz`, and, where PostGIS is installed, `geom`, a `geometry(PointZ, 4326)`
/// that PostgreSQL computes from `lon`, `lat` and `depth` (km, positive down, as in the feed; NaN
/// when the depth is unknown; NULL without a position). A field that holds JSON (`contributors`,
/// io.quaked's `[]Contributor`) is a `jsonb` column, written with the row (so in the same
/// transaction as every other field).
struct QuakeTable: Sendable {
    enum Kind: Sendable {
        case text, int, float, time, json

        /// The type as `format_type` names it.
        var sqlType: String {
            switch self {
            case .text: "text"
            case .int: "bigint"
            case .float: "double precision"
            case .time: "timestamp with time zone"
            case .json: "jsonb"
            }
        }
    }

    struct Column: Sendable {
        var name: String
        var kind: Kind
    }

    /// One column per field of QuakeModel's declaration, in its order.
    static let columns: [Column] = QuakeRecord.fields.map { field in
        let kind: Kind =
            switch field.kind {
            case .text: field.isJSON ? .json : .text
            case .integer: field.isTime ? .time : .int
            case .real: .float
            }
        return Column(name: field.snakeCaseName, kind: kind)
    }

    /// The columns a table made by an older quakectl lacks, added when the sink starts (`ALTER
    /// TABLE ... ADD COLUMN IF NOT EXISTS`), after which the sink loads every row again.
    static let addedColumns: Set<String> = ["agency", "contributors"]

    static let geometryType = "geometry(PointZ,4326)"

    /// A quake's values, in ``columns`` order.
    enum Value {
        case text(String?), int(Int?), float(Double?), time(Int?)
    }

    static func values(_ q: IOQuaked.Quake) -> [Value] {
        zip(columns, q.values).map { column, value in
            switch column.kind {
            case .text, .json: .text(value.text)
            case .int: .int(value.integer.map(Int.init))
            case .float: .float(value.real)
            case .time: .time(value.integer.map(Int.init))
            }
        }
    }

    /// A double-quoted identifier (the names are checked, but quoting is what makes them safe).
    static func quoted(_ name: String) -> String {
        "\"" + name.replacingOccurrences(of: "\"", with: "\"\"") + "\""
    }

    /// Text PostgreSQL can hold: it has no U+0000 (the store may), which becomes U+FFFD.
    static func storable(_ text: String) -> String {
        text.utf8.contains(0) ? text.replacingOccurrences(of: "\u{0}", with: "\u{FFFD}") : text
    }

    let name: String
    let quotedName: String

    init(name: String) {
        self.name = name
        quotedName = Self.quoted(name)
    }

    /// The table, without its secondary indexes (a first load builds them after COPY).
    func createSQL(geometry: Bool) -> String {
        var definitions = Self.columns.map { column in
            "\(Self.quoted(column.name)) \(column.kind.sqlType)"
                + (column.name == "id" ? " PRIMARY KEY" : column.name == "time" ? " NOT NULL" : "")
        }
        if geometry { definitions.append(Self.geometryDefinition) }
        return "CREATE TABLE \(quotedName) (\n  " + definitions.joined(separator: ",\n  ") + "\n)"
    }

    /// The indexes on `time` and (with PostGIS) a GiST index on `geom`.
    func indexSQL(geometry: Bool) -> [String] {
        ["CREATE INDEX ON \(quotedName) (\"time\")"] + (geometry ? [geometryIndexSQL] : [])
    }

    static let geometryDefinition = """
        geom \(geometryType) GENERATED ALWAYS AS (CASE WHEN lon IS NULL OR lat IS NULL THEN NULL \
        ELSE ST_SetSRID(ST_MakePoint(lon, lat, coalesce(depth, 'NaN'::float8)), 4326) END) STORED
        """

    var geometryIndexSQL: String { "CREATE INDEX ON \(quotedName) USING gist (geom)" }

    /// The upsert of one quake, its values bound in ``columns`` order (times as epoch ms).
    var upsertSQL: String {
        let names = Self.columns.map { Self.quoted($0.name) }
        let placeholders = Self.columns.enumerated().map { index, column in
            switch column.kind {
            case .time: "'epoch'::timestamptz + $\(index + 1)::bigint * interval '1 millisecond'"
            case .json: "$\(index + 1)::jsonb"
            default: "$\(index + 1)"
            }
        }
        let updates = names.dropFirst().map { "\($0) = EXCLUDED.\($0)" }
        return """
            INSERT INTO \(quotedName) (\(names.joined(separator: ", "))) VALUES (\(placeholders.joined(separator: ", "))) \
            ON CONFLICT (id) DO UPDATE SET \(updates.joined(separator: ", "))
            """
    }

    func upsert(_ quake: IOQuaked.Quake) throws -> PostgresQuery {
        var binds = PostgresBindings(capacity: Self.columns.count)
        for value in Self.values(quake) {
            switch value {
            case .text(let text): binds.append(text.map(Self.storable))
            case .int(let int): binds.append(int)
            case .float(let float): binds.append(float)
            case .time(let ms): binds.append(ms)
            }
        }
        return PostgresQuery(unsafeSQL: upsertSQL, binds: binds)
    }

    /// The columns read back as the quake's fields (times as epoch ms).
    var selectList: String {
        Self.columns.map { column in
            switch column.kind {
            case .time: "(extract(epoch FROM \(Self.quoted(column.name))) * 1000)::bigint"
            case .json: "\(Self.quoted(column.name))::text"
            default: Self.quoted(column.name)
            }
        }.joined(separator: ", ")
    }

    /// A row of ``selectList`` as a quake.
    static func quake(_ row: PostgresRow) throws -> IOQuaked.Quake {
        var cells = row.makeIterator()
        func next<T: PostgresDecodable>(_: T.Type) throws -> T? where T._DecodableType == T {
            guard let cell = cells.next() else { throw PostgresDecodingError.Code.missingData }
            return try cell.decode(T?.self)
        }
        var values: [QuakeValue] = []
        values.reserveCapacity(columns.count)
        for column in columns {
            switch column.kind {
            case .text, .json: values.append(QuakeValue(try next(String.self)))
            case .int, .time: values.append(QuakeValue(try next(Int.self)))
            case .float: values.append(QuakeValue(try next(Double.self)))
            }
        }
        // The required fields (id, time) are never NULL in a table the sink wrote.
        for (field, value) in zip(QuakeRecord.fields, values) where field.isRequired && value.isNull {
            throw PostgresDecodingError.Code.missingData
        }
        return IOQuaked.Quake(values: values)
    }

    // MARK: COPY

    /// Appends quakes to `buffer` as COPY's text format: tab-separated, `\N` for NULL, times as
    /// ISO 8601 in UTC.
    static func copyText(_ quakes: [IOQuaked.Quake], into buffer: inout ByteBuffer) {
        for quake in quakes {
            for (index, value) in values(quake).enumerated() {
                if index > 0 { buffer.writeInteger(UInt8(ascii: "\t")) }
                switch value {
                case .text(nil), .int(nil), .float(nil), .time(nil):
                    buffer.writeStaticString("\\N")
                case .text(let text?):
                    writeEscaped(storable(text), into: &buffer)
                case .int(let int?):
                    buffer.writeString(String(int))
                case .float(let float?):
                    buffer.writeString(float.description)
                case .time(let ms?):
                    writeTimestamp(ms, into: &buffer)
                }
            }
            buffer.writeInteger(UInt8(ascii: "\n"))
        }
    }

    private static func writeEscaped(_ text: String, into buffer: inout ByteBuffer) {
        var text = text
        text.withUTF8 { bytes in
            var start = 0
            for (index, byte) in bytes.enumerated() {
                let escape: StaticString?
                switch byte {
                case UInt8(ascii: "\\"): escape = "\\\\"
                case UInt8(ascii: "\n"): escape = "\\n"
                case UInt8(ascii: "\r"): escape = "\\r"
                case UInt8(ascii: "\t"): escape = "\\t"
                default: escape = nil
                }
                if let escape {
                    buffer.writeBytes(UnsafeRawBufferPointer(rebasing: UnsafeRawBufferPointer(bytes)[start..<index]))
                    buffer.writeStaticString(escape)
                    start = index + 1
                }
            }
            buffer.writeBytes(UnsafeRawBufferPointer(rebasing: UnsafeRawBufferPointer(bytes)[start...]))
        }
    }

    /// `YYYY-MM-DD HH:MM:SS.mmm+00` for milliseconds since the epoch (proleptic Gregorian;
    /// years before 1 are written as PostgreSQL's `BC`).
    static func writeTimestamp(_ ms: Int, into buffer: inout ByteBuffer) {
        let utc = QuakeTime.utc(ms)
        let (y, m, d) = (utc.year, utc.month, utc.day)
        func pad(_ value: Int, _ width: Int) {
            let digits = String(value)
            for _ in digits.count..<max(width, digits.count) { buffer.writeInteger(UInt8(ascii: "0")) }
            buffer.writeString(digits)
        }
        pad(y > 0 ? y : 1 - y, 4)
        buffer.writeInteger(UInt8(ascii: "-"))
        pad(m, 2)
        buffer.writeInteger(UInt8(ascii: "-"))
        pad(d, 2)
        buffer.writeInteger(UInt8(ascii: " "))
        pad(utc.hour, 2)
        buffer.writeInteger(UInt8(ascii: ":"))
        pad(utc.minute, 2)
        buffer.writeInteger(UInt8(ascii: ":"))
        pad(utc.second, 2)
        buffer.writeInteger(UInt8(ascii: "."))
        pad(utc.millisecond, 3)
        buffer.writeStaticString("+00")
        if y <= 0 { buffer.writeStaticString(" BC") }
    }
}
