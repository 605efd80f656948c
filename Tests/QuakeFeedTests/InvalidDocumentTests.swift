import QuakeFeed
import Testing

/// A document that must be rejected, and where.
struct BadDocument: CustomTestStringConvertible, Sendable {
    var name: String
    var bytes: [UInt8]
    var kind: FeedError.Kind
    var offset: Int
    var featureIndex: Int?

    var testDescription: String { name }

    /// `marker` is replaced by `bad`; the error must point at the marker's position (+ `shift`).
    init(_ name: String, _ text: String, _ bad: [UInt8], _ kind: FeedError.Kind, shift: Int = 0, feature: Int? = nil) {
        let parts = text.components(separatedBy: "@")
        precondition(parts.count == 2, "exactly one @ marker")
        self.name = name
        bytes = Array(parts[0].utf8) + bad + Array(parts[1].utf8)
        self.kind = kind
        offset = parts[0].utf8.count + shift
        featureIndex = feature
    }

    init(_ name: String, _ text: String, _ kind: FeedError.Kind, shift: Int = 0, feature: Int? = nil) {
        self.init(name, text, [], kind, shift: shift, feature: feature)
    }
}

private let head = #"{"type":"FeatureCollection","features":["#
private let f0 = feature()

@Suite("Invalid documents")
struct InvalidDocumentTests {
    static let cases: [BadDocument] = [
        BadDocument("trailing comma in features", head + f0 + ",@]}", .invalidJSON, feature: 1),
        BadDocument(
            "trailing comma in an object", head + #"{"id":"a","properties":{"time":1,@}}]}"#, .invalidJSON, feature: 0),
        BadDocument(
            "trailing comma in an array", head + f0 + #",{"id":"a","properties":{"time":1,"x":[1,@]}}]}"#, .invalidJSON,
            feature: 1),
        BadDocument("trailing comma at the top level", #"{"type":"FeatureCollection","features":[],@}"#, .invalidJSON),
        BadDocument(
            "leading zero", head + #"{"id":"a","properties":{"time":1,"mag":@01}}]}"#, .invalidJSON, feature: 0),
        BadDocument("plus sign", head + #"{"id":"a","properties":{"time":@+1}}]}"#, .invalidJSON, feature: 0),
        BadDocument("leading dot", head + #"{"id":"a","properties":{"time":@.5}}]}"#, .invalidJSON, feature: 0),
        BadDocument("trailing dot", head + #"{"id":"a","properties":{"mag":1.@}}]}"#, .invalidJSON, feature: 0),
        BadDocument("empty exponent", head + #"{"id":"a","properties":{"mag":1e@}}]}"#, .invalidJSON, feature: 0),
        BadDocument("minus alone", head + #"{"id":"a","properties":{"mag":-@}}]}"#, .invalidJSON, feature: 0),
        BadDocument("NaN", head + #"{"id":"a","properties":{"mag":@NaN}}]}"#, .invalidJSON, feature: 0),
        BadDocument("Infinity", head + #"{"id":"a","properties":{"mag":-@Infinity}}]}"#, .invalidJSON, feature: 0),
        BadDocument("bad literal", head + #"{"id":"a","properties":{"mag":@nul}}]}"#, .invalidJSON, feature: 0),
        BadDocument("single quotes", head + #"{"id":@'a'}]}"#, .invalidJSON, feature: 0),
        BadDocument("comment", #"{"type":"FeatureCollection",@/* hi */"features":[]}"#, .invalidJSON),
        BadDocument("control character in a string", head + #"{"id":"a@b"}]}"#, [0x0A], .invalidJSON, feature: 0),
        BadDocument("tab in a string", head + #"{"id":"a@"}]}"#, [0x09], .invalidJSON, feature: 0),
        BadDocument("bad escape", head + #"{"id":"a@x"}]}"#, Array(#"\"#.utf8), .invalidJSON, feature: 0),
        BadDocument("short \\u escape", head + #"{"id":"@12"}]}"#, Array(#"\u"#.utf8), .invalidJSON, feature: 0),
        BadDocument(
            "lone high surrogate escape", head + #"{"id":"a@b"}]}"#, Array(#"\uD83D"#.utf8), .invalidJSON, feature: 0),
        BadDocument(
            "high surrogate with a non-surrogate", head + #"{"id":"@\u0041"}]}"#, Array(#"\uD83D"#.utf8), .invalidJSON,
            feature: 0),
        BadDocument(
            "lone low surrogate escape", head + #"{"id":"@"}]}"#, Array(#"\uDE00"#.utf8), .invalidJSON, feature: 0),
        BadDocument("overlong UTF-8 (C0 AF)", head + #"{"id":"@"}]}"#, [0xC0, 0xAF], .invalidUTF8, feature: 0),
        BadDocument(
            "overlong UTF-8 (E0 80 AF)", head + #"{"id":"@"}]}"#, [0xE0, 0x80, 0xAF], .invalidUTF8, feature: 0),
        BadDocument(
            "UTF-8 encoded surrogate (ED A0 80)", head + #"{"id":"@"}]}"#, [0xED, 0xA0, 0x80], .invalidUTF8, feature: 0),
        BadDocument(
            "code point above U+10FFFF", head + #"{"id":"@"}]}"#, [0xF4, 0x90, 0x80, 0x80], .invalidUTF8, feature: 0),
        BadDocument("byte F5", head + #"{"id":"x@"}]}"#, [0xF5, 0x80, 0x80, 0x80], .invalidUTF8, feature: 0),
        BadDocument(
            "stray continuation byte in a string", head + #"{"id":"ab@c"}]}"#, [0x80], .invalidUTF8, feature: 0),
        BadDocument("stray continuation byte outside strings", head + "@]}", [0x80], .invalidUTF8, feature: 0),
        BadDocument("truncated UTF-8 sequence", head + #"{"id":"@"}]}"#, [0xC3], .invalidUTF8, feature: 0),
        BadDocument(
            "truncated UTF-8 sequence before ASCII", head + #"{"id":"@abcdefgh"}]}"#, [0xE2, 0x82], .invalidUTF8,
            feature: 0),
        BadDocument(
            "invalid UTF-8 in a top-level key", #"{"type":"FeatureCollection","fea@tures":[]}"#, [0xFF], .invalidUTF8),
        BadDocument(
            "invalid UTF-8 in a property key", head + #"{"id":"a","properties":{"ti@me":1}}]}"#, [0xED, 0xBF, 0xBF],
            .invalidUTF8, feature: 0),
        BadDocument("byte order mark", "@{}", [0xEF, 0xBB, 0xBF], .invalidJSON),
        BadDocument("trailing garbage", #"{"type":"FeatureCollection","features":[]} @x"#, .invalidJSON),
        BadDocument("second root", #"{"type":"FeatureCollection","features":[]}@{}"#, .invalidJSON),
        BadDocument("missing comma", head + f0 + "@" + f0 + "]}", .invalidJSON),
        BadDocument("missing colon", #"{"type"@"FeatureCollection","features":[]}"#, .invalidJSON),
        BadDocument("unquoted key", #"{@type:"FeatureCollection","features":[]}"#, .invalidJSON),
        BadDocument("mismatched bracket", head + #"{"id":"a","x":[1@}}]}"#, .invalidJSON, feature: 0),
        BadDocument("root array", "@[]", .wrongType),
        BadDocument("root string", #"@"FeatureCollection""#, .wrongType),
        BadDocument("features not an array", #"{"type":"FeatureCollection","features":@{}}"#, .wrongType),
        BadDocument("features null", #"{"type":"FeatureCollection","features":@null}"#, .wrongType),
        BadDocument("type Feature", #"{"type":@"Feature","features":[]}"#, .wrongType),
        BadDocument("type not a string", #"{"features":[],"type":@1}"#, .wrongType),
        BadDocument("duplicate features", #"{"type":"FeatureCollection","features":[],"features":@[]}"#, .wrongType),
        BadDocument("no features", #"{"type":"FeatureCollection","metadata":{}}@"#, .wrongType),
        BadDocument("no type", #"{"features":[]}@"#, .wrongType),
        BadDocument("empty document", "@", .truncated),
        BadDocument("whitespace only", " \n@", .truncated),
        BadDocument("unclosed root", head + f0 + "]@", .truncated),
        BadDocument(
            "unclosed feature", head + f0 + #","# + #"{"id":"a","properties":{"time":1}@"#, .truncated, feature: 1),
    ]

    @Test("rejected with the right kind and byte offset, for any chunking", arguments: cases)
    func rejected(bad: BadDocument) {
        for chunkSize in [nil, 1, 2, 5, 64] {
            let result = parse(bad.bytes, chunkSize: chunkSize)
            let error = result.error
            #expect(
                error?.kind == bad.kind, "chunk size \(String(describing: chunkSize)): \(String(describing: error))")
            #expect(
                error?.byteOffset == bad.offset,
                "chunk size \(String(describing: chunkSize)): \(String(describing: error))")
            #expect(
                error?.featureIndex == bad.featureIndex,
                "chunk size \(String(describing: chunkSize)): \(String(describing: error))")
        }
    }

    @Test("errors read well")
    func description() {
        let result = parse(head + f0 + ",}]}")
        #expect(
            result.error?.description
                == "invalid JSON at byte \(head.utf8.count + f0.utf8.count + 1) (feature 1): expected a value, found '}'"
        )
        let nested = parse(head + #"{"id":"a","x":[1}]}"#)
        let offset = (head + #"{"id":"a","x":[1"#).utf8.count
        #expect(
            nested.error?.description
                == "invalid JSON at byte \(offset) (feature 0): expected ',' or ']' after an array element, found '}'")
        #expect(
            FeedError.Kind.invalidUTF8.rawValue == "invalid-utf8" && FeedError.Kind.wrongType.rawValue == "wrong-type")
    }

    @Test("every strict prefix of a valid document is truncated; the whole document parses")
    func prefixes() {
        let text =
            head + f0 + ","
            + feature(
                id: #""\u0063i2""#, properties: #""time":1,"place":"Pāhala \ud83d\ude00","mag":-1.5e-1,"tsunami":true"#)
            + #"],"bbox":[-1.5,2,null,true,false]}"#
        let bytes = Array(text.utf8)
        let whole = parse(bytes)
        #expect(whole.error == nil)
        #expect(whole.items.count == 2)
        for length in 0..<bytes.count {
            for chunkSize in [nil, 1, 7] {
                let result = parse(Array(bytes[..<length]), chunkSize: chunkSize)
                #expect(result.error?.kind == .truncated, "prefix \(length), chunk \(String(describing: chunkSize))")
                #expect(result.error?.byteOffset == length)
                #expect(result.items == Array(whole.items.prefix(result.items.count)))
            }
        }
    }

    @Test("nesting deeper than maxDepth fails")
    func depth() {
        // Root 1, features 2, feature 3, properties 4: n arrays inside properties reach depth 4 + n.
        func nested(_ n: Int) -> String {
            head + #"{"id":"a","properties":{"time":1,"x":"# + String(repeating: "[", count: n)
                + String(repeating: "]", count: n) + "}}]}"
        }
        #expect(parse(nested(60)).error == nil)
        let tooDeep = parse(nested(61))
        #expect(tooDeep.error?.kind == .tooLarge)
        #expect(tooDeep.error?.byteOffset == (head + #"{"id":"a","properties":{"time":1,"x":"#).utf8.count + 60)
        #expect(tooDeep.error?.featureIndex == 0)
        var limits = FeedParser.Limits()
        limits.maxDepth = 3
        #expect(parse(head + f0 + "]}", limits: limits).error?.kind == .tooLarge)
        #expect(
            parse(#"{"type":"FeatureCollection","features":[],"bbox":[[[1]]]}"#, limits: limits).error?.kind
                == .tooLarge)
        #expect(parse(#"{"type":"FeatureCollection","features":[],"bbox":[[1]]}"#, limits: limits).error == nil)
    }

    @Test("a feature over maxFeatureBytes fails; one at the limit passes")
    func featureSize() {
        let small = feature()
        let big = feature(properties: #""time":1,"place":""# + String(repeating: "x", count: 300) + #"""#)
        var limits = FeedParser.Limits()
        limits.maxFeatureBytes = small.utf8.count
        for chunkSize in [nil, 1, 16, 100] {
            let ok = parse(head + small + "," + small + "]}", chunkSize: chunkSize, limits: limits)
            #expect(ok.error == nil)
            #expect(ok.items.count == 2)
            let result = parse(head + small + "," + big + "," + small + "]}", chunkSize: chunkSize, limits: limits)
            #expect(result.error?.kind == .tooLarge)
            #expect(result.error?.featureIndex == 1)
            #expect(result.error?.byteOffset == head.utf8.count + small.utf8.count + 1 + limits.maxFeatureBytes)
            #expect(result.items.count == 1)
        }
        // Any other top-level value is bounded too.
        let bbox = #"{"type":"FeatureCollection","features":[],"bbox":"# + String(repeating: "1", count: 500) + "}"
        #expect(parse(bbox, chunkSize: 10, limits: limits).error?.kind == .tooLarge)
        #expect(parse(bbox, limits: limits).error?.kind == .tooLarge)
    }

    @Test("a dead parser rethrows the same error")
    func dead() throws {
        var parser = FeedParser()
        var first: FeedError?
        do { try parser.consume(Array("[]".utf8)) { _ in } } catch let e as FeedError { first = e }
        #expect(first?.kind == .wrongType)
        #expect(throws: first!) { try parser.consume(Array("{}".utf8)) { _ in } }
        #expect(throws: first!) { try parser.finish() }
    }

    @Test("an error thrown by body propagates and parsing can resume")
    func bodyError() throws {
        struct Stop: Error {}
        let text =
            head + [feature(id: #""a""#), feature(id: #""b""#), feature(id: #""c""#)].joined(separator: ",") + "]}"
        var parser = FeedParser()
        var ids: [String] = []
        let record: (FeedItem) throws -> Void = { item in
            guard case .feature(let f, _) = item else { return }
            ids.append(f.id)
            if f.id == "a" { throw Stop() }
        }
        #expect(throws: Stop.self) { try parser.consume(Array(text.utf8), record) }
        #expect(ids == ["a"])
        try parser.consume([], record)
        try parser.finish()
        #expect(ids == ["a", "b", "c"])
        #expect(parser.featureCount == 3)
        #expect(parser.bytesConsumed == text.utf8.count)
    }
}
