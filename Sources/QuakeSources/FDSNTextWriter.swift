import QuakeModel

/// Writes reports in the FDSN event service's text format (`format=text`): a header line, then one
/// line per report, columns separated by `|`.
///
/// ```text
/// #EventID|Time|Latitude|Longitude|Depth/km|Author|Catalog|Contributor|ContributorID|MagType|Magnitude|MagAuthor|EventLocationName|EventType
/// us7000abcd|2025-11-22T02:57:00.123|35.5|139.25|10.0|us|quaked|us|us7000abcd|mww|6.1|us|near the coast|earthquake
/// ```
///
/// The columns: `EventID` the report's id; `Time` UTC with milliseconds and no zone
/// (``QuakeTime/utcText(_:)``); `Latitude`, `Longitude`, `Depth/km` and `Magnitude` the shortest
/// text that reads back as the same `Double`; `Author`, `Contributor` and `MagAuthor` the agency;
/// `Catalog` ``catalog``; `ContributorID` the id again; `MagType`; `EventLocationName` the place;
/// `EventType` (only in the 14-column layout) the event type. A value the report does not have, and
/// a NaN or an infinity, is an empty column. The 13-column layout (``Layout/thirteen``) is the FDSN
/// specification's original one, without `EventType`, as EMSC and older services answer.
///
/// The format has no quoting, so text is made to fit: a `|` in a value becomes `/`, and a line
/// break or any other control character (tab, C1 controls and U+2028/U+2029 included) a space, so
/// that every line has exactly its layout's columns; a value that would start a line with `#` (an id) gets `_` for it, since a line
/// starting with `#` is a comment. Retractions have no line (the format cannot say an event is gone);
/// appending a ``SourceItem`` skips them.
public struct FDSNTextWriter: Sendable {
    /// How many columns a line has.
    public enum Layout: Int, Sendable, Hashable, CaseIterable {
        /// The FDSN specification's 13 columns, without `EventType`.
        case thirteen = 13
        /// 13 + `EventType`, as most services answer (the default).
        case fourteen = 14
    }

    /// The column names of the 14-column layout, in order (the 13-column layout is the first 13).
    public static let columns = [
        "EventID", "Time", "Latitude", "Longitude", "Depth/km", "Author", "Catalog", "Contributor",
        "ContributorID", "MagType", "Magnitude", "MagAuthor", "EventLocationName", "EventType",
    ]

    /// The number of columns.
    public var layout: Layout
    /// The `Catalog` column of every line (empty when `nil`).
    public var catalog: String?

    /// A writer of `layout`'s lines, with `catalog` in the `Catalog` column.
    public init(layout: Layout = .fourteen, catalog: String? = nil) {
        self.layout = layout
        self.catalog = catalog
    }

    /// The header and a line per report, in their order.
    public func document(_ reports: some Sequence<SourceReport>) -> [UInt8] {
        var out: [UInt8] = []
        appendHeader(to: &out)
        for report in reports { append(report, to: &out) }
        return out
    }

    /// `#EventID|Time|…` and a newline.
    public func appendHeader(to out: inout [UInt8]) {
        out.append(UInt8(ascii: "#"))
        out.append(contentsOf: Self.columns.prefix(layout.rawValue).joined(separator: "|").utf8)
        out.append(UInt8(ascii: "\n"))
    }

    /// A report's line, or nothing for a retraction.
    public func append(_ item: SourceItem, to out: inout [UInt8]) {
        if case .report(let report) = item { append(report, to: &out) }
    }

    /// A report's line, ending with a newline.
    public func append(_ report: SourceReport, to out: inout [UInt8]) {
        var values: [String?] = [
            report.id, QuakeTime.utcText(report.time), Self.number(report.latitude), Self.number(report.longitude),
            report.depth.flatMap(Self.number), report.agency, catalog, report.agency, report.id,
            report.magnitudeType, report.magnitude.flatMap(Self.number), report.agency, report.place,
        ]
        if layout == .fourteen { values.append(report.eventType) }
        for (column, value) in values.enumerated() {
            if column > 0 { out.append(UInt8(ascii: "|")) }
            if let value { Self.appendValue(value, first: column == 0, to: &out) }
        }
        out.append(UInt8(ascii: "\n"))
    }

    /// `value` made to fit a column: `|` → `/`, control characters → space, a leading `#` of the
    /// line's first column → `_`.
    static func appendValue(_ value: String, first: Bool, to out: inout [UInt8]) {
        var position = 0
        for scalar in value.unicodeScalars {
            defer { position += 1 }
            switch scalar.value {
            case 0x7C: out.append(UInt8(ascii: "/"))
            case 0..<0x20, 0x7F...0x9F, 0x2028, 0x2029: out.append(UInt8(ascii: " "))
            case 0x23 where first && position == 0: out.append(UInt8(ascii: "_"))
            default: UTF8.encode(scalar) { out.append($0) }
            }
        }
    }

    /// The shortest text that reads back as `value`, or `nil` for a NaN or an infinity.
    static func number(_ value: Double) -> String? {
        value.isFinite ? value.description : nil
    }
}
