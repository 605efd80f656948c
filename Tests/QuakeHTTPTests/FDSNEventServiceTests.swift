import AsyncHTTPClient
import Foundation
import NIOHTTP1
import QuakeFeed
import QuakeHTTP
import QuakeModel
import QuakeSources
import QuakeStore
import QuakeTestSupport
import Testing

#if canImport(FoundationXML)
    import FoundationXML
#endif

/// The FDSN event service over real HTTP: each format read back by QuakeSources' readers and
/// quaked's feed parser, checked against the fixture as JSONSerialization reads it.
@Suite struct FDSNEventServiceTests {
    static let path = "/fdsnws/event/1/"
    /// 2022-06-25 00:00 to 12:00 UTC, inside the fixture's week.
    static let start: Int64 = 1_656_115_200_000
    static let end: Int64 = 1_656_158_400_000
    static let window = "starttime=2022-06-25T00:00:00&endtime=2022-06-25T12:00:00"

    /// The fixture's ids in the window, in `order`.
    static func expected(
        _ fixture: FixtureFeed, order: String = "time", where include: (FixtureFeed.Feature) -> Bool = { _ in true }
    ) -> [String] {
        let matches = fixture.features.filter { $0.time >= start && $0.time <= end && include($0) }
        let sorted: [FixtureFeed.Feature]
        func byTime(_ a: FixtureFeed.Feature, _ b: FixtureFeed.Feature) -> Bool { (a.time, b.id) > (b.time, a.id) }
        switch order {
        case "time": sorted = matches.sorted(by: byTime)
        case "time-asc": sorted = matches.sorted { ($0.time, $0.id) < ($1.time, $1.id) }
        case "magnitude", "magnitude-asc":
            let ascending = order == "magnitude-asc"
            sorted = matches.sorted { a, b in
                switch (a.mag, b.mag) {
                case (nil, nil): return byTime(a, b)
                case (nil, _): return false
                case (_, nil): return true
                case (let x?, let y?): return x == y ? byTime(a, b) : (ascending ? x < y : x > y)
                }
            }
        default: sorted = []
        }
        return sorted.map(\.id)
    }

    @Test("query in each format, read back: QuakeML (valid against the 1.2 schema), text and GeoJSON hold the same events; count agrees")
    func formats() async throws {
        let fixture = try FixtureFeed(Catalog.week)
        let expected = Self.expected(fixture)
        #expect(expected.count > 100)
        let byID = Dictionary(uniqueKeysWithValues: fixture.features.map { ($0.id, $0) })
        try await Catalog.with { catalog in
            let xml = try await catalog.get(Self.path + "query?" + Self.window)
            #expect(xml.status == 200)
            #expect(xml.header("Content-Type") == "application/xml")
            let reports = try quakeMLReports(xml.body)
            #expect(reports.map(\.id) == expected)
            for report in reports {
                let original = try #require(byID[report.id])
                #expect(report.time == original.time)
                #expect(abs(report.latitude - original.lat) < 1e-9 && abs(report.longitude - original.lon) < 1e-9)
                #expect(report.magnitude == original.mag)
                #expect(report.agency == original.properties["net"] as? String)
                #expect(report.place == original.properties["place"] as? String)
                #expect(report.updated == (original.properties["updated"] as? NSNumber)?.int64Value)
            }
            let validation = try await xmllint(xml.body, ["--noout", "--nonet", "--schema", quakeMLSchema])
            #expect(validation.status == 0, "\(validation.stderr.prefix(2000))")

            let quakeml = try await catalog.get(Self.path + "query?format=quakeml&" + Self.window)
            #expect(quakeml.body == xml.body)

            let text = try await catalog.get(Self.path + "query?format=text&" + Self.window)
            #expect(text.status == 200)
            #expect(text.text.hasPrefix("#EventID|Time|Latitude|Longitude|Depth/km|Author|Catalog|Contributor|ContributorID|MagType|Magnitude|MagAuthor|EventLocationName|EventType\n"))
            let rows = try textReports(text.body)
            #expect(rows.map(\.id) == expected)
            for (row, report) in zip(rows, reports) {
                #expect(row.time == report.time && row.magnitude == report.magnitude && row.agency == report.agency, "\(row.id)")
                // QuakeML carries metres, text km: equal but for the last bits.
                #expect(abs((row.depth ?? .nan) - (report.depth ?? .nan)) <= 1e-9, "\(row.id): \(String(describing: row.depth)) \(String(describing: report.depth))")
                let original = try #require(byID[row.id])
                #expect(row.depth == original.coordinates[2], "\(row.id): the text carries the depth as stored")
            }

            let geojson = try await catalog.get(Self.path + "query?format=geojson&" + Self.window)
            #expect(geojson.status == 200)
            let parsed = try ParsedFeed(geojson.body)
            #expect(parsed.ids == expected)
            #expect(parsed.metadata.count == expected.count)

            let count = try await catalog.get(Self.path + "count?" + Self.window)
            #expect(count.status == 200)
            #expect(count.text == "\(expected.count)\n")
        }
    }

    @Test("limit, offset (from 1) and orderby time, time-asc, magnitude and magnitude-asc")
    func paging() async throws {
        let fixture = try FixtureFeed(Catalog.week)
        try await Catalog.with { catalog in
            for order in ["time", "time-asc", "magnitude", "magnitude-asc"] {
                let expected = Self.expected(fixture, order: order)
                let first = try textReports(try await catalog.get(Self.path + "query?format=text&orderby=\(order)&limit=25&" + Self.window).body)
                #expect(first.map(\.id) == Array(expected.prefix(25)), "\(order)")
                let second = try textReports(
                    try await catalog.get(Self.path + "query?format=text&orderby=\(order)&limit=25&offset=26&" + Self.window).body)
                #expect(second.map(\.id) == Array(expected[25..<50]), "\(order)")
                let whole = try textReports(try await catalog.get(Self.path + "query?format=text&orderby=\(order)&" + Self.window).body)
                #expect(whole.map(\.id) == expected, "\(order)")
            }
            let magnitudes = try textReports(try await catalog.get(Self.path + "query?format=text&orderby=magnitude&" + Self.window).body)
                .compactMap(\.magnitude)
            #expect(magnitudes == magnitudes.sorted(by: >))
            // Past the end: no data.
            let expected = Self.expected(fixture)
            let beyond = try await catalog.get(Self.path + "query?offset=\(expected.count + 1)&" + Self.window)
            #expect(beyond.status == 204)
            let last = try textReports(try await catalog.get(Self.path + "query?format=text&offset=\(expected.count)&" + Self.window).body)
            #expect(last.map(\.id) == [expected.last!])
            #expect(try await catalog.get(Self.path + "count?limit=7&" + Self.window).text == "7\n")
        }
    }

    @Test("magnitude range, box, circle in degrees or km, minradius, updatedafter and eventid select as the FDSN specification says")
    func selections() async throws {
        let fixture = try FixtureFeed(Catalog.week)
        try await Catalog.with { catalog in
            let magnitudes = Self.expected(fixture) { ($0.mag ?? -9) >= 2 && ($0.mag ?? 99) <= 3 }
            let got1 = try await Self.ids(catalog, "minmagnitude=2&maxmagnitude=3")
            #expect(got1 == magnitudes)
            let got2 = try await Self.ids(catalog, "minmag=2&maxmag=3")
            #expect(got2 == magnitudes)
            #expect(!magnitudes.isEmpty)

            let box = Self.expected(fixture) { $0.lat >= 30 && $0.lat <= 45 && $0.lon >= -125 && $0.lon <= -110 }
            let got3 = try await Self.ids(catalog, "minlatitude=30&maxlatitude=45&minlongitude=-125&maxlongitude=-110")
            #expect(got3 == box)
            #expect(!box.isEmpty)

            let kmPerDegree = 6371 * Double.pi / 180
            let circle = Self.expected(fixture) { FixtureFeed.distanceKm($0.lat, $0.lon, 61.2, -149.9) <= 5 * kmPerDegree }
            let got4 = try await Self.ids(catalog, "latitude=61.2&longitude=-149.9&maxradius=5")
            #expect(got4 == circle)
            #expect(!circle.isEmpty)
            let ring = Self.expected(fixture) {
                let d = FixtureFeed.distanceKm($0.lat, $0.lon, 61.2, -149.9)
                return d <= 5 * kmPerDegree && d >= 2 * kmPerDegree
            }
            let got5 = try await Self.ids(catalog, "latitude=61.2&longitude=-149.9&minradius=2&maxradius=5")
            #expect(got5 == ring)
            #expect(!ring.isEmpty && ring.count < circle.count)
            let km = Self.expected(fixture) { FixtureFeed.distanceKm($0.lat, $0.lon, 61.2, -149.9) <= 300 }
            let got6 = try await Self.ids(catalog, "latitude=61.2&longitude=-149.9&maxradiuskm=300")
            #expect(got6 == km)

            let updatedAfter: Int64 = 1_656_200_000_000
            let updated = Self.expected(fixture) { (($0.properties["updated"] as? NSNumber)?.int64Value ?? 0) > updatedAfter }
            let got7 = try await Self.ids(catalog, "updatedafter=\(QuakeTime.iso8601(updatedAfter).dropLast())")
            #expect(got7 == updated)
            #expect(!updated.isEmpty && updated.count < Self.expected(fixture).count)

            let one = Self.expected(fixture)[3]
            let single = try await Self.ids(catalog, "eventid=\(one)")
            #expect(single == [one])
        }
    }

    static func ids(_ catalog: Catalog, _ query: String) async throws -> [String] {
        let reply = try await catalog.get(Self.path + "query?format=text&" + Self.window + "&" + query)
        #expect(reply.status == 200 || reply.status == 204, "\(query): \(reply.text)")
        return try textReports(reply.body).map(\.id)
    }

    @Test("version, application.wadl (well-formed WADL naming every parameter), catalogs and contributors")
    func serviceDocuments() async throws {
        try await Catalog.with { catalog in
            let version = try await catalog.get(Self.path + "version")
            #expect(version.status == 200 && version.text == "1.2.0\n")
            let wadl = try await catalog.get(Self.path + "application.wadl")
            #expect(wadl.status == 200)
            #expect(wadl.header("Content-Type") == "application/xml")
            let lint = try await xmllint(wadl.body, ["--noout", "--nonet"])
            #expect(lint.status == 0, "\(lint.stderr)")
            let names = try WADLParameters.parse(wadl.body)
            #expect(names.resources.isSuperset(of: ["query", "count", "version", "catalogs", "contributors", "application.wadl"]))
            for name in [
                "starttime", "start", "endtime", "end", "updatedafter", "minmagnitude", "minmag", "maxmagnitude", "maxmag",
                "latitude", "longitude", "minradius", "maxradius", "maxradiuskm", "minlatitude", "maxlatitude",
                "minlongitude", "maxlongitude", "limit", "offset", "orderby", "eventid", "format", "nodata",
            ] {
                #expect(names.queryParameters.contains(name), "\(name) missing from the WADL")
            }
            #expect(names.base == catalog.base + Self.path)
            let catalogs = try await catalog.get(Self.path + "catalogs")
            #expect(catalogs.text.contains("<Catalog>quaked</Catalog>"))
            let contributors = try await catalog.get(Self.path + "contributors")
            #expect(try await xmllint(contributors.body, ["--noout"]).status == 0)
            #expect(contributors.text.contains("<Contributor>ak</Contributor>"))
            #expect(contributors.text.contains("<Contributor>us</Contributor>"))
        }
    }

    @Test("nothing matches: 204 by default, 404 with the FDSN error text for nodata=404; count is 0")
    func noData() async throws {
        try await Catalog.with { catalog in
            let query = "query?starttime=2001-01-01&endtime=2001-01-02"
            let empty = try await catalog.get(Self.path + query)
            #expect(empty.status == 204)
            #expect(empty.body.isEmpty)
            let notFound = try await catalog.get(Self.path + query + "&nodata=404")
            #expect(notFound.status == 404)
            #expect(notFound.text.hasPrefix("Error 404: Not Found\n"))
            #expect(try await catalog.get(Self.path + "count?starttime=2001-01-01&endtime=2001-01-02").text == "0\n")
            #expect(try await catalog.get(Self.path + "query?eventid=nosuchevent").status == 204)
        }
    }

    @Test("bad parameters are a 400 with the FDSN error document naming the parameter and what it accepts")
    func badRequests() async throws {
        try await Catalog.with { catalog in
            let cases: [(String, [String])] = [
                ("starttime=yesterday", ["starttime=yesterday", "YYYY-MM-DD"]),
                ("endtime=2022-13-01T00:00:00", ["endtime", "YYYY-MM-DD"]),
                ("starttime=2022-06-26&endtime=2022-06-25", ["endtime is before starttime"]),
                ("minmagnitude=x", ["minmagnitude=x", "magnitude"]),
                ("minmagnitude=5&maxmagnitude=4", ["maxmagnitude", "below minmagnitude"]),
                ("orderby=size", ["orderby=size", "time, time-asc, magnitude or magnitude-asc"]),
                ("format=csv", ["format=csv", "xml", "text", "geojson"]),
                ("limit=0", ["limit=0", "1 or more"]),
                ("offset=0", ["offset=0", "1 is the first event"]),
                ("nodata=500", ["nodata=500", "204 or 404"]),
                ("minlatitude=10&latitude=1&longitude=2&maxradius=3", ["box", "circle"]),
                ("maxlatitude=-10&minlatitude=10", ["maxlatitude", "south of minlatitude"]),
                ("magnitude=5", ["Unknown parameter magnitude", "minmagnitude/minmag"]),
                ("minmag=4&minmagnitude=5", ["given twice"]),
                ("maxradius=200", ["maxradius=200", "0 to 180"]),
            ]
            for (query, phrases) in cases {
                for method in ["query", "count"] {
                    let target = Self.path + method + "?" + query
                    let reply = try await catalog.get(target)
                    #expect(reply.status == 400, "\(target)")
                    let text = reply.text
                    #expect(text.hasPrefix("Error 400: Bad Request\n\n"), "\(target): \(text)")
                    for phrase in phrases { #expect(text.contains(phrase), "\(target): no \(phrase) in \(text)") }
                    #expect(text.contains("\nRequest:\n\(catalog.base)\(target)\n"), "\(text)")
                    #expect(text.contains("\nRequest Submitted:\n20"), "\(text)")
                    #expect(text.contains("\nService version:\n1.2.0\n"), "\(text)")
                    #expect(text.contains("application.wadl"))
                }
            }
            #expect(try await catalog.get(Self.path + "nosuchmethod").status == 404)
        }
    }

    @Test("a large answer streams: the body arrives in many pieces, and holds every quake")
    func streaming() async throws {
        let fixtures = [
            "heltond__earthquakes__query.geojson", "CsabaConsulting__DataScienceBootcampHomework__2.5_month.geojson",
            "wbravoanoni__generar_datos__all_week.geojson", Catalog.week, "ptoru001__geojason__all_week.geojson",
        ]
        try await Catalog.with(fixtures: fixtures) { catalog in
            let stored = try catalog.store.count()
            #expect(stored > 12_000)
            let xml = try await catalog.get(Self.path + "query?orderby=time-asc")
            #expect(xml.status == 200)
            #expect(xml.body.count > 10_000_000)
            #expect(xml.chunks > 10, "\(xml.chunks) pieces")
            #expect(xml.header("Content-Length") == nil)
            #expect(xml.header("Transfer-Encoding") == "chunked")
            let reports = try quakeMLReports(xml.body)
            #expect(reports.count == stored)
            #expect(reports.map(\.time) == reports.map(\.time).sorted())
            let geojson = try await catalog.get(Self.path + "query?format=geojson")
            #expect(geojson.chunks > 10)
            #expect(try ParsedFeed(geojson.body).features.count == stored)
        }
    }

    @Test("a client that stops reading a large answer holds up neither other clients nor the store's writes")
    func backPressure() async throws {
        let fixtures = [
            "heltond__earthquakes__query.geojson", "CsabaConsulting__DataScienceBootcampHomework__2.5_month.geojson",
            Catalog.week,
        ]
        try await Catalog.with(fixtures: fixtures) { catalog in
            // A raw socket that sends the request and reads only the first bytes.
            let port = try #require(Int(catalog.base.split(separator: ":").last ?? ""))
            let stalled = try TCPProbe(port: port, receiveBufferSize: 4096)
            try stalled.send("GET \(Self.path)query HTTP/1.1\r\nHost: test\r\n\r\n")
            let start = try await stalled.receive(upTo: 4096)
            #expect(String(decoding: start, as: UTF8.self).hasPrefix("HTTP/1.1 200 OK"))
            // Meanwhile, others are served.
            let version = try await catalog.get(Self.path + "version")
            #expect(version.text == "1.2.0\n")
            let feed = try await catalog.get("/feeds/significant_week.geojson")
            #expect(feed.status == 200)
            // The stalled answer reads a snapshot of its own: the store takes writes meanwhile.
            let newest = try #require(try catalog.store.query(QuakeQuery(limit: 1)).quakes.first)
            let deleted = try await catalog.store.delete(ids: [newest.id])
            #expect(try catalog.store.quake(id: newest.id) == nil, "\(deleted)")
            stalled.close()
        }
    }
}

/// The resources and query parameters of a WADL document, as XMLParser reads it.
final class WADLParameters: NSObject, XMLParserDelegate {
    var resources: Set<String> = []
    var queryParameters: Set<String> = []
    var base: String?
    private var resource: String?

    static func parse(_ bytes: [UInt8]) throws -> WADLParameters {
        let parser = XMLParser(data: Data(bytes))
        let delegate = WADLParameters()
        parser.delegate = delegate
        parser.shouldProcessNamespaces = true
        guard parser.parse() else { throw parser.parserError ?? CocoaError(.coderReadCorrupt) }
        return delegate
    }

    func parser(
        _ parser: XMLParser, didStartElement elementName: String, namespaceURI: String?, qualifiedName qName: String?,
        attributes attributeDict: [String: String] = [:]
    ) {
        guard namespaceURI == "http://wadl.dev.java.net/2009/02" else { return }
        switch elementName {
        case "resources": base = attributeDict["base"]
        case "resource":
            resource = attributeDict["path"]
            if let resource { resources.insert(resource) }
        case "param" where resource == "query":
            if let name = attributeDict["name"] { queryParameters.insert(name) }
        default: break
        }
    }
}
