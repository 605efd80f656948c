import QuakeFeed
import Testing

@Suite("Feature decoding and skip reasons")
struct FeatureDecodingTests {
    /// Parses a document with one feature and returns its item.
    func item(_ feature: String) throws -> FeedItem {
        let result = parse(document(features: feature))
        #expect(result.error == nil, "\(String(describing: result.error))")
        try #require(result.items.count == 1)
        return result.items[0]
    }

    func reason(_ feature: String) throws -> SkipReason? {
        if case .skipped(let reason, _, _) = try item(feature) { return reason }
        return nil
    }

    func decoded(_ feature: String) throws -> FeedFeature {
        let item = try item(feature)
        guard case .feature(let f, _) = item else {
            Issue.record("not decoded: \(item)")
            throw CancellationError()
        }
        return f
    }

    @Test("elements that are not objects", arguments: ["1", #""ci1""#, "null", "[1,2]", "true"])
    func notAnObject(element: String) throws {
        #expect(try reason(element) == .notAnObject)
    }

    @Test(
        "missing or unusable id",
        arguments: [
            feature(id: "null"), feature(id: #""""#), feature(id: "5"), feature(id: "[]"),
            #"{"type":"Feature","properties":{"time":1}}"#,
        ])
    func missingID(element: String) throws {
        #expect(try reason(element) == .missingID)
    }

    @Test(
        "missing or non-integer time",
        arguments: [
            feature(properties: #""mag":1"#), feature(properties: #""time":null"#),
            feature(properties: #""time":"1700000000000""#),
            feature(properties: #""time":1.5"#), feature(properties: #""time":1.7e12"#),
            feature(properties: #""time":9223372036854775808"#),
            #"{"type":"Feature","id":"ci1","properties":null}"#, #"{"type":"Feature","id":"ci1"}"#,
            #"{"type":"Feature","id":"ci1","properties":[1]}"#,
        ])
    func missingTime(element: String) throws {
        #expect(try reason(element) == .missingTime)
    }

    @Test(
        "wrongly typed fields",
        arguments: [
            feature(properties: #""time":1,"mag":"4.5""#), feature(properties: #""time":1,"felt":2.5"#),
            feature(properties: #""time":1,"tsunami":"0""#), feature(properties: #""time":1,"place":5"#),
            feature(properties: #""time":1,"sig":true"#), feature(properties: #""time":1,"nst":1e30"#),
            feature(geometry: #"{"type":"Point","coordinates":[1]}"#),
            feature(geometry: #"{"type":"Point","coordinates":[1,2,3,4]}"#),
            feature(geometry: #"{"type":"Point","coordinates":["1",2]}"#), feature(geometry: #"{"type":"Point"}"#),
            feature(geometry: #""POINT(1 2)""#), feature(geometry: #"{"coordinates":{"lon":1}}"#),
            #"{"type":"Point","properties":{"time":1},"id":"ci1"}"#,
        ])
    func invalidField(element: String) throws {
        #expect(try reason(element) == .invalidField)
    }

    @Test("skip detail names the field and the problem")
    func skipDetail() throws {
        #expect(
            try item(feature(properties: #""time":1,"mag":"4.5""#))
                == .skipped(
                    .invalidField, index: 0, detail: "properties.mag: expected a number or null, found a string"))
        #expect(
            try item(feature(properties: #""time":1,"felt":2.5"#))
                == .skipped(
                    .invalidField, index: 0,
                    detail: "properties.felt: expected an integer or null, found a number with a fraction"))
    }

    @Test("priority: missing id, then missing time, then invalid field")
    func priority() throws {
        #expect(try reason(feature(id: "null", properties: #""mag":"x""#)) == .missingID)
        #expect(try reason(feature(properties: #""mag":"x""#)) == .missingTime)
        #expect(try reason(feature(properties: #""time":1,"mag":"x""#, geometry: "7")) == .invalidField)
    }

    @Test("skipped features keep their index and later features still decode")
    func indices() {
        let result = parse(document(features: [feature(id: "1"), "null", feature(id: #""b""#)].joined(separator: ",")))
        #expect(result.error == nil)
        #expect(result.items.count == 3)
        if case .skipped(.missingID, 0, _) = result.items[0] {} else { Issue.record("\(result.items[0])") }
        if case .skipped(.notAnObject, 1, _) = result.items[1] {} else { Issue.record("\(result.items[1])") }
        if case .feature(let f, 2) = result.items[2] {
            #expect(f.id == "b")
        } else {
            Issue.record("\(result.items[2])")
        }
    }

    @Test("integer fields accept integral numbers only")
    func integers() throws {
        let f = try decoded(
            feature(
                properties:
                    #""time":-5,"felt":12.0,"sig":1e2,"nst":-0.0,"tz":-600,"updated":9223372036854775807,"tsunami":0"#))
        #expect(f.time == -5)
        #expect(f.felt == 12)
        #expect(f.sig == 100)
        #expect(f.nst == 0)
        #expect(f.tz == -600)
        #expect(f.updated == Int64.max)
        #expect(f.tsunami == 0)
        #expect(try reason(feature(properties: #""time":1,"felt":12.000000000000000000001"#)) == .invalidField)
        #expect(try reason(feature(properties: #""time":1,"updated":9223372036854775808"#)) == .invalidField)
        #expect(try decoded(feature(properties: #""time":-9223372036854775808"#)).time == Int64.min)
    }

    @Test(
        "doubles are exact",
        arguments: [
            "0.1", "-0.0", "1.86", "-155.487838745117", "0.140000001", "1.7976931348623157e308", "5e-324",
            "2.2250738585072014E-308",
            "123456789012345678901234567890", "0.30000000000000004", "9007199254740993", "1e23", "8.41e21", "1E+2",
            "4.9406564584124654e-324",
            "0.000000000000000000000000000000000000001234567890123456789",
        ])
    func doubles(text: String) throws {
        let f = try decoded(feature(properties: #""time":1,"mag":"# + text))
        let expected = try #require(Double(text))
        #expect(f.mag == expected)
        #expect(f.mag?.sign == expected.sign)
    }

    @Test("strings: escapes, non-ASCII, escaped keys, nulls, unknown and nested properties")
    func strings() throws {
        let f = try decoded(
            feature(
                properties:
                    #""time":1,"pl\u0061ce":"a\"b\\c\/d\b\f\n\r\t\u00e9\ud83d\ude00 Pāhala","status":"REVIEWED","#
                    + #""alert":null,"extra":{"deep":[1,{"x":null}]},"net":"","title":"\u0000""#,
                geometry: "null"))
        #expect(f.place == "a\"b\\c/d\u{8}\u{c}\n\r\té😀 Pāhala")
        #expect(f.status == "reviewed")
        #expect(f.alert == nil)
        #expect(f.net == "")
        #expect(f.title == "\u{0}")
        #expect(f.lon == nil && f.lat == nil && f.depth == nil)
        #expect(f.mag == nil && f.felt == nil && f.url == nil)
    }

    @Test("geometry: two or three coordinates, null coordinates, absent geometry")
    func geometry() throws {
        let two = try decoded(feature(geometry: #"{"type":"Point","coordinates":[1.5,-2]}"#))
        #expect(two.lon == 1.5 && two.lat == -2 && two.depth == nil)
        let nulls = try decoded(feature(geometry: #"{"coordinates":[null,2,null],"type":"Point"}"#))
        #expect(nulls.lon == nil && nulls.lat == 2 && nulls.depth == nil)
        let absent = try decoded(#"{"id":"x","properties":{"time":3}}"#)
        #expect(absent.id == "x" && absent.time == 3 && absent.lon == nil)
    }
}
