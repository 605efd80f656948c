// Fuzzes QuakeFeed's JSONReader (the feed's strict tokenizer) over arbitrary bytes, against
// Varlink's JSONScanner: two strict RFC 8259 parsers written independently must agree on every
// input, value for value. Also checks the reader's contracts that FeedParser relies on:
// - reading a prefix of the input never gives a different answer than reading all of it, only
//   `.needMore` (how the parser handles values that straddle chunks);
// - numbers convert exactly (the fast paths against the standard library's parser);
// - key codes (FeatureDecoder's `Key`) identify their key and no other.
// JSONReader is internal to QuakeFeed, hence the testable import.

import FuzzSupport
import Varlink
import VarlinkFuzzSupport

@testable import QuakeFeed

@_cdecl("LLVMFuzzerTestOneInput")
func fuzzJSONReader(_ start: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    let input = bytes(start, count)
    let reader = readerNode(input)
    let scanner = scannerNode(input)
    check(
        reader == scanner,
        "JSONReader and JSONScanner disagree on \(show(input)):\n  reader:  \(reader)\n  scanner: \(scanner)")
    var choices = Choices(seed: input)
    // Any prefix: either the same answer as the whole input or .needMore.
    let whole = skip(input, count: input.count, endIsDelimiter: true)
    for _ in 0..<3 where !input.isEmpty {
        let cut = choices.next(in: 0...input.count - 1)
        let prefix = skip(input, count: cut, endIsDelimiter: false)
        check(
            prefix == .needMore || prefix == whole,
            "the prefix of \(cut) bytes of \(show(input)) reads as \(prefix), the whole as \(whole)")
    }
    return 0
}

// MARK: JSONReader

func readerNode(_ input: [UInt8]) -> Node {
    input.withUnsafeBytes { buffer in
        var r = JSONReader(buffer, base: 0, endIsDelimiter: true, maxDepth: JSONScanner.maxDepth)
        do throws(ReadStop) {
            let node = try read(&r, depth: 1)
            return r.peekNonWS() == nil ? node : .invalid
        } catch {
            return .invalid
        }
    }
}

func read(_ r: inout JSONReader, depth: Int) throws(ReadStop) -> Node {
    let c = try r.nextNonWS()
    switch c {
    case UInt8(ascii: "\""):
        return .string(try string(&r))
    case UInt8(ascii: "{"):
        try r.enter(depth)
        r.i += 1
        var members: [Node.Member] = []
        if try r.nextNonWS() == UInt8(ascii: "}") {
            r.i += 1
            return .object([])
        }
        repeat {
            // The key's code as FeatureDecoder reads it, then the key again as text.
            let start = r.i
            let code = try r.key()
            r.i = start
            try r.expectKey()
            let key = try string(&r)
            try r.expectColon()
            checkKeyCode(code, key)
            members.append(.init(key: key, value: try read(&r, depth: depth + 1)))
        } while try !r.endOfObject()
        return .object(members)
    case UInt8(ascii: "["):
        try r.enter(depth)
        r.i += 1
        var elements: [Node] = []
        if try r.nextNonWS() == UInt8(ascii: "]") {
            r.i += 1
            return .array([])
        }
        repeat {
            elements.append(try read(&r, depth: depth + 1))
        } while try !r.endOfArray()
        return .array(elements)
    case UInt8(ascii: "t"):
        try r.literal("true")
        return .bool(true)
    case UInt8(ascii: "f"):
        try r.literal("false")
        return .bool(false)
    case UInt8(ascii: "n"):
        try r.literal("null")
        return .null
    case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
        // skipNumber must accept exactly what scanNumber does, and stop at the same place.
        var skipped = r
        let skipError: ReadStop?
        do throws(ReadStop) {
            try skipped.skipNumber()
            skipError = nil
        } catch {
            skipError = error
        }
        let n: NumberToken
        do throws(ReadStop) {
            n = try r.scanNumber()
        } catch {
            check(
                skipError.map { "\($0)" } == "\(error)",
                "skipNumber: \(String(describing: skipError)), scanNumber: \(error)")
            throw error
        }
        check(
            skipError == nil && skipped.i == r.i,
            "skipNumber: \(String(describing: skipError)) at \(skipped.i), scanNumber ends at \(r.i)")
        let text = String(decoding: UnsafeRawBufferPointer(start: r.p + n.start, count: n.end - n.start), as: UTF8.self)
        checkNumber(r, n, text)
        return .number(text)
    default:
        throw r.unexpected(c, at: r.i, expected: "expected a value")
    }
}

/// The string at `r.i`, decoded; its text through the arena must be the same.
func string(_ r: inout JSONReader) throws(ReadStop) -> [UInt8] {
    let s = try r.scanString()
    let text = Array(r.string(s).utf8)
    let span = r.text(s)
    let fromArena = r.arena.withUnsafeBytes { Array(FeatureRecord.bytes(span, in: $0)) }
    check(fromArena == text, "text(_:) gives \(show(fromArena)), string(_:) \(show(text))")
    return text
}

/// `double` and `int64` against exact references.
func checkNumber(_ r: JSONReader, _ n: NumberToken, _ text: String) {
    let expected = Double(text)!
    let double = r.double(n)
    check(
        double.bitPattern == expected.bitPattern,
        "double(\(text)) is \(double), the standard library says \(expected)")
    let int = r.int64(n)
    let exact = exactInt64(text)
    check(int == exact, "int64(\(text)) is \(String(describing: int)), exactly it is \(String(describing: exact))")
    check(
        !n.isInteger || exact == Int64(text), "\(text): isInteger but Int64(text) is \(String(describing: Int64(text)))"
    )
}

/// FeatureDecoder's key codes and the keys they stand for: the format's own, and the quake
/// record's properties (FieldKey, generated from QuakeModel's declaration).
enum KeyCodes {
    static let all: [(code: UInt64, key: String)] =
        [
            (Key.id, "id"), (Key.type, "type"), (Key.geometry, "geometry"), (Key.properties, "properties"),
            (Key.coordinates, "coordinates"), (Key.generated, "generated"), (Key.time, "time"), (Key.url, "url"),
            (Key.status, "status"), (Key.ids, "ids"), (Key.title, "title"), (Key.features, "features"),
            (Key.metadata, "metadata"), (Key.api, "api"), (Key.count, "count"),
        ] + FieldKey.all
}

/// A key's code stands for that key and no other.
func checkKeyCode(_ code: UInt64, _ key: [UInt8]) {
    for (known, name) in KeyCodes.all {
        check(
            (code == known) == key.elementsEqual(name.utf8),
            "key \"\(show(key))\" has the code of \"\(name)\" (\(code))")
    }
}

/// How `skipValue` ends on the first `count` bytes: comparable across prefixes.
enum SkipResult: Equatable, CustomStringConvertible {
    case ok(end: Int)
    case needMore
    case failed(FeedError)

    var description: String {
        switch self {
        case .ok(let end): "ok, ends at \(end)"
        case .needMore: "needMore"
        case .failed(let error): "\(error)"
        }
    }
}

func skip(_ input: [UInt8], count: Int, endIsDelimiter: Bool) -> SkipResult {
    input.withUnsafeBytes { buffer in
        var r = JSONReader(
            UnsafeRawBufferPointer(rebasing: buffer[..<count]), base: 0, endIsDelimiter: endIsDelimiter,
            maxDepth: JSONScanner.maxDepth)
        do throws(ReadStop) {
            try r.skipValue(depth: 1)
            return .ok(end: r.i)
        } catch {
            switch error {
            case .needMore: return .needMore
            case .failed(let e): return .failed(e)
            }
        }
    }
}

runFuzzer(fuzzJSONReader)
