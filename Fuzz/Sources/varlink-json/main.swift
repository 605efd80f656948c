// Fuzzes Varlink's JSONScanner (the strict pull parser generated types decode with) over
// arbitrary bytes:
// - `skipValue` accepts exactly what `JSONValue` accepts, save numbers too large for a Double;
// - whatever `JSONValue` and every generated type decode, their own text decodes back to the same
//   value (writer and reader are inverses), and what a generated type takes is JSON;
// - `nextMember`'s hash is `keyHash` of its name, and the name is `nextKey`'s (generated decoders
//   switch on the hash and compare the name's bytes);
// - `readDouble` (with its fast path without strtod) reads every number as `Double(String)` does;
// - a history page and a list of quakes decode the same, or fail the same, whether repeated
//   quakes are taken as decoded before (`JSONScanner.repeated`) or decoded again.
// The JSON-level differential against QuakeFeed's JSONReader is in json-reader.

import FuzzSupport
import QuakeProtocol
import Varlink
import VarlinkFuzzSupport

@_cdecl("LLVMFuzzerTestOneInput")
func fuzzVarlinkJSON(_ start: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    let input = bytes(start, count)

    var scanner = JSONScanner(input)
    var valid = true
    do {
        _ = try scanner.skipValue()
        try scanner.finish()
    } catch {
        valid = false
    }
    let value = try? JSONValue.decode(json: input)
    if value != nil {
        check(valid, "JSONValue decodes \(show(input)), skipValue refuses it")
    } else if valid {
        // JSONValue also refuses duplicate keys and numbers beyond Double.
        check(hasDuplicateKeyOrHugeNumber(input), "skipValue accepts \(show(input)), JSONValue refuses it")
    }
    checkKeyHashes(input)
    for (_, check) in generatedTypes { _ = check(input) }
    checkRepeats(IOQuaked.FetchHistory.Reply.self, input)
    checkRepeats([IOQuaked.Quake].self, input)
    return 0
}

/// `input` decoded as `T` with repeats taken and without: the same value, or an error both ways.
func checkRepeats<T: VarlinkValue & Equatable>(_ type: T.Type, _ input: [UInt8]) {
    func decode(_ takesRepeats: Bool) -> Result<T, VarlinkParameterError> {
        var scanner = JSONScanner(input)
        scanner.takesRepeats = takesRepeats
        do throws(VarlinkParameterError) {
            let value = try T(json: &scanner)
            try scanner.finish()
            return .success(value)
        } catch {
            return .failure(error)
        }
    }
    switch (decode(true), decode(false)) {
    case (.success(let a), .success(let b)):
        check(a == b, "\(T.self): \(show(input)) decodes to \(a) taking repeats, to \(b) without")
    case (.failure, .failure): break
    case (let a, let b):
        fail("\(T.self): \(show(input)) gives \(a) taking repeats, \(b) without")
    }
}

/// Walks `input` with `nextMember` wherever there is an object; returns whether some object
/// has a key twice or some number is not finite as a Double (what JSONValue refuses on top).
@discardableResult
func checkKeyHashes(_ input: [UInt8]) -> Bool {
    var scanner = JSONScanner(input)
    var odd = false
    do {
        try walk(&scanner, input, &odd)
    } catch {}
    return odd
}

func hasDuplicateKeyOrHugeNumber(_ input: [UInt8]) -> Bool { checkKeyHashes(input) }

func walk(_ s: inout JSONScanner, _ input: [UInt8], _ odd: inout Bool) throws(VarlinkParameterError) {
    var k = s.offset
    while k < input.count, [0x20, 0x09, 0x0A, 0x0D].contains(input[k]) { k += 1 }
    switch k < input.count ? input[k] : 0 {
    case UInt8(ascii: "{"):
        try s.beginObject()
        var keys: Set<String> = []
        while true {
            // The same member read the other way, from the same place: the same name, or the
            // same error.
            var other = s
            let key = try? other.nextKey()
            let next: JSONScanner.MemberName?
            do {
                next = try s.nextMember()
            } catch {
                check(key == nil, "nextMember refused a member nextKey read: \(String(describing: key))")
                throw error
            }
            guard let member = next else {
                check(key == .some(nil), "nextMember ended an object nextKey did not")
                break
            }
            let name = s.name(member)
            check(key == .some(name), "nextMember read \"\(name)\" where nextKey read \(String(describing: key))")
            check(member.hash == JSONScanner.keyHash(name), "nextMember: the hash of \"\(name)\" is not keyHash")
            check(other.offset == s.offset, "nextMember and nextKey stop at different places after \"\(name)\"")
            if !keys.insert(name).inserted { odd = true }
            if let key, !keys.insert(key).inserted { odd = true }
            try walk(&s, input, &odd)
        }
    case UInt8(ascii: "["):
        try s.beginArray()
        while try s.nextElement() { try walk(&s, input, &odd) }
    case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
        // readDouble (its fast path for short numbers included) reads exactly what Double(String) does.
        var number = s
        let read = try? number.readDouble()
        let range = try s.skipValue()
        let double = Double(String(decoding: input[range], as: UTF8.self))
        if let double, !double.isFinite { odd = true }
        if let double, double.isFinite {
            check(read?.bitPattern == double.bitPattern, "readDouble read \(String(describing: read)) for \(double)")
        } else {
            check(read == nil, "readDouble read \(String(describing: read)), Double(String) \(String(describing: double))")
        }
    default:
        _ = try s.skipValue()
    }
}

runFuzzer(fuzzVarlinkJSON)
