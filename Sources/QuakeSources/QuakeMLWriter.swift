import QuakeModel

/// Writes reports as a QuakeML 1.2 document (the FDSN event service's `format=xml`), streaming:
/// each call appends to a byte buffer, so a long answer is written event by event.
///
/// ```swift
/// let writer = QuakeMLWriter(authority: "local.quaked")
/// var out: [UInt8] = []
/// writer.appendHeader(to: &out)
/// for report in reports { writer.append(report, to: &out) }
/// writer.appendFooter(to: &out)
/// ```
///
/// What an event holds (one origin and at most one magnitude, all under `smi:AUTHORITY/…`):
/// - `event publicID="smi:AUTHORITY/event/ID"`, `preferredOriginID`, `preferredMagnitudeID` (with
///   a magnitude), `type` (the report's ``SourceReport/eventType``, `earthquake` when it has none;
///   a type QuakeML 1.2 does not list, such as an older draft's `induced earthquake` or `other`, is
///   written `other event`, since the schema allows only its own), `description` (`text` the place,
///   `type` `region name`) and `creationInfo/agencyID` (the agency).
/// - `origin publicID="smi:AUTHORITY/origin/ID"`: `time/value` (ISO 8601 UTC with milliseconds and
///   `Z`), `latitude/value`, `longitude/value`, `depth/value` in metres (the report's km × 1000,
///   shifted in decimal text, so `10.123` km is `10123` m exactly), `evaluationMode` and
///   `evaluationStatus` when known, and `creationInfo` with `agencyID` and `creationTime`, the
///   report's ``SourceReport/updated`` (QuakeML 1.2 has no modification time; agencies, the USGS
///   among them, put the solution's last change there).
/// - `magnitude publicID="smi:AUTHORITY/magnitude/ID"`, when the report has a finite magnitude:
///   `mag/value`, `type`, `originID`.
/// - A retraction is an event with `type` `not existing` and nothing else but its `creationInfo`
///   (`creationTime` its `updated`, when known).
///
/// Text is escaped for XML (`&`, `<`, `>`, `"`, `'`; in attributes also tab, newline and carriage
/// return as character references, which attribute normalisation would otherwise turn into
/// spaces; a carriage return in element text likewise), and characters XML 1.0 forbids (control
/// characters other than tab, newline and carriage return, U+FFFE, U+FFFF) become U+FFFD. Numbers are
/// the shortest text that reads back as the same `Double`; a NaN or an infinity is never written:
/// its element is left out. `agencyID` is cut to the schema's 64 characters, the magnitude type to
/// its 32 (Unicode scalars, as XML counts them).
///
/// An id goes into a resource identifier as it is when it has only ASCII letters, digits, `-`, `.`
/// and `_` (every agency's ids seen so far); any other byte of its UTF-8, `~` included, is written
/// `~HH` (two upper-case hex digits), which the schema's identifier pattern allows, keeps the id the
/// identifier's last path segment, and reads back unambiguously.
public struct QuakeMLWriter: Sendable {
    /// The authority of every resource identifier (`smi:AUTHORITY/event/ID`), e.g. `local.quaked`.
    public var authority: String

    /// QuakeML 1.2's event types (the schema's `EventType`); any other is written `other event`.
    public static let eventTypes: Set<String> = [
        "not existing", "not reported", "earthquake", "anthropogenic event", "collapse", "cavity collapse",
        "mine collapse", "building collapse", "explosion", "accidental explosion", "chemical explosion",
        "controlled explosion", "experimental explosion", "industrial explosion", "mining explosion", "quarry blast",
        "road cut", "blasting levee", "nuclear explosion", "induced or triggered event", "rock burst",
        "reservoir loading", "fluid injection", "fluid extraction", "crash", "plane crash", "train crash",
        "boat crash", "other event", "atmospheric event", "sonic boom", "sonic blast", "acoustic noise", "thunder",
        "avalanche", "snow avalanche", "debris avalanche", "hydroacoustic event", "ice quake", "slide", "landslide",
        "rockslide", "meteorite", "volcanic eruption",
    ]

    /// A writer whose identifiers are under `authority` (written as ``identifierSegment(_:)`` makes it).
    public init(authority: String = "local.quaked") {
        self.authority = authority
    }

    /// The whole document of `items`, in their order.
    public func document(_ items: some Sequence<SourceItem>) -> [UInt8] {
        var out: [UInt8] = []
        appendHeader(to: &out)
        for item in items { append(item, to: &out) }
        appendFooter(to: &out)
        return out
    }

    /// The whole document of `reports`, in their order.
    public func document(reports: some Sequence<SourceReport>) -> [UInt8] {
        document(reports.lazy.map { SourceItem.report($0) })
    }

    /// The XML declaration, the `q:quakeml` root and `eventParameters` (its `publicID`
    /// `smi:AUTHORITY/eventParameters`).
    public func appendHeader(to out: inout [UInt8]) {
        out.append(contentsOf: "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n".utf8)
        out.append(
            contentsOf:
                "<q:quakeml xmlns:q=\"http://quakeml.org/xmlns/quakeml/1.2\" xmlns=\"http://quakeml.org/xmlns/bed/1.2\">\n"
                .utf8)
        out.append(contentsOf: "<eventParameters publicID=\"".utf8)
        appendIdentifier("eventParameters", nil, to: &out)
        out.append(contentsOf: "\">\n".utf8)
    }

    /// Closes `eventParameters` and the root.
    public func appendFooter(to out: inout [UInt8]) {
        out.append(contentsOf: "</eventParameters>\n</q:quakeml>\n".utf8)
    }

    /// One event: a report's, or a retraction's.
    public func append(_ item: SourceItem, to out: inout [UInt8]) {
        switch item {
        case .report(let report): append(report, to: &out)
        case .retraction(_, let id, let updated): appendRetraction(id: id, updated: updated, to: &out)
        }
    }

    /// One `event` with its origin and magnitude.
    public func append(_ report: SourceReport, to out: inout [UInt8]) {
        let id = report.id
        let magnitude = report.magnitude.flatMap { $0.isFinite ? $0 : nil }
        openEvent(id, to: &out)
        out.append(contentsOf: "  <preferredOriginID>".utf8)
        appendIdentifier("origin", id, to: &out)
        out.append(contentsOf: "</preferredOriginID>\n".utf8)
        if magnitude != nil {
            out.append(contentsOf: "  <preferredMagnitudeID>".utf8)
            appendIdentifier("magnitude", id, to: &out)
            out.append(contentsOf: "</preferredMagnitudeID>\n".utf8)
        }
        let type = report.eventType.map { Self.eventTypes.contains($0) ? $0 : "other event" } ?? "earthquake"
        element("type", type, indent: 2, to: &out)
        if let place = report.place {
            out.append(contentsOf: "  <description>\n".utf8)
            element("text", place, indent: 4, to: &out)
            out.append(contentsOf: "    <type>region name</type>\n  </description>\n".utf8)
        }
        if let agency = report.agency {
            out.append(contentsOf: "  <creationInfo>\n".utf8)
            element("agencyID", Self.prefix(agency, 64), indent: 4, to: &out)
            out.append(contentsOf: "  </creationInfo>\n".utf8)
        }

        out.append(contentsOf: "  <origin publicID=\"".utf8)
        appendIdentifier("origin", id, to: &out)
        out.append(contentsOf: "\">\n    <time>\n      <value>".utf8)
        out.append(contentsOf: QuakeTime.iso8601(report.time).utf8)
        out.append(contentsOf: "</value>\n    </time>\n".utf8)
        quantity("latitude", Self.number(report.latitude), to: &out)
        quantity("longitude", Self.number(report.longitude), to: &out)
        quantity("depth", report.depth.flatMap(Self.metres), to: &out)
        if let mode = report.evaluationMode { element("evaluationMode", mode.rawValue, indent: 4, to: &out) }
        if let status = report.evaluationStatus { element("evaluationStatus", status.rawValue, indent: 4, to: &out) }
        appendCreationInfo(agency: report.agency, time: report.updated, indent: 4, to: &out)
        out.append(contentsOf: "  </origin>\n".utf8)

        if let magnitude {
            out.append(contentsOf: "  <magnitude publicID=\"".utf8)
            appendIdentifier("magnitude", id, to: &out)
            out.append(contentsOf: "\">\n".utf8)
            quantity("mag", Self.number(magnitude), to: &out)
            if let type = report.magnitudeType { element("type", Self.prefix(type, 32), indent: 4, to: &out) }
            out.append(contentsOf: "    <originID>".utf8)
            appendIdentifier("origin", id, to: &out)
            out.append(contentsOf: "</originID>\n  </magnitude>\n".utf8)
        }
        out.append(contentsOf: "</event>\n".utf8)
    }

    /// An `event` of type `not existing`: the agency has withdrawn it.
    public func appendRetraction(id: String, updated: Int64?, to out: inout [UInt8]) {
        openEvent(id, to: &out)
        out.append(contentsOf: "  <type>not existing</type>\n".utf8)
        appendCreationInfo(agency: nil, time: updated, indent: 2, to: &out)
        out.append(contentsOf: "</event>\n".utf8)
    }

    // MARK: Pieces

    private func openEvent(_ id: String, to out: inout [UInt8]) {
        out.append(contentsOf: "<event publicID=\"".utf8)
        appendIdentifier("event", id, to: &out)
        out.append(contentsOf: "\">\n".utf8)
    }

    private func appendCreationInfo(agency: String?, time: Int64?, indent: Int, to out: inout [UInt8]) {
        guard agency != nil || time != nil else { return }
        let pad = String(repeating: " ", count: indent)
        out.append(contentsOf: (pad + "<creationInfo>\n").utf8)
        if let agency { element("agencyID", Self.prefix(agency, 64), indent: indent + 2, to: &out) }
        if let time { element("creationTime", QuakeTime.iso8601(time), indent: indent + 2, to: &out) }
        out.append(contentsOf: (pad + "</creationInfo>\n").utf8)
    }

    /// `smi:AUTHORITY/KIND/ID` (`smi:AUTHORITY/KIND` without an id), escaped for an attribute or text.
    private func appendIdentifier(_ kind: String, _ id: String?, to out: inout [UInt8]) {
        var text = "smi:" + Self.identifierSegment(authority) + "/" + kind
        if let id { text += "/" + Self.identifierSegment(id) }
        XMLText.append(text, attribute: true, to: &out)
    }

    /// `<name>text</name>` on a line of its own.
    private func element(_ name: String, _ text: String, indent: Int, to out: inout [UInt8]) {
        out.append(contentsOf: (String(repeating: " ", count: indent) + "<" + name + ">").utf8)
        XMLText.append(text, attribute: false, to: &out)
        out.append(contentsOf: ("</" + name + ">\n").utf8)
    }

    /// `<name><value>number</value></name>`, or nothing without a number.
    private func quantity(_ name: String, _ number: String?, to out: inout [UInt8]) {
        guard let number else { return }
        out.append(contentsOf: "    <\(name)>\n      <value>\(number)</value>\n    </\(name)>\n".utf8)
    }

    // MARK: Values

    /// `id` as a resource identifier's segment: ASCII letters, digits, `-`, `.` and `_` as they are,
    /// every other UTF-8 byte as `~HH`.
    public static func identifierSegment(_ id: String) -> String {
        let hex = Array("0123456789ABCDEF".utf8)
        var bytes: [UInt8] = []
        bytes.reserveCapacity(id.utf8.count)
        for byte in id.utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"):
                bytes.append(byte)
            default:
                bytes.append(contentsOf: [UInt8(ascii: "~"), hex[Int(byte >> 4)], hex[Int(byte & 15)]])
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// The first `count` Unicode scalars of `text` (the schema's lengths count characters as XML does,
    /// not grapheme clusters).
    static func prefix(_ text: String, _ count: Int) -> String {
        text.unicodeScalars.count <= count ? text : String(String.UnicodeScalarView(text.unicodeScalars.prefix(count)))
    }

    /// The shortest text that reads back as `value`, or `nil` for a NaN or an infinity.
    static func number(_ value: Double) -> String? {
        value.isFinite ? value.description : nil
    }

    /// `km` in metres as decimal text: `km`'s shortest text with its decimal point moved three places,
    /// so no binary rounding is added (`10.123` gives `10123`, `0.0015` gives `1.5`); `nil` for a NaN
    /// or an infinity.
    static func metres(_ km: Double) -> String? {
        guard km.isFinite else { return nil }
        let text = km.description
        let negative = text.hasPrefix("-")
        let unsigned = negative ? text.dropFirst() : Substring(text)
        let parts = unsigned.split(separator: "e", maxSplits: 1)
        guard let mantissa = parts.first, let exponent = parts.count == 2 ? Int(parts[1]) : 0 else {
            return (km * 1000).description
        }
        let halves = mantissa.split(separator: ".", maxSplits: 1, omittingEmptySubsequences: false)
        var digits = Array(halves[0]) + (halves.count == 2 ? Array(halves[1]) : [])
        var point = halves[0].count + exponent + 3
        while digits.count > 1, digits.first == "0" {
            digits.removeFirst()
            point -= 1
        }
        while digits.count > 1, digits.last == "0", digits.count > max(point, 1) { digits.removeLast() }
        guard (-30...30).contains(point) else { return (km * 1000).description }
        var result: String
        if digits.allSatisfy({ $0 == "0" }) {
            result = "0"
        } else if point <= 0 {
            result = "0." + String(repeating: "0", count: -point) + String(digits)
        } else if point >= digits.count {
            result = String(digits) + String(repeating: "0", count: point - digits.count)
        } else {
            result = String(digits[..<point]) + "." + String(digits[point...])
        }
        return negative && result != "0" ? "-" + result : result
    }
}

/// XML 1.0 text: escaping and the characters it cannot hold.
enum XMLText {
    /// Appends `text` escaped for element content (`attribute: false`) or a quoted attribute value;
    /// characters XML 1.0 forbids become U+FFFD.
    static func append(_ text: String, attribute: Bool, to out: inout [UInt8]) {
        var clean = true
        for byte in text.utf8
        where byte < 0x20 || byte == 0x26 || byte == 0x3C || byte == 0x3E || byte == 0x22
            || byte == 0x27 || byte == 0xEF
        {
            clean = false
            break
        }
        if clean {
            out.append(contentsOf: text.utf8)
            return
        }
        for scalar in text.unicodeScalars {
            switch scalar.value {
            case 0x26: out.append(contentsOf: "&amp;".utf8)
            case 0x3C: out.append(contentsOf: "&lt;".utf8)
            case 0x3E: out.append(contentsOf: "&gt;".utf8)
            case 0x22: out.append(contentsOf: "&quot;".utf8)
            case 0x27: out.append(contentsOf: "&apos;".utf8)
            case 0x0D: out.append(contentsOf: "&#13;".utf8)
            case 0x09 where attribute: out.append(contentsOf: "&#9;".utf8)
            case 0x0A where attribute: out.append(contentsOf: "&#10;".utf8)
            case 0x09, 0x0A: out.append(UInt8(scalar.value))
            case 0..<0x20, 0xFFFE, 0xFFFF: out.append(contentsOf: [0xEF, 0xBF, 0xBD])
            default: UTF8.encode(scalar) { out.append($0) }
            }
        }
    }
}
