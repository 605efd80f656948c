/// A strict pull parser over one JSON text (RFC 8259, UTF-8 validated): what generated types
/// decode with, field by field, without building a tree first.
///
/// Errors are ``VarlinkParameterError``s; the decoding code adds the field names on the way out.
public struct JSONScanner: Sendable {
    @usableFromInline let bytes: [UInt8]
    @usableFromInline var index: Int
    /// Nesting depth: a hostile message of a million `[` is refused, not a stack overflow.
    @usableFromInline var depth = 0
    public static let maxDepth = 64
    /// What a generated decoder does with an object member its type does not declare.
    public var unknownMembers: UnknownMembers
    /// Large objects decoded so far, for ``repeated(_:at:)``; nil until one is remembered.
    @usableFromInline var repeats: RepeatStores?
    /// Whether generated decoders take a repeated large object as decoded before (the default);
    /// off, every object is decoded (the fuzz target compares the two).
    public var takesRepeats = true

    /// What a generated decoder does with an object member its type does not declare, at any
    /// depth (the mode is the scanner's, so every nested struct follows it).
    public enum UnknownMembers: Sendable, Hashable {
        /// An error naming the member (a call's parameters: the server's InvalidParameter).
        case refuse
        /// Skipped, its whole value checked as JSON and passed over (a reply's: what a newer
        /// server added since this client's interface, as Varlink's evolution rule allows).
        case skip
    }

    public init(_ bytes: [UInt8], unknownMembers: UnknownMembers = .refuse) {
        self.bytes = bytes
        self.index = 0
        self.unknownMembers = unknownMembers
    }

    /// The position of the next byte to read (for keeping a value's raw bytes).
    public var offset: Int { index }

    // MARK: Structure

    @inlinable @inline(__always) mutating func skipSpace() {
        // Replies come without spaces between tokens: the first byte decides, in line.
        guard index < bytes.count, bytes[index] <= 0x20 else { return }
        skipSpaceRun()
    }

    @usableFromInline mutating func skipSpaceRun() {
        while index < bytes.count {
            switch bytes[index] {
            case 0x20, 0x09, 0x0A, 0x0D: index += 1
            default: return
            }
        }
    }

    @usableFromInline func peekByte() -> UInt8? { index < bytes.count ? bytes[index] : nil }

    /// Expects `{`; then call ``nextKey()`` until it returns nil.
    @inlinable public mutating func beginObject() throws(VarlinkParameterError) {
        skipSpace()
        guard peekByte() == UInt8(ascii: "{") else { throw wrongType("an object") }
        try enter()
        index += 1
    }

    /// A member's name as ``nextMember()`` found it: its ``keyHash(_:)``, and where it lies in the
    /// input when it is plain printable ASCII (then ``member(_:is:)`` compares the bytes and no
    /// `String` is made); any other name comes decoded, as ``nextKey()`` gives it.
    public struct MemberName: Sendable {
        public let hash: UInt64
        @usableFromInline let start: Int
        @usableFromInline let end: Int
        @usableFromInline let decoded: String?

        @usableFromInline init(hash: UInt64, start: Int, end: Int, decoded: String?) {
            self.hash = hash
            self.start = start
            self.end = end
            self.decoded = decoded
        }
    }

    /// The next member's name, hashed, positioned at its value; nil after the closing `}`. What
    /// generated decoders read objects with: the same checks as ``nextKey()``, without a `String`
    /// for a name that is plain ASCII, as every declared field's is.
    @inlinable public mutating func nextMember() throws(VarlinkParameterError) -> MemberName? {
        // Structure and separators, with their errors, exactly as nextKey checks them.
        skipSpace()
        guard let byte = peekByte() else { throw malformed("an object does not end") }
        if byte == UInt8(ascii: "}") {
            index += 1
            depth -= 1
            return nil
        }
        if byte == UInt8(ascii: ",") {
            guard index > 0, !isAfterOpening(UInt8(ascii: "{")) else { throw malformed("unexpected \",\"") }
            index += 1
            skipSpace()
        } else if !isAfterOpening(UInt8(ascii: "{")) {
            throw malformed("expected \",\" or \"}\" in an object")
        }
        guard peekByte() == UInt8(ascii: "\"") else { throw malformed("expected a member name") }
        // At the name's opening quote. Plain printable ASCII up to the closing quote: hashed as
        // it is scanned.
        let quote = index
        let start = quote + 1
        var hash = Self.fnvBasis
        let end = bytes.withUnsafeBufferPointer { buffer -> Int in
            var i = start
            while i < buffer.count {
                let byte = buffer[i]
                if byte == UInt8(ascii: "\"") { return i }
                if byte < 0x20 || byte >= 0x80 || byte == UInt8(ascii: "\\") { return -1 }
                hash = Self.fnv(hash, byte)
                i += 1
            }
            return -1
        }
        let name: MemberName
        if end >= 0 {
            index = end + 1
            name = MemberName(hash: hash, start: start, end: end, decoded: nil)
        } else {
            index = quote
            let key = try readString()
            name = MemberName(hash: Self.keyHash(key), start: 0, end: 0, decoded: key)
        }
        skipSpace()
        guard peekByte() == UInt8(ascii: ":") else {
            throw malformed("expected \":\" after \"\(self.name(name))\"")
        }
        index += 1
        return name
    }

    /// For generated decoders: when the next member is named `name` (a declared field's plain
    /// ASCII name), written as every encoder of ours writes it (`,"name":`, or `"name":` first,
    /// without spaces), moves past it and returns true, positioned at its value. Otherwise
    /// changes nothing and returns false: ``nextMember()`` then reads whatever comes, with its
    /// checks and errors. Decoders try the field after the last one they read, then a few after
    /// it (optionals left out), before they hash: members come in declaration order, so most
    /// are found here.
    @inlinable public mutating func takeMember(_ name: StaticString) -> Bool {
        let start = index
        let found = name.withUTF8Buffer { name -> Int in
            bytes.withUnsafeBufferPointer { b -> Int in
                var i = start
                guard i > 0, i < b.count else { return -1 }
                let previous = b[i - 1]
                if b[i] == UInt8(ascii: ",") {
                    // A separator after a value, as nextMember requires (not after the opening
                    // brace, nor after a space that might follow it).
                    guard previous > 0x20, previous != UInt8(ascii: "{") else { return -1 }
                    i += 1
                } else {
                    // The first member: right after the opening brace.
                    guard previous == UInt8(ascii: "{") else { return -1 }
                }
                let count = name.count
                guard i + count + 3 <= b.count, b[i] == UInt8(ascii: "\""), b[i + count + 1] == UInt8(ascii: "\""),
                    b[i + count + 2] == UInt8(ascii: ":")
                else { return -1 }
                for k in 0..<count where b[i + 1 + k] != name[k] { return -1 }
                return i + count + 3
            }
        }
        guard found >= 0 else { return false }
        index = found
        return true
    }

    /// Whether `member` is `expected` (an ASCII field name).
    @inlinable public func member(_ member: MemberName, is expected: StaticString) -> Bool {
        if let decoded = member.decoded { return decoded == expected.description }
        let count = member.end - member.start
        return expected.withUTF8Buffer { name in
            guard name.count == count else { return false }
            return bytes.withUnsafeBufferPointer { buffer in
                for i in 0..<count where buffer[member.start + i] != name[i] { return false }
                return true
            }
        }
    }

    /// For generated decoders, at a member `member` their type does not declare (positioned at
    /// its value): skips the value when ``unknownMembers`` is ``UnknownMembers/skip``, else
    /// throws the error naming it. Out of line: it costs nothing while every member is known.
    public mutating func unknownMember(_ member: MemberName) throws(VarlinkParameterError) {
        guard unknownMembers == .skip else { throw VarlinkParameterError(path: [name(member)], .unknownField) }
        _ = try skipValue()
    }

    /// ``unknownMember(_:)`` for a decoder that reads names with ``nextKey()``.
    public mutating func unknownMember(_ key: String) throws(VarlinkParameterError) {
        guard unknownMembers == .skip else { throw VarlinkParameterError(path: [key], .unknownField) }
        _ = try skipValue()
    }

    /// `member`'s text (for an error naming it).
    @inlinable public func name(_ member: MemberName) -> String {
        member.decoded ?? String(decoding: bytes[member.start..<member.end], as: UTF8.self)
    }

    /// The next member's name, positioned at its value; nil after the closing `}`.
    @inlinable public mutating func nextKey() throws(VarlinkParameterError) -> String? {
        skipSpace()
        guard let byte = peekByte() else { throw malformed("an object does not end") }
        if byte == UInt8(ascii: "}") {
            index += 1
            depth -= 1
            return nil
        }
        if byte == UInt8(ascii: ",") {
            guard index > 0, !isAfterOpening(UInt8(ascii: "{")) else { throw malformed("unexpected \",\"") }
            index += 1
            skipSpace()
        } else if !isAfterOpening(UInt8(ascii: "{")) {
            throw malformed("expected \",\" or \"}\" in an object")
        }
        guard peekByte() == UInt8(ascii: "\"") else { throw malformed("expected a member name") }
        let key = try readString()
        skipSpace()
        guard peekByte() == UInt8(ascii: ":") else { throw malformed("expected \":\" after \"\(key)\"") }
        index += 1
        return key
    }

    /// Expects `[`; then call ``nextElement()`` before each element until it returns false.
    @inlinable public mutating func beginArray() throws(VarlinkParameterError) {
        skipSpace()
        guard peekByte() == UInt8(ascii: "[") else { throw wrongType("an array") }
        try enter()
        index += 1
    }

    @inlinable public mutating func nextElement() throws(VarlinkParameterError) -> Bool {
        skipSpace()
        guard let byte = peekByte() else { throw malformed("an array does not end") }
        if byte == UInt8(ascii: "]") {
            index += 1
            depth -= 1
            return false
        }
        if byte == UInt8(ascii: ",") {
            guard !isAfterOpening(UInt8(ascii: "[")) else { throw malformed("unexpected \",\"") }
            index += 1
            skipSpace()
            guard peekByte() != UInt8(ascii: "]") else { throw malformed("a trailing \",\"") }
        } else if !isAfterOpening(UInt8(ascii: "[")) {
            throw malformed("expected \",\" or \"]\" in an array")
        }
        return true
    }

    /// Whether the last non-space byte before the cursor is `opening` (the first member).
    @usableFromInline func isAfterOpening(_ opening: UInt8) -> Bool {
        var i = index - 1
        while i >= 0 {
            switch bytes[i] {
            case 0x20, 0x09, 0x0A, 0x0D: i -= 1
            default: return bytes[i] == opening
            }
        }
        return false
    }

    @usableFromInline mutating func enter() throws(VarlinkParameterError) {
        depth += 1
        guard depth <= Self.maxDepth else { throw malformed("nested more than \(Self.maxDepth) levels deep") }
    }

    /// Checks that only white space follows the value.
    public mutating func finish() throws(VarlinkParameterError) {
        skipSpace()
        guard index == bytes.count else { throw malformed("bytes after the end of the value") }
    }

    // MARK: Scalars

    /// Consumes `null` if it comes next.
    @inlinable public mutating func readNull() throws(VarlinkParameterError) -> Bool {
        skipSpace()
        guard peekByte() == UInt8(ascii: "n") else { return false }
        try literal("null")
        return true
    }

    public mutating func readBool() throws(VarlinkParameterError) -> Bool {
        skipSpace()
        switch peekByte() {
        case UInt8(ascii: "t"):
            try literal("true")
            return true
        case UInt8(ascii: "f"):
            try literal("false")
            return false
        default: throw wrongType("a boolean")
        }
    }

    @usableFromInline mutating func literal(_ word: StaticString) throws(VarlinkParameterError) {
        let count = word.utf8CodeUnitCount
        guard index + count <= bytes.count,
            word.withUTF8Buffer({ w in (0..<count).allSatisfy { bytes[index + $0] == w[$0] } })
        else { throw malformed("invalid literal") }
        index += count
    }

    /// A JSON integer: no fraction and no exponent (1.0 is not an int), within 64 bits.
    public mutating func readInt() throws(VarlinkParameterError) -> Int {
        skipSpace()
        let (start, isInteger) = try scanNumber(expected: "an integer")
        guard isInteger else { throw wrongType("an integer") }
        var value = 0
        var i = start
        let negative = bytes[i] == UInt8(ascii: "-")
        if negative { i += 1 }
        while i < index {
            let digit = Int(bytes[i] &- UInt8(ascii: "0"))
            let (times10, o1) = value.multipliedReportingOverflow(by: 10)
            let (next, o2) = negative ? times10.subtractingReportingOverflow(digit) : times10.addingReportingOverflow(digit)
            guard !o1, !o2 else { throw wrongType("an integer within 64 bits") }
            value = next
            i += 1
        }
        return value
    }

    /// Any JSON number.
    public mutating func readDouble() throws(VarlinkParameterError) -> Double {
        skipSpace()
        let (start, _) = try scanNumber(expected: "a number")
        if let value = Self.exactDouble(bytes, start, index) { return value }
        let text = String(decoding: bytes[start..<index], as: UTF8.self)
        guard let value = Double(text), value.isFinite else { throw wrongType("a finite number") }
        return value
    }

    /// The value of the number `bytes[start..<end]` (checked by ``scanNumber(expected:)``) when
    /// it is the common kind that needs no `strtod`: at most 19 significant digits making an
    /// integer m ≤ 2^53, times a power of ten 10^e with |e| ≤ 22. Both are exact as Doubles, so one
    /// multiplication or division, correctly rounded, is the correctly rounded value (Clinger's
    /// fast path): the same Double as `Double(String)` gives. Nil for anything else.
    @usableFromInline static func exactDouble(_ bytes: [UInt8], _ start: Int, _ end: Int) -> Double? {
        bytes.withUnsafeBufferPointer { b -> Double? in
            var i = start
            let negative = b[i] == UInt8(ascii: "-")
            if negative { i += 1 }
            var mantissa: UInt64 = 0
            // Significant digits: from the first that is not 0. At most 19 of them fit in 64
            // bits; the 20th gives up before it could wrap.
            var digits = 0
            var exponent = 0
            while i < end, b[i] &- UInt8(ascii: "0") < 10 {
                if digits > 0 || b[i] != UInt8(ascii: "0") { digits += 1 }
                guard digits <= 19 else { return nil }
                mantissa = mantissa * 10 + UInt64(b[i] &- UInt8(ascii: "0"))
                i += 1
            }
            if i < end, b[i] == UInt8(ascii: ".") {
                i += 1
                while i < end, b[i] &- UInt8(ascii: "0") < 10 {
                    if digits > 0 || b[i] != UInt8(ascii: "0") { digits += 1 }
                    guard digits <= 19 else { return nil }
                    mantissa = mantissa * 10 + UInt64(b[i] &- UInt8(ascii: "0"))
                    exponent -= 1
                    i += 1
                }
            }
            guard mantissa <= 1 << 53 else { return nil }
            if i < end {  // e or E
                i += 1
                var negativeExponent = false
                if b[i] == UInt8(ascii: "+") || b[i] == UInt8(ascii: "-") {
                    negativeExponent = b[i] == UInt8(ascii: "-")
                    i += 1
                }
                var e = 0
                while i < end {
                    e = e * 10 + Int(b[i] &- UInt8(ascii: "0"))
                    guard e < 1000 else { return nil }
                    i += 1
                }
                exponent += negativeExponent ? -e : e
            }
            guard exponent >= -22, exponent <= 22 else { return nil }
            var value = Double(mantissa)
            if exponent < 0 {
                value /= powersOfTen[-exponent]
            } else {
                value *= powersOfTen[exponent]
            }
            return negative ? -value : value
        }
    }

    @usableFromInline static let powersOfTen: [Double] = [
        1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18,
        1e19, 1e20, 1e21, 1e22,
    ]

    /// Checks the number grammar and moves past it; returns where it starts and whether it is an integer.
    @usableFromInline mutating func scanNumber(expected: String) throws(VarlinkParameterError) -> (Int, Bool) {
        let start = index
        var i = index
        func digits() -> Int {
            let from = i
            while i < bytes.count, bytes[i] >= UInt8(ascii: "0"), bytes[i] <= UInt8(ascii: "9") { i += 1 }
            return i - from
        }
        if i < bytes.count, bytes[i] == UInt8(ascii: "-") { i += 1 }
        guard i < bytes.count, bytes[i] >= UInt8(ascii: "0"), bytes[i] <= UInt8(ascii: "9") else {
            throw wrongType(expected)
        }
        if bytes[i] == UInt8(ascii: "0") {
            i += 1
            if i < bytes.count, bytes[i] >= UInt8(ascii: "0"), bytes[i] <= UInt8(ascii: "9") {
                throw malformed("a number with a leading zero")
            }
        } else {
            _ = digits()
        }
        var isInteger = true
        if i < bytes.count, bytes[i] == UInt8(ascii: ".") {
            i += 1
            isInteger = false
            guard digits() > 0 else { throw malformed("a number without digits after \".\"") }
        }
        if i < bytes.count, bytes[i] == UInt8(ascii: "e") || bytes[i] == UInt8(ascii: "E") {
            i += 1
            isInteger = false
            if i < bytes.count, bytes[i] == UInt8(ascii: "+") || bytes[i] == UInt8(ascii: "-") { i += 1 }
            guard digits() > 0 else { throw malformed("a number without digits in its exponent") }
        }
        index = i
        return (start, isInteger)
    }

    /// A JSON string, unescaped; invalid UTF-8, unescaped control characters and lone surrogates
    /// are errors.
    public mutating func readString() throws(VarlinkParameterError) -> String {
        skipSpace()
        guard peekByte() == UInt8(ascii: "\"") else { throw wrongType("a string") }
        index += 1
        let start = index
        // Fast path: no escapes. One pass over the raw buffer finds the closing quote, a
        // backslash or a control character; the text is then checked and made in one go.
        let stop = bytes.withUnsafeBufferPointer { buffer -> Int in
            var i = start
            while i < buffer.count {
                let byte = buffer[i]
                if byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") || byte < 0x20 { return i }
                i += 1
            }
            return i
        }
        index = stop
        if index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "\"") {
                let end = index
                index += 1
                guard let text = bytes.withUnsafeBufferPointer({ Self.string(UnsafeBufferPointer(rebasing: $0[start..<end])) })
                else { throw malformed("a string that is not valid UTF-8") }
                return text
            }
            if byte < 0x20 { throw malformed("a control character in a string") }
        }
        var text = Array(bytes[start..<index])
        while index < bytes.count {
            let byte = bytes[index]
            index += 1
            switch byte {
            case UInt8(ascii: "\""):
                guard let result = text.withUnsafeBufferPointer(Self.string) else {
                    throw malformed("a string that is not valid UTF-8")
                }
                return result
            case UInt8(ascii: "\\"):
                guard index < bytes.count else { break }
                let escape = bytes[index]
                index += 1
                switch escape {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): text.append(escape)
                case UInt8(ascii: "b"): text.append(0x08)
                case UInt8(ascii: "f"): text.append(0x0C)
                case UInt8(ascii: "n"): text.append(0x0A)
                case UInt8(ascii: "r"): text.append(0x0D)
                case UInt8(ascii: "t"): text.append(0x09)
                case UInt8(ascii: "u"):
                    let scalar = try unicodeEscape()
                    text.append(contentsOf: String(Character(Unicode.Scalar(scalar)!)).utf8)
                default: throw malformed("an invalid escape in a string")
                }
            default:
                guard byte >= 0x20 else { throw malformed("a control character in a string") }
                text.append(byte)
            }
        }
        throw malformed("a string does not end")
    }

    /// The text of `utf8`, or nil when it is not valid UTF-8 (RFC 3629: no overlong forms, no
    /// surrogates, nothing above U+10FFFF). Checked here rather than with the standard library's
    /// generic `String(validating:as:)`, whose unspecialized path costs more than the JSON around it.
    static func string(_ utf8: UnsafeBufferPointer<UInt8>) -> String? {
        guard isValidUTF8(utf8) else { return nil }
        return String(decoding: utf8, as: UTF8.self)
    }

    static func isValidUTF8(_ b: UnsafeBufferPointer<UInt8>) -> Bool {
        var i = 0
        let n = b.count
        while i < n {
            let c = b[i]
            if c < 0x80 {
                i += 1
                continue
            }
            func cont(_ k: Int) -> Bool { i + k < n && b[i + k] & 0xC0 == 0x80 }
            switch c {
            case 0xC2...0xDF:
                guard cont(1) else { return false }
                i += 2
            case 0xE0...0xEF:
                guard cont(1), cont(2) else { return false }
                let c1 = b[i + 1]
                if c == 0xE0 && c1 < 0xA0 { return false }  // overlong
                if c == 0xED && c1 >= 0xA0 { return false }  // a surrogate
                i += 3
            case 0xF0...0xF4:
                guard cont(1), cont(2), cont(3) else { return false }
                let c1 = b[i + 1]
                if c == 0xF0 && c1 < 0x90 { return false }  // overlong
                if c == 0xF4 && c1 >= 0x90 { return false }  // above U+10FFFF
                i += 4
            default:
                return false
            }
        }
        return true
    }

    /// After `\u`: the escaped scalar, reading the low half of a surrogate pair too (`\uD83D\uDE00`);
    /// a lone surrogate is refused.
    private mutating func unicodeEscape() throws(VarlinkParameterError) -> UInt32 {
        let scalar = try hex4()
        if (0xD800..<0xDC00).contains(scalar) {
            guard index + 1 < bytes.count, bytes[index] == UInt8(ascii: "\\"), bytes[index + 1] == UInt8(ascii: "u")
            else { throw malformed("a lone surrogate in a string") }
            index += 2
            let low = try hex4()
            guard (0xDC00..<0xE000).contains(low) else { throw malformed("a lone surrogate in a string") }
            return 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
        }
        if (0xDC00..<0xE000).contains(scalar) { throw malformed("a lone surrogate in a string") }
        return scalar
    }

    private mutating func hex4() throws(VarlinkParameterError) -> UInt32 {
        guard index + 4 <= bytes.count else { throw malformed("a short \\u escape") }
        var value: UInt32 = 0
        for _ in 0..<4 {
            let b = bytes[index]
            let digit: UInt32
            switch b {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = UInt32(b - UInt8(ascii: "0"))
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = UInt32(b - UInt8(ascii: "a") + 10)
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = UInt32(b - UInt8(ascii: "A") + 10)
            default: throw malformed("an invalid \\u escape")
            }
            value = value << 4 | digit
            index += 1
        }
        return value
    }

    /// Moves past one value of any type, checking it; returns its byte range.
    public mutating func skipValue() throws(VarlinkParameterError) -> Range<Int> {
        skipSpace()
        let start = index
        switch peekByte() {
        case UInt8(ascii: "{"):
            try beginObject()
            // Names as nextMember reads them: checked as nextKey checks them, no String made.
            while try nextMember() != nil { _ = try skipValue() }
        case UInt8(ascii: "["):
            try beginArray()
            while try nextElement() { _ = try skipValue() }
        case UInt8(ascii: "\""): try skipString()
        case UInt8(ascii: "t"), UInt8(ascii: "f"): _ = try readBool()
        case UInt8(ascii: "n"): _ = try readNull()
        case nil: throw malformed("a value is missing")
        default: _ = try scanNumber(expected: "a value")
        }
        return start..<index
    }

    /// Moves past a string, checking it exactly as ``readString()`` does (escapes, surrogate
    /// pairs, control characters, UTF-8), without making it.
    mutating func skipString() throws(VarlinkParameterError) {
        skipSpace()
        guard peekByte() == UInt8(ascii: "\"") else { throw wrongType("a string") }
        index += 1
        let start = index
        while index < bytes.count {
            let byte = bytes[index]
            switch byte {
            case UInt8(ascii: "\""):
                // Escapes are ASCII, so the raw bytes are valid UTF-8 exactly when the text is.
                let valid = bytes.withUnsafeBufferPointer {
                    Self.isValidUTF8(UnsafeBufferPointer(rebasing: $0[start..<index]))
                }
                guard valid else { throw malformed("a string that is not valid UTF-8") }
                index += 1
                return
            case UInt8(ascii: "\\"):
                index += 1
                guard index < bytes.count else { break }
                let escape = bytes[index]
                index += 1
                switch escape {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"), UInt8(ascii: "b"), UInt8(ascii: "f"),
                    UInt8(ascii: "n"), UInt8(ascii: "r"), UInt8(ascii: "t"):
                    break
                case UInt8(ascii: "u"):
                    _ = try unicodeEscape()
                default: throw malformed("an invalid escape in a string")
                }
            default:
                guard byte >= 0x20 else { throw malformed("a control character in a string") }
                index += 1
            }
        }
        throw malformed("a string does not end")
    }

    /// The bytes of a range returned by ``skipValue()``.
    public func slice(_ range: Range<Int>) -> ArraySlice<UInt8> { bytes[range] }

    // MARK: Errors

    @usableFromInline func wrongType(_ expected: String) -> VarlinkParameterError {
        if index >= bytes.count { return VarlinkParameterError(.malformed("a value is missing")) }
        return VarlinkParameterError(.wrongType(expected: expected))
    }

    @usableFromInline func malformed(_ detail: String) -> VarlinkParameterError {
        VarlinkParameterError(.malformed("\(detail) (byte \(index))"))
    }
}

extension JSONScanner {
    /// FNV-1a (64 bits) of a member name's UTF-8: generated decoders switch on it (the generator
    /// computes the same for each field) instead of comparing the name with every field's.
    @inlinable public static func keyHash(_ key: String) -> UInt64 {
        var hash = fnvBasis
        for byte in key.utf8 { hash = fnv(hash, byte) }
        return hash
    }

    /// FNV-1a's offset basis and its step for one byte: the hash of member names (``keyHash(_:)``,
    /// and `nextMember` as it scans a name) and of a repeat's first bytes (`repeatKey`).
    @inlinable static var fnvBasis: UInt64 { 0xcbf2_9ce4_8422_2325 }
    @inlinable static func fnv(_ hash: UInt64, _ byte: UInt8) -> UInt64 { (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }

    /// For generated decoders: a declared field, read once (a second occurrence is an error),
    /// with the field's name added to any error from its value.
    @inlinable public mutating func field<T: VarlinkValue>(
        _ name: String, seen: inout UInt64, bit: UInt64
    ) throws(VarlinkParameterError) -> T {
        guard seen & bit == 0 else { throw VarlinkParameterError(path: [name], .duplicate) }
        seen |= bit
        do {
            return try T(json: &self)
        } catch {
            throw error.inField(name)
        }
    }
}
