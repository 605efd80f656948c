import Foundation
import QuakeConfigValues
import QuakeModel
import QuakeTestSupport
import Testing

/// quaked.conf's value parsers and its `prefer` line, read without a daemon (QuakeDaemonTests
/// reads them through the configuration loader and a real quaked; the `prefer-line` fuzz target
/// reads any bytes).
@Suite("configuration values")
struct ConfigValueTests {
    static func problem(_ body: () throws -> Void) -> String? {
        do {
            try body()
            return nil
        } catch let problem as ConfigValue.Problem {
            return problem.message
        } catch {
            return "\(error)"
        }
    }

    @Test("durations, sizes and regions read back as they are written")
    func roundTrips() throws {
        #expect(try ConfigValue.duration("90") == .seconds(90))
        #expect(try ConfigValue.duration("1w") == .seconds(7 * 86_400))
        #expect(try ConfigValue.duration("1500ms") == .milliseconds(1500))
        for text in ["15m", "7d", "1500ms", "60s"] {
            #expect(ConfigValue.text(duration: try ConfigValue.duration(text)) == text)
        }
        #expect(try ConfigValue.size("256M") == 256 << 20)
        #expect(ConfigValue.text(size: try ConfigValue.size("1G")) == "1G")
        #expect(try ConfigValue.region("-41,174,800") == .near(lat: -41, lon: 174, radiusKm: 800))
        #expect(try ConfigValue.region("35,6,48,19") == .box(minLat: 35, maxLat: 48, minLon: 6, maxLon: 19))
        #expect(try ConfigValue.region("none") == nil)
        for text in ["-41,174,800", "35,6,48,19", "35.5,170,48,-170"] {
            let region = try #require(try ConfigValue.region(text))
            #expect(ConfigValue.text(region: region) == text)
        }
        let unset: Int? = nil
        #expect(ConfigValue.text(of: unset as Any) == "none")
        #expect(ConfigValue.text(of: Duration.seconds(300)) == "5m")
    }

    @Test("a bad value says what it is and what to write")
    func badValues() {
        let cases: [(() throws -> Void, String)] = [
            ({ _ = try ConfigValue.duration("soon") }, "'soon' is not a duration"),
            ({ _ = try ConfigValue.duration("1s", minimum: .seconds(5)) }, "shorter than the minimum"),
            ({ _ = try ConfigValue.size("0") }, "'0' is not a size"),
            ({ _ = try ConfigValue.size("12T") }, "'12T' is not a size"),
            ({ _ = try ConfigValue.region("1,2") }, "is not a region"),
            ({ _ = try ConfigValue.region("95,0,10") }, "latitude -90 to 90"),
            ({ _ = try ConfigValue.region("50,0,10,10") }, "MINLAT <= MAXLAT"),
        ]
        for (body, expected) in cases {
            let message = Self.problem(body)
            #expect(message?.contains(expected) == true, "\(expected): \(message ?? "accepted")")
        }
    }

    @Test("a prefer line: agencies in order, a circle, a box or a polygon file; its description reads back")
    func preferLines() async throws {
        let box = try PreferenceConfiguration(parsing: "INGV region=35,6,48,19")
        #expect(box.agencies == ["INGV"])
        #expect(box.area == .shape(.box(minLat: 35, maxLat: 48, minLon: 6, maxLon: 19)))
        let circle = try PreferenceConfiguration(parsing: "geonet, GNS region=-41,174,800")
        #expect(circle.agencies == ["geonet", "GNS"])
        #expect(circle.area == .shape(.near(lat: -41, lon: 174, radiusKm: 800)))
        for line in [box, circle] {
            #expect(try PreferenceConfiguration(parsing: line.description) == line, "\(line.description)")
        }
        try await withTemporaryDirectory { dir in
            let file = dir.appendingPathComponent("alps.geojson")
            try Data(
                #"{"type":"Polygon","coordinates":[[[6,44],[6,48],[16,48],[16,44],[6,44]]]}"#.utf8
            ).write(to: file)
            let polygon = try PreferenceConfiguration(parsing: "GFZ,EMSC region=\(file.path)")
            guard case .file(let path, _) = polygon.area else {
                Issue.record("not a polygon file: \(polygon.area)")
                return
            }
            #expect(path == file.path)
            #expect(polygon.regionalPreference.agencies == ["GFZ", "EMSC"])
            #expect(try PreferenceConfiguration(parsing: polygon.description) == polygon)
        }
    }

    @Test("a bad prefer line names the line and what to write")
    func badPreferLines() {
        let cases: [(String, String)] = [
            ("region=35,6,48,19", "names no agency"),
            ("IN GV! region=35,6,48,19", "'GV!' is not an agency"),
            ("INGV,ingv region=35,6,48,19", "prefer INGV,ingv: ingv is named twice"),
            ("INGV", "prefer INGV: no region"),
            ("INGV region=1,2", "prefer INGV: option region:"),
            ("INGV region=35,6,48,19 region=1,1,2,2", "given twice"),
            ("INGV colour=red", "unknown option 'colour'"),
            ("INGV region=relative/file.geojson", "prefer INGV: option region:"),
        ]
        for (line, expected) in cases {
            let message = Self.problem { _ = try PreferenceConfiguration(parsing: line) }
            #expect(message?.contains(expected) == true, "\(line): \(message ?? "accepted")")
        }
    }
}
