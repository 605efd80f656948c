import QuakeModel
import QuakeSources
import Testing

/// One websocket message through a fresh EMSCMessageReader.
private func message(_ bytes: [UInt8]) -> (item: SourceItem?, reader: EMSCMessageReader, error: SourceError?) {
    var reader = EMSCMessageReader(source: "emsc")
    do {
        let item = try reader.read(bytes)
        return (item, reader, nil)
    } catch {
        return (nil, reader, error)
    }
}

private func message(_ text: String) -> (item: SourceItem?, reader: EMSCMessageReader, error: SourceError?) {
    message(Array(text.utf8))
}

private func report(_ item: SourceItem?) -> SourceReport? {
    if case .report(let r)? = item { r } else { nil }
}

/// An EMSC FDSN GeoJSON answer through an EMSCGeoJSONReader in chunks of `chunk` bytes.
func parseEMSCGeoJSON(_ bytes: [UInt8], chunk: Int = 65536) -> Parsed {
    parse(EMSCGeoJSONReader(source: "emsc"), bytes, chunk: chunk)
}

/// A feature of EMSC's layout with `properties` (a JSON object's members) and `geometry`.
private func ws(
    action: String = "\"create\"",
    properties: String = #""unid": "20210502_0000100", "time": "2021-05-02T12:46:04.0Z", "lat": -30.07, "lon": -71.53"#,
    geometry: String = #"{"type": "Point", "coordinates": [-71.53, -30.07, -38.0]}"#
) -> String {
    #"{"action": \#(action), "data": {"geometry": \#(geometry), "type": "Feature", "id": "20210502_0000100", "properties": {\#(properties)}}}"#
}

@Suite struct EMSCReaderTests {
    @Test func websocketCreateMessage() throws {
        let result = message(try fixture("mightymatth__earthquake-tools__emsc_ws_test.json"))
        #expect(result.error == nil)
        let r = try #require(report(result.item))
        #expect(
            r
                == SourceReport(
                    source: "emsc", id: "20210502_0000100", agency: "GUC", time: 1_619_959_564_000, latitude: -30.07,
                    longitude: -71.53, depth: 38, magnitude: 2.7, magnitudeType: "ml",
                    place: "OFFSHORE COQUIMBO, CHILE", eventType: "earthquake", updated: 1_619_960_460_000))
    }

    @Test func petrinjaMainShock() throws {
        let r = try #require(report(message(try fixture("mightymatth__earthquake-tools__response.json")).item))
        #expect(r.id == "20201229_0000078")
        #expect(r.time == 1_609_240_794_600)
        #expect(r.latitude == 45.46 && r.longitude == 16.31 && r.depth == 10)
        #expect(r.magnitude == 6.4 && r.magnitudeType == "mw")
        #expect(r.place == "CROATIA" && r.agency == "EMSC")
        #expect(r.updated == 1_609_245_720_000)
    }

    @Test func updateMessageWithGeometryFirst() throws {
        let r = try #require(report(message(try fixture("h00s__goseismic__README.json")).item))
        #expect(r.id == "20201230_0000082")
        #expect(r.time == 1_609_317_929_900 && r.updated == 1_609_318_020_000)
        #expect(r.latitude == 36.6 && r.longitude == -121.2 && r.depth == 4)
        #expect(r.magnitude == 2.4 && r.magnitudeType == "md" && r.agency == "NC")
        #expect(r.place == "CENTRAL CALIFORNIA")
    }

    /// EMSC's documented example has a comma after the last member: strict JSON rejects it,
    /// naming the comma's byte.
    @Test func documentedExampleTrailingCommaIsRejected() throws {
        let result = message(try fixture("EMSC-CSEM__webservices101__usecase3.json"))
        let error = try #require(result.error)
        #expect(error.kind == .malformedJSON)
        #expect(error.byteOffset == 611)
        #expect(error.message.contains("trailing comma"))
        #expect(error.description.contains("byte 611"))
        #expect(error.source == "emsc")
        // Without the comma it reads, with the microseconds of its lastupdate.
        var bytes = try fixture("EMSC-CSEM__webservices101__usecase3.json")
        bytes.remove(at: 611)
        let r = try #require(report(message(bytes).item))
        #expect(r.id == "20250305_0000090" && r.time == 1_741_167_907_000)
        #expect(r.updated == SourceTime.milliseconds("2025-03-05T10:06:56.102Z"))
        #expect(r.agency == "AFAD" && r.place == "WESTERN TURKEY" && r.depth == 7)
        #expect(r.latitude == 40.115 && r.longitude == 28.5381)
    }

    @Test func trailingCommaInAnArrayIsRejected() throws {
        let error = try #require(message(ws(geometry: #"{"coordinates": [1, 2, -3,]}"#)).error)
        #expect(error.kind == .malformedJSON)
        #expect(error.message.contains("trailing comma"))
    }

    @Test func depthFallsBackToTheNegatedThirdCoordinate() throws {
        let r = try #require(report(message(ws()).item))
        #expect(r.depth == 38)
        let zero = try #require(report(message(ws(geometry: #"{"coordinates": [-71.53, -30.07, -0.0]}"#)).item))
        #expect(zero.depth == 0 && zero.depth?.sign == .plus)
        let none = try #require(report(message(ws(geometry: #"{"coordinates": [-71.53, -30.07]}"#)).item))
        #expect(none.depth == nil)
    }

    @Test func coordinatesFallBackToTheGeometry() throws {
        let r = try #require(
            report(message(ws(properties: #""unid": "a", "time": "2021-05-02T12:46:04Z""#)).item))
        #expect(r.latitude == -30.07 && r.longitude == -71.53)
        // The feature's id when there is no unid; any number of fractional digits.
        let s = try #require(
            report(message(ws(properties: #""time": "2021-05-02T12:46:04.123456789Z", "lat": 1, "lon": 2"#)).item))
        #expect(s.id == "20210502_0000100" && s.time == 1_619_959_564_123)
    }

    @Test func eventTypeCodes() throws {
        func type(_ code: String) throws -> String? {
            try #require(report(message(ws(properties: #""unid": "a", "time": "2021-05-02T12:46:04Z", "evtype": \#(code)"#)).item))
                .eventType
        }
        #expect(try type("\"ke\"") == "earthquake")
        #expect(try type("\"se\"") == "earthquake")
        #expect(try type("\"KM\"") == "mining explosion")
        #expect(try type("\"sn\"") == "nuclear explosion")
        #expect(try type("\"ls\"") == "landslide")
        #expect(try type("\"uk\"") == nil)
        #expect(try type("\"\"") == nil)
        #expect(try type("\"qb\"") == "qb")
        #expect(try type("12") == nil)
    }

    @Test func skippedEventsAreCountedNotThrown() throws {
        var reader = EMSCMessageReader(source: "emsc")
        #expect(try reader.read(Array(ws(properties: #""unid": "a", "time": "yesterday", "lat": 1, "lon": 2"#).utf8)) == nil)
        #expect(try reader.read(Array(ws(properties: #""unid": "b", "lat": 1, "lon": 2"#).utf8)) == nil)
        #expect(
            try reader.read(
                Array(ws(properties: #""unid": "c", "time": "2021-05-02T12:46:04Z", "lat": 91, "lon": 2"#).utf8)) == nil)
        #expect(try reader.read(Array(ws().utf8)) != nil)
        #expect(reader.skippedCount == 3)
        #expect(reader.problems.map(\.kind) == [.badTime, .badTime, .badCoordinates])
        #expect(reader.problems.map(\.id) == ["a", "b", "c"])
        #expect(reader.problems[0].path == "data.properties.time")
        #expect(reader.problems[0].message.contains("\"yesterday\""))
        // No id at all.
        let noID = message(#"{"action":"create","data":{"properties":{"time":"2021-05-02T12:46:04Z","lat":1,"lon":2}}}"#)
        #expect(noID.item == nil && noID.error == nil)
        #expect(noID.reader.problems.first?.kind == .noID)
    }

    @Test func wrongShapesNameTheMember() throws {
        let cases: [(String, String)] = [
            (ws(action: "\"delete\""), "action"),
            (ws(action: "1"), "action"),
            (#"{"action": "create"}"#, "\"data\""),
            (#"{"data": {}}"#, "\"action\""),
            (#"{"action": "create", "data": []}"#, "data"),
            (#"{"action": "create", "data": {"properties": 5}}"#, "data.properties"),
            (#"{"action": "create", "data": {"type": "FeatureCollection"}}"#, "data.type"),
            (#"[1]"#, "the message"),
        ]
        for (text, member) in cases {
            let error = try #require(message(text).error, "\(text)")
            #expect(error.kind == .wrongShape, "\(text)")
            #expect(error.message.contains(member), "\(text): \(error)")
        }
    }

    @Test func malformedMessages() throws {
        for text in ["", "  ", #"{"action": "create", "data": {}"#, ws() + " x", "{'action': 1}", ws() + "{}"] {
            let error = try #require(message(text).error, "\(text)")
            #expect(error.kind == .malformedJSON, "\(text): \(error)")
            #expect(error.byteOffset != nil)
        }
        // Invalid UTF-8 inside a string.
        var bytes = Array(ws().utf8)
        bytes[bytes.firstIndex(of: UInt8(ascii: "2"))!] = 0xFF
        #expect(message(bytes).error?.kind == .malformedJSON)
    }

    @Test func memberOrderAndUnknownMembersDoNotMatter() throws {
        let text = #"""
            {"data": {"properties": {"x": [1, {"y": null}], "unid": "z", "time": "2021-05-02T12:46:04Z",
             "lat": 1.5, "lon": -2.5, "mag": "big", "flynn_region": 7, "source_id": "1", "source_catalog": "EMSC-RTS"},
             "geometry": null, "extra": true}, "action": "update", "more": {}}
            """#
        let r = try #require(report(message(text).item))
        #expect(r.id == "z" && r.latitude == 1.5 && r.longitude == -2.5)
        #expect(r.magnitude == nil && r.place == nil && r.depth == nil)
    }

    @Test func fdsnGeoJSONAnswer() throws {
        let bytes = try fixture("mightymatth__earthquake-tools__emsc_rest_test.json")
        let whole = parseEMSCGeoJSON(bytes)
        #expect(whole.error == nil)
        #expect(whole.items.count == 1)
        // The same event as the websocket's message.
        let socket = message(try fixture("mightymatth__earthquake-tools__emsc_ws_test.json")).item
        #expect(whole.items.first == socket)
        for chunk in 1...40 {
            let chunked = parseEMSCGeoJSON(bytes, chunk: chunk)
            #expect(chunked.items == whole.items && chunked.error == nil, "chunk \(chunk)")
        }
    }

    /// Each message's `data`, as the one feature of an FDSN answer, gives the message's item.
    @Test func messagesAndFDSNAnswersAgree() throws {
        for name in [
            "mightymatth__earthquake-tools__emsc_ws_test.json", "mightymatth__earthquake-tools__response.json",
            "h00s__goseismic__README.json",
        ] {
            let bytes = try fixture(name)
            let item = try #require(message(bytes).item, "\(name)")
            let text = String(decoding: bytes, as: UTF8.self)
            let data = try #require(text.range(of: "\"data\"")).upperBound
            let colon = try #require(text[data...].firstIndex(of: ":"))
            let close = try #require(text.lastIndex(of: "}"))
            let feature = text[text.index(after: colon)..<close]
            let answer = #"{"type":"FeatureCollection","metadata":{"totalCount":1},"features":["# + feature + "]}"
            let parsed = parseEMSCGeoJSON(Array(answer.utf8), chunk: 17)
            #expect(parsed.error == nil, "\(name)")
            #expect(parsed.items == [item], "\(name)")
        }
    }

    @Test func fdsnGeoJSONErrors() throws {
        let html = parseEMSCGeoJSON(Array("\n<!DOCTYPE html><html><body>503</body></html>".utf8), chunk: 3)
        #expect(html.error?.kind == .htmlPage)
        #expect(html.error?.message.contains("format=json") == true)
        let text = try fixture("mightymatth__earthquake-tools__emsc_rest_test.json")
        let cut = parseEMSCGeoJSON(Array(text.prefix(300)))
        #expect(cut.error?.kind == .malformedJSON)
        #expect(cut.error?.byteOffset == 300)
        let feature = parseEMSCGeoJSON(Array(#"{"type":"FeatureCollection","features":[1]}"#.utf8))
        #expect(feature.error?.kind == .wrongShape)
        #expect(feature.error?.message.contains("features[0]") == true)
        let collection = parseEMSCGeoJSON(Array(#"{"type":"Feature","features":[]}"#.utf8))
        #expect(collection.error?.kind == .wrongShape)
        let comma = parseEMSCGeoJSON(Array(#"{"type":"FeatureCollection","features":[],}"#.utf8))
        #expect(comma.error?.kind == .malformedJSON)
        #expect(comma.error?.byteOffset == 42)
        // HTTP 204: nothing.
        for blank in ["", " \n "] {
            let none = parseEMSCGeoJSON(Array(blank.utf8))
            #expect(none.items.isEmpty && none.error == nil)
        }
    }

    @Test func aThrowingBodyLeavesTheReaderUsable() throws {
        struct Stop: Error {}
        let feature = #"{"type":"Feature","id":"ID","properties":{"time":"2021-05-02T12:46:04Z","lat":1,"lon":2}}"#
        let doc = #"{"type":"FeatureCollection","features":["# + [1, 2, 3].map { feature.replacingOccurrences(of: "ID", with: "e\($0)") }.joined(separator: ",") + "]}"
        var reader = EMSCGeoJSONReader(source: "emsc")
        var ids: [String] = []
        var thrown = 0
        var calls = 0
        func take(_ item: SourceItem) throws {
            calls += 1
            if calls == 1 { thrown += 1; throw Stop() }
            if case .report(let r) = item { ids.append(r.id) }
        }
        #expect(throws: Stop.self) { try reader.consume(Array(doc.utf8), take) }
        try reader.consume([], take)
        try reader.finish(take)
        #expect(thrown == 1)
        #expect(ids == ["e2", "e3"])
    }
}
