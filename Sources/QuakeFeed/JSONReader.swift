/// Why the reader stopped before finishing a value.
///
/// Public, with ``JSONReader``, for QuakeSources' EMSC and GeoNet readers.
public enum ReadStop: Error {
    /// The bytes ran out in the middle of the value: the caller keeps them and retries with more.
    case needMore
    case failed(FeedError)
}

/// A number token as scanned: its text plus what the fast conversions need. Public only as
/// what ``JSONReader/scanNumber()`` hands to ``JSONReader/double(_:)``.
public struct NumberToken {
    var start: Int
    var end: Int
    var negative = false
    /// No fraction and no exponent in the text.
    var isInteger = true
    /// The first 19 significant digits as an integer...
    var mantissa: UInt64 = 0
    /// ...times 10 to this power is the value (when `droppedNonZero` is false).
    var exp10 = 0
    /// Digits past the 19th were not all zero, so `mantissa * 10^exp10` is not exact.
    var droppedNonZero = false
    /// Some digit did not fit in `mantissa` (zero or not).
    var dropped = false
}

/// A strict RFC 8259 reader over one contiguous byte buffer.
///
/// It is not resumable: when the bytes run out mid-value it throws `.needMore` and the caller
/// re-reads the value from its start once more bytes are in (see `FeedParser`, which bounds
/// how often that happens). Everything it reads is fully validated (syntax, escapes, UTF-8).
///
/// Public for QuakeSources' JSON readers (EMSC's messages and answers, GeoNet's API), which
/// walk their documents with the same strict cursor. What they use is public: the initializer,
/// the position `i`, `base`, and the primitives below marked so. The cursor sits *before* a
/// token: `peekNonWS`/`nextNonWS` look at its first byte without consuming it, a caller moves
/// past a punctuation byte it has looked at with `i += 1`, and the scanning methods consume
/// the whole token. Errors come as ``ReadStop/failed(_:)`` with a ``FeedError`` whose
/// `byteOffset` is `base` plus the offending byte's index. The buffer must outlive the reader.
public struct JSONReader {
    let p: UnsafeRawPointer
    /// Read position (index into the buffer).
    public var i: Int
    /// End of readable bytes.
    var end: Int
    /// Absolute document offset of the buffer's first byte, for error offsets.
    public let base: Int
    /// The bytes at `end` are known to end the current value (a delimiter or the value's known end),
    /// so a number or literal reaching `end` is complete rather than `.needMore`.
    var endIsDelimiter: Bool
    let maxDepth: Int
    /// Reused buffer for strings with escapes.
    var scratch: [UInt8] = []
    /// Where decoded texts go (see `text(_:)`); its owner moves it in and out.
    var arena: [UInt8] = []

    /// A reader of `buffer`, whose first byte is at `base` in the document. `endIsDelimiter`:
    /// the buffer ends where the value does (a whole document), so a number or literal reaching
    /// its end is complete rather than ``ReadStop/needMore``. `maxDepth`: the deepest nesting
    /// accepted (a deeper container fails with `.tooLarge`).
    public init(_ buffer: UnsafeRawBufferPointer, base: Int, endIsDelimiter: Bool, maxDepth: Int) {
        p = buffer.baseAddress ?? UnsafeRawPointer(bitPattern: 1)!
        i = 0
        end = buffer.count
        self.base = base
        self.endIsDelimiter = endIsDelimiter
        self.maxDepth = maxDepth
    }

    @inline(__always) func byte(_ at: Int) -> UInt8 { p.load(fromByteOffset: at, as: UInt8.self) }

    /// The error `kind` with `message` at buffer index `at` (document offset `base + at`).
    public func fail(_ kind: FeedError.Kind, _ message: String, at: Int) -> ReadStop {
        .failed(FeedError(kind, message, at: base + at))
    }

    /// Skips whitespace; returns the next byte without consuming it, or nil at `end`.
    @inline(__always) public mutating func peekNonWS() -> UInt8? {
        while i < end {
            let c = byte(i)
            // Space, tab, LF, CR are the only JSON whitespace.
            guard c == 0x20 || c == 0x0A || c == 0x0D || c == 0x09 else { return c }
            i &+= 1
        }
        return nil
    }

    /// Like `peekNonWS` but running out is `.needMore`.
    @inline(__always) public mutating func nextNonWS() throws(ReadStop) -> UInt8 {
        guard let c = peekNonWS() else { throw .needMore }
        return c
    }

    // MARK: Errors about unexpected bytes

    /// An error for an unexpected byte `c` at `at`; invalid-utf8 for bytes that can never start UTF-8.
    public func unexpected(_ c: UInt8, at: Int, expected: String) -> ReadStop {
        if c >= 0x80 {
            // Outside strings non-ASCII is never valid JSON. Bytes that cannot start a UTF-8
            // sequence are reported as invalid UTF-8 without looking ahead (so the verdict never
            // depends on chunking); a plausible lead byte is an unexpected character.
            if c < 0xC2 || c > 0xF4 {
                return fail(.invalidUTF8, "byte 0x\(hex(c)) cannot start a UTF-8 sequence", at: at)
            }
            if at + base == 0 && c == 0xEF {
                return fail(
                    .invalidJSON, "a byte order mark (or other non-ASCII byte) cannot start a JSON text", at: at)
            }
            return fail(.invalidJSON, "\(expected), found non-ASCII byte 0x\(hex(c))", at: at)
        }
        return fail(.invalidJSON, "\(expected), found \(describe(c))", at: at)
    }

    // MARK: Values

    /// Validates and skips any JSON value starting at `i` (after whitespace). `depth` is the
    /// nesting depth a container opened here would have.
    public mutating func skipValue(depth: Int) throws(ReadStop) {
        let c = try nextNonWS()
        switch c {
        case UInt8(ascii: "\""): _ = try scanString()
        case UInt8(ascii: "{"):
            try enter(depth)
            i &+= 1
            if try nextNonWS() == UInt8(ascii: "}") { i &+= 1; return }
            while true {
                try expectKey()
                _ = try scanString()
                try expectColon()
                try skipValue(depth: depth + 1)
                if try endOfObject() { return }
            }
        case UInt8(ascii: "["):
            try enter(depth)
            i &+= 1
            if try nextNonWS() == UInt8(ascii: "]") { i &+= 1; return }
            while true {
                try skipValue(depth: depth + 1)
                if try endOfArray() { return }
            }
        case UInt8(ascii: "t"): try literal("true")
        case UInt8(ascii: "f"): try literal("false")
        case UInt8(ascii: "n"): try literal("null")
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): try skipNumber()
        default: throw unexpected(c, at: i, expected: "expected a value")
        }
    }

    /// Checks the depth of a container about to open at `i`.
    @inline(__always) public func enter(_ depth: Int) throws(ReadStop) {
        if depth > maxDepth {
            throw fail(.tooLarge, "nesting deeper than maxDepth (\(maxDepth))", at: i)
        }
    }

    /// Expects the `"` of an object key.
    @inline(__always) public mutating func expectKey() throws(ReadStop) {
        let c = try nextNonWS()
        if c != UInt8(ascii: "\"") {
            throw unexpected(c, at: i, expected: "expected a string key")
        }
    }

    /// Expects `:` after an object key and moves past it.
    @inline(__always) public mutating func expectColon() throws(ReadStop) {
        let c = try nextNonWS()
        if c != UInt8(ascii: ":") { throw unexpected(c, at: i, expected: "expected ':' after an object key") }
        i &+= 1
    }

    /// After an object member: consumes `,` (returns false) or `}` (returns true).
    @inline(__always) public mutating func endOfObject() throws(ReadStop) -> Bool {
        let c = try nextNonWS()
        i &+= 1
        if c == UInt8(ascii: ",") { return false }
        if c == UInt8(ascii: "}") { return true }
        i &-= 1
        throw unexpected(c, at: i, expected: "expected ',' or '}' after an object member")
    }

    /// After an array element: consumes `,` (returns false) or `]` (returns true).
    @inline(__always) public mutating func endOfArray() throws(ReadStop) -> Bool {
        let c = try nextNonWS()
        i &+= 1
        if c == UInt8(ascii: ",") { return false }
        if c == UInt8(ascii: "]") { return true }
        i &-= 1
        throw unexpected(c, at: i, expected: "expected ',' or ']' after an array element")
    }

    /// `true`, `false` or `null` at `i`.
    mutating func literal(_ word: StaticString) throws(ReadStop) {
        let start = i
        for k in 0..<word.utf8CodeUnitCount {
            if i == end {
                if endIsDelimiter { break }
                throw .needMore
            }
            if byte(i) != word.utf8Start[k] { break }
            i &+= 1
        }
        if i - start != word.utf8CodeUnitCount {
            throw fail(.invalidJSON, "invalid literal (expected '\(word)')", at: start)
        }
    }

    // MARK: Strings

    /// Validates the string whose opening quote is at `i` and moves past its closing quote.
    /// Returns the content's range (without quotes) and whether it contains escapes.
    @inline(__always) public mutating func scanString() throws(ReadStop) -> (start: Int, end: Int, escaped: Bool) {
        let start = i &+ 1
        i = start
        var escaped = false
        while true {
            // Fast path: 8 bytes at a time up to the first byte that needs a look.
            while i &+ 8 <= end {
                let special = specialBytes(p.loadUnaligned(fromByteOffset: i, as: UInt64.self))
                if special == 0 {
                    i &+= 8
                } else {
                    i &+= special.trailingZeroBitCount &>> 3
                    break
                }
            }
            guard i < end else { throw .needMore }
            let c = byte(i)
            if c == UInt8(ascii: "\"") {
                i &+= 1
                return (start, i &- 1, escaped)
            } else if c == UInt8(ascii: "\\") {
                try scanEscape()
                escaped = true
            } else if c < 0x20 {
                throw fail(.invalidJSON, "unescaped control character U+00\(hex(c)) in a string", at: i)
            } else if c >= 0x80 {
                try scanUTF8(c)
            } else {
                i &+= 1
            }
        }
    }

    /// The high bit of each byte of `x` (8 bytes loaded little-endian) that may be `"`, `\`, a
    /// control character or non-ASCII; 0 when none is. The lowest set bit is always exact: a byte
    /// is flagged wrongly only through a borrow from a lower byte that is flagged rightly. So
    /// `trailingZeroBitCount / 8` is the index of the first special byte.
    @inline(__always) func specialBytes(_ x: UInt64) -> UInt64 {
        let ones: UInt64 = 0x0101_0101_0101_0101
        let quote = x ^ (ones &* 0x22)
        let backslash = x ^ (ones &* 0x5C)
        // (v - 1) & ~v sets a byte's high bit when that byte is zero; x - 0x20 does when x < 0x20.
        let t = ((quote &- ones) & ~quote) | ((backslash &- ones) & ~backslash) | (x &- ones &* 0x20) | x
        return t & (ones &* 0x80)
    }

    /// Validates the escape at `i` (a backslash) and moves past it.
    mutating func scanEscape() throws(ReadStop) {
        let at = i
        guard i &+ 1 < end else { throw .needMore }
        switch byte(i &+ 1) {
        case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"), UInt8(ascii: "b"),
            UInt8(ascii: "f"), UInt8(ascii: "n"), UInt8(ascii: "r"), UInt8(ascii: "t"):
            i &+= 2
        case UInt8(ascii: "u"):
            let unit = try hex4(at: at)
            if unit >= 0xDC00 && unit <= 0xDFFF {
                throw fail(.invalidJSON, "unpaired low surrogate \\u\(hex16(unit)) in a string", at: at)
            }
            if unit >= 0xD800 && unit <= 0xDBFF {
                // A high surrogate must be followed at once by an escaped low surrogate.
                guard at &+ 7 < end else { throw .needMore }
                guard byte(at &+ 6) == UInt8(ascii: "\\"), byte(at &+ 7) == UInt8(ascii: "u") else {
                    throw fail(.invalidJSON, "unpaired high surrogate \\u\(hex16(unit)) in a string", at: at)
                }
                let low = try hex4(at: at &+ 6)
                guard low >= 0xDC00 && low <= 0xDFFF else {
                    throw fail(.invalidJSON, "unpaired high surrogate \\u\(hex16(unit)) in a string", at: at)
                }
                i = at &+ 12
            } else {
                i = at &+ 6
            }
        default:
            let c = byte(i &+ 1)
            throw fail(
                .invalidJSON,
                "invalid escape '\\\(c >= 0x20 && c < 0x7F ? String(UnicodeScalar(c)) : "0x" + hex(c))' in a string",
                at: at)
        }
    }

    /// The 4 hex digits of the `\u` escape whose backslash is at `at`.
    func hex4(at: Int) throws(ReadStop) -> UInt16 {
        var v: UInt16 = 0
        for k in 2..<6 {
            guard at &+ k < end else { throw .needMore }
            let c = byte(at &+ k)
            let d: UInt8
            switch c {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): d = c &- UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): d = c &- UInt8(ascii: "a") &+ 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): d = c &- UInt8(ascii: "A") &+ 10
            default: throw fail(.invalidJSON, "invalid \\u escape: expected 4 hex digits", at: at)
            }
            v = v << 4 | UInt16(d)
        }
        return v
    }

    /// Validates the UTF-8 sequence whose lead byte `c` (>= 0x80) is at `i` and moves past it.
    /// Errors point at the sequence's first byte.
    @inline(__always) mutating func scanUTF8(_ c: UInt8) throws(ReadStop) {
        // Unicode table 3-7: the allowed range of the second byte depends on the lead byte;
        // this rules out overlong forms, UTF-16 surrogates (ED A0..BF) and code points > U+10FFFF.
        let count: Int
        var lo: UInt8 = 0x80, hi: UInt8 = 0xBF
        switch c {
        case 0xC2...0xDF: count = 2
        case 0xE0: count = 3; lo = 0xA0
        case 0xED: count = 3; hi = 0x9F
        case 0xE1...0xEF: count = 3
        case 0xF0: count = 4; lo = 0x90
        case 0xF1...0xF3: count = 4
        case 0xF4: count = 4; hi = 0x8F
        case 0x80...0xBF: throw fail(.invalidUTF8, "stray UTF-8 continuation byte 0x\(hex(c))", at: i)
        case 0xC0, 0xC1: throw fail(.invalidUTF8, "overlong UTF-8 encoding (lead byte 0x\(hex(c)))", at: i)
        default: throw fail(.invalidUTF8, "byte 0x\(hex(c)) never occurs in UTF-8", at: i)
        }
        for k in 1..<count {
            guard i &+ k < end else { throw .needMore }
            let b = byte(i &+ k)
            let ok = k == 1 ? (b >= lo && b <= hi) : (b & 0xC0 == 0x80)
            if !ok {
                let why: String
                if k == 1 && c == 0xED && b >= 0xA0 && b <= 0xBF {
                    why = "UTF-16 surrogate encoded in UTF-8"
                } else if k == 1 && (c == 0xE0 || c == 0xF0) && b >= 0x80 && b < lo {
                    why = "overlong UTF-8 encoding"
                } else if k == 1 && c == 0xF4 && b > hi && b <= 0xBF {
                    why = "UTF-8 code point above U+10FFFF"
                } else {
                    why = "truncated UTF-8 sequence"
                }
                throw fail(.invalidUTF8, "\(why) (bytes starting 0x\(hex(c)) 0x\(hex(b)))", at: i)
            }
        }
        i &+= count
    }

    /// The text of a string scanned by `scanString`.
    public mutating func string(_ s: (start: Int, end: Int, escaped: Bool)) -> String {
        if !s.escaped {
            return String(decoding: UnsafeRawBufferPointer(start: p + s.start, count: s.end - s.start), as: UTF8.self)
        }
        unescape(s.start, s.end)
        return String(decoding: scratch, as: UTF8.self)
    }

    /// Appends the text of a string scanned by `scanString` to `arena`.
    mutating func text(_ s: (start: Int, end: Int, escaped: Bool)) -> TextSpan {
        if !s.escaped {
            return append(UnsafeRawBufferPointer(start: p + s.start, count: s.end - s.start))
        }
        unescape(s.start, s.end)
        let start = arena.count
        arena.append(contentsOf: scratch)
        return TextSpan(start: Int32(start), count: Int32(arena.count - start))
    }

    /// Appends `bytes` to `arena`.
    mutating func append(_ bytes: some Collection<UInt8>) -> TextSpan {
        let start = arena.count
        arena.append(contentsOf: bytes)
        return TextSpan(start: Int32(start), count: Int32(arena.count - start))
    }

    /// Decodes the already validated string content `start..<end` into `scratch`.
    mutating func unescape(_ start: Int, _ end: Int) {
        scratch.removeAll(keepingCapacity: true)
        var k = start
        while k < end {
            let c = byte(k)
            guard c == UInt8(ascii: "\\") else { scratch.append(c); k += 1; continue }
            let e = byte(k + 1)
            k += 2
            switch e {
            case UInt8(ascii: "b"): scratch.append(0x08)
            case UInt8(ascii: "f"): scratch.append(0x0C)
            case UInt8(ascii: "n"): scratch.append(0x0A)
            case UInt8(ascii: "r"): scratch.append(0x0D)
            case UInt8(ascii: "t"): scratch.append(0x09)
            case UInt8(ascii: "u"):
                var scalar = UInt32((try? hex4(at: k - 2)) ?? 0)
                k += 4
                if scalar >= 0xD800 && scalar <= 0xDBFF {  // validated: a low surrogate follows
                    let low = UInt32((try? hex4(at: k)) ?? 0)
                    scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                    k += 6
                }
                appendUTF8(scalar)
            default: scratch.append(e)  // " \ /
            }
        }
    }

    private mutating func appendUTF8(_ v: UInt32) {
        switch v {
        case ..<0x80: scratch.append(UInt8(v))
        case ..<0x800:
            scratch.append(UInt8(0xC0 | v >> 6)); scratch.append(UInt8(0x80 | v & 0x3F))
        case ..<0x10000:
            scratch.append(UInt8(0xE0 | v >> 12)); scratch.append(UInt8(0x80 | v >> 6 & 0x3F))
            scratch.append(UInt8(0x80 | v & 0x3F))
        default:
            scratch.append(UInt8(0xF0 | v >> 18)); scratch.append(UInt8(0x80 | v >> 12 & 0x3F))
            scratch.append(UInt8(0x80 | v >> 6 & 0x3F)); scratch.append(UInt8(0x80 | v & 0x3F))
        }
    }

    /// True if the scanned string's text equals `word` (escapes decoded).
    mutating func stringEquals(_ s: (start: Int, end: Int, escaped: Bool), _ word: StaticString) -> Bool {
        let w = UnsafeRawBufferPointer(start: word.utf8Start, count: word.utf8CodeUnitCount)
        if !s.escaped {
            return s.end - s.start == w.count && memEqual(p + s.start, w)
        }
        unescape(s.start, s.end)
        return scratch.withUnsafeBytes { $0.count == w.count && memEqual($0.baseAddress!, w) }
    }

    private func memEqual(_ a: UnsafeRawPointer, _ b: UnsafeRawBufferPointer) -> Bool {
        for k in 0..<b.count where a.load(fromByteOffset: k, as: UInt8.self) != b[k] { return false }
        return true
    }

    // MARK: Numbers

    /// Validates the number at `i` (which starts with `-` or a digit) and moves past it.
    @inline(__always) public mutating func scanNumber() throws(ReadStop) -> NumberToken {
        var n = NumberToken(start: i, end: i)
        if byte(i) == UInt8(ascii: "-") { n.negative = true; i &+= 1 }
        // Integer part: "0" or a non-zero digit followed by digits.
        guard let first = try numberByte() else {
            throw fail(.invalidJSON, "invalid number: expected a digit after '-'", at: i)
        }
        if first == 0 {
            i &+= 1
            if let d = try numberByte() {
                _ = d
                throw fail(.invalidJSON, "invalid number: leading zeros are not allowed", at: i - 1)
            }
        } else {
            while let d = try numberByte() { n.addDigit(d, fraction: false); i &+= 1 }
        }
        if try peekNumberByte() == UInt8(ascii: ".") {
            n.isInteger = false
            i &+= 1
            guard try numberByte() != nil else {
                throw fail(.invalidJSON, "invalid number: expected a digit after the decimal point", at: i)
            }
            while let d = try numberByte() { n.addDigit(d, fraction: true); i &+= 1 }
        }
        if let c = try peekNumberByte(), c | 0x20 == UInt8(ascii: "e") {
            n.isInteger = false
            i &+= 1
            var negativeExp = false
            if let s = try peekNumberByte(), s == UInt8(ascii: "+") || s == UInt8(ascii: "-") {
                negativeExp = s == UInt8(ascii: "-")
                i &+= 1
            }
            guard try numberByte() != nil else {
                throw fail(.invalidJSON, "invalid number: expected a digit in the exponent", at: i)
            }
            var e = 0
            while let d = try numberByte() {
                if e < 1_000_000 { e = e &* 10 &+ Int(d) }  // beyond this every value is 0 or inf anyway
                i &+= 1
            }
            n.exp10 += negativeExp ? -e : e
        }
        n.end = i
        return n
    }

    /// Validates the number at `i` (which starts with `-` or a digit) and moves past it, as
    /// `scanNumber` does (same checks, same errors) without computing its value.
    @inline(__always) mutating func skipNumber() throws(ReadStop) {
        if byte(i) == UInt8(ascii: "-") { i &+= 1 }
        guard let first = try numberByte() else {
            throw fail(.invalidJSON, "invalid number: expected a digit after '-'", at: i)
        }
        i &+= 1
        if first == 0 {
            if try numberByte() != nil {
                throw fail(.invalidJSON, "invalid number: leading zeros are not allowed", at: i - 1)
            }
        } else {
            while try numberByte() != nil { i &+= 1 }
        }
        if try peekNumberByte() == UInt8(ascii: ".") {
            i &+= 1
            guard try numberByte() != nil else {
                throw fail(.invalidJSON, "invalid number: expected a digit after the decimal point", at: i)
            }
            while try numberByte() != nil { i &+= 1 }
        }
        if let c = try peekNumberByte(), c | 0x20 == UInt8(ascii: "e") {
            i &+= 1
            if let s = try peekNumberByte(), s == UInt8(ascii: "+") || s == UInt8(ascii: "-") { i &+= 1 }
            guard try numberByte() != nil else {
                throw fail(.invalidJSON, "invalid number: expected a digit in the exponent", at: i)
            }
            while try numberByte() != nil { i &+= 1 }
        }
    }

    /// The digit value at `i` (without consuming it), nil if not a digit or at a delimited end.
    @inline(__always) func numberByte() throws(ReadStop) -> UInt8? {
        guard let c = try peekNumberByte() else { return nil }
        let d = c &- UInt8(ascii: "0")
        return d < 10 ? d : nil
    }

    /// The byte at `i`, nil at a delimited end; `.needMore` at an open end (more digits may follow).
    @inline(__always) func peekNumberByte() throws(ReadStop) -> UInt8? {
        if i < end { return byte(i) }
        if endIsDelimiter { return nil }
        throw .needMore
    }

    /// The exact value of `n` as a Double (correctly rounded).
    public func double(_ n: NumberToken) -> Double {
        // Clinger's fast path: both factors are exact doubles, so one IEEE operation rounds correctly.
        if !n.dropped && n.mantissa <= 1 << 53 && n.exp10 >= -22 && n.exp10 <= 22 {
            var v = Double(n.mantissa)
            if n.exp10 < 0 { v /= powersOf10[-n.exp10] } else { v *= powersOf10[n.exp10] }
            return n.negative ? -v : v
        }
        let text = String(decoding: UnsafeRawBufferPointer(start: p + n.start, count: n.end - n.start), as: UTF8.self)
        return Double(text) ?? .nan  // cannot fail: the text is a valid JSON number (strtod syntax)
    }

    /// The value of `n` if it is exactly an integer that fits in Int64.
    func int64(_ n: NumberToken) -> Int64? {
        if n.droppedNonZero { return nil }
        var m = n.mantissa, e = n.exp10
        if m == 0 { return 0 }
        if e < -19 { return nil }  // m < 10^20 cannot be a multiple of 10^20
        while e < 0 {
            if m % 10 != 0 { return nil }
            m /= 10; e += 1
        }
        while e > 0 {
            let (r, overflow) = m.multipliedReportingOverflow(by: 10)
            if overflow { return nil }
            m = r; e -= 1
        }
        if n.negative { return m <= 1 << 63 ? Int64(bitPattern: 0 &- m) : nil }
        return m <= UInt64(Int64.max) ? Int64(m) : nil
    }
}

extension NumberToken {
    @inline(__always) mutating func addDigit(_ d: UInt8, fraction: Bool) {
        if mantissa <= (UInt64.max - 9) / 10 {
            mantissa = mantissa &* 10 &+ UInt64(d)
            if fraction { exp10 -= 1 }
        } else {
            dropped = true
            if d != 0 { droppedNonZero = true }
            if !fraction { exp10 += 1 }
        }
    }
}

private let powersOf10: [Double] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
    1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
]

func hex(_ c: UInt8) -> String {
    let s = String(c, radix: 16, uppercase: true)
    return c < 16 ? "0" + s : s
}

func hex16(_ v: UInt16) -> String {
    let s = String(v, radix: 16, uppercase: true)
    return String(repeating: "0", count: 4 - s.count) + s
}

/// A byte for error messages: `'x'` for printable ASCII, else its hex value.
func describe(_ c: UInt8) -> String {
    c >= 0x20 && c < 0x7F ? "'\(Character(UnicodeScalar(c)))'" : "byte 0x\(hex(c))"
}

/// The JSON type a value starting with `c` has, for messages.
func jsonTypeName(_ c: UInt8) -> String {
    switch c {
    case UInt8(ascii: "\""): return "a string"
    case UInt8(ascii: "{"): return "an object"
    case UInt8(ascii: "["): return "an array"
    case UInt8(ascii: "t"), UInt8(ascii: "f"): return "a boolean"
    case UInt8(ascii: "n"): return "null"
    default: return "a number"
    }
}
