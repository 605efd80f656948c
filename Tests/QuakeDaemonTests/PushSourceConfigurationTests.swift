import Foundation
import QuakeModel
import QuakeProtocol
import QuakeStore
import QuakeTestSupport
import Testing

@testable import QuakeDaemon

/// `source = NAME emsc WS-URL catch-up=URL ...` and `source = NAME geonet URL ...`: good lines and
/// their round trip, a missing `catch-up=`, bad URL schemes, options the kind does not take, the
/// environment form, and the `min-magnitude=`/`region=` filter the socket's and GeoNet's reports pass.
@Suite("emsc and geonet source configuration")
struct PushSourceConfigurationTests {
    let defaults = DefaultPaths(environment: [:], isRoot: true)
    static let socket = "wss://www.seismicportal.eu/standing_order/websocket"
    static let catchUp = "https://www.seismicportal.eu/fdsnws/event/1/"
    static let geonet = "https://api.geonet.org.nz/quake?MMI=-1"

    func load(_ text: String, environment: [String: String] = [:]) throws -> ResolvedConfiguration {
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let file = dir.appendingPathComponent("quaked.conf")
        try text.write(to: file, atomically: true, encoding: .utf8)
        return try ConfigurationLoader(
            flags: [], configFile: file.path, environment: environment, defaults: defaults
        ).resolve()
    }

    func error(_ text: String, environment: [String: String] = [:]) -> ConfigurationError? {
        do {
            _ = try load(text, environment: environment)
            return nil
        } catch {
            return error as? ConfigurationError
        }
    }

    @Test("emsc: the websocket URL, catch-up= as the FDSN service, geojson by default, every option, the round trip")
    func emscLines() throws {
        let plain = try SourceConfiguration(parsing: "emsc emsc \(Self.socket) catch-up=\(Self.catchUp)")
        #expect(plain.kind == .emsc)
        #expect(plain.endpoint?.absoluteString == Self.socket)
        #expect(plain.service.description == Self.catchUp)
        #expect(plain.format == .geojson && plain.format.parameter == "json")
        #expect(plain.since == .seconds(86_400) && plain.overlap == .seconds(600))
        #expect(
            plain.description
                == "emsc emsc \(Self.socket) catch-up=\(Self.catchUp) format=geojson since=1d overlap=10m")
        #expect(try SourceConfiguration(parsing: plain.description) == plain)

        let full = try SourceConfiguration(
            parsing:
                "eu emsc ws://127.0.0.1:8080/ws catch-up=http://127.0.0.1:8081/fdsnws/event/1/query format=xml overlap=2m since=3d min-magnitude=3 region=35,6,48,19"
        )
        #expect(full.endpoint?.absoluteString == "ws://127.0.0.1:8080/ws")
        #expect(full.service.description == "http://127.0.0.1:8081/fdsnws/event/1/")
        #expect(full.format == .xml && full.overlap == .seconds(120) && full.since == .seconds(3 * 86_400))
        #expect(full.minMagnitude == 3 && full.region == .box(minLat: 35, maxLat: 48, minLon: 6, maxLon: 19))
        #expect(try SourceConfiguration(parsing: full.description) == full)

        // The catch-up query is the fdsn kind's, against catch-up=.
        let url = SourceSync.queryURL(plain, updatedAfter: 0)
        #expect(url.absoluteString.hasPrefix(Self.catchUp + "query?format=json&orderby=time&updatedafter="))
    }

    @Test("geonet: the API URL with its query, interval, the round trip")
    func geonetLines() throws {
        let plain = try SourceConfiguration(parsing: "geonet geonet \(Self.geonet)")
        #expect(plain.kind == .geonet && plain.endpoint?.absoluteString == Self.geonet)
        #expect(plain.interval == .seconds(60))
        #expect(plain.description == "geonet geonet \(Self.geonet) interval=60s")
        #expect(try SourceConfiguration(parsing: plain.description) == plain)
        let full = try SourceConfiguration(parsing: "nz geonet \(Self.geonet) interval=2m min-magnitude=4 region=-41,174,300")
        #expect(full.interval == .seconds(120) && full.minMagnitude == 4)
        #expect(full.region == .near(lat: -41, lon: 174, radiusKm: 300))
        #expect(try SourceConfiguration(parsing: full.description) == full)
    }

    @Test(
        "errors name the source, the option and the remedy, with the place",
        arguments: [
            (
                "emsc emsc \(socket)",
                "source emsc: an emsc source needs catch-up=, the FDSN event service that brings what was published while the websocket was down: add catch-up=https://www.seismicportal.eu/fdsnws/event/1/"
            ),
            (
                "emsc emsc https://www.seismicportal.eu/standing_order/websocket catch-up=\(catchUp)",
                "source emsc: 'https://www.seismicportal.eu/standing_order/websocket' is not EMSC's websocket URL: use a wss:// or ws:// URL with a host"
            ),
            ("emsc emsc \(socket) catch-up=wss://example.org/", "source emsc: option catch-up: 'wss://example.org/' is not an FDSN event service URL"),
            ("emsc emsc \(socket) catch-up=\(catchUp) interval=1m", "source emsc: unknown option 'interval' (options: catch-up, format, since, overlap, min-magnitude, region)"),
            ("emsc emsc \(socket) catch-up=\(catchUp) catch-up=\(catchUp)", "source emsc: option catch-up: given twice"),
            ("emsc emsc \(socket) catch-up=\(catchUp) overlap=soon", "source emsc: option overlap: 'soon' is not a duration"),
            ("nz geonet ftp://api.geonet.org.nz/quake", "source nz: 'ftp://api.geonet.org.nz/quake' is not GeoNet's quake API URL: use a https:// or http:// URL with a host"),
            ("nz geonet wss://api.geonet.org.nz/quake", "is not GeoNet's quake API URL"),
            ("nz geonet \(geonet) format=xml", "source nz: unknown option 'format' (options: interval, min-magnitude, region)"),
            ("nz geonet \(geonet) interval=1s", "source nz: option interval: '1s' is shorter than the minimum of"),
        ])
    func malformed(line: String, expected: String) throws {
        let problem = try #require(error("feed = none\nsource = \(line)\n"))
        #expect(problem.key == "source")
        #expect(problem.source.hasSuffix("quaked.conf:2"), "\(problem)")
        #expect(problem.problem.contains(expected), "\(problem.problem)")
    }

    @Test("QUAKED_SOURCE takes both kinds beside an fdsn line; the configuration's text reads back the same")
    func environment() throws {
        let resolved = try load(
            "feed = none\n",
            environment: [
                "QUAKED_SOURCE":
                    "ingv fdsn https://webservices.ingv.it/fdsnws/event/1/; emsc emsc \(Self.socket) catch-up=\(Self.catchUp); nz geonet \(Self.geonet)"
            ])
        let sources = resolved.configuration.sources
        #expect(sources.map(\.name) == ["ingv", "emsc", "nz"])
        #expect(sources.map(\.kind) == [.fdsn, .emsc, .geonet])
        let missing = try #require(error("feed = none\n", environment: ["QUAKED_SOURCE": "emsc emsc \(Self.socket)"]))
        #expect(missing.source == "QUAKED_SOURCE" && missing.problem.contains("needs catch-up="))
    }

    @Test("min-magnitude= and region= filter the pushed and polled reports; retractions always pass")
    func filters() throws {
        func report(_ lat: Double, _ lon: Double, _ magnitude: Double?) -> SourceItem {
            .report(
                SourceReport(
                    source: "s", id: "x", agency: "EMSC", time: 0, latitude: lat, longitude: lon, magnitude: magnitude))
        }
        let box = try SourceConfiguration(
            parsing: "s emsc \(Self.socket) catch-up=\(Self.catchUp) min-magnitude=3 region=35,6,48,19")
        #expect(box.admits(report(42, 13, 4)))
        #expect(!box.admits(report(42, 13, 2.9)))
        #expect(!box.admits(report(42, 13, nil)))
        #expect(!box.admits(report(30, 13, 4)))
        #expect(!box.admits(report(42, 25, 4)))
        #expect(box.admits(.retraction(source: "s", id: "x", updated: nil)))
        let circle = try SourceConfiguration(parsing: "nz geonet \(Self.geonet) region=-41,174,300")
        #expect(circle.admits(report(-41.2, 174.8, nil)))
        #expect(!circle.admits(report(-45.9, 170.5, 5)))
        let everything = try SourceConfiguration(parsing: "nz geonet \(Self.geonet)")
        #expect(everything.admits(report(10, 10, nil)))
    }
}
