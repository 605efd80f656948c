/// An incremental parser for a USGS GeoJSON `FeatureCollection`: feed it the document in chunks
/// of any size and it hands back one `FeedItem` per element of `features`, in order.
///
/// The document is checked strictly against RFC 8259 (syntax, escapes, numbers, UTF-8 everywhere;
/// a leading byte order mark is rejected as invalid JSON) and against the feed's shape (root object,
/// `"type": "FeatureCollection"`, `features` an array). Memory use is bounded by
/// `Limits.maxFeatureBytes` plus one chunk: only the current element (or other top-level value)
/// is kept when it straddles chunk boundaries, never the document.
///
/// Every top-level value other than `features`, and every element of `features`, must fit in
/// `maxFeatureBytes`. Once `consume` or `finish` has thrown a `FeedError` the parser is dead and
/// keeps rethrowing it. If `body` throws, its error propagates and the parser stays usable: the
/// rest of the chunk is kept and parsing resumes on the next `consume` (an empty chunk is fine).
public struct FeedParser: Sendable {
    public struct Limits: Sendable {
        /// Maximum nesting depth of arrays and objects (the root object is depth 1, a feature 3).
        public var maxDepth: Int = 64
        /// Maximum encoded size of one element of `features`, and of any other top-level value.
        public var maxFeatureBytes: Int = 1 << 20
        public init() {}
    }

    /// Total bytes fed so far.
    public private(set) var bytesConsumed = 0
    /// Elements of `features` seen so far (each produced one `FeedItem`).
    public private(set) var featureCount = 0
    /// The known fields of the top-level `metadata` object, once it has been read.
    public private(set) var metadata = FeedMetadata()

    private let limits: Limits

    /// Where the parser is in the document's skeleton (between tokens).
    private enum State {
        case start, firstKey, key, colon, value, afterMember, firstElement, element, afterElement, done
    }
    /// Which top-level member's value comes next.
    private enum Member { case type, features, metadata, other }

    private var state = State.start
    private var member = Member.other
    private var sawType = false
    private var sawFeatures = false
    /// Bytes fed but not yet parsed: an incomplete value (usually) or, after `body` threw,
    /// the rest of that chunk. `carryBase` is the document offset of `carry[0]`.
    private var carry: [UInt8] = []
    private var carryBase = 0
    /// Finds the end of the incomplete value at `carry[0]`, so it is decoded once, when complete.
    private var boundary: ValueBoundary?
    private var failure: FeedError?
    /// The texts of the records decoded by the current `consume` call (see ``takeArena()``).
    private var arena: [UInt8] = []

    public init(limits: FeedParser.Limits = .init()) {
        self.limits = limits
    }

    /// Parses as much of the document as `chunk` allows; calls `body` for each complete element
    /// of `features`, in order.
    public mutating func consume(_ chunk: UnsafeRawBufferPointer, _ body: (FeedItem) throws -> Void) throws {
        try consume(chunk, decode: true) { element in try body(element.item!) }
    }

    /// The arena the records of the last `consume` call point into; the parser starts a new one.
    /// Take it before the next call, which otherwise reuses the memory.
    public mutating func takeArena() -> [UInt8] {
        var taken: [UInt8] = []
        swap(&taken, &arena)
        arena.reserveCapacity(taken.count)
        return taken
    }

    /// Parses as much of the document as `chunk` allows; calls `body` for each complete element
    /// of `features`, in order, with its bytes and their hash. With `decode`, each element comes
    /// decoded (``FeedElement/item``); without, it is only validated as JSON and its `id` read,
    /// and ``decode(_:index:base:limits:)`` decodes it later if needed.
    public mutating func consume(
        _ chunk: UnsafeRawBufferPointer, decode: Bool, _ body: (FeedElement) throws -> Void
    ) throws {
        if let failure { throw failure }
        arena.removeAll(keepingCapacity: true)
        var rest = chunk
        var restBase = bytesConsumed
        bytesConsumed += chunk.count
        while true {
            if carry.isEmpty {
                // Fast path: parse straight from the caller's buffer, keep only what is left over.
                let (stop, bodyError) = try run(rest, base: restBase, endIsDelimiter: false, eof: false, decode, body)
                if stop < rest.count {
                    carry.append(contentsOf: UnsafeRawBufferPointer(rebasing: rest[stop...]))
                    carryBase = restBase + stop
                }
                if let bodyError { throw bodyError }
                return
            }
            // Extend the carried value only up to its end, so the rest goes through the fast path.
            var take = rest.count
            var complete = false
            if var b = boundary {
                if let n = b.scan(rest) {
                    take = n
                    complete = true
                }
                boundary = b
            }
            carry.append(contentsOf: UnsafeRawBufferPointer(rebasing: rest[..<take]))
            rest = UnsafeRawBufferPointer(rebasing: rest[take...])
            restBase += take
            if boundary != nil && !complete && carry.count <= limits.maxFeatureBytes { return }

            var buffer = carry  // moved out: `run` mutates self
            carry = []
            let (stop, bodyError) = try buffer.withUnsafeBytes {
                try run($0, base: carryBase, endIsDelimiter: complete, eof: false, decode, body)
            }
            buffer.removeFirst(stop)
            carryBase += stop
            carry = buffer
            if let bodyError {
                carry.append(contentsOf: rest)
                boundary = nil
                throw bodyError
            }
            if rest.isEmpty { return }
        }
    }

    /// Convenience for `consume(_:_:)` with an array.
    public mutating func consume(_ chunk: [UInt8], _ body: (FeedItem) throws -> Void) throws {
        try chunk.withUnsafeBytes { try consume($0, body) }
    }

    /// End of input: throws `.truncated` unless the document is complete (root closed, only
    /// whitespace after it), or `.wrongType` when `features` never came or `type` is missing.
    /// After `body` threw, call `consume` (with an empty chunk) until it returns first: elements
    /// still kept are not handed over by `finish`.
    public mutating func finish() throws {
        if let failure { throw failure }
        if !carry.isEmpty {
            // Errors from `run` have already marked the parser dead.
            let buffer = carry
            carry = []
            _ = try buffer.withUnsafeBytes {
                try run($0, base: carryBase, endIsDelimiter: false, eof: true, false, { _ in })
            }
        }
        let error: FeedError
        if state != .done {
            error = FeedError(.truncated, "unexpected end of input: the root object is not closed", at: bytesConsumed)
        } else if !sawFeatures {
            error = FeedError(.wrongType, "the document has no 'features' member", at: bytesConsumed)
        } else if !sawType {
            error = FeedError(.wrongType, "the document has no 'type' member", at: bytesConsumed)
        } else {
            return
        }
        failure = error
        throw error
    }

    /// Runs the skeleton state machine over `buf` (document offset `base`). Returns where it
    /// stopped: the start of an incomplete value (then `boundary` is set), the end of `buf`, or
    /// just after the item whose `body` threw (returned, not thrown, so the caller can keep the rest).
    private mutating func run(
        _ buf: UnsafeRawBufferPointer, base: Int, endIsDelimiter: Bool, eof: Bool, _ decode: Bool,
        _ body: (FeedElement) throws -> Void
    ) throws(FeedError) -> (stop: Int, bodyError: (any Error)?) {
        // Set again below if `buf` ends inside a value; after this run the carry is anything else
        // (the rest of a chunk whose `body` threw), which a left-over boundary would misjudge.
        boundary = nil
        var r = JSONReader(buf, base: base, endIsDelimiter: endIsDelimiter, maxDepth: limits.maxDepth)
        swap(&r.arena, &arena)
        defer { swap(&r.arena, &arena) }
        /// The arena's length before the current value: what it goes back to if the value turns
        /// out incomplete and is read again later (texts of elements already handed over stay).
        var arenaMark = r.arena.count
        let limit = limits.maxFeatureBytes
        var valueStart = 0
        // Reads of a value see at most limit + 1 bytes: enough to tell "too large" from "complete".
        func beginValue(_ r: inout JSONReader) {
            valueStart = r.i
            arenaMark = r.arena.count
            if buf.count - r.i > limit {
                r.end = r.i + limit + 1
                r.endIsDelimiter = false
            }
        }
        func endValue(_ r: inout JSONReader) throws(ReadStop) {
            r.end = buf.count
            r.endIsDelimiter = endIsDelimiter
            if r.i - valueStart > limit { throw tooLarge(r, valueStart) }
        }
        do throws(ReadStop) {
            while true {
                guard let c = r.peekNonWS() else { return (r.i, nil) }
                switch state {
                case .start:
                    guard c == UInt8(ascii: "{") else {
                        if isValueStart(c) {
                            throw r.fail(.wrongType, "the root must be an object, found \(jsonTypeName(c))", at: r.i)
                        }
                        throw r.unexpected(c, at: r.i, expected: "expected '{' to start the document")
                    }
                    r.i += 1
                    state = .firstKey
                case .firstKey, .key:
                    if c == UInt8(ascii: "}") && state == .firstKey {
                        r.i += 1
                        state = .done
                        continue
                    }
                    guard c == UInt8(ascii: "\"") else {
                        throw r.unexpected(
                            c, at: r.i,
                            expected: state == .firstKey
                                ? "expected a string key or '}'" : "expected a string key after ','")
                    }
                    beginValue(&r)
                    let s = try r.scanString()
                    try endValue(&r)
                    member =
                        r.stringEquals(s, "features")
                        ? .features
                        : r.stringEquals(s, "type")
                            ? .type
                            : r.stringEquals(s, "metadata") ? .metadata : .other
                    state = .colon
                case .colon:
                    guard c == UInt8(ascii: ":") else {
                        throw r.unexpected(c, at: r.i, expected: "expected ':' after an object key")
                    }
                    r.i += 1
                    state = .value
                case .value:
                    if member == .features {
                        guard c == UInt8(ascii: "[") else {
                            if isValueStart(c) {
                                throw r.fail(
                                    .wrongType, "'features' must be an array, found \(jsonTypeName(c))", at: r.i)
                            }
                            throw r.unexpected(c, at: r.i, expected: "expected a value")
                        }
                        if sawFeatures { throw r.fail(.wrongType, "duplicate 'features' member", at: r.i) }
                        try r.enter(2)
                        sawFeatures = true
                        r.i += 1
                        state = .firstElement
                        continue
                    }
                    beginValue(&r)
                    switch member {
                    case .type:
                        // Checked as soon as it is seen, so a wrong document fails early.
                        if c == UInt8(ascii: "\"") {
                            let s = try r.scanString()
                            if !r.stringEquals(s, "FeatureCollection") {
                                throw r.fail(
                                    .wrongType, "'type' must be \"FeatureCollection\", found \"\(r.string(s))\"",
                                    at: valueStart)
                            }
                        } else {
                            try r.skipValue(depth: 2)
                            throw r.fail(
                                .wrongType, "'type' must be \"FeatureCollection\", found \(jsonTypeName(c))",
                                at: valueStart)
                        }
                        sawType = true
                    case .metadata: metadata = try r.metadata(depth: 2)
                    default: try r.skipValue(depth: 2)
                    }
                    try endValue(&r)
                    state = .afterMember
                case .afterMember:
                    if c == UInt8(ascii: ",") {
                        state = .key
                    } else if c == UInt8(ascii: "}") {
                        state = .done
                    } else {
                        throw r.unexpected(c, at: r.i, expected: "expected ',' or '}' after a top-level member")
                    }
                    r.i += 1
                case .firstElement, .element:
                    if c == UInt8(ascii: "]") {
                        guard state == .firstElement else {
                            throw r.fail(
                                .invalidJSON, "expected a feature after ',', found ']' (trailing comma)", at: r.i)
                        }
                        r.i += 1
                        state = .afterMember
                        continue
                    }
                    beginValue(&r)
                    var decoded: DecodedElement?
                    var identity: (id: String?, hasAliases: Bool) = (nil, false)
                    if decode {
                        decoded = try r.feature(depth: 3)
                    } else {
                        identity = try r.featureIdentity(depth: 3)
                    }
                    try endValue(&r)
                    let bytes = UnsafeRawBufferPointer(rebasing: buf[valueStart..<r.i])
                    let index = featureCount
                    featureCount += 1
                    state = .afterElement
                    do {
                        try r.arena.withUnsafeBytes { arena in
                            try body(
                                FeedElement(
                                    index: index, bytes: bytes, offset: base + valueStart,
                                    hash: FeedElement.hash(bytes), decoded: decoded, arena: arena, id: identity.id,
                                    hasAliases: identity.hasAliases))
                        }
                    } catch {
                        return (r.i, error)
                    }
                case .afterElement:
                    if c == UInt8(ascii: ",") {
                        state = .element
                    } else if c == UInt8(ascii: "]") {
                        state = .afterMember
                    } else {
                        throw r.unexpected(c, at: r.i, expected: "expected ',' or ']' after a feature")
                    }
                    r.i += 1
                case .done:
                    throw r.unexpected(c, at: r.i, expected: "expected only whitespace after the root object")
                }
            }
        } catch {
            let inFeature = state == .firstElement || state == .element
            var e: FeedError
            switch error {
            case .failed(let failed):
                e = failed
            case .needMore:
                r.arena.removeSubrange(arenaMark...)
                if r.end - valueStart > limit {
                    e = tooLargeError(r, valueStart)
                } else if eof {
                    e = FeedError(.truncated, "unexpected end of input inside a value", at: base + buf.count)
                } else {
                    // Keep the incomplete value; find its end as bytes arrive (see `consume`).
                    var b = ValueBoundary(first: buf[valueStart])
                    // Cannot end inside bytes the decoder found incomplete; if it claims to, do not
                    // trust it and simply retry the decoder on every chunk.
                    boundary = b.scan(UnsafeRawBufferPointer(rebasing: buf[valueStart...])) == nil ? b : nil
                    return (valueStart, nil)
                }
            }
            if inFeature && e.featureIndex == nil { e.featureIndex = featureCount }
            failure = e
            throw e
        }
    }

    /// Decodes one element of `features` from its bytes (as a ``FeedElement`` had them), exactly as
    /// `consume(_:decode:_:)` with `decode` would have. `base` is the bytes' document offset, for errors.
    public static func decode(
        _ bytes: UnsafeRawBufferPointer, index: Int, base: Int, limits: Limits = .init()
    ) throws(FeedError) -> FeedItem {
        let (decoded, arena) = try decodeElement(bytes, index: index, base: base, limits: limits)
        return arena.withUnsafeBytes { decoded.item(index: index, arena: $0) }
    }

    /// ``decode(_:index:base:limits:)`` as a ``DecodedElement`` and the arena its texts are in.
    public static func decodeElement(
        _ bytes: UnsafeRawBufferPointer, index: Int, base: Int, limits: Limits = .init()
    ) throws(FeedError) -> (DecodedElement, arena: [UInt8]) {
        var r = JSONReader(bytes, base: base, endIsDelimiter: true, maxDepth: limits.maxDepth)
        do throws(ReadStop) {
            return (try r.feature(depth: 3), r.arena)
        } catch {
            var e: FeedError
            switch error {
            case .failed(let failed): e = failed
            case .needMore: e = FeedError(.truncated, "unexpected end of input inside a value", at: base + bytes.count)
            }
            if e.featureIndex == nil { e.featureIndex = index }
            throw e
        }
    }

    private func tooLargeError(_ r: JSONReader, _ valueStart: Int) -> FeedError {
        let what = state == .firstElement || state == .element ? "feature" : "value"
        return FeedError(
            .tooLarge, "\(what) larger than maxFeatureBytes (\(limits.maxFeatureBytes) bytes)",
            at: r.base + valueStart + limits.maxFeatureBytes)
    }

    private func tooLarge(_ r: JSONReader, _ valueStart: Int) -> ReadStop {
        .failed(tooLargeError(r, valueStart))
    }

    private func isValueStart(_ c: UInt8) -> Bool {
        switch c {
        case UInt8(ascii: "{"), UInt8(ascii: "["), UInt8(ascii: "\""), UInt8(ascii: "-"),
            UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "t"), UInt8(ascii: "f"), UInt8(ascii: "n"):
            return true
        default:
            return false
        }
    }
}
