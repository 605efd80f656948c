import FuzzSupport
import Varlink

/// A parsed JSON value, comparable across the two parsers (numbers as their text; objects keep
/// order and duplicates).
public indirect enum Node: Equatable, CustomStringConvertible {
    case null
    case bool(Bool)
    case number(String)
    case string([UInt8])
    case array([Node])
    case object([Member])
    case invalid

    public struct Member: Equatable {
        public var key: [UInt8]
        public var value: Node

        public init(key: [UInt8], value: Node) {
            self.key = key
            self.value = value
        }
    }

    public var description: String {
        switch self {
        case .null: "null"
        case .bool(let b): "\(b)"
        case .number(let n): n
        case .string(let s): "\"\(show(s))\""
        case .array(let a): "[" + a.map(\.description).joined(separator: ",") + "]"
        case .object(let o): "{" + o.map { "\"\(show($0.key))\":\($0.value)" }.joined(separator: ",") + "}"
        case .invalid: "invalid"
        }
    }
}

/// `input` parsed by Varlink's JSONScanner (`.invalid` if it is not one JSON text), checking on
/// the way `nextMember`'s hashes and `readInt` and `readDouble` against exact references.
public func scannerNode(_ input: [UInt8]) -> Node {
    var s = JSONScanner(input)
    do {
        let node = try scan(&s, input)
        try s.finish()
        return node
    } catch {
        return .invalid
    }
}

func scan(_ s: inout JSONScanner, _ input: [UInt8]) throws(VarlinkParameterError) -> Node {
    var k = s.offset
    while k < input.count, [0x20, 0x09, 0x0A, 0x0D].contains(input[k]) { k += 1 }
    switch k < input.count ? input[k] : 0 {
    case UInt8(ascii: "{"):
        try s.beginObject()
        var members: [Node.Member] = []
        while let member = try s.nextMember() {
            let key = s.name(member)
            check(member.hash == JSONScanner.keyHash(key), "nextMember: the hash of \"\(key)\" is not keyHash")
            members.append(.init(key: Array(key.utf8), value: try scan(&s, input)))
        }
        return .object(members)
    case UInt8(ascii: "["):
        try s.beginArray()
        var elements: [Node] = []
        while try s.nextElement() { elements.append(try scan(&s, input)) }
        return .array(elements)
    case UInt8(ascii: "\""):
        return .string(Array(try s.readString().utf8))
    case UInt8(ascii: "t"), UInt8(ascii: "f"):
        return .bool(try s.readBool())
    case UInt8(ascii: "n"):
        check(try s.readNull(), "readNull at 'n'")
        return .null
    default:
        var asInt = s
        var asDouble = s
        let range = try s.skipValue()
        let text = String(decoding: input[range], as: UTF8.self)
        // readInt and readDouble: exact, and only what they should take.
        let int = try? asInt.readInt()
        let isInteger = !text.contains { $0 == "." || $0 == "e" || $0 == "E" }
        check(int.map(Int64.init) == (isInteger ? Int64(text) : nil), "readInt(\(text)) is \(String(describing: int))")
        let double = try? asDouble.readDouble()
        let expected = Double(text).flatMap { $0.isFinite ? $0 : nil }
        check(double?.bitPattern == expected?.bitPattern, "readDouble(\(text)) is \(String(describing: double))")
        return .number(text)
    }
}

/// The value of a JSON number's text if it is exactly an integer within Int64, computed the slow
/// way: decimal digits and an exponent, trailing zeros moved into the exponent.
public func exactInt64(_ text: String) -> Int64? {
    var utf8 = Substring(text).utf8[...]
    let negative = utf8.first == UInt8(ascii: "-")
    if negative { utf8 = utf8.dropFirst() }
    var digits: [UInt8] = []
    var exponent = 0
    var inFraction = false
    while let c = utf8.first, c != UInt8(ascii: "e"), c != UInt8(ascii: "E") {
        utf8 = utf8.dropFirst()
        if c == UInt8(ascii: ".") {
            inFraction = true
            continue
        }
        digits.append(c - UInt8(ascii: "0"))
        if inFraction { exponent -= 1 }
    }
    if !utf8.isEmpty {
        utf8 = utf8.dropFirst()
        var sign = 1
        if utf8.first == UInt8(ascii: "+") || utf8.first == UInt8(ascii: "-") {
            if utf8.first == UInt8(ascii: "-") { sign = -1 }
            utf8 = utf8.dropFirst()
        }
        var e = 0
        for c in utf8 where e < 100_000_000 { e = e * 10 + Int(c - UInt8(ascii: "0")) }
        exponent += sign * e
    }
    while digits.first == 0 { digits.removeFirst() }
    if digits.isEmpty { return 0 }
    while digits.last == 0 {
        digits.removeLast()
        exponent += 1
    }
    if exponent < 0 || digits.count + exponent > 19 { return nil }
    var magnitude: UInt64 = 0
    for d in digits { magnitude = magnitude * 10 + UInt64(d) }
    for _ in 0..<exponent { magnitude *= 10 }
    if negative { return magnitude <= 1 << 63 ? Int64(bitPattern: 0 &- magnitude) : nil }
    return magnitude <= UInt64(Int64.max) ? Int64(magnitude) : nil
}

