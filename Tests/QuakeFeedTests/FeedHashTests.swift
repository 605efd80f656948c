import Foundation
import QuakeFeed
import QuakeTestSupport
import Testing

@Suite("Feature hashing and undecoded parsing")
struct FeedHashTests {
    /// Reference values printed by the `xxhash` Python package (the C reference implementation).
    @Test(
        "XXH64 matches the reference implementation",
        arguments: [
            ([UInt8](), UInt64(0), UInt64(0xEF46_DB37_51D8_E999)),
            (Array("a".utf8), 0, 0xD24E_C4F1_A98C_6E5B),
            (Array("abc".utf8), 0, 0x44BC_2CF5_AD77_0999),
            (Array("Nobody inspects the spammish repetition".utf8), 0, 0xFBCE_A83C_8A37_8BF1),
            (Array((0..<768).map { UInt8($0 % 256) }), 0, 0x8E03_C838_C596_036F),
            (Array("abc".utf8), 1, 0xBEA9_CA81_9932_8908),
            (Array((0..<100).map { UInt8($0) }), 12345, 0x028B_A1AE_2DE4_DE27),
        ])
    func referenceVectors(bytes: [UInt8], seed: UInt64, expected: UInt64) {
        #expect(bytes.withUnsafeBytes { FeedHash.xxh64($0, seed: seed) } == expected)
    }

    @Test("parsing without decoding validates, finds the ids and hashes alike", arguments: Fixtures.usgsFeeds)
    func undecodedMatchesDecoded(fixture: URL) throws {
        let bytes = try Array(Data(contentsOf: fixture))
        struct Seen: Equatable {
            var hash: UInt64
            var id: String?
            var hasAliases: Bool
        }
        var decoded: [(Seen, FeedItem)] = []
        var undecoded: [(Seen, FeedItem)] = []
        for decode in [true, false] {
            var parser = FeedParser()
            // Odd chunk sizes so that elements straddle chunks.
            for start in stride(from: 0, to: bytes.count, by: 4093) {
                let chunk = Array(bytes[start..<min(start + 4093, bytes.count)])
                try chunk.withUnsafeBytes { chunk in
                    try parser.consume(chunk, decode: decode) { element in
                        #expect(element.hash == FeedElement.hash(element.bytes))
                        let again = try FeedParser.decode(element.bytes, index: element.index, base: element.offset)
                        if decode {
                            #expect(element.item == again)
                            var id: String?
                            var hasAliases = false
                            if case .feature(let feature, _) = again {
                                id = feature.id
                                hasAliases = feature.aliasIDs.contains { $0 != feature.id }
                            }
                            decoded.append((Seen(hash: element.hash, id: id, hasAliases: hasAliases), again))
                        } else {
                            #expect(element.item == nil)
                            undecoded.append(
                                (Seen(hash: element.hash, id: element.id, hasAliases: element.hasAliases), again))
                        }
                    }
                }
            }
            try parser.finish()
        }
        #expect(decoded.count == undecoded.count)
        for (d, u) in zip(decoded, undecoded) {
            #expect(d.1 == u.1)
            #expect(d.0.hash == u.0.hash)
            // Skipped features may still carry an id the undecoded scan found; decoded ones agree.
            if d.0.id != nil {
                #expect(d.0 == u.0)
            }
        }
    }

    @Test("the same bytes hash alike wherever they sit; other bytes differently")
    func hashDependsOnTheBytesOnly() throws {
        let feature = #"{"type":"Feature","properties":{"time":1,"ids":",a,b,"},"id":"a"}"#
        let spaced = #"{"type": "Feature", "properties":{"time":1,"ids":",a,b,"},"id":"a"}"#
        var hashes: [UInt64] = []
        for document in [
            #"{"type":"FeatureCollection","features":[\#(feature),\#(spaced)]}"#,
            #"{"features":[   \#(feature)],"type":"FeatureCollection"}"#,
        ] {
            try Array(document.utf8).withUnsafeBytes { chunk in
                var p = FeedParser()
                try p.consume(chunk, decode: false) { element in
                    #expect(element.id == "a")
                    #expect(element.hasAliases)
                    #expect(String(decoding: element.bytes, as: UTF8.self).hasPrefix("{"))
                    hashes.append(element.hash)
                }
                try p.finish()
            }
        }
        #expect(hashes.count == 3)
        #expect(hashes[0] == hashes[2])
        #expect(hashes[0] != hashes[1])
    }
}

@Suite("Skipping numbers")
struct SkipNumberTests {
    /// The outcome of parsing `document`: nil, or the error's kind, offset and message.
    static func outcome(_ document: String, decode: Bool) -> String? {
        var parser = FeedParser()
        do {
            try Array(document.utf8).withUnsafeBytes { bytes in
                try parser.consume(bytes, decode: decode) { _ in }
            }
            try parser.finish()
            return nil
        } catch let error as FeedError {
            return "\(error.kind) \(error.byteOffset) \(error.message)"
        } catch {
            return "\(error)"
        }
    }

    @Test(
        "a skipped number is checked exactly as a decoded one",
        arguments: [
            "0", "-0", "12", "-12.5", "1e5", "1E+5", "1.5e-7", "123456789012345678901234567890", "0.000",
            "01", "-", "-a", "1.", "1.e5", "1e", "1e+", ".5", "+1", "1x", "- 1", "00", "-01", "1.5.3", "1e5e5",
        ])
    func skipMatchesScan(number: String) {
        let known = #"{"type":"FeatureCollection","features":[{"id":"a","properties":{"time":1,"mag":\#(number)}}]}"#
        let unknown = #"{"type":"FeatureCollection","features":[{"id":"a","properties":{"time":1,"zzz":\#(number)}}]}"#
        // `mag` is decoded with scanNumber, `zzz` skipped with skipNumber; undecoded, both are skipped.
        let decoded = Self.outcome(known, decode: true)
        #expect(Self.outcome(unknown, decode: true) == decoded)
        #expect(Self.outcome(known, decode: false) == decoded)
    }
}

@Suite("Feature records")
struct FeatureRecordTests {
    @Test("a record made from a feature holds the same values as the decoder's", arguments: Fixtures.usgsFeeds)
    func recordFromFeature(fixture: URL) throws {
        let bytes = try Array(Data(contentsOf: fixture))
        var parser = FeedParser()
        var records = 0
        try bytes.withUnsafeBytes { chunk in
            try parser.consume(chunk, decode: true) { element in
                guard case .record(let decoded) = element.decoded else { return }
                let feature = decoded.feature(in: element.arena)
                var arena: [UInt8] = []
                let made = FeatureRecord(feature, arena: &arena)
                #expect(arena.withUnsafeBytes { made.feature(in: $0) } == feature)
                #expect(made.hasAliases == decoded.hasAliases)
                records += 1
            }
        }
        #expect(records > 0)
    }
}
