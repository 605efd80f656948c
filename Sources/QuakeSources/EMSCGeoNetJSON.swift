import QuakeFeed
import QuakeModel

// What the JSON readers of QuakeSources share (EMSC's websocket messages and FDSN GeoJSON,
// GeoNet's quake API): strict reading over QuakeFeed's `JSONReader`, never Foundation's
// JSONSerialization or JSONDecoder, and a FeatureCollection streamed through QuakeFeed's
// `FeedParser`, which checks the whole document strictly and hands over one element at a time.

/// The deepest nesting the JSON readers accept (a feature's coordinates are at depth 5).
let sourceJSONMaxDepth = 64

/// A JSON value read where a scalar is expected: what the readers keep of a member.
enum JSONScalar {
    case string(String)
    case number(Double)
    case null
    /// Anything else (a boolean, an object, an array), by its type's name, for messages.
    case other(String)

    var string: String? { if case .string(let s) = self { s } else { nil } }
    /// A finite number (a JSON number too large for a Double is not one).
    var number: Double? { if case .number(let n) = self, n.isFinite { n } else { nil } }
    /// A string that is not empty.
    var text: String? { if case .string(let s) = self, !s.isEmpty { s } else { nil } }

    /// The value for a message: `"text"`, `12.5`, `null`, or its type.
    var shown: String {
        switch self {
        case .string(let s): "\"\(s.count > 40 ? String(s.prefix(40)) + "..." : s)\""
        case .number(let n): "\(n)"
        case .null: "null"
        case .other(let type): type
        }
    }
}

func jsonTypeText(_ c: UInt8) -> String {
    switch c {
    case UInt8(ascii: "\""): "a string"
    case UInt8(ascii: "{"): "an object"
    case UInt8(ascii: "["): "an array"
    case UInt8(ascii: "t"), UInt8(ascii: "f"): "a boolean"
    case UInt8(ascii: "n"): "null"
    default: "a number"
    }
}

extension JSONReader {
    /// Opens the object at the cursor, or throws a wrong-shape error naming `path`.
    mutating func openObject(depth: Int, path: String) throws(ReadStop) {
        let c = try nextNonWS()
        guard c == UInt8(ascii: "{") else {
            let at = i
            try skipValue(depth: depth)
            throw fail(.wrongType, "\(path): expected an object, found \(jsonTypeText(c))", at: at)
        }
        try enter(depth)
        i += 1
    }

    /// The next member's key of an object opened by `openObject`, with the cursor on its value;
    /// nil after the closing `}`. `started` is false before the first member. A comma before
    /// `}` is reported as the trailing comma it is, at the comma's offset.
    mutating func nextKey(_ started: inout Bool) throws(ReadStop) -> String? {
        if started {
            let c = try nextNonWS()
            if c == UInt8(ascii: "}") {
                i += 1
                return nil
            }
            guard c == UInt8(ascii: ",") else {
                throw unexpected(c, at: i, expected: "expected ',' or '}' after an object member")
            }
            let comma = i
            i += 1
            if try nextNonWS() == UInt8(ascii: "}") {
                throw fail(
                    .invalidJSON, "a trailing comma before '}': strict JSON allows no comma after the last member",
                    at: comma)
            }
        } else {
            started = true
            if try nextNonWS() == UInt8(ascii: "}") {
                i += 1
                return nil
            }
        }
        try expectKey()
        let key = string(try scanString())
        try expectColon()
        return key
    }

    /// The value at the cursor as a ``JSONScalar`` (containers and booleans are validated and
    /// skipped).
    mutating func scalar(depth: Int) throws(ReadStop) -> JSONScalar {
        let c = try nextNonWS()
        switch c {
        case UInt8(ascii: "\""): return .string(string(try scanString()))
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return .number(double(try scanNumber()))
        case UInt8(ascii: "n"):
            try skipValue(depth: depth)
            return .null
        default:
            try skipValue(depth: depth)
            return .other(jsonTypeText(c))
        }
    }

    /// An array of numbers at the cursor (its first `keep` kept), or nil when the value is not
    /// an array of numbers only (then skipped).
    mutating func numbers(depth: Int, keep: Int = 3) throws(ReadStop) -> [Double]? {
        guard try nextNonWS() == UInt8(ascii: "[") else {
            try skipValue(depth: depth)
            return nil
        }
        try enter(depth)
        i += 1
        var values: [Double] = []
        var allNumbers = true
        if try nextNonWS() == UInt8(ascii: "]") {
            i += 1
            return values
        }
        repeat {
            let c = try nextNonWS()
            if c == UInt8(ascii: "-") || (c >= UInt8(ascii: "0") && c <= UInt8(ascii: "9")) {
                let n = double(try scanNumber())
                if values.count < keep { values.append(n) }
            } else if c == UInt8(ascii: "]") {
                throw fail(.invalidJSON, "a trailing comma before ']': strict JSON allows no comma after the last element", at: i)
            } else {
                allNumbers = false
                try skipValue(depth: depth + 1)
            }
        } while try !endOfArray()
        return allNumbers ? values : nil
    }

    /// The `coordinates` of a GeoJSON `geometry` object at the cursor (`[lon, lat, ...]`), or
    /// nil when it has none that are numbers. Its other members are validated and skipped.
    mutating func geometryCoordinates(depth: Int, path: String) throws(ReadStop) -> [Double]? {
        if try nextNonWS() == UInt8(ascii: "n") {
            try skipValue(depth: depth)
            return nil
        }
        try openObject(depth: depth, path: path)
        var coordinates: [Double]?
        var started = false
        while let key = try nextKey(&started) {
            if key == "coordinates" {
                coordinates = try numbers(depth: depth + 1)
            } else {
                try skipValue(depth: depth + 1)
            }
        }
        return coordinates
    }
}

/// What one feature gave: an item, or the problem that skipped it.
enum FeatureOutcome {
    case item(SourceItem)
    case skipped(SourceProblem)
}

/// A `FeedError` from reading JSON as the readers report it: a ``SourceError`` of kind
/// `malformedJSON` (syntax, UTF-8, cut short) or `wrongShape` (valid JSON of the wrong shape,
/// too deep or too large), at its byte offset, with `remedy` appended.
func sourceError(_ error: FeedError, source: String, remedy: String) -> SourceError {
    let kind: SourceError.Kind
    let what: String
    switch error.kind {
    case .invalidJSON, .invalidUTF8: (kind, what) = (.malformedJSON, "not strict JSON")
    case .truncated: (kind, what) = (.malformedJSON, "cut short")
    case .wrongType, .tooLarge: (kind, what) = (.wrongShape, "not the expected shape")
    }
    return SourceError(kind, "\(what): \(error.message); \(remedy)", source: source, byteOffset: error.byteOffset)
}

/// Reads a GeoJSON FeatureCollection as it arrives in chunks and hands each feature to a
/// decoder: `FeedParser` (strict RFC 8259, a root object with `"type": "FeatureCollection"`
/// and a `features` array, each element at most 1 MiB, nesting at most 64) finds the elements
/// without holding the document; the decoder reads each one's bytes. An answer that is blank
/// (an FDSN service's HTTP 204) is no features; one that opens an HTML page is an `htmlPage`
/// error. Once it has thrown a ``SourceError`` it keeps throwing it.
struct FeatureCollectionStream: Sendable {
    let source: String
    /// The end of each error's message: what to check.
    let remedy: String
    private var parser = FeedParser()
    private var head: [UInt8] = []
    private var started = false
    private var failure: SourceError?
    private(set) var skippedCount = 0
    private(set) var problems: [SourceProblem] = []
    private(set) var bytesConsumed = 0
    private static let headBytes = 4096

    init(source: String, remedy: String) {
        self.source = source
        self.remedy = remedy
    }

    /// The decoder's own failure: the feature's shape is wrong.
    private struct Shape: Error { var error: FeedError }

    typealias Decoder = (inout JSONReader, _ index: Int) throws(ReadStop) -> FeatureOutcome

    mutating func consume(
        _ chunk: [UInt8], decode: Decoder, _ body: (SourceItem) throws -> Void
    ) throws {
        if let failure { throw failure }
        bytesConsumed += chunk.count
        if started {
            try feed(chunk, decode: decode, body)
            return
        }
        let n = min(chunk.count, Self.headBytes - head.count)
        head += chunk.prefix(n)
        guard try start(complete: false) else { return }
        let first = head + chunk.dropFirst(n)
        head = []
        try feed(first, decode: decode, body)
    }

    mutating func finish(decode: Decoder, _ body: (SourceItem) throws -> Void) throws {
        if let failure { throw failure }
        if !started {
            guard try start(complete: true) else { return }
            let first = head
            head = []
            try feed(first, decode: decode, body)
        } else {
            // Elements kept after a throwing `body` are handed over by `consume` only.
            try feed([], decode: decode, body)
        }
        do {
            try parser.finish()
        } catch let error as FeedError {
            throw fail(sourceError(error, source: source, remedy: remedy))
        }
    }

    /// Whether the head says what the answer is: false while it cannot tell yet, or (complete)
    /// when the answer is blank.
    private mutating func start(complete: Bool) throws -> Bool {
        let blank = head.allSatisfy { [0x20, 0x09, 0x0A, 0x0D].contains($0) }
        if blank && (complete || head.count < Self.headBytes) { return false }
        switch looksLikeHTML(head, complete: complete || head.count >= Self.headBytes) {
        case nil: return false
        case true?:
            throw fail(
                SourceError(
                    .htmlPage, "the service answered with an HTML page, not GeoJSON: \(remedy)", source: source,
                    byteOffset: 0))
        case false?:
            started = true
            return true
        }
    }

    private mutating func fail(_ error: SourceError) -> SourceError {
        failure = error
        return error
    }

    private mutating func feed(_ bytes: [UInt8], decode: Decoder, _ body: (SourceItem) throws -> Void) throws {
        var skipped: [SourceProblem] = []
        defer {
            skippedCount += skipped.count
            problems += skipped.prefix(max(0, SourceProblem.keptLimit - problems.count))
        }
        do {
            try bytes.withUnsafeBytes { buffer in
                try parser.consume(buffer, decode: false) { element in
                    var r = JSONReader(
                        element.bytes, base: element.offset, endIsDelimiter: true, maxDepth: sourceJSONMaxDepth)
                    let outcome: FeatureOutcome
                    do throws(ReadStop) {
                        // Depth 3: the root object is 1, `features` 2.
                        outcome = try decode(&r, element.index)
                    } catch {
                        switch error {
                        case .failed(let e): throw Shape(error: e)
                        case .needMore:  // cannot be: the parser found the element complete
                            throw Shape(error: FeedError(.truncated, "a feature ended early", at: element.offset))
                        }
                    }
                    switch outcome {
                    case .item(let item): try body(item)
                    case .skipped(let problem): skipped.append(problem)
                    }
                }
            }
        } catch let error as FeedError {
            throw fail(sourceError(error, source: source, remedy: remedy))
        } catch let error as Shape {
            throw fail(sourceError(error.error, source: source, remedy: remedy))
        }
    }
}
