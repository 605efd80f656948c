import QuakeFeed
import Testing

/// What fuzzing found (scripts/fuzz, Fuzz/), each with its reproducer.
@Suite("Fuzzing findings: feed")
struct FuzzFindingTests {
    /// The elements of `document` parsed without decoding (as the importer parses a feed), each
    /// with its `hasAliases` and what decoding its bytes gives.
    static func lazy(_ document: String) throws -> [(hasAliases: Bool, id: String?, decoded: DecodedElement)] {
        var parser = FeedParser()
        var elements: [(Bool, String?, DecodedElement)] = []
        try Array(document.utf8).withUnsafeBytes { bytes in
            try parser.consume(bytes, decode: false) { element in
                let (decoded, _) = try FeedParser.decodeElement(
                    element.bytes, index: element.index, base: element.offset)
                elements.append((element.hasAliases, element.id, decoded))
            }
        }
        try parser.finish()
        return elements
    }

    // feed-parser: a repeated "properties" kept the fields of the first one that the second did
    // not give (here ids), while featureIdentity, which the importer trusts without decoding,
    // read only the second: hasAliases false for a record whose ids list another id.
    @Test("a repeated properties object replaces the earlier one, as featureIdentity reads it")
    func repeatedProperties() throws {
        let element =
            #"{"id":"a","properties":{"time":1,"ids":",a,b,","mag":5},"properties":{"time":2},"geometry":{"coordinates":[1,2]}}"#
        let result = parse(document(features: element))
        var expected = FeedFeature(id: "a", time: 2)
        expected.lon = 1
        expected.lat = 2
        #expect(result.features == [expected])
        let lazy = try Self.lazy(document(features: element))
        #expect(lazy.count == 1)
        guard case .record(let record) = lazy.first?.decoded else { Issue.record("not a record"); return }
        #expect(!record.hasAliases)
        #expect(lazy.first?.hasAliases == false)
    }

    // feed-parser: the same, with a null ids after a string one in one properties object.
    @Test("ids given as a string and then as null is no ids, decoded or not")
    func idsThenNull() throws {
        let element = #"{"id":"a","properties":{"time":1,"ids":",a,b,","ids":null}}"#
        #expect(parse(document(features: element)).features.first?.ids == nil)
        let lazy = try Self.lazy(document(features: element))
        guard case .record(let record) = lazy.first?.decoded else { Issue.record("not a record"); return }
        #expect(!record.hasAliases)
        #expect(lazy.first?.hasAliases == false)
    }

    @Test("a time problem of a replaced properties object is not reported")
    func replacedTimeProblem() throws {
        let result = parse(document(features: #"{"id":"a","properties":{"time":"x"},"properties":null}"#))
        #expect(result.items == [.skipped(.missingTime, index: 0, detail: "properties.time: missing")])
    }

    // json-reader: the codes of the keys longer than 8 bytes (1, 2, 3) were also the packed codes
    // of the keys "\u0001", "\u0002" and "\u0003", which then read as properties, coordinates
    // and generated.
    @Test("keys \\u0001, \\u0002 and \\u0003 are not properties, coordinates and generated")
    func controlCharacterKeys() throws {
        let result = parse(
            #"{"type":"FeatureCollection","metadata":{"\u0003":5},"features":["#
                + #"{"id":"a","\u0001":{"time":1}},"#
                + #"{"id":"b","properties":{"time":1},"geometry":{"\u0002":[1,2]}}]}"#)
        #expect(result.error == nil)
        #expect(result.metadata.generated == nil)
        #expect(
            result.items == [
                .skipped(.missingTime, index: 0, detail: "properties.time: missing"),
                .skipped(.invalidField, index: 1, detail: "geometry.coordinates: missing"),
            ])
    }

    struct Stop: Error {}

    // feed-parser: after the consumer threw, an empty consume did not resume when an earlier
    // element had straddled chunks (the parser still held that element's end scanner and waited
    // for more bytes), and finish then dropped the elements still kept.
    @Test("after the consumer throws, an empty consume resumes, also after an element straddled chunks")
    func resumeAfterThrow() throws {
        let features = [feature(id: #""a""#), feature(id: #""b""#), feature(id: #""c""#)]
        let bytes = Array(document(features: features.joined(separator: ",")).utf8)
        let cut = bytes.count / 4  // inside the first feature
        var parser = FeedParser()
        var ids: [String] = []
        func take(_ item: FeedItem) throws {
            guard case .feature(let f, _) = item else { return }
            ids.append(f.id)
            if f.id == "b" && ids.count == 2 { throw Stop() }
        }
        try parser.consume(Array(bytes[..<cut]), take)
        #expect(throws: Stop.self) { try parser.consume(Array(bytes[cut...]), take) }
        try parser.consume([], take)
        try parser.finish()
        #expect(ids == ["a", "b", "c"])
    }

    // feed-parser (its model of the format): a metadata field given again as null or with the
    // wrong type kept its earlier value; the last one wins elsewhere, and the wrong type is nil.
    @Test("a metadata field given again as null or of the wrong type is nil")
    func repeatedMetadata() {
        let result = parse(
            #"{"type":"FeatureCollection","metadata":{"count":5,"count":null,"url":"a","url":5,"#
                + #""generated":1,"generated":"x","status":200,"status":2e2,"title":"t","title":null},"features":[]}"#)
        #expect(result.error == nil)
        var expected = FeedMetadata()
        expected.status = 200
        #expect(result.metadata == expected)
    }
}
