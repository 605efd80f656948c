import QuakeModel
import QuakeSources
import Testing

/// A GeoNet quake API answer through a GeoNetReader in chunks of `chunk` bytes.
func parseGeoNet(_ bytes: [UInt8], chunk: Int = 65536, source: String = "geonet") -> Parsed {
    parse(GeoNetReader(source: source), bytes, chunk: chunk)
}

private func retractions(_ parsed: Parsed) -> [String] {
    parsed.items.compactMap { if case .retraction(_, let id, _) = $0 { id } else { nil } }
}

@Suite struct GeoNetReaderTests {
    @Test func mmi4() throws {
        let bytes = try fixture("exxamalte__python-aio-geojson-geonetnz-quakes__quake-mmi4.json")
        let parsed = parseGeoNet(bytes)
        #expect(parsed.error == nil)
        #expect(parsed.items.count == 88)
        #expect(parsed.reports.count == 81)
        #expect(
            retractions(parsed) == [
                "2019p497615", "2019p174778", "2019p174754", "2019p166058", "2019p166055", "2019p159004", "2019p098570",
            ])
        #expect(parsed.skipped == 0)
        let first = try #require(parsed.report("2019p545576"))
        #expect(
            first
                == SourceReport(
                    source: "geonet", id: "2019p545576", agency: "WEL", time: 1_563_741_802_303, latitude: -43.5546608,
                    longitude: 172.6222076, depth: 5, magnitude: 3.900755846, place: "Within 5 km of Christchurch",
                    evaluationMode: .manual, evaluationStatus: .reviewed))
        #expect(first.isReviewed)
        // The quake USGS also has (us600044py), and the duplicate of the deleted 2019p159004.
        let feilding = try #require(parsed.report("2019p467195"))
        #expect(feilding.time == SourceTime.milliseconds("2019-06-22T20:41:42.265Z"))
        #expect(parsed.report("2019p159000") != nil)
        #expect(parsed.report("2019p159004") == nil)
        #expect(parsed.reports.allSatisfy { (-48 ... -34).contains($0.latitude) && $0.agency == "WEL" })
        for chunk in [1, 7, 100, 4096] {
            let chunked = parseGeoNet(bytes, chunk: chunk)
            #expect(chunked.items == parsed.items && chunked.error == nil, "chunk \(chunk)")
        }
    }

    @Test func mmi6IsOneDeletion() throws {
        let parsed = parseGeoNet(try fixture("exxamalte__python-aio-geojson-geonetnz-quakes__quake-mmi6.json"))
        #expect(parsed.error == nil)
        #expect(parsed.items == [.retraction(source: "geonet", id: "2019p159004", updated: nil)])
    }

    @Test func aFeatureWithoutTimeIsSkipped() throws {
        let bytes = try fixture("exxamalte__python-aio-geojson-geonetnz-quakes__quakes-1.json")
        let parsed = parseGeoNet(bytes)
        #expect(parsed.error == nil)
        #expect(parsed.reports.map(\.id) == ["2019p111111", "2019p222222"])
        #expect(parsed.reports.map(\.time) == [1_563_991_200_000, 1_563_994_800_000])
        #expect(parsed.reports.map(\.place) == ["Locality 1", "Locality 2"])
        #expect(parsed.reports[1].depth == 0 && parsed.reports[1].magnitude == 5.881102095)
        #expect(parsed.skipped == 1)
        let problem = try #require(parsed.problems.first)
        #expect(problem.kind == .badTime)
        #expect(problem.id == "2019p333333")
        #expect(problem.path == "features[2].properties.time")
        #expect(problem.description.contains("2019p333333"))
        for chunk in 1...64 {
            let chunked = parseGeoNet(bytes, chunk: chunk)
            #expect(chunked.items == parsed.items && chunked.problems == parsed.problems, "chunk \(chunk)")
        }
    }

    @Test func qualityMapping() {
        #expect(GeoNetReader.evaluation(quality: "best") == (.manual, .reviewed))
        #expect(GeoNetReader.evaluation(quality: "preliminary") == (nil, .preliminary))
        #expect(GeoNetReader.evaluation(quality: "automatic") == (.automatic, nil))
        #expect(GeoNetReader.evaluation(quality: "caution") == (.automatic, nil))
        #expect(GeoNetReader.evaluation(quality: "odd") == (nil, nil))
        #expect(GeoNetReader.evaluation(quality: nil) == (nil, nil))
    }

    private func one(_ properties: String, coordinates: String = "[172.5, -43.5]") -> Parsed {
        parseGeoNet(
            Array(
                #"{"type":"FeatureCollection","features":[{"type":"Feature","geometry":{"type":"Point","coordinates":\#(coordinates)},"properties":{\#(properties)}}]}"#
                    .utf8))
    }

    @Test func skippedFeatures() throws {
        let time = #""time":"2019-07-24T18:00:00Z""#
        #expect(one(time).problems.first?.kind == .noID)
        #expect(one(#""publicID":"","# + time).problems.first?.kind == .noID)
        #expect(one(#""publicID":"a","time":1"#).problems.first?.kind == .badTime)
        #expect(one(#""publicID":"a","# + time, coordinates: "[172.5, -93]").problems.first?.kind == .badCoordinates)
        #expect(one(#""publicID":"a","# + time, coordinates: "[190, 1]").problems.first?.kind == .badCoordinates)
        #expect(one(#""publicID":"a","# + time, coordinates: "[1e400, 1]").problems.first?.kind == .badCoordinates)
        #expect(one(#""publicID":"a","# + time, coordinates: "[1]").problems.first?.kind == .badCoordinates)
        // Deleted needs neither time nor coordinates.
        #expect(one(#""publicID":"a","quality":"deleted""#, coordinates: "null").items == [
            .retraction(source: "geonet", id: "a", updated: nil)
        ])
        // Optional members of the wrong type are absent; a third coordinate is ignored.
        let r = try #require(
            one(#""publicID":"a","depth":"deep","magnitude":null,"locality":5,"mmi":-1,"# + time,
                coordinates: "[172.5, -43.5, 12]").reports.first)
        #expect(r.depth == nil && r.magnitude == nil && r.place == nil && r.latitude == -43.5)
        #expect(r.evaluationMode == nil && r.evaluationStatus == nil)
    }

    @Test func rejectedAnswers() throws {
        let bytes = try fixture("exxamalte__python-aio-geojson-geonetnz-quakes__quakes-1.json")
        let cut = parseGeoNet(Array(bytes.prefix(700)), chunk: 50)
        #expect(cut.error?.kind == .malformedJSON)
        #expect(cut.error?.byteOffset == 700)
        #expect(cut.error?.message.contains("api.geonet.org.nz") == true)
        #expect(parseGeoNet(Array("<html><body>Bad gateway</body></html>".utf8)).error?.kind == .htmlPage)
        #expect(parseGeoNet(Array("[]".utf8)).error?.kind == .wrongShape)
        #expect(parseGeoNet(Array(#"{"type":"FeatureCollection"}"#.utf8)).error?.kind == .wrongShape)
        #expect(
            parseGeoNet(Array(#"{"type":"FeatureCollection","features":[{"properties":[]}]}"#.utf8)).error?.kind
                == .wrongShape)
        let comma = parseGeoNet(
            Array(#"{"type":"FeatureCollection","features":[{"properties":{"publicID":"a",}}]}"#.utf8))
        #expect(comma.error?.kind == .malformedJSON)
        #expect(comma.error?.byteOffset == 70)
        // Once rejected, it stays rejected.
        var reader = GeoNetReader(source: "geonet")
        #expect(throws: SourceError.self) { try reader.consume(Array("{]".utf8)) { _ in } }
        #expect(throws: SourceError.self) { try reader.consume(Array("{}".utf8)) { _ in } }
        #expect(throws: SourceError.self) { try reader.finish { _ in } }
        #expect(parseGeoNet([]).items.isEmpty && parseGeoNet([]).error == nil)
    }
}
