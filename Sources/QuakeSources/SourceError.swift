/// Why a source's whole answer was rejected: nothing of it should be imported. Thrown by the
/// readers' `consume` and `finish`; once thrown, the reader keeps rethrowing it.
///
/// What rejects the whole answer: bytes that are not the format at all (malformed or truncated
/// XML, an HTML page, a QuakeML document whose root is not `quakeml`, an FDSN text answer
/// without its header or with a row of the wrong column count, a line longer than the limit,
/// JSON that is not strict JSON or not the GeoJSON or message shape EMSC and GeoNet send).
/// A reader that cannot trust the document's structure cannot trust any event in it. Problems
/// of one event (no origin, impossible coordinates, a time that does not parse, no id) skip
/// that event only: see ``SourceProblem``.
public struct SourceError: Error, Sendable, Hashable, CustomStringConvertible {
    public enum Kind: String, Sendable, Hashable {
        /// Not well-formed XML (libxml2's message), or cut short.
        case malformedXML = "malformed-xml"
        /// The service answered with an HTML page (an error page, a portal) instead.
        case htmlPage = "html-page"
        /// Well-formed XML, but its root is not QuakeML's `quakeml`.
        case notQuakeML = "not-quakeml"
        /// FDSN text without the `#EventID|Time|...` header, or one missing a required column.
        case badHeader = "bad-header"
        /// An FDSN text row whose column count differs from the header's.
        case wrongColumns = "wrong-columns"
        /// An FDSN text line longer than ``FDSNTextReader/maxLineBytes``.
        case lineTooLong = "line-too-long"
        /// Not strict RFC 8259 JSON (a trailing comma, a bad escape or number, invalid UTF-8),
        /// or cut short; `byteOffset` points at the offending byte.
        case malformedJSON = "malformed-json"
        /// Well-formed JSON, but not the shape the source sends: the root, `action`, `data`,
        /// `type`, `features`, a feature or `properties` of the wrong type; `path` names it.
        case wrongShape = "wrong-shape"
    }

    public var kind: Kind
    /// What was wrong, and what to do about it.
    public var message: String
    /// The configured source's name.
    public var source: String
    /// 1-based line and column of the problem, when known.
    public var line: Int?
    public var column: Int?
    /// Offset in the answer's bytes, when known.
    public var byteOffset: Int?
    /// The element path (`quakeml/eventParameters/event`) or text column, when known.
    public var path: String?

    public init(
        _ kind: Kind, _ message: String, source: String, line: Int? = nil, column: Int? = nil,
        byteOffset: Int? = nil, path: String? = nil
    ) {
        self.kind = kind
        self.message = message
        self.source = source
        self.line = line
        self.column = column
        self.byteOffset = byteOffset
        self.path = path
    }

    public var description: String {
        "source \(source): \(placeText(line: line, column: column, byteOffset: byteOffset, path: path))\(message)"
    }
}

/// Why one event of an answer was skipped, while the rest of the answer was imported. The
/// readers count them (`skippedCount`) and keep the first ``SourceProblem/keptLimit`` in
/// `problems` for the caller to log.
public struct SourceProblem: Error, Sendable, Hashable, CustomStringConvertible {
    public enum Kind: String, Sendable, Hashable {
        /// A QuakeML event without any `origin`: nothing says where or when.
        case noOrigin = "no-origin"
        /// Latitude outside -90...90, longitude outside -180...180, missing or not a finite number.
        case badCoordinates = "bad-coordinates"
        /// The origin time is missing or not an ISO 8601 instant ``SourceTime`` reads.
        case badTime = "bad-time"
        /// The event has no id (no `publicID`, an empty `EventID`).
        case noID = "no-id"
        /// An event with more origins or magnitudes than a reader keeps.
        case tooLarge = "too-large"
    }

    /// How many problems a reader keeps in its `problems` list (it counts them all).
    public static let keptLimit = 100

    public var kind: Kind
    public var message: String
    public var source: String
    /// The event's id, when it has one.
    public var id: String?
    public var line: Int?
    public var column: Int?
    /// The element path or column the value came from.
    public var path: String?

    public init(
        _ kind: Kind, _ message: String, source: String, id: String?, line: Int? = nil, column: Int? = nil,
        path: String? = nil
    ) {
        self.kind = kind
        self.message = message
        self.source = source
        self.id = id
        self.line = line
        self.column = column
        self.path = path
    }

    public var description: String {
        let event = id.map { "event \($0) " } ?? "an event "
        return "source \(source): \(placeText(line: line, column: column, byteOffset: nil, path: path))\(event)skipped: \(message)"
    }
}

func placeText(line: Int?, column: Int?, byteOffset: Int?, path: String?) -> String {
    var parts: [String] = []
    if let line { parts.append(column.map { "line \(line), column \($0)" } ?? "line \(line)") }
    if let byteOffset { parts.append("byte \(byteOffset)") }
    if let path { parts.append(path) }
    return parts.isEmpty ? "" : parts.joined(separator: ", ") + ": "
}

/// Whether the first non-blank bytes of an answer open an HTML page (`<!DOCTYPE html`, `<html`,
/// any case): nil while too few bytes have come to tell.
func looksLikeHTML(_ head: [UInt8], complete: Bool) -> Bool? {
    var i = 0
    if head.starts(with: [0xEF, 0xBB, 0xBF]) { i = 3 }
    while i < head.count, [0x20, 0x09, 0x0A, 0x0D].contains(head[i]) { i += 1 }
    let rest = head[i...].map { $0 >= 0x41 && $0 <= 0x5A ? $0 + 0x20 : $0 }
    for prefix in ["<!doctype html", "<html"] {
        let p = Array(prefix.utf8)
        let n = min(p.count, rest.count)
        guard rest.prefix(n).elementsEqual(p.prefix(n)) else { continue }
        if n == p.count { return true }
        if !complete { return nil }
    }
    return false
}
