/// Byte-level edits of one feature's JSON that keep every other byte as it was.
///
/// Not a validating parser: it walks JSON the ``FeedParser`` has already accepted. Keys are compared
/// byte for byte as written (USGS keys have no escapes).
enum FeatureEditor {
    /// `bytes` without leading and trailing whitespace.
    static func trimmed(_ bytes: [UInt8]) -> [UInt8] {
        var start = 0
        var end = bytes.count
        while start < end, isSpace(bytes[start]) { start += 1 }
        while end > start, isSpace(bytes[end - 1]) { end -= 1 }
        return start == 0 && end == bytes.count ? bytes : Array(bytes[start..<end])
    }

    /// The feature with `properties[key]` set to each value (raw JSON), missing keys appended.
    static func settingProperties(_ values: [String: [UInt8]], in bytes: [UInt8]) -> [UInt8]? {
        guard let root = members(bytes, objectAt: firstNonSpace(bytes, from: 0)),
            let properties = root.members.first(where: { key(bytes, $0.key) == "properties" }),
            bytes[properties.value.lowerBound] == UInt8(ascii: "{"),
            let inner = members(bytes, objectAt: properties.value.lowerBound)
        else { return nil }
        var edits: [(range: Range<Int>, replacement: [UInt8])] = []
        var missing = values
        for member in inner.members {
            guard let name = key(bytes, member.key), let value = values[name] else { continue }
            missing[name] = nil
            edits.append((member.value, value))
        }
        if !missing.isEmpty {
            var addition: [UInt8] = []
            for (name, value) in missing.sorted(by: { $0.key < $1.key }) {
                if !inner.members.isEmpty || !addition.isEmpty { addition.append(UInt8(ascii: ",")) }
                addition.append(contentsOf: FDSNTestService.jsonString(name).utf8)
                addition.append(UInt8(ascii: ":"))
                addition.append(contentsOf: value)
            }
            edits.append((inner.close..<inner.close, addition))
        }
        return apply(edits, to: bytes)
    }

    /// The feature with its top-level member `name` replaced by `value` (raw JSON), or appended.
    static func replacingMember(_ name: String, with value: [UInt8], in bytes: [UInt8]) -> [UInt8]? {
        guard let root = members(bytes, objectAt: firstNonSpace(bytes, from: 0)) else { return nil }
        if let member = root.members.first(where: { key(bytes, $0.key) == name }) {
            return apply([(member.value, value)], to: bytes)
        }
        var addition: [UInt8] = root.members.isEmpty ? [] : [UInt8(ascii: ",")]
        addition.append(contentsOf: FDSNTestService.jsonString(name).utf8)
        addition.append(UInt8(ascii: ":"))
        addition.append(contentsOf: value)
        return apply([(root.close..<root.close, addition)], to: bytes)
    }

    private static func apply(_ edits: [(range: Range<Int>, replacement: [UInt8])], to bytes: [UInt8]) -> [UInt8] {
        var result = bytes
        for edit in edits.sorted(by: { $0.range.lowerBound > $1.range.lowerBound }) {
            result.replaceSubrange(edit.range, with: edit.replacement)
        }
        return result
    }

    private static func key(_ bytes: [UInt8], _ range: Range<Int>) -> String? {
        String(decoding: bytes[range], as: UTF8.self)
    }

    private static func isSpace(_ c: UInt8) -> Bool {
        c == UInt8(ascii: " ") || c == UInt8(ascii: "\n") || c == UInt8(ascii: "\r") || c == UInt8(ascii: "\t")
    }

    private static func firstNonSpace(_ bytes: [UInt8], from start: Int) -> Int {
        var i = start
        while i < bytes.count, isSpace(bytes[i]) { i += 1 }
        return i
    }

    /// The members of the object whose `{` is at `start`: each key's bytes (inside the quotes) and
    /// value's range, and the position of the closing `}`.
    private static func members(
        _ bytes: [UInt8], objectAt start: Int
    ) -> (members: [(key: Range<Int>, value: Range<Int>)], close: Int)? {
        guard start < bytes.count, bytes[start] == UInt8(ascii: "{") else { return nil }
        var result: [(key: Range<Int>, value: Range<Int>)] = []
        var i = firstNonSpace(bytes, from: start + 1)
        if i < bytes.count, bytes[i] == UInt8(ascii: "}") { return (result, i) }
        while i < bytes.count {
            guard bytes[i] == UInt8(ascii: "\""), let keyEnd = skipValue(bytes, from: i) else { return nil }
            let keyRange = (i + 1)..<(keyEnd - 1)
            i = firstNonSpace(bytes, from: keyEnd)
            guard i < bytes.count, bytes[i] == UInt8(ascii: ":") else { return nil }
            let valueStart = firstNonSpace(bytes, from: i + 1)
            guard let valueEnd = skipValue(bytes, from: valueStart) else { return nil }
            result.append((keyRange, valueStart..<valueEnd))
            i = firstNonSpace(bytes, from: valueEnd)
            guard i < bytes.count else { return nil }
            if bytes[i] == UInt8(ascii: "}") { return (result, i) }
            guard bytes[i] == UInt8(ascii: ",") else { return nil }
            i = firstNonSpace(bytes, from: i + 1)
        }
        return nil
    }

    /// The position just after the value starting at `start`.
    private static func skipValue(_ bytes: [UInt8], from start: Int) -> Int? {
        guard start < bytes.count else { return nil }
        var i = start
        switch bytes[i] {
        case UInt8(ascii: "\""):
            i += 1
            while i < bytes.count {
                switch bytes[i] {
                case UInt8(ascii: "\\"): i += 2
                case UInt8(ascii: "\""): return i + 1
                default: i += 1
                }
            }
            return nil
        case UInt8(ascii: "{"), UInt8(ascii: "["):
            var depth = 0
            while i < bytes.count {
                switch bytes[i] {
                case UInt8(ascii: "\""):
                    guard let end = skipValue(bytes, from: i) else { return nil }
                    i = end
                    continue
                case UInt8(ascii: "{"), UInt8(ascii: "["): depth += 1
                case UInt8(ascii: "}"), UInt8(ascii: "]"):
                    depth -= 1
                    if depth == 0 { return i + 1 }
                default: break
                }
                i += 1
            }
            return nil
        default:
            while i < bytes.count {
                switch bytes[i] {
                case UInt8(ascii: ","), UInt8(ascii: "}"), UInt8(ascii: "]"), UInt8(ascii: " "), UInt8(ascii: "\n"),
                    UInt8(ascii: "\r"), UInt8(ascii: "\t"):
                    return i
                default: i += 1
                }
            }
            return i
        }
    }
}
