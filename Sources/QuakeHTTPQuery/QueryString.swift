/// A query string (after `?`) read as HTML forms and the FDSN services write it: `&`-separated
/// `name=value` pairs, percent-encoded, `+` a space. QuakeHTTP's ``HTTPRequest`` reads its
/// target's with it.
public enum QueryString {
    /// The `name=value` pairs in order, names and values percent-decoded (`+` is a space); nil
    /// when an escape is malformed.
    public static func items(_ rawQuery: String) -> [(name: String, value: String)]? {
        var items: [(String, String)] = []
        for pair in rawQuery.split(separator: "&", omittingEmptySubsequences: true) {
            let halves = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard let name = percentDecoded(String(halves[0]), plusIsSpace: true),
                let value = percentDecoded(halves.count == 2 ? String(halves[1]) : "", plusIsSpace: true)
            else { return nil }
            items.append((name, value))
        }
        return items
    }

    /// `text` with its `%XX` escapes (and, with `plusIsSpace`, its `+`) decoded; nil when an
    /// escape is malformed or the bytes are not UTF-8.
    public static func percentDecoded(_ text: String, plusIsSpace: Bool) -> String? {
        guard text.utf8.contains(where: { $0 == UInt8(ascii: "%") || (plusIsSpace && $0 == UInt8(ascii: "+")) }) else {
            return text
        }
        var bytes: [UInt8] = []
        var iterator = Array(text.utf8).makeIterator()
        func hex(_ c: UInt8?) -> UInt8? {
            switch c {
            case let c? where c >= 0x30 && c <= 0x39: c - 0x30
            case let c? where c >= 0x41 && c <= 0x46: c - 0x41 + 10
            case let c? where c >= 0x61 && c <= 0x66: c - 0x61 + 10
            default: nil
            }
        }
        while let c = iterator.next() {
            if c == UInt8(ascii: "%") {
                guard let high = hex(iterator.next()), let low = hex(iterator.next()) else { return nil }
                bytes.append(high << 4 | low)
            } else if plusIsSpace && c == UInt8(ascii: "+") {
                bytes.append(0x20)
            } else {
                bytes.append(c)
            }
        }
        return String(validating: bytes, as: UTF8.self)
    }
}

/// A parameter the request cannot be answered with: ``message`` says which and what it takes.
public struct ParameterError: Error {
    public var message: String
    public init(_ message: String) { self.message = message }
}
