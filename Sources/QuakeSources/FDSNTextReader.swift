import QuakeModel

/// Reads an FDSN event service's text answer (`format=text`) as it arrives in chunks, one line
/// at a time, and produces one ``SourceItem`` per row, in order.
///
/// The header line names the columns: `#EventID|Time|Latitude|Longitude|Depth/km|Author|
/// Catalog|Contributor|ContributorID|MagType|Magnitude|MagAuthor|EventLocationName`, optionally
/// with `|EventType` (SeisComP). Columns are found by name (any case, spaces around the pipes
/// as EMSC writes them), not position; `EventID`, `Time`, `Latitude` and `Longitude` are
/// required. In rows, values are trimmed and an empty value is nil. Depth is already in km.
/// The agency is `Author`, else `Contributor`; the place `EventLocationName`. An `EventType` of
/// `not existing` or `deleted` is a retraction. Lines end with LF or CRLF; blank lines and
/// further `#` lines are ignored.
///
/// Errors: a ``SourceError`` rejects the whole answer: an HTML page, no header before the first
/// row, a header without a required column, a row whose column count differs from the
/// header's (naming the line and the expected count), a line over ``maxLineBytes``. A row with
/// a bad time, impossible coordinates or an empty id is skipped (``skippedCount``,
/// ``problems``). Zero bytes, or only blank lines, is no events and no error: FDSN services
/// answer HTTP 204 with an empty body when nothing matches.
///
/// When `body` throws, its error propagates and the reader stays usable: the next call reads on
/// from the row after.
///
/// Memory: one line at most (``maxLineBytes``), never the document.
public struct FDSNTextReader: Sendable {
    /// The longest line accepted.
    public static let maxLineBytes = 64 * 1024

    public let source: String
    public private(set) var skippedCount = 0
    public private(set) var problems: [SourceProblem] = []
    public private(set) var bytesConsumed = 0

    private enum Column: String, CaseIterable {
        case eventID = "eventid", time, latitude, longitude, depth = "depth/km", author, catalog, contributor,
            contributorID = "contributorid", magType = "magtype", magnitude, magAuthor = "magauthor",
            place = "eventlocationname", eventType = "eventtype"
    }
    /// Each known column's index in the header's order.
    private var columns: [Column: Int] = [:]
    private var columnCount = 0
    private var line: [UInt8] = []
    private var lineNumber = 0
    private var lineStart = 0
    private var failure: SourceError?
    /// What was left of a chunk when `body` threw: read first by the next call.
    private var leftover: [UInt8] = []

    public init(source: String) {
        self.source = source
    }

    /// Reads the complete lines `chunk` ends; calls `body` for each row's item. Throws
    /// ``SourceError``.
    public mutating func consume(_ newChunk: [UInt8], _ body: (SourceItem) throws -> Void) throws {
        if let failure { throw failure }
        bytesConsumed += newChunk.count
        let chunk = leftover.isEmpty ? newChunk : leftover + newChunk
        leftover = []
        var start = 0
        for (i, byte) in chunk.enumerated() where byte == 0x0A {
            line += chunk[start..<i]
            start = i + 1
            do {
                try endLine(body)
            } catch let error where !(error is SourceError) {
                leftover = Array(chunk[start...])
                throw error
            }
        }
        line += chunk[start...]
        if line.count > Self.maxLineBytes {
            throw fail(
                .lineTooLong, "line \(lineNumber + 1) is longer than \(Self.maxLineBytes) bytes: this is not FDSN text",
                line: lineNumber + 1)
        }
    }

    /// Reads the last line, if it had no newline.
    public mutating func finish(_ body: (SourceItem) throws -> Void) throws {
        if let failure { throw failure }
        if !leftover.isEmpty { try consume([], body) }
        if !line.isEmpty { try endLine(body) }
    }

    private mutating func fail(_ kind: SourceError.Kind, _ message: String, line: Int, path: String? = nil)
        -> SourceError
    {
        let error = SourceError(kind, message, source: source, line: line, byteOffset: lineStart, path: path)
        failure = error
        return error
    }

    private mutating func endLine(_ body: (SourceItem) throws -> Void) throws {
        lineNumber += 1
        defer {
            lineStart += line.count + 1
            line.removeAll(keepingCapacity: true)
        }
        if line.last == 0x0D { line.removeLast() }
        if lineNumber == 1, line.starts(with: [0xEF, 0xBB, 0xBF]) { line.removeFirst(3) }
        let text = String(decoding: line, as: UTF8.self)
        let trimmed = text.trimmingSpaces()
        if trimmed.isEmpty { return }
        if columnCount == 0 {
            if looksLikeHTML(Array(trimmed.utf8), complete: true) == true {
                throw fail(
                    .htmlPage, "the service answered with an HTML page, not FDSN text: check the URL", line: lineNumber)
            }
            guard trimmed.hasPrefix("#") else {
                throw fail(
                    .badHeader,
                    "line \(lineNumber) comes before any \"#EventID|Time|...\" header: check that the URL asks for format=text",
                    line: lineNumber)
            }
            let names = trimmed.dropFirst().split(separator: "|", omittingEmptySubsequences: false)
                .map { $0.trimmingSpaces().lowercased() }
            for (index, name) in names.enumerated() {
                if let column = Column(rawValue: name == "depth" ? "depth/km" : name), columns[column] == nil {
                    columns[column] = index
                }
            }
            for required in [Column.eventID, .time, .latitude, .longitude] where columns[required] == nil {
                columns = [:]
                throw fail(
                    .badHeader, "the header has no \(required) column: this is not an FDSN event text answer",
                    line: lineNumber)
            }
            columnCount = names.count
            return
        }
        if trimmed.hasPrefix("#") { return }
        let values = text.split(separator: "|", omittingEmptySubsequences: false)
        guard values.count == columnCount else {
            throw fail(
                .wrongColumns,
                "line \(lineNumber) has \(values.count) columns, the header \(columnCount): expected \(columnCount) "
                    + "columns separated by \"|\"; the answer is cut or not FDSN text",
                line: lineNumber)
        }
        func value(_ column: Column) -> String? {
            guard let index = columns[column] else { return nil }
            let v = values[index].trimmingSpaces()
            return v.isEmpty ? nil : v
        }
        let id = value(.eventID)
        func skip(_ kind: SourceProblem.Kind, _ message: String, _ column: Column) {
            skippedCount += 1
            if problems.count < SourceProblem.keptLimit {
                let path = column == .eventID ? "EventID" : "\(column)"
                problems.append(
                    SourceProblem(
                        kind, message, source: source, id: id, line: lineNumber, column: nil, path: path))
            }
        }
        guard let id else { return skip(.noID, "the EventID is empty", .eventID) }
        if let type = value(.eventType), type == "not existing" || type == "deleted" {
            return try body(.retraction(source: source, id: id, updated: nil))
        }
        guard let time = value(.time).flatMap(SourceTime.milliseconds) else {
            return skip(.badTime, "time \(quoted(value(.time))) is not an ISO 8601 instant", .time)
        }
        guard let latitude = value(.latitude).flatMap(finite), (-90...90).contains(latitude) else {
            return skip(.badCoordinates, "latitude \(quoted(value(.latitude))) is not in -90...90", .latitude)
        }
        guard let longitude = value(.longitude).flatMap(finite), (-180...180).contains(longitude) else {
            return skip(.badCoordinates, "longitude \(quoted(value(.longitude))) is not in -180...180", .longitude)
        }
        try body(
            .report(
                SourceReport(
                    source: source, id: id, agency: value(.author) ?? value(.contributor), time: time,
                    latitude: latitude, longitude: longitude, depth: value(.depth).flatMap(finite),
                    magnitude: value(.magnitude).flatMap(finite), magnitudeType: value(.magType),
                    place: value(.place), eventType: value(.eventType))))
    }
}

extension StringProtocol {
    /// Without leading and trailing spaces and tabs.
    func trimmingSpaces() -> String {
        let isSpace: (Character) -> Bool = { $0 == " " || $0 == "\t" || $0 == "\r" }
        guard let first = firstIndex(where: { !isSpace($0) }) else { return "" }
        let last = lastIndex(where: { !isSpace($0) })!
        return String(self[first...last])
    }
}
