import Foundation
import QuakeHTTP
import QuakeHTTPQuery
import QuakeModel
import QuakeTestSupport
import Testing

/// Real clients from PyPI, in the project's test virtualenv (scripts/install-deps): the libraries
/// behind Home Assistant's USGS and generic GeoJSON feed integrations read a summary feed, and
/// ObsPy's FDSN client reads QuakeML from the event service. A missing peer fails the test.
@Suite struct PeerClientTests {
    static func script(_ name: String) -> String {
        Fixtures.packageRoot.appendingPathComponent("Tests/Peers/\(name)").path
    }

    /// Fails, saying what to run, when the venv's Python cannot import `modules`.
    static func requirePeer(_ modules: String) async throws {
        let probe = try await ChildProcess.run("/usr/bin/env", [PeerTools.python, "-c", "import \(modules)"])
        try #require(
            probe.status == 0,
            "the Python peers are not installed in \(PeerTools.testVenv.path): run scripts/install-deps (\(probe.stderr.suffix(300)))")
    }

    static func json(_ text: String) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any], "not JSON: \(text)")
    }

    @Test("aio_geojson_usgs_earthquakes and aio_geojson_generic_client read a feed: every quake, its place, magnitude, times and position")
    func homeAssistantLibraries() async throws {
        try await Self.requirePeer("aio_geojson_usgs_earthquakes, aio_geojson_generic_client")
        let fixture = try FixtureFeed(Catalog.week)
        let feed = SummaryFeed(level: .m25, period: .week)
        let expected = fixture.feed(feed, now: Catalog.weekGenerated)
        let byID = Dictionary(uniqueKeysWithValues: fixture.features.map { ($0.id, $0) })
        try await Catalog.with { catalog in
            let result = try await ChildProcess.run(
                "/usr/bin/env",
                [PeerTools.python, Self.script("http_geojson_feeds.py"), catalog.base + feed.path, "past_week_m25_earthquakes", "61.2", "-149.9"],
                timeout: .seconds(120))
            #expect(result.status == 0, "\(result.stdout) \(result.stderr)")
            let summary = try Self.json(result.stdout)
            let usgs = try #require(summary["usgs"] as? [String: Any])
            #expect(usgs["status"] as? String == "OK")
            let entries = try #require(usgs["entries"] as? [[String: Any]])
            #expect(entries.map { $0["id"] as? String ?? "" } == expected)
            for entry in entries {
                let id = entry["id"] as? String ?? ""
                let original = try #require(byID[id])
                #expect(entry["place"] as? String == original.properties["place"] as? String)
                #expect(entry["title"] as? String == original.properties["title"] as? String)
                #expect((entry["magnitude"] as? NSNumber)?.doubleValue == original.mag)
                #expect(entry["status"] as? String == original.properties["status"] as? String)
                #expect(entry["type"] as? String == original.properties["type"] as? String)
                let coordinates = (entry["coordinates"] as? [NSNumber] ?? []).map(\.doubleValue)
                // The library gives (lat, lon), rounded to 6 decimals (the geojson package's precision).
                #expect(coordinates.count == 2, "\(id)")
                #expect(zip(coordinates, [original.lat, original.lon]).allSatisfy { abs($0 - $1) <= 5e-7 }, "\(id): \(coordinates)")
                // The library's time is the feature's, in UTC.
                let time = try #require(entry["time"] as? String)
                #expect(time.hasPrefix(String(QuakeTime.iso8601(original.time).prefix(19))), "\(time)")
            }
            #expect(entries.first?["attribution"] as? String == feed.title)
            let generic = try #require(summary["generic"] as? [String: Any])
            #expect(generic["status"] as? String == "OK")
            let genericEntries = try #require(generic["entries"] as? [[String: Any]])
            #expect(genericEntries.map { $0["id"] as? String ?? "" } == expected)
            #expect(genericEntries.allSatisfy { ($0["sources"] as? String)?.isEmpty == false })

            // With the home integration's filters: 500 km and magnitude 3.
            let near = try await ChildProcess.run(
                "/usr/bin/env",
                [PeerTools.python, Self.script("http_geojson_feeds.py"), catalog.base + feed.path, "past_week_m25_earthquakes", "61.2", "-149.9", "500", "3"],
                timeout: .seconds(120))
            #expect(near.status == 0, "\(near.stderr)")
            let nearEntries = (try Self.json(near.stdout)["usgs"] as? [String: Any])?["entries"] as? [[String: Any]] ?? []
            let expectedNear = expected.filter { id in
                let f = byID[id]!
                return FixtureFeed.distanceKm(f.lat, f.lon, 61.2, -149.9) <= 500 && (f.mag ?? 0) >= 3
            }
            #expect(nearEntries.map { $0["id"] as? String ?? "" } == expectedNear)
        }
    }

    @Test("ObsPy's FDSN Client(base_url=...) discovers the event service and get_events reads its QuakeML")
    func obspy() async throws {
        try await Self.requirePeer("obspy.clients.fdsn")
        let fixture = try FixtureFeed(Catalog.week)
        let expected = FDSNEventServiceTests.expected(fixture) { ($0.mag ?? -9) >= 2.5 }
        let byID = Dictionary(uniqueKeysWithValues: fixture.features.map { ($0.id, $0) })
        try await Catalog.with { catalog in
            let parameters = #"{"starttime": "2022-06-25T00:00:00", "endtime": "2022-06-25T12:00:00", "minmagnitude": 2.5}"#
            let result = try await ChildProcess.run(
                "/usr/bin/env", [PeerTools.python, Self.script("http_obspy_fdsn.py"), catalog.base, parameters],
                timeout: .seconds(180))
            #expect(result.status == 0, "\(result.stdout) \(result.stderr)")
            let summary = try Self.json(result.stdout)
            #expect((summary["services"] as? [String])?.contains("event") == true, "\(summary)")
            let events = try #require(summary["events"] as? [[String: Any]], "\(result.stdout)")
            let prefix = "smi:local.quaked/event/"
            #expect(events.map { String(($0["id"] as? String ?? "").dropFirst(prefix.count)) } == expected)
            for event in events {
                let id = String((event["id"] as? String ?? "").dropFirst(prefix.count))
                let original = try #require(byID[id])
                let timestamp = try #require((event["timestamp"] as? NSNumber)?.doubleValue)
                #expect(abs(timestamp * 1000 - Double(original.time)) < 1, "\(id)")
                #expect((event["latitude"] as? NSNumber)?.doubleValue == original.lat)
                #expect((event["longitude"] as? NSNumber)?.doubleValue == original.lon)
                #expect((event["magnitude"] as? NSNumber)?.doubleValue == original.mag)
                #expect(event["magnitudeType"] as? String == original.properties["magType"] as? String)
                #expect(event["agency"] as? String == original.properties["net"] as? String)
                #expect(event["description"] as? String == original.properties["place"] as? String)
                // Depth in metres (QuakeML), the feed's km × 1000.
                let depth = (event["depth"] as? NSNumber)?.doubleValue
                let km = original.coordinates[2]
                #expect(depth.map { abs($0 - km * 1000) < 1e-6 } == true, "\(id): \(String(describing: depth)) m for \(km) km")
            }

            // Nothing matches: ObsPy raises its no-data exception (the 204); a bad value its bad request.
            let none = try await ChildProcess.run(
                "/usr/bin/env",
                [PeerTools.python, Self.script("http_obspy_fdsn.py"), catalog.base, #"{"starttime": "2001-01-01T00:00:00", "endtime": "2001-01-02T00:00:00"}"#],
                timeout: .seconds(180))
            #expect(none.status == 0, "\(none.stderr)")
            #expect(try Self.json(none.stdout)["nodata"] as? Bool == true)
            let bad = try await ChildProcess.run(
                "/usr/bin/env",
                [PeerTools.python, Self.script("http_obspy_fdsn.py"), catalog.base, #"{"orderby": "size"}"#],
                timeout: .seconds(180))
            #expect(bad.status == 0, "\(bad.stderr)")
            // ObsPy passes the service's 400 on, with its text.
            let badRequest = try #require(try Self.json(bad.stdout)["badRequest"] as? String, "\(bad.stdout)")
            #expect(badRequest.contains("orderby=size"), "\(badRequest)")
        }
    }
}
