import Foundation
import QuakeProtocol
import QuakeTestSupport
import Testing

@testable import QuakeCtl

/// `show`'s reports table, `status`'s sources section and their JSON, from constructed values.
@Suite struct SourceOutputTests {
    static let utc = OutputStyle(absoluteTimes: true, timeZone: TimeZone(identifier: "UTC")!)
    static let now = Date(timeIntervalSince1970: 1_741_132_800)  // 2025-03-05 00:00:00 UTC

    static let reports = [
        IOQuaked.Report(
            source: "ingv", agency: "INGV", id: "20250305_0000090", time: 1_741_132_809_120, lat: 42.5, lon: 13.25,
            depth: 9.8, mag: 4.4, magType: "ML", place: "Central Italy", type: "earthquake", status: "reviewed",
            mode: "manual", updated: 1_741_133_000_000, preferred: true),
        IOQuaked.Report(
            source: "emsc", agency: nil, id: "20250305_0000012", time: 1_741_132_809_500, lat: 42.52, lon: 13.2,
            depth: nil, mag: 4.5, magType: nil, place: nil, type: nil, status: nil, mode: "automatic", updated: nil,
            preferred: false),
        IOQuaked.Report(
            source: "usgs", agency: "us", id: "us7000abcd", time: 1_741_132_810_000, lat: 42.4, lon: 13.3, depth: 10,
            mag: nil, magType: "mb", place: "4 km SW of Montereale, Italy, a place with a very long name", type: nil,
            status: nil, mode: nil, updated: nil, preferred: false),
    ]

    @Test("the reports table: a header, a row per report, the preferred one marked *")
    func reportsTable() {
        let text = ShowCommand.reportsText(Self.reports, Self.utc)
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        #expect(lines[0] == "")
        #expect(lines[1] == "reports")
        #expect(
            lines[2].hasPrefix("    source  agency  id                time                     mag     depth   place"),
            "\(text)")
        #expect(
            lines[3]
                == "  * ingv    INGV    20250305_0000090  2025-03-05 00:00:09 UTC  4.4 ML  9.8 km  "
                + "Central Italy                             reviewed")
        #expect(
            lines[4]
                == "    emsc    –       20250305_0000012  2025-03-05 00:00:09 UTC  4.5     –       "
                + "–                                         automatic")
        // A long place is cut at 40 characters; a magnitude type without a value still shows.
        #expect(lines[5].contains("– mb    10 km   4 km SW of Montereale, Italy, a place w…  –"), "\(lines[5])")
        #expect(lines.count == 7 && lines[6] == "")
        #expect(!text.contains("\u{1B}"), "no colours without a terminal")
    }

    @Test("the table follows --tz and --units")
    func reportsTableDisplay() throws {
        let style = OutputStyle(
            absoluteTimes: true, timeZone: try #require(TimeZone(identifier: "Asia/Tokyo")), units: .mi)
        let text = ShowCommand.reportsText([Self.reports[0]], style)
        #expect(text.contains("2025-03-05 09:00:09 +09:00"), "\(text)")
        #expect(text.contains("6.1 mi"), "\(text)")
    }

    @Test("show --json adds reports only when there are any")
    func showJSON() throws {
        let quake = IOQuaked.Quake(id: "20250305_0000090", mag: 4.4, time: 1_741_132_809_120)
        let plain = ShowCommand.json(quake, reports: [])
        #expect(plain == JSONText.encode(quake))
        #expect(!plain.contains("reports"))

        let text = ShowCommand.json(quake, reports: Self.reports)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
        #expect(object["id"] as? String == "20250305_0000090")
        #expect(object["mag"] as? Double == 4.4)
        let reports = try #require(object["reports"] as? [[String: Any]])
        #expect(reports.count == 3)
        #expect(reports[0]["preferred"] as? Bool == true && reports[1]["preferred"] as? Bool == false)
        #expect(reports[0]["time"] as? Int == 1_741_132_809_120, "times are the interface's milliseconds")
        #expect(reports[1]["agency"] == nil, "absent values are left out")
        // The quake still decodes from it, as an old consumer of show --json reads it.
        struct Shown: Decodable {
            var id: String
            var reports: [IOQuaked.Report]
        }
        let shown = try JSONDecoder().decode(Shown.self, from: Data(text.utf8))
        #expect(shown.reports == Self.reports)
    }

    /// The reports above as the event carries them: `contributors`, the preferred first.
    static let contributors = reports.map { r in
        IOQuaked.Contributor(
            source: r.source, agency: r.agency, id: r.id, time: r.time, lat: r.lat, lon: r.lon, depth: r.depth,
            mag: r.mag, magType: r.magType, status: r.status, updated: r.updated, preferred: r.preferred)
    }

    /// An event three agencies reported, INGV's solution preferred.
    static var event: IOQuaked.Quake {
        var quake = IOQuaked.Quake(id: "20250305_0000090", mag: 4.4, time: 1_741_132_809_120)
        quake.net = "ingv"
        quake.sources = ",ingv,emsc,us,"
        quake.lat = 42.5
        quake.lon = 13.25
        quake.agency = "INGV"
        quake.contributors = contributors
        return quake
    }

    @Test("show --json carries agency and contributors, typed, the preferred first; show lists them in a line")
    func showContributors() throws {
        for text in [ShowCommand.json(Self.event, reports: []), ShowCommand.json(Self.event, reports: Self.reports)] {
            let object = try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
            #expect(object["agency"] as? String == "INGV")
            let contributors = try #require(object["contributors"] as? [[String: Any]], "\(text)")
            #expect(contributors.map { $0["source"] as? String } == ["ingv", "emsc", "usgs"])
            #expect(contributors.map { $0["preferred"] as? Bool } == [true, false, false])
            #expect(contributors[0]["time"] as? Int == 1_741_132_809_120 && contributors[0]["lat"] as? Double == 42.5)
            #expect(contributors[1]["agency"] == nil, "absent values are left out")
            #expect(try JSONDecoder().decode(IOQuaked.Quake.self, from: Data(text.utf8)).contributors == Self.contributors)
        }
        // list --json: the Query reply, the quakes in the same form.
        let reply = JSONText.encode(IOQuaked.Query.Reply(quakes: [Self.event], total: 1, headToken: 7))
        let decoded = try JSONDecoder().decode(IOQuaked.Query.Reply.self, from: Data(reply.utf8))
        #expect(decoded.quakes.first?.contributors == Self.contributors && decoded.quakes.first?.agency == "INGV")

        let text = ShowCommand.text(Self.event, Self.utc, now: Self.now)
        let lines = text.split(separator: "\n").map(String.init)
        #expect(lines.contains { $0.hasPrefix("  agency ") && $0.hasSuffix("  INGV") }, "\(text)")
        let line = try #require(lines.first { $0.hasPrefix("  contributors") }, "\(text)")
        #expect(
            line.hasSuffix("  INGV 20250305_0000090 (preferred), emsc 20250305_0000012, us us7000abcd"), "\(line)")
        #expect(!text.contains("\"source\""), "no JSON in the text")
        // A quake without sources shows neither (a dash, as for any null field).
        var plain = Self.event
        plain.agency = nil
        plain.contributors = nil
        let plainText = ShowCommand.text(plain, Self.utc, now: Self.now)
        #expect(plainText.contains("  contributors  –"), "\(plainText)")
    }

    @Test("exports: ndjson and geojson carry contributors as an array; csv and kml an agency column, no contributors")
    func exportsCarryContributors() throws {
        var ndjson: [UInt8] = []
        NDJSONExportWriter().quake(Self.event, index: 0, into: &ndjson)
        let line = try #require(
            try JSONSerialization.jsonObject(with: Data(ndjson.dropLast())) as? [String: Any])
        #expect((line["contributors"] as? [[String: Any]])?.count == 3)
        #expect(line["agency"] as? String == "INGV")
        #expect(try IOQuaked.Quake.decode(json: ndjson.dropLast()) == Self.event, "the interface's Quake, strictly")

        let geojson = GeoJSONExportWriter()
        var out: [UInt8] = []
        geojson.header(into: &out)
        geojson.quake(Self.event, index: 0, into: &out)
        geojson.footer(into: &out)
        let collection = try #require(try JSONSerialization.jsonObject(with: Data(out)) as? [String: Any])
        let feature = try #require((collection["features"] as? [[String: Any]])?.first)
        let properties = try #require(feature["properties"] as? [String: Any])
        #expect(properties["agency"] as? String == "INGV")
        let contributors = try #require(properties["contributors"] as? [[String: Any]])
        #expect(contributors.map { $0["id"] as? String } == Self.reports.map(\.id))
        #expect(properties["lat"] == nil && properties["id"] == nil, "coordinates and id stay the feature's own")

        let csv = CSVExportWriter()
        var table: [UInt8] = []
        csv.header(into: &table)
        csv.quake(Self.event, index: 0, into: &table)
        let rows = String(decoding: table, as: UTF8.self).components(separatedBy: "\r\n")
        let header = rows[0].split(separator: ",", omittingEmptySubsequences: false).map(String.init)
        #expect(header.last == "agency" && !header.contains("contributors"))
        #expect(header == QuakeFields.names.filter { $0 != "contributors" })
        #expect(rows[1].hasSuffix(",INGV"), "\(rows[1])")

        var kml: [UInt8] = []
        KMLExportWriter(title: "t").quake(Self.event, index: 0, into: &kml)
        let placemark = String(decoding: kml, as: UTF8.self)
        #expect(placemark.contains(#"<Data name="agency"><value>INGV</value></Data>"#), "\(placemark)")
        #expect(!placemark.contains("contributors"))
    }

    static let sources = [
        IOQuaked.SourceStatus(
            name: "emsc", position: nil, lastAttempt: 1_741_132_740_000, lastSuccess: nil,
            lastError: "HTTP 503 from https://www.seismicportal.eu",
            lastQuery: "https://www.seismicportal.eu/fdsnws/event/1/query", reports: 0),
        IOQuaked.SourceStatus(
            name: "ingv", position: 1_741_132_500_000, lastAttempt: 1_741_132_680_000, lastSuccess: 1_741_132_680_000,
            lastError: nil, lastQuery: nil, reports: 12_345),
    ]

    @Test("status: a sources section with reports, last success, position and the last error")
    func statusSources() {
        let relative = OutputStyle()
        let text = StatusCommand.sourcesText(Self.sources, relative, now: Self.now)
        #expect(
            text == """
                sources
                  emsc  0 reports · last success never
                    error (1 minute ago): HTTP 503 from https://www.seismicportal.eu
                  ingv  12,345 reports · last success 2 minutes ago · position 5 minutes ago

                """)
        let absolute = StatusCommand.sourcesText([Self.sources[1]], Self.utc, now: Self.now)
        #expect(absolute.contains("last success 2025-03-04 23:58:00 UTC · position 2025-03-04 23:55:00 UTC"))
        #expect(StatusCommand.sourcesText([Self.sources[1]], relative).contains("12,345 reports"))
    }

    static func status(sources: [IOQuaked.SourceStatus]?) -> IOQuaked.GetStatus.Reply {
        IOQuaked.GetStatus.Reply(
            version: "1.0", storeId: "s", headToken: 3, oldestToken: 0, quakeCount: 1, databaseBytes: 4096,
            lastChange: nil, feeds: [], subscribers: 0, clients: [], sources: sources)
    }

    @Test("status prints the section only when quaked sends sources, and --json carries them")
    func statusWholeText() throws {
        let without = StatusCommand.text(Self.status(sources: nil), OutputStyle(), now: Self.now)
        #expect(!without.contains("sources"))
        let with = StatusCommand.text(Self.status(sources: Self.sources), OutputStyle(), now: Self.now)
        #expect(with.contains("\nsources\n  emsc  0 reports"), "\(with)")
        // Before clients, after feeds.
        let sources = try #require(with.range(of: "\nsources\n"))
        #expect(try #require(with.range(of: "\nfeeds\n")).lowerBound < sources.lowerBound)
        #expect(sources.upperBound < (try #require(with.range(of: "\nclients\n"))).lowerBound)

        let json = JSONText.encode(Self.status(sources: Self.sources))
        let object = try #require(try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any])
        let list = try #require(object["sources"] as? [[String: Any]])
        #expect(list.map { $0["name"] as? String } == ["emsc", "ingv"])
        #expect(list[1]["position"] as? Int == 1_741_132_500_000 && list[1]["reports"] as? Int == 12_345)
        #expect(!JSONText.encode(Self.status(sources: nil)).contains("sources"))
    }

    /// A quaked from before sources: io.quaked without GetReports (MethodNotFound), in Python.
    static let oldQuaked = #"""
        quake = {"id": "old1", "time": 1741132809120, "mag": 4.4, "place": "Somewhere"}
        def answer(call):
            method = call.get("method")
            if method == "io.quaked.Get":
                return {"parameters": {"quake": quake}}
        """#

    @Test("show against a quaked without GetReports: the quake, no table, no reports in --json")
    func showWithOlderQuaked() async throws {
        try await withTemporaryDirectory { dir in
            let (server, socket) = try await startPythonQuaked(Self.oldQuaked, named: "old-quaked", in: dir)
            defer { server.signal(SIGTERM) }

            let shown = try await quakectl(["show", "old1", "--socket", socket])
            #expect(shown.status == 0, "\(shown.stderr)")
            #expect(shown.stdout.contains("Somewhere") && !shown.stdout.contains("reports"), "\(shown.stdout)")
            #expect(shown.stderr.isEmpty, "\(shown.stderr)")
            let json = try await quakectl(["show", "old1", "--json", "--socket", socket])
            #expect(json.status == 0, "\(json.stderr)")
            #expect(json.stdout.hasPrefix("{") && !json.stdout.contains("reports"), "\(json.stdout)")
        }
    }
}
