import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import QuakeTestSupport
import Testing

#if canImport(FoundationXML)
    import FoundationXML
#endif

/// The FDSN service's QuakeML (`format=xml`, the default) and text (`format=text`) answers, over real
/// HTTP, checked against the fixture features as Foundation's JSONSerialization reads them.
extension TestDoubles {
    @Suite struct FDSNFormatTests {
        static let query = FDSNTestServiceTests.query

        struct Reply {
            let status: Int
            let headers: HTTPHeaders
            let body: [UInt8]

            var text: String { String(decoding: body, as: UTF8.self) }
            var lines: [Substring] { text.split(separator: "\n") }
            var rows: [[Substring]] {
                lines.filter { !$0.hasPrefix("#") }.map { $0.split(separator: "|", omittingEmptySubsequences: false) }
            }
            /// The ids of a text answer.
            var textIDs: [String] { rows.map { String($0[0]) } }
            /// The events of a QuakeML answer (throws when it is not well-formed).
            func events() throws -> [XMLEvents.Event] { try XMLEvents.parse(body) }
            /// The ids of a QuakeML answer, from the events' publicIDs.
            func xmlIDs() throws -> [String] {
                try events().map { String($0.publicID.dropFirst("smi:fdsnws.test/event/".count)) }
            }
        }

        private func get(_ client: HTTPClient, _ url: String) async throws -> Reply {
            let response = try await client.execute(HTTPClientRequest(url: url), timeout: .seconds(60))
            let body = try await response.body.collect(upTo: 256 * 1024 * 1024)
            return Reply(
                status: Int(response.status.code), headers: response.headers, body: Array(body.readableBytesView))
        }

        private func withService(_ body: (FDSNTestService, HTTPClient) async throws -> Void) async throws {
            try await FDSNTestService.withService { service, _ in
                try service.add(featuresOf: Self.query)
                return try await withHTTPClient { client in try await body(service, client) }
            }
        }

        private func ask(_ client: HTTPClient, _ service: FDSNTestService, _ parameters: String) async throws -> Reply {
            try await get(client, service.queryURL + "?" + parameters)
        }

        /// The fixture's features by id (JSONSerialization).
        /// Equal but for the last bits: Foundation's JSON reader on Linux is an ulp off on some
        /// 17-digit numbers, which the service reads exactly.
        static func close(_ a: Double?, _ b: Double?) -> Bool {
            guard let a, let b else { return a == nil && b == nil }
            return abs(a - b) <= 1e-12 * max(1, abs(b))
        }

        static func features() throws -> [String: [String: Any]] {
            let features = try FeedDocument(contentsOf: query).features
            return Dictionary(uniqueKeysWithValues: features.map { ($0["id"] as! String, $0) })
        }

        // MARK: QuakeML

        @Test func quakeMLHoldsEachFeature() async throws {
            let byID = try Self.features()
            try await withService { (service, client) async throws in
                let window = "starttime=2019-06-01&endtime=2019-06-05"
                let geojson = try await ask(client, service, "format=geojson&" + window)
                let expected =
                    (try JSONSerialization.jsonObject(with: Data(geojson.body)) as! [String: Any])["features"]
                    as! [[String: Any]]
                let xml = try await ask(client, service, "format=xml&" + window)
                #expect(xml.status == 200)
                #expect(xml.headers.first(name: "Content-Type") == "application/xml")
                #expect(xml.text.hasPrefix("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<q:quakeml "))
                #expect(try xml.xmlIDs() == expected.map { $0["id"] as! String })
                #expect(expected.count > 10)
                // The default format is QuakeML, as at the real service; so is `quakeml`.
                #expect(try await ask(client, service, window).body == xml.body)
                #expect(try await ask(client, service, "format=quakeml&" + window).body == xml.body)

                for event in try xml.events() {
                    let id = String(event.publicID.dropFirst("smi:fdsnws.test/event/".count))
                    let feature = try #require(byID[id])
                    let properties = feature["properties"] as! [String: Any]
                    let coordinates = (feature["geometry"] as! [String: Any])["coordinates"] as! [Double]
                    let v = event.values
                    let time = (properties["time"] as! NSNumber).int64Value
                    #expect(v["origin/time/value"] == FDSNTestService.formatTime(time) + "Z")
                    #expect(Self.close(v["origin/longitude/value"].flatMap(Double.init), coordinates[0]))
                    #expect(Self.close(v["origin/latitude/value"].flatMap(Double.init), coordinates[1]))
                    let metres = try #require(v["origin/depth/value"].flatMap(Double.init))
                    #expect(abs(metres / 1000 - coordinates[2]) < 1e-9, "\(id)")
                    #expect(
                        Self.close(
                            v["magnitude/mag/value"].flatMap(Double.init), (properties["mag"] as? NSNumber)?.doubleValue
                        ))
                    #expect(v["magnitude/type"] == properties["magType"] as? String)
                    #expect(v["description/text"] == properties["place"] as? String)
                    #expect(v["type"] == properties["type"] as? String || v["type"] == "other", "\(id)")
                    #expect(v["creationInfo/agencyID"] == properties["net"] as? String)
                    let updated = (properties["updated"] as! NSNumber).int64Value
                    #expect(v["origin/creationInfo/creationTime"] == FDSNTestService.formatTime(updated) + "Z")
                    let status = properties["status"] as! String
                    #expect(v["origin/evaluationMode"] == (status == "reviewed" ? "manual" : "automatic"))
                    #expect(v["origin/evaluationStatus"] == (status == "reviewed" ? "reviewed" : nil))
                }
            }
        }

        // MARK: Text

        @Test func textHasALinePerFeature() async throws {
            let byID = try Self.features()
            try await withService { (service, client) async throws in
                let window = "starttime=2019-06-01&endtime=2019-06-05"
                let geojson = try await ask(client, service, "format=geojson&" + window)
                let ids =
                    (try JSONSerialization.jsonObject(with: Data(geojson.body)) as! [String: Any])["features"]
                    as! [[String: Any]]
                let text = try await ask(client, service, "format=text&" + window)
                #expect(text.status == 200)
                #expect(text.headers.first(name: "Content-Type") == "text/plain; charset=utf-8")
                #expect(
                    text.lines.first.map(String.init)
                        == "#EventID|Time|Latitude|Longitude|Depth/km|Author|Catalog|Contributor|ContributorID|"
                        + "MagType|Magnitude|MagAuthor|EventLocationName|EventType")
                #expect(text.textIDs == ids.map { $0["id"] as! String })
                for row in text.rows {
                    #expect(row.count == 14)
                    let feature = try #require(byID[String(row[0])])
                    let properties = feature["properties"] as! [String: Any]
                    let coordinates = (feature["geometry"] as! [String: Any])["coordinates"] as! [Double]
                    #expect(row[1] == FDSNTestService.formatTime((properties["time"] as! NSNumber).int64Value))
                    #expect(zip([row[3], row[2], row[4]], coordinates).allSatisfy { Self.close(Double($0), $1) })
                    #expect(row[5] == properties["net"] as? String ?? "" && row[7] == row[5] && row[11] == row[5])
                    #expect(row[6] == "fdsnws-test" && row[8] == row[0])
                    #expect(row[9] == properties["magType"] as? String ?? "")
                    #expect(Self.close(Double(row[10]), (properties["mag"] as? NSNumber)?.doubleValue))
                    #expect(row[12] == properties["place"] as? String ?? "")
                    #expect(row[13] == properties["type"] as? String ?? "")
                }
                service.textLayout = .thirteen
                let thirteen = try await ask(client, service, "format=text&" + window)
                #expect(thirteen.lines.first?.hasSuffix("|MagAuthor|EventLocationName") == true)
                #expect(thirteen.rows.allSatisfy { $0.count == 13 } && thirteen.textIDs == text.textIDs)
            }
        }

        // MARK: Selection

        @Test func everyFormatSelectsTheSameEvents() async throws {
            try await withService { (service, client) async throws in
                let updates = try FDSNTestServiceTests.Quake.load(Self.query).map(\.updated).sorted()
                let pivot = FDSNTestService.formatTime(updates[updates.count - 300])
                for parameters in [
                    "starttime=2019-06-01&endtime=2019-06-10", "updatedafter=\(pivot)&limit=100", "limit=10&offset=11",
                    "orderby=magnitude&limit=25", "orderby=magnitude-asc&limit=7&offset=3", "minmagnitude=4.5",
                    "orderby=time-asc&limit=5&offset=2", "latitude=37&longitude=-120&maxradiuskm=100&limit=50",
                ] {
                    let geojson = try await ask(client, service, "format=geojson&" + parameters)
                    let ids =
                        ((try JSONSerialization.jsonObject(with: Data(geojson.body)) as! [String: Any])["features"]
                        as! [[String: Any]]).map { $0["id"] as! String }
                    #expect(!ids.isEmpty, "\(parameters)")
                    #expect(try await ask(client, service, "format=xml&" + parameters).xmlIDs() == ids, "\(parameters)")
                    #expect(try await ask(client, service, "format=text&" + parameters).textIDs == ids, "\(parameters)")
                }
                // The search limit holds in every format.
                service.searchLimit = 100
                for format in ["xml", "text"] {
                    let reply = try await ask(client, service, "format=\(format)")
                    #expect(reply.status == 400)
                    #expect(reply.text == FDSNTestService.searchLimitMessage(matching: 4312, limit: 100))
                }
            }
        }

        @Test func noDataIs204Or404() async throws {
            try await withService { (service, client) async throws in
                for format in ["xml", "text"] {
                    for none in ["starttime=2030-01-01", "limit=5&offset=5000"] {
                        let empty = try await ask(client, service, "format=\(format)&" + none)
                        #expect(empty.status == 204 && empty.body.isEmpty, "\(format) \(none)")
                        let explicit = try await ask(client, service, "format=\(format)&nodata=204&" + none)
                        #expect(explicit.status == 204)
                        let notFound = try await ask(client, service, "format=\(format)&nodata=404&" + none)
                        #expect(notFound.status == 404)
                        #expect(notFound.text.hasPrefix("Error 404: Not Found\n\n"))
                    }
                    #expect(try await ask(client, service, "format=\(format)&nodata=404&limit=1").status == 200)
                }
                // GeoJSON keeps the USGS's empty collection, unless nodata is given.
                let geojson = try await ask(client, service, "format=geojson&starttime=2030-01-01")
                #expect(geojson.status == 200 && geojson.text.contains("\"features\":[]"))
                #expect(try await ask(client, service, "format=geojson&starttime=2030-01-01&nodata=404").status == 404)
                let bad = try await ask(client, service, "format=xml&nodata=500")
                #expect(
                    bad.status == 400 && bad.text.hasPrefix("Error 400: Bad Request\n\n") && bad.text.contains("nodata")
                )
                let statuses = service.log.map(\.status)
                #expect(statuses.filter { $0 == 204 }.count == 8)
            }
        }

        @Test func unknownFormatIs400() async throws {
            try await withService { (service, client) async throws in
                for format in ["json", "csv", "XML", ""] {
                    let reply = try await ask(client, service, "format=\(format)&limit=1")
                    #expect(reply.status == 400, "\(format)")
                    #expect(reply.text.hasPrefix("Error 400: Bad Request\n\nBad format value \"\(format)\"."))
                }
                #expect(service.log.allSatisfy { $0.status == 400 && $0.query == nil })
            }
        }

        @Test func deletedEventsAreNotExisting() async throws {
            try await withService { (service, client) async throws in
                let newest = try await ask(client, service, "format=text&limit=2")
                let gone = newest.textIDs[0]
                try service.markDeleted(id: gone, updated: 1_600_000_000_000)
                #expect(try await ask(client, service, "format=xml&limit=1").xmlIDs() == [newest.textIDs[1]])
                let xml = try await ask(client, service, "format=xml&limit=2&includedeleted=true").events()
                #expect(xml.count == 2)
                #expect(
                    xml[0].values == ["type": "not existing", "creationInfo/creationTime": "2020-09-13T12:26:40.000Z"])
                #expect(xml[1].values["origin/time/value"] != nil)
                let text = try await ask(client, service, "format=text&includedeleted=only")
                #expect(text.textIDs == [gone] && text.rows[0][13] == "not existing" && text.rows[0].count == 14)
                service.textLayout = .thirteen
                let thirteen = try await ask(client, service, "format=text&includedeleted=true&limit=2")
                #expect(thirteen.textIDs == [newest.textIDs[1]])
                #expect(
                    service.item(id: gone) == .retraction(source: "fdsn-test", id: gone, updated: 1_600_000_000_000))
            }
        }

        @Test func hostileFeatureOverHTTP() async throws {
            try await FDSNTestService.withService { service, _ in
                try service.add(
                    feature: #"{"type":"Feature","properties":{"mag":4.2,"place":"A|B <c> & \"d\"\nnext\u0001","#
                        + #""time":1560000000000,"updated":1560000001000,"status":"reviewed","net":"x<y","magType":"ml","#
                        + #""type":"earthquake"},"geometry":{"type":"Point","coordinates":[10.5,45.25,7.125]},"#
                        + #""id":"hostile|1"}"#)
                try await withHTTPClient { client in
                    let xml = try await ask(client, service, "format=xml")
                    let event = try #require(try xml.events().first)
                    #expect(event.publicID == "smi:fdsnws.test/event/hostile~7C1")
                    #expect(event.values["description/text"] == "A|B <c> & \"d\"\nnext\u{FFFD}")
                    #expect(event.values["creationInfo/agencyID"] == "x<y")
                    #expect(event.values["origin/depth/value"] == "7125")
                    #expect(event.values["origin/time/value"] == "2019-06-08T13:20:00.000Z")
                    let text = try await ask(client, service, "format=text")
                    #expect(text.lines.count == 2)
                    let row = try #require(text.rows.first)
                    #expect(row.count == 14)
                    #expect(row[0] == "hostile/1" && row[8] == "hostile/1")
                    #expect(row[12] == "A/B <c> & \"d\" next ")
                    #expect(row[1] == "2019-06-08T13:20:00.000" && row[4] == "7.125" && row[5] == "x<y")
                }
            }
        }

        // MARK: Faults

        @Test func formatFaults() async throws {
            try await withService { (service, client) async throws in
                let real = try await ask(client, service, "format=xml&limit=20")
                let realText = try await ask(client, service, "format=text&limit=20")
                service.enqueueFaults([.maintenancePage(), .malformedXML(), .malformedXML(), .wrongColumnCount(12)])
                service.enqueueFaults([.wrongColumnCount(15)])

                let maintenance = try await ask(client, service, "format=xml&limit=20")
                #expect(maintenance.status == 200)
                #expect(maintenance.headers.first(name: "Content-Type") == "text/html")
                #expect(maintenance.text.contains("Service maintenance"))

                let cut = try await ask(client, service, "format=xml&limit=20")
                #expect(cut.status == 200 && cut.headers.first(name: "Content-Type") == "application/xml")
                #expect(cut.body.count < real.body.count && Array(real.body.prefix(cut.body.count)) == cut.body)
                #expect(cut.text.hasSuffix("<ori"))
                #expect((try? cut.events()) == nil)
                // Without data (204) the fault still answers a cut document.
                let cutEmpty = try await ask(client, service, "format=xml&starttime=2030-01-01")
                #expect(cutEmpty.status == 200 && (try? cutEmpty.events()) == nil)

                let short = try await ask(client, service, "format=text&limit=20")
                #expect(short.lines.first == realText.lines.first)
                #expect(short.rows.count == 20 && short.rows.allSatisfy { $0.count == 12 })
                #expect(short.textIDs == realText.textIDs)
                let long = try await ask(client, service, "format=text&limit=20")
                #expect(long.rows.allSatisfy { $0.count == 15 && $0[14].isEmpty })
                #expect(service.pendingFaults == 0)
                #expect(try await ask(client, service, "format=xml&limit=20").body == real.body)
            }
        }
    }
}

/// A QuakeML document's events as XMLParser reads it: leaf values by path below the event
/// (`origin/depth/value`), each event's publicID.
final class XMLEvents: NSObject, XMLParserDelegate {
    struct Event: Equatable {
        var publicID: String
        var values: [String: String] = [:]
    }

    struct Malformed: Error {}

    private var events: [Event] = []
    private var stack: [String] = []
    private var hadChild: [Bool] = []
    private var text = ""

    static func parse(_ bytes: [UInt8]) throws -> [Event] {
        let collector = XMLEvents()
        let parser = XMLParser(data: Data(bytes))
        parser.delegate = collector
        // parse() is true for a document cut short (corelibs); parserError says so.
        guard parser.parse(), parser.parserError == nil else { throw Malformed() }
        return collector.events
    }

    private var path: String? {
        stack.firstIndex(of: "event").map { stack[($0 + 1)...].joined(separator: "/") }
    }

    func parser(
        _ parser: XMLParser, didStartElement elementName: String, namespaceURI: String?, qualifiedName: String?,
        attributes: [String: String] = [:]
    ) {
        if !hadChild.isEmpty { hadChild[hadChild.count - 1] = true }
        stack.append(elementName)
        hadChild.append(false)
        text = ""
        if elementName == "event" && path == "" { events.append(Event(publicID: attributes["publicID"] ?? "")) }
    }

    func parser(_ parser: XMLParser, foundCharacters string: String) { text += string }

    func parser(_ parser: XMLParser, didEndElement elementName: String, namespaceURI: String?, qualifiedName: String?) {
        if let path, !path.isEmpty, hadChild.last == false { events[events.count - 1].values[path] = text }
        stack.removeLast()
        hadChild.removeLast()
        text = ""
    }
}
