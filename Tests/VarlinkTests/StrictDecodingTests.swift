import Foundation
import QuakeModel
import QuakeProtocol
import Testing
@testable import Varlink

/// Generated types decode as systemd's sd-varlink does: strictly, naming the field that is wrong.
@Suite("Strict decoding")
struct StrictDecodingTests {
    static func error<T: VarlinkValue>(_ type: T.Type, _ json: String) -> VarlinkParameterError? {
        do {
            _ = try T.decode(json: Array(json.utf8))
            return nil
        } catch {
            return error
        }
    }

    @Test(
        "wrong input names the field",
        arguments: [
            // Unknown fields, at any depth.
            (#"{"bogus":1}"#, "bogus"),
            (#"{"near":{"lat":1,"lon":2,"radiusKm":3,"bogus":1}}"#, "near.bogus"),
            // Wrong types, including an int that is not integral.
            (#"{"limit":1.5}"#, "limit"),
            (#"{"limit":1.0}"#, "limit"),
            (#"{"limit":1e2}"#, "limit"),
            (#"{"limit":"5"}"#, "limit"),
            (#"{"limit":99999999999999999999}"#, "limit"),
            (#"{"minMagnitude":"4"}"#, "minMagnitude"),
            (#"{"near":{"lat":"north","lon":2,"radiusKm":3}}"#, "near.lat"),
            (#"{"near":[1,2,3]}"#, "near"),
            (#"{"order":"size"}"#, "order"),
            (#"{"type":5}"#, "type"),
            // A required field missing, or null.
            (#"{"near":{"lat":1,"lon":2}}"#, "near.radiusKm"),
            (#"{"near":{"lat":null,"lon":2,"radiusKm":3}}"#, "near.lat"),
            // Twice.
            (#"{"limit":1,"limit":2}"#, "limit"),
            // Not an object at all.
            ("[]", "parameters"),
            ("5", "parameters"),
            (#""x""#, "parameters"),
        ])
    func queryParameters(json: String, parameter: String) {
        let error = Self.error(IOQuaked.Query.Parameters.self, json)
        #expect(error?.parameter == parameter, "\(json): \(String(describing: error))")
    }

    @Test("arrays name the element")
    func arrayElements() {
        #expect(Self.error(IOQuaked.Delete.Parameters.self, #"{"ids":["a",2]}"#)?.parameter == "ids[1]")
        #expect(
            Self.error(IOQuaked.FetchHistory.Reply.self, Self.historyReply(kind: "upsert"))?.parameter
                == "transactions[0].changes[0].kind")
    }

    static func historyReply(kind: String) -> String {
        #"{"storeId":"s","headToken":1,"oldestToken":0,"hasMore":false,"nextAfter":1,"transactions":[{"token":1,"author":"import","timestamp":5,"inserted":1,"updated":0,"deleted":0,"changes":[{"quakeId":"q","kind":"\#(kind)"}]}]}"#
    }

    @Test(
        "bytes that are not strict JSON are refused",
        arguments: [
            #"{"ids":["a",]}"#, #"{"ids":[,"a"]}"#, #"{,"ids":[]}"#, #"{"ids":[] "x":1}"#, #"{"ids":["\u00"]}"#,
            #"{"ids":["\ud800"]}"#, #"{"ids":[]} trailing"#, #"{"ids":[01]}"#, #"{"ids":[tru]}"#,
            #"{"ids":["a"]"#, "",
        ])
    func malformed(json: String) {
        #expect(Self.error(IOQuaked.Delete.Parameters.self, json) != nil, "\(json)")
    }

    @Test("invalid UTF-8 and raw control characters in strings are refused")
    func invalidText() {
        let invalid: [UInt8] = Array(#"{"ids":[""#.utf8) + [0xC3, 0x28] + Array(#""]}"#.utf8)
        #expect(throws: VarlinkParameterError.self) { try IOQuaked.Delete.Parameters.decode(json: invalid) }
        let control: [UInt8] = Array(#"{"ids":[""#.utf8) + [0x0A] + Array(#""]}"#.utf8)
        #expect(throws: VarlinkParameterError.self) { try IOQuaked.Delete.Parameters.decode(json: control) }
    }

    @Test("nesting is bounded: a hostile depth is an error, not a stack overflow")
    func depth() {
        let deep = #"{"ids":"# + String(repeating: "[", count: 100_000)
        #expect(Self.error(IOQuaked.Delete.Parameters.self, deep) != nil)
        let object = String(repeating: #"{"a":"#, count: 10_000)
        #expect(Self.error([String: JSONValue].self, object) != nil)
    }

    @Test("escapes, surrogate pairs and non-ASCII text decode, and encode back to the same value")
    func strings() throws {
        let json = #"{"ids":["a\"b\\c\/d\n\t\u00e9\ud83c\udf0b","ü ∆ 地震",""]}"#
        let decoded = try IOQuaked.Delete.Parameters.decode(json: Array(json.utf8))
        #expect(decoded.ids == ["a\"b\\c/d\n\té🌋", "ü ∆ 地震", ""])
        #expect(try IOQuaked.Delete.Parameters.decode(json: decoded.jsonBytes) == decoded)
    }

    @Test("a whole Quake and a history page round-trip through the generated writer and reader")
    func roundTrip() throws {
        let quake = IOQuaked.Quake(
            id: "us7000abcd", mag: 4.53, place: "10 km N of \"Somewhere\"", time: 1_700_000_000_123,
            updated: 1_700_000_100_000, tz: -480, url: "https://x/y", detail: nil, felt: 12, cdi: 3.4, mmi: 0.1,
            alert: "green", status: "reviewed", tsunami: 0, sig: 318, net: "us", code: "7000abcd",
            ids: ",us7000abcd,", sources: ",us,", types: ",origin,", nst: nil, dmin: 1e-05, rms: 0.7, gap: 45,
            magType: "mb", type: "earthquake", title: "M 4.5", lon: -179.99999, lat: 89.5, depth: -1.2)
        #expect(try IOQuaked.Quake.decode(json: quake.jsonBytes) == quake)
        let reply = IOQuaked.FetchHistory.Reply(
            storeId: "s", headToken: 9, oldestToken: 0,
            transactions: [
                IOQuaked.Transaction(
                    token: 9, author: .import, timestamp: 1, source: "file:///x", inserted: 0, updated: 1,
                    deleted: 1,
                    changes: [
                        IOQuaked.Change(
                            quakeId: "a", kind: .update,
                            fields: [
                                .init(field: "mag", old: .init(float: 4.1), new: .init(float: 3.9)),
                                .init(field: "felt", new: .init(int: 3)),
                            ], quake: quake),
                        IOQuaked.Change(
                            quakeId: "b", kind: .delete,
                            tombstone: .init(id: "b", mag: 2, time: 5), reason: .superseded, supersededBy: "c"),
                    ])
            ], hasMore: false, nextAfter: 9)
        #expect(try IOQuaked.FetchHistory.Reply.decode(json: reply.jsonBytes) == reply)
        // Optional fields that are nil are left out, never written as null.
        #expect(!String(decoding: reply.jsonBytes, as: UTF8.self).contains("null"))
    }

    /// A large object that comes again byte for byte in the same text (a history page's quake,
    /// once per transaction that changed it) is taken as decoded the first time. Anything that
    /// differs, even past the bytes that key it, or a repeat at another depth, is decoded.
    @Test("a repeated quake decodes to its own value; one that differs anywhere, or at another depth, is decoded again")
    func repeatedObjects() throws {
        var moved = Self.quake
        moved.depth = -1.25  // the last member: only the bytes past the key differ
        var other = Self.quake
        other.id = "us7000abce"  // within the key's bytes
        var unknown = Self.quake
        unknown.title = "M 4.5 \u{1F30B}"
        let quakes = [Self.quake, moved, Self.quake, other, unknown, moved, Self.quake, unknown]
        #expect(try [IOQuaked.Quake].decode(json: quakes.jsonBytes) == quakes)
        // In a history page, change after change.
        let changes = quakes.enumerated().map { IOQuaked.Change(quakeId: "q\($0.offset)", kind: .update, quake: $0.element) }
        let transactions = (0..<3).map { token in
            IOQuaked.Transaction(
                token: token + 1, author: .import, timestamp: 1, inserted: 0, updated: changes.count, deleted: 0,
                changes: changes)
        }
        let page = IOQuaked.FetchHistory.Reply(
            storeId: "s", headToken: 3, oldestToken: 0, transactions: transactions, hasMore: false, nextAfter: 3)
        #expect(try IOQuaked.FetchHistory.Reply.decode(json: page.jsonBytes) == page)
        // A repeat with something wrong after the bytes it shares is refused, as a first would be.
        let text = String(decoding: [Self.quake, Self.quake].jsonBytes, as: UTF8.self)
        let broken = text.dropLast(2) + ",\"extra\":1}]"
        #expect(Self.error([IOQuaked.Quake].self, String(broken))?.parameter == "[1].extra")

        // Taken only at the depth the first was decoded at: `[quake, quake, [quake]]`.
        let json = Self.quake.jsonBytes
        var scanner = JSONScanner(Array("[".utf8) + json + Array(",".utf8) + json + Array(",[".utf8) + json + Array("]]".utf8))
        try scanner.beginArray()
        #expect(try scanner.nextElement())
        #expect(scanner.repeated(IOQuaked.Quake.self, at: scanner.valueStart()) == nil, "nothing decoded yet")
        #expect(try IOQuaked.Quake(json: &scanner) == Self.quake)
        #expect(try scanner.nextElement())
        #expect(scanner.repeated(IOQuaked.Quake.self, at: scanner.valueStart()) == Self.quake, "at the same depth")
        #expect(try scanner.nextElement())
        try scanner.beginArray()
        #expect(try scanner.nextElement())
        #expect(scanner.repeated(IOQuaked.Quake.self, at: scanner.valueStart()) == nil, "one level deeper")
        var deeper = scanner
        #expect(try IOQuaked.Quake(json: &deeper) == Self.quake)
    }

    /// A quake with every kind of field and runs of left-out optionals (as agencies other than
    /// the USGS leave them), for the decoders' look-ahead over them.
    static let quake = IOQuaked.Quake(
        id: "us7000abcd", mag: 4.53, place: "10 km N of \"Somewhere\"", time: 1_700_000_000_123,
        updated: 1_700_000_100_000, tz: -480, url: "https://x/y", detail: nil, felt: 12, cdi: nil, mmi: 0.1,
        alert: "green", status: "reviewed", tsunami: 0, sig: 318, net: "us", code: "7000abcd", ids: ",us7000abcd,",
        sources: nil, types: nil, nst: nil, dmin: nil, rms: nil, gap: nil, magType: "mb", type: "earthquake",
        title: "M 4.5", lon: -179.99999, lat: 89.5, depth: -1.2)

    /// An object's members as written: each name with its value's bytes.
    static func members(_ json: [UInt8]) throws -> [(name: String, value: String)] {
        var scanner = JSONScanner(json)
        try scanner.beginObject()
        var members: [(String, String)] = []
        while let name = try scanner.nextKey() {
            members.append((name, String(decoding: scanner.slice(try scanner.skipValue()), as: UTF8.self)))
        }
        return members
    }

    /// Decoders find members in declaration order first, by comparing names (skipping a few
    /// left-out optionals), and only then by hash: whatever the order, the spacing or the
    /// spelling of the names, the value is the same, and duplicates are still refused.
    @Test("members in any order, spaced, or with escaped names decode to the same value; a repeat is refused")
    func memberOrder() throws {
        let members = try Self.members(Self.quake.jsonBytes)
        func object(_ members: [(name: String, value: String)]) -> [UInt8] {
            Array(("{" + members.map { #""\#($0.name)":\#($0.value)"# }.joined(separator: ",") + "}").utf8)
        }
        #expect(try IOQuaked.Quake.decode(json: object(members)) == Self.quake)
        #expect(try IOQuaked.Quake.decode(json: object(members.reversed())) == Self.quake)
        for seed in UInt64(1)...20 {
            var random = SeededRandom(seed: seed)
            let shuffled = members.shuffled(using: &random)
            #expect(
                try IOQuaked.Quake.decode(json: object(shuffled)) == Self.quake,
                "seed \(seed): \(shuffled.map(\.name))")
        }
        // Spaced as a person or another library writes JSON.
        let spaced = "{ " + members.map { #""\#($0.name)" : \#($0.value)"# }.joined(separator: " , ") + " }"
        #expect(try IOQuaked.Quake.decode(json: Array(spaced.utf8)) == Self.quake)
        // A name with an escape is the same name.
        var escaped = members
        escaped[1].name = #"m\u0061g"#
        #expect(try IOQuaked.Quake.decode(json: object(escaped)) == Self.quake)
        // Repeats: right after, and after members the decoder skipped ahead over.
        for (at, again) in [(1, 1), (3, 1), (members.count - 1, 0)] {
            var repeated = members
            repeated.insert(members[again], at: at + 1)
            let error = Self.error(IOQuaked.Quake.self, String(decoding: object(repeated), as: UTF8.self))
            #expect(error?.parameter == members[again].name, "\(repeated.map(\.name)): \(String(describing: error))")
        }
        #expect(Self.error(IOQuaked.FieldValue.self, #"{"int":1,"string":"x","int":2}"#)?.parameter == "int")
    }

    @Test(
        "separators around members are checked whichever way a member is found",
        arguments: [
            #"{"field":"mag" "old":{"int":1}}"#, #"{"field":"mag",,"old":{"int":1}}"#, #"{,"field":"mag"}"#,
            #"{ ,"field":"mag"}"#, #"{"field":"mag",}"#, #"{"field":"mag","old":{"int":1} ,}"#,
            #"{"field":"mag","old"{"int":1}}"#, #"{"field""mag"}"#, #"{"field":"mag","old":{,"int":1}}"#,
            #"{"field":"mag","old":{"int":1,}}"#, #"{"field":"mag""#,
        ])
    func separators(json: String) {
        #expect(Self.error(IOQuaked.FieldChange.self, json) != nil, "\(json)")
    }

    @Test("doubles are written in their shortest exact form; integral floats without a fraction")
    func numbers() throws {
        for value in [0.1, 4.53, -179.99999, 1e-05, 1e300, 2.4500000000000002, 3, -0.0, 123456789.125] {
            var writer = JSONWriter()
            writer.double(value)
            let text = String(decoding: writer.bytes, as: UTF8.self)
            #expect(Double(text) == value, "\(value) → \(text)")
            #expect(try Double.decode(json: writer.bytes) == value)
        }
        var writer = JSONWriter()
        writer.double(3)
        #expect(writer.bytes == Array("3".utf8))
        for value in [0, 1, -1, Int.max, Int.min, 1_700_000_000_123] {
            var writer = JSONWriter()
            writer.int(value)
            #expect(try Int.decode(json: writer.bytes) == value)
        }
    }
}

extension StrictDecodingTests {
    @Test("UTF-8 is checked as RFC 3629 says, the same as the standard library's validation")
    func utf8Validation() {
        let samples: [[UInt8]] = [
            Array("plain".utf8), Array("é ü ∆ 地震 🌋".utf8), [0xC3, 0x28], [0xC0, 0x80], [0xE0, 0x80, 0x80],
            [0xED, 0xA0, 0x80], [0xF4, 0x90, 0x80, 0x80], [0xF0, 0x8F, 0xBF, 0xBF], [0xF8, 0x88, 0x80, 0x80, 0x80],
            [0xE2, 0x82], [0x80], [0xEF, 0xBF, 0xBF], [0xF4, 0x8F, 0xBF, 0xBF], [0xDF, 0xBF], [0xC1, 0xBF],
        ]
        for sample in samples {
            let mine = sample.withUnsafeBufferPointer(JSONScanner.string)
            #expect(mine == String(validating: sample, as: UTF8.self), "\(sample)")
        }
        // And every two-byte sequence, exhaustively.
        for a in 0...255 {
            for b in 0...255 {
                let sample = [UInt8(a), UInt8(b)]
                #expect(
                    sample.withUnsafeBufferPointer(JSONScanner.isValidUTF8)
                        == (String(validating: sample, as: UTF8.self) != nil), "\(sample)")
            }
        }
    }
}

extension StrictDecodingTests {
    @Test("numbers read without strtod (short ones) are the same Doubles as Double(String) reads")
    func fastDoubles() throws {
        var samples = [
            "0", "-0", "-0.0", "0.1", "4.53", "-179.99999", "1e-05", "1E5", "1e+22", "1e22", "1e23", "1e-22", "1e-23",
            "9007199254740992", "9007199254740993", "9007199254740993.0", "123456789012345678", "1234567890123456789",
            "12345678901234567890", "0.000000000000000000001", "0.0000000000000000000000001", "2.4500000000000002",
            "123456789.125", "5e-324", "1.7976931348623157e308", "1e400", "0e400", "-0e-400", "100000000000000000000000",
            "3.141592653589793238462643383279", "0.30000000000000004", "1.5e-7", "-118.4985", "35.7728333", "0.00e0",
            // 20 digits: the 64-bit mantissa would wrap (to 0 for 2^64), found by fuzzing.
            "18446744073709551616", "-18446744073709551616e-3", "0.18446744073709551616", "36893488147419103232",
            "10000000000000000000", "0.000000000000000000010000000000000000000",
        ]
        // Random short decimals, the kind quaked's replies are made of.
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<20_000 {
            let digits = Int.random(in: 1...18, using: &generator)
            let mantissa = String(UInt64.random(in: 0..<UInt64(pow(10, Double(digits))), using: &generator))
            let point = Int.random(in: 0...mantissa.count, using: &generator)
            var text = point == 0 || point == mantissa.count ? mantissa : String(mantissa.prefix(point)) + "." + mantissa.dropFirst(point)
            if Bool.random(using: &generator) { text += "e\(Int.random(in: -30...30, using: &generator))" }
            samples.append(Bool.random(using: &generator) ? "-" + text : text)
        }
        for text in samples {
            let expected = Double(text)!
            if expected.isFinite {
                #expect(try Double.decode(json: Array(text.utf8)).bitPattern == expected.bitPattern, "\(text)")
            } else {
                #expect(Self.error(Double.self, text) != nil, "\(text)")
            }
        }
    }
}
