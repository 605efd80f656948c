import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import QuakeTestSupport
import Testing

/// The FDSN event service test double, over real HTTP on 127.0.0.1, checked against an independent
/// reading of the fixture feeds (Foundation's JSONSerialization, through `FeedDocument`).
extension TestDoubles {
    @Suite struct FDSNTestServiceTests {
        /// A catalogue search answer: 4312 events of 2019 in the contiguous US, M2.5+.
        static let query = Fixtures.usgs("heltond__earthquakes__query.geojson")
        /// A worldwide week (1513 events), with events on both sides of the antimeridian.
        static let week = Fixtures.usgs("abruzzi__earthquake-viz__all_week.geojson")

        // MARK: Oracle

        /// One fixture event as JSONSerialization reads it.
        struct Quake {
            let id: String
            let time: Int64
            let updated: Int64
            let mag: Double?
            let lon: Double
            let lat: Double
            let status: String

            static func load(_ file: URL) throws -> [Quake] {
                try FeedDocument(contentsOf: file).features.map { feature in
                    let properties = feature["properties"] as! [String: Any]
                    let coordinates = (feature["geometry"] as! [String: Any])["coordinates"] as! [Double]
                    return Quake(
                        id: feature["id"] as! String,
                        time: (properties["time"] as! NSNumber).int64Value,
                        updated: (properties["updated"] as! NSNumber).int64Value,
                        mag: (properties["mag"] as? NSNumber)?.doubleValue,
                        lon: coordinates[0], lat: coordinates[1],
                        status: properties["status"] as! String)
                }
            }
        }

        /// The oracle's time order: newest first, ties by id (descending, the reverse of oldest first).
        static func newestFirst(_ quakes: [Quake]) -> [Quake] {
            quakes.sorted { $0.time != $1.time ? $0.time > $1.time : $0.id > $1.id }
        }

        /// Milliseconds of an ISO-8601 UTC time, by Foundation (independent of the service's parser).
        static func ms(_ text: String) -> Int64 {
            let formatter = ISO8601DateFormatter()
            formatter.formatOptions =
                text.contains(".")
                ? [.withInternetDateTime, .withFractionalSeconds] : [.withInternetDateTime]
            let date = formatter.date(from: text)!
            return Int64((date.timeIntervalSince1970 * 1000).rounded())
        }

        /// Great-circle distance (spherical law of cosines, unlike the service's haversine).
        static func distanceKm(_ lat1: Double, _ lon1: Double, _ lat2: Double, _ lon2: Double) -> Double {
            let r = Double.pi / 180
            let c = sin(lat1 * r) * sin(lat2 * r) + cos(lat1 * r) * cos(lat2 * r) * cos((lon2 - lon1) * r)
            return 6371.0 * acos(max(-1, min(1, c)))
        }

        // MARK: HTTP helpers

        struct Reply {
            let status: Int
            let headers: HTTPHeaders
            let body: [UInt8]

            var text: String { String(decoding: body, as: UTF8.self) }
            var json: [String: Any] { (try? JSONSerialization.jsonObject(with: Data(body))) as? [String: Any] ?? [:] }
            var features: [[String: Any]] { json["features"] as? [[String: Any]] ?? [] }
            var ids: [String] { features.map { $0["id"] as! String } }
            var metadata: [String: Any] { json["metadata"] as? [String: Any] ?? [:] }
        }

        private func withClient<R>(readTimeout: TimeAmount? = nil, _ body: (HTTPClient) async throws -> R)
            async throws -> R
        {
            try await withHTTPClient(readTimeout: readTimeout, body)
        }

        private func get(_ client: HTTPClient, _ url: String) async throws -> Reply {
            let response = try await client.execute(HTTPClientRequest(url: url), timeout: .seconds(60))
            let body = try await response.body.collect(upTo: 512 * 1024 * 1024)
            return Reply(
                status: Int(response.status.code), headers: response.headers, body: Array(body.readableBytesView))
        }

        /// A service on a fresh server with `fixtures` loaded, and a client.
        private func withService(
            _ fixtures: [URL], _ body: (FDSNTestService, HTTPClient) async throws -> Void
        ) async throws {
            try await FDSNTestService.withService { service, _ in
                for fixture in fixtures { try service.add(featuresOf: fixture) }
                return try await withClient { client in try await body(service, client) }
            }
        }

        private func query(_ client: HTTPClient, _ service: FDSNTestService, _ parameters: String) async throws
            -> Reply
        {
            try await get(client, service.queryURL + "?format=geojson" + (parameters.isEmpty ? "" : "&" + parameters))
        }

        // MARK: The answer

        @Test func answerIsAUSGSFeatureCollection() async throws {
            let fixture = try Data(contentsOf: Self.query)
            let oracle = try FeedDocument(contentsOf: Self.query)
            let byID = Dictionary(uniqueKeysWithValues: oracle.features.map { ($0["id"] as! String, $0) })
            try await withService([Self.query]) { (service, client) async throws in
                #expect(service.eventCount == 4312)
                #expect(service.baseURL.hasSuffix("/fdsnws/event/1/"))
                let parameters = "starttime=2019-06-01&endtime=2019-06-03"
                let reply = try await query(client, service, parameters)
                #expect(reply.status == 200)
                #expect(reply.headers.first(name: "Content-Type") == "application/json")
                #expect(reply.json["type"] as? String == "FeatureCollection")
                let metadata = reply.metadata
                #expect(metadata["title"] as? String == "USGS Earthquakes")
                #expect(metadata["status"] as? Int == 200)
                #expect(metadata["api"] as? String == "1.14.1")
                #expect(metadata["url"] as? String == service.queryURL + "?format=geojson&" + parameters)
                #expect(metadata["count"] as? Int == reply.features.count)
                let generated = (metadata["generated"] as? NSNumber)?.doubleValue ?? 0
                #expect(abs(generated / 1000 - Date().timeIntervalSince1970) < 60)
                #expect(reply.features.count > 5)

                // Each feature is the fixture's, unchanged: equal as JSON, and its exact bytes are in the body.
                for feature in reply.features {
                    let id = feature["id"] as! String
                    #expect(NSDictionary(dictionary: feature) == NSDictionary(dictionary: byID[id] ?? [:]))
                }
                let first = try #require(service.feature(id: reply.ids[0]))
                #expect(fixture.range(of: Data(first)) != nil)
                #expect(Data(reply.body).range(of: Data(first)) != nil)

                // bbox: [minlon, minlat, mindepth, maxlon, maxlat, maxdepth] of the returned events.
                // (Within 1e-9: Foundation's JSON reader on Linux is an ulp off on some 17-digit numbers.)
                let coordinates = reply.features.map { ($0["geometry"] as! [String: Any])["coordinates"] as! [Double] }
                let bbox = try #require(reply.json["bbox"] as? [Double])
                let expectedBox =
                    (0..<3).map { axis in coordinates.map { $0[axis] }.min()! }
                    + (0..<3).map { axis in coordinates.map { $0[axis] }.max()! }
                #expect(bbox.count == 6)
                #expect(zip(bbox, expectedBox).allSatisfy { abs($0 - $1) < 1e-9 }, "\(bbox) vs \(expectedBox)")

                // No match: an empty collection, count 0, no bbox.
                let empty = try await query(client, service, "starttime=2030-01-01")
                #expect(empty.status == 200)
                #expect(empty.features.isEmpty)
                #expect(empty.metadata["count"] as? Int == 0)
                #expect(empty.json["bbox"] == nil)
            }
        }

        // MARK: Parameters

        @Test func timeWindowIsInclusiveAtBothEnds() async throws {
            let quakes = try Quake.load(Self.query)
            try await withService([Self.query]) { (service, client) async throws in
                // Date-only bounds against the oracle.
                let start = Self.ms("2019-06-01T00:00:00Z")
                let end = Self.ms("2019-06-10T00:00:00Z")
                let expected = Self.newestFirst(quakes.filter { $0.time >= start && $0.time <= end }).map(\.id)
                #expect(expected.count > 20)
                #expect(try await query(client, service, "starttime=2019-06-01&endtime=2019-06-10").ids == expected)
                // The same bounds spelled with T, Z, a fraction, a space, and the FDSN short names.
                for spelling in [
                    "starttime=2019-06-01T00:00:00&endtime=2019-06-10T00:00:00Z",
                    "starttime=2019-06-01T00:00:00.000Z&endtime=2019-06-10T00:00:00.0",
                    "starttime=2019-06-01%2000:00:00&endtime=2019-06-10+00:00:00",
                    "start=2019-06-01&end=2019-06-10",
                ] {
                    #expect(try await query(client, service, spelling).ids == expected, "\(spelling)")
                }

                // An event's own time as both bounds finds it; a millisecond either side does not.
                let event = quakes[100]
                let at = FDSNTestService.formatTime(event.time)
                let same = quakes.filter { $0.time == event.time }.map(\.id).sorted()
                #expect(try await query(client, service, "starttime=\(at)&endtime=\(at)").ids.sorted() == same)
                let after = FDSNTestService.formatTime(event.time + 1)
                let before = FDSNTestService.formatTime(event.time - 1)
                #expect(!(try await query(client, service, "starttime=\(after)").ids.contains(event.id)))
                #expect(!(try await query(client, service, "endtime=\(before)").ids.contains(event.id)))
                #expect(try await query(client, service, "endtime=\(at)").ids.contains(event.id))
                #expect(try await query(client, service, "starttime=\(at)").ids.contains(event.id))
            }
        }

        @Test func updatedAfterIsInclusive() async throws {
            let quakes = try Quake.load(Self.query)
            try await withService([Self.query]) { (service, client) async throws in
                let pivot = quakes.map(\.updated).sorted()[quakes.count - 50]
                let expected = Self.newestFirst(quakes.filter { $0.updated >= pivot }).map(\.id)
                let reply = try await query(client, service, "updatedafter=\(FDSNTestService.formatTime(pivot))")
                #expect(reply.ids == expected)
                #expect(expected.count >= 50 && expected.count < quakes.count)
                #expect(reply.ids.contains(quakes.first { $0.updated == pivot }!.id))
            }
        }

        @Test func magnitudeBoundsAreInclusive() async throws {
            let quakes = try Quake.load(Self.query)
            try await withService([Self.query]) { (service, client) async throws in
                let expected = Self.newestFirst(quakes.filter { $0.mag! >= 4 && $0.mag! <= 4.5 }).map(\.id)
                #expect(!expected.isEmpty)
                #expect(try await query(client, service, "minmagnitude=4&maxmagnitude=4.5").ids == expected)
                #expect(try await query(client, service, "minmag=4&maxmag=4.5").ids == expected)
                let strongest = quakes.max { $0.mag! < $1.mag! }!
                let exact = try await query(
                    client, service, "minmagnitude=\(strongest.mag!)&maxmagnitude=\(strongest.mag!)")
                #expect(exact.ids.contains(strongest.id))
                #expect(exact.ids.count == quakes.filter { $0.mag == strongest.mag }.count)
                let above = try await query(client, service, "minmagnitude=\(strongest.mag!.nextUp)")
                #expect(above.ids.isEmpty)
            }
        }

        @Test func circleSearch() async throws {
            let quakes = try Quake.load(Self.query)
            try await withService([Self.query]) { (service, client) async throws in
                let (lat, lon, radius) = (38.8, -122.8, 50.0)  // The Geysers
                let expected = Self.newestFirst(
                    quakes.filter { Self.distanceKm(lat, lon, $0.lat, $0.lon) <= radius }
                ).map(\.id)
                #expect(expected.count > 20 && expected.count < quakes.count / 2)
                let reply = try await query(client, service, "latitude=\(lat)&longitude=\(lon)&maxradiuskm=\(radius)")
                #expect(reply.ids == expected)
                #expect(try await query(client, service, "lat=\(lat)&lon=\(lon)&maxradiuskm=\(radius)").ids == expected)
                // Without a radius, the whole earth.
                #expect(
                    try await query(client, service, "latitude=0&longitude=0&limit=20000").ids.count == quakes.count)
            }
        }

        @Test func boxSearchAlsoAcrossTheAntimeridian() async throws {
            let quakes = try Quake.load(Self.week)
            try await withService([Self.week]) { (service, client) async throws in
                // A plain box (California).
                let plain = Self.newestFirst(
                    quakes.filter { $0.lat >= 32 && $0.lat <= 42 && $0.lon >= -125 && $0.lon <= -114 }
                ).map(\.id)
                #expect(plain.count > 50)
                let reply = try await query(
                    client, service, "minlatitude=32&maxlatitude=42&minlongitude=-125&maxlongitude=-114")
                #expect(reply.ids == plain)
                #expect(
                    try await query(client, service, "minlat=32&maxlat=42&minlon=-125&maxlon=-114").ids == plain)

                // 170°E … 170°W, south of the equator (Fiji, Tonga, Kermadec), spelled both ways.
                let across = Self.newestFirst(
                    quakes.filter { $0.lat >= -60 && $0.lat <= 0 && ($0.lon >= 170 || $0.lon <= -170) }
                )
                #expect(across.contains { $0.lon > 0 } && across.contains { $0.lon < 0 })
                let east = try await query(
                    client, service, "minlatitude=-60&maxlatitude=0&minlongitude=170&maxlongitude=190")
                #expect(east.ids == across.map(\.id))
                let west = try await query(
                    client, service, "minlatitude=-60&maxlatitude=0&minlongitude=-190&maxlongitude=-170")
                #expect(west.ids == across.map(\.id))
                // One edge only: the other is the default.
                let north = Self.newestFirst(quakes.filter { $0.lat >= 60 }).map(\.id)
                #expect(!north.isEmpty)
                #expect(try await query(client, service, "minlatitude=60").ids == north)
            }
        }

        @Test func eachOrder() async throws {
            let quakes = try Quake.load(Self.query).filter { $0.time >= Self.ms("2019-07-01T00:00:00Z") }
            try await withService([Self.query]) { (service, client) async throws in
                let window = "starttime=2019-07-01"
                let newest = Self.newestFirst(quakes).map(\.id)
                let oldest = Array(newest.reversed())
                // Magnitude ties: newest first for `magnitude`, oldest first for `magnitude-asc`.
                let largest = quakes.sorted {
                    $0.mag != $1.mag ? $0.mag! > $1.mag! : ($0.time != $1.time ? $0.time > $1.time : $0.id > $1.id)
                }.map(\.id)
                let smallest = quakes.sorted {
                    $0.mag != $1.mag ? $0.mag! < $1.mag! : ($0.time != $1.time ? $0.time < $1.time : $0.id < $1.id)
                }.map(\.id)
                #expect(newest.count > 1000)
                #expect(try await query(client, service, window).ids == newest)
                #expect(try await query(client, service, window + "&orderby=time").ids == newest)
                #expect(try await query(client, service, window + "&orderby=time-asc").ids == oldest)
                #expect(try await query(client, service, window + "&orderby=magnitude").ids == largest)
                #expect(try await query(client, service, window + "&orderby=magnitude-asc").ids == smallest)
            }
        }

        @Test func limitAndOffsetPage() async throws {
            let quakes = try Quake.load(Self.query)
            try await withService([Self.query]) { (service, client) async throws in
                let all = Self.newestFirst(quakes).map(\.id)
                #expect(try await query(client, service, "limit=10").ids == Array(all[0..<10]))
                #expect(try await query(client, service, "limit=10&offset=1").ids == Array(all[0..<10]))
                #expect(try await query(client, service, "limit=10&offset=11").ids == Array(all[10..<20]))
                let ascending = try await query(client, service, "orderby=time-asc&limit=3&offset=2")
                #expect(ascending.ids == Array(all.reversed()[1..<4]))
                #expect(try await query(client, service, "offset=4300").ids == Array(all[4299...]))
                let past = try await query(client, service, "limit=5&offset=5000")
                #expect(past.status == 200 && past.ids.isEmpty)
                #expect(try await query(client, service, "limit=20000").ids.count == 4312)
                #expect(try await query(client, service, "limit=0").status == 400)
                #expect(try await query(client, service, "limit=20001").status == 400)
                #expect(try await query(client, service, "offset=0").status == 400)
            }
        }

        @Test func includeDeleted() async throws {
            let quakes = try Quake.load(Self.query)
            try await withService([Self.query]) { (service, client) async throws in
                let gone = [quakes[0].id, quakes[7].id]
                try service.markDeleted(id: gone[0], updated: 1_600_000_000_000)
                try service.markDeleted(id: gone[1])
                #expect(service.event(id: gone[0])?.isDeleted == true)
                #expect(service.event(id: gone[1])?.updated == quakes[7].updated + 1)

                let all = Self.newestFirst(quakes).map(\.id)
                let kept = try await query(client, service, "limit=20000")
                #expect(kept.ids == all.filter { !gone.contains($0) })
                #expect(try await query(client, service, "limit=20000&includedeleted=false").ids == kept.ids)
                #expect(try await query(client, service, "limit=20000&includedeleted=true").ids == all)
                let only = try await query(client, service, "includedeleted=only")
                #expect(only.ids == gone)

                // The deleted feature says so, and keeps everything else.
                let original = try FeedDocument(contentsOf: Self.query).features.first {
                    $0["id"] as? String == gone[0]
                }!
                let deleted = only.features[0]
                var properties = deleted["properties"] as! [String: Any]
                #expect(properties["status"] as? String == "deleted")
                #expect((properties["updated"] as? NSNumber)?.int64Value == 1_600_000_000_000)
                properties["status"] = (original["properties"] as! [String: Any])["status"]
                properties["updated"] = (original["properties"] as! [String: Any])["updated"]
                #expect(
                    NSDictionary(dictionary: properties)
                        == NSDictionary(dictionary: original["properties"] as! [String: Any]))
                // updatedafter sees the new `updated`.
                let recent = try await query(client, service, "includedeleted=true&updatedafter=2020-09-13T12:26:40")
                #expect(recent.ids == [gone[0]])
            }
        }

        @Test func countInGeoJSONAndText() async throws {
            let quakes = try Quake.load(Self.query)
            try await withService([Self.query]) { (service, client) async throws in
                let expected = quakes.filter { $0.mag! >= 3 }.count
                let json = try await get(client, service.countURL + "?format=geojson&minmagnitude=3")
                #expect(json.status == 200)
                #expect(json.json["count"] as? Int == expected)
                #expect(json.json["maxAllowed"] as? Int == 20000)
                let plain = try await get(client, service.countURL + "?minmagnitude=3")
                #expect(plain.status == 200)
                #expect(plain.text == "\(expected)")
                #expect(plain.headers.first(name: "Content-Type") == "text/plain")
                // count has no search limit.
                service.searchLimit = 100
                let all = try await get(client, service.countURL + "?format=geojson")
                #expect(all.json["count"] as? Int == 4312)
                #expect(all.json["maxAllowed"] as? Int == 100)
                // It can lie, and be switched off.
                service.countLies = { $0 / 2 }
                #expect(try await get(client, service.countURL).text == "\(4312 / 2)")
                service.countLies = nil
                service.countAvailable = false
                #expect(try await get(client, service.countURL).status == 404)
                service.countAvailable = true
                #expect(try await get(client, service.countURL + "?format=text").text == "4312")
                #expect(try await get(client, service.countURL + "?format=xml").status == 400)
                #expect(try await get(client, service.countURL + "?bogus=1").status == 400)
                #expect(service.countRequests.count == 8)
                #expect(service.log.last?.status == 400)
                #expect(service.log.first?.matched == expected)
            }
        }

        @Test func searchLimit() async throws {
            try await withService([Self.query]) { (service, client) async throws in
                let tooMany = try await query(client, service, "")
                #expect(tooMany.status == 200)
                #expect(tooMany.ids.count == 4312)
                service.searchLimit = 1000
                let refused = try await query(client, service, "")
                #expect(refused.status == 400)
                #expect(
                    refused.text
                        == "Error 400: Bad Request\n\n4312 matching events exceeds search limit of 1000. "
                        + "Modify the search to match fewer events.\n")
                #expect(refused.text == FDSNTestService.searchLimitMessage(matching: 4312, limit: 1000))
                #expect(refused.headers.first(name: "Content-Type") == "text/plain")
                // A narrower search passes; `limit` lifts the check (up to the limit itself).
                let narrow = try await query(client, service, "minmagnitude=3.5")
                #expect(narrow.status == 200 && !narrow.ids.isEmpty && narrow.ids.count <= 1000)
                let paged = try await query(client, service, "limit=1000&offset=4001")
                #expect(paged.status == 200 && paged.ids.count == 312)
                #expect(try await query(client, service, "limit=1001").status == 400)
                #expect(service.log.map(\.status) == [200, 400, 200, 200, 400])
                #expect(service.log[1].matched == 4312)
            }
        }

        @Test func badParametersGet400NamingThem() async throws {
            try await withService([Self.week]) { (service, client) async throws in
                let cases: [(String, String)] = [
                    ("bogus=1", "bogus"),
                    ("eventid=us1000", "eventid"),
                    ("starttime=yesterday", "starttime"),
                    ("endtime=2024-02-30", "endtime"),
                    ("starttime=2024-01-02T25:00:00", "starttime"),
                    ("updatedafter=2024-01-02T03:04", "updatedafter"),
                    ("starttime=2024-01-03&endtime=2024-01-02", "starttime"),
                    ("minmagnitude=big", "minmagnitude"),
                    ("maxmagnitude=nan", "maxmagnitude"),
                    ("minmagnitude=5&maxmagnitude=4", "minmagnitude"),
                    ("latitude=91&longitude=0", "latitude"),
                    ("latitude=10", "latitude"),
                    ("maxradiuskm=100", "maxradiuskm"),
                    ("minlongitude=-400", "minlongitude"),
                    ("minlatitude=10&maxlatitude=5", "minlatitude"),
                    ("orderby=size", "orderby"),
                    ("limit=ten", "limit"),
                    ("offset=-1", "offset"),
                    ("includedeleted=maybe", "includedeleted"),
                    ("start=2024-01-01&starttime=2024-01-01", "start"),
                ]
                for (parameters, name) in cases {
                    let reply = try await query(client, service, parameters)
                    #expect(reply.status == 400, "\(parameters)")
                    #expect(reply.text.hasPrefix("Error 400: Bad Request\n\n"), "\(parameters)")
                    #expect(reply.text.contains(name), "\(parameters): \(reply.text)")
                }
                // format: geojson, xml (quakeml) or text (FDSNFormatTests); no other.
                let json = try await get(client, service.queryURL + "?format=json")
                #expect(json.status == 400 && json.text.contains("format"))
                let kml = try await get(client, service.queryURL + "?format=kml&limit=1")
                #expect(kml.status == 400 && kml.text.contains("format"))
                #expect(service.log.count == cases.count + 2)
                #expect(service.log.allSatisfy { $0.status == 400 && $0.query == nil })
                #expect(service.queryRequests.first?.query == ["format": "geojson", "bogus": "1"])
            }
        }

        // MARK: Faults

        @Test func oneShotFaultsInOrder() async throws {
            try await withService([Self.query]) { (service, client) async throws in
                let page = "limit=20"
                let real = try await query(client, service, page)
                #expect(real.status == 200 && real.ids.count == 20)

                service.enqueueFaults([
                    .tooManyRequests(retryAfter: 7),
                    .serviceUnavailable(retryAfter: 3),
                    .serviceUnavailable(retryAfter: nil),
                    .response(.status(500)),
                    .html(),
                    .transform { $0.withHeader("X-Fault", "transformed") },
                ])
                #expect(service.pendingFaults == 6)
                let busy = try await query(client, service, page)
                #expect(busy.status == 429)
                #expect(busy.headers.first(name: "Retry-After") == "7")
                let unavailable = try await query(client, service, page)
                #expect(unavailable.status == 503)
                #expect(unavailable.headers.first(name: "Retry-After") == "3")
                let bare = try await query(client, service, page)
                #expect(bare.status == 503)
                #expect(bare.headers.first(name: "Retry-After") == nil)
                #expect(try await query(client, service, page).status == 500)
                let html = try await query(client, service, page)
                #expect(html.status == 200)
                #expect(html.headers.first(name: "Content-Type") == "text/html")
                #expect(html.text.hasPrefix("<html>"))
                let transformed = try await query(client, service, page)
                #expect(transformed.headers.first(name: "X-Fault") == "transformed")
                #expect(transformed.ids == real.ids)
                #expect(service.pendingFaults == 0)
                // Then the real answers again; count requests never take a query fault.
                service.enqueueFaults([.serviceUnavailable(retryAfter: 1)])
                #expect(try await get(client, service.countURL).status == 200)
                #expect(try await query(client, service, page).status == 503)
                #expect(try await query(client, service, page).ids == real.ids)
                let statuses = service.log.filter { $0.endpoint == .query }.map(\.status)
                #expect(statuses == [200, 429, 503, 503, 500, 200, 200, 503, 200])
            }
        }

        @Test func truncatedBodyStopsAfterTheGivenBytes() async throws {
            try await withService([Self.query]) { (service, client) async throws in
                let real = try await query(client, service, "limit=50")
                service.enqueueFaults([.truncated(afterBytes: 1000)])
                let response = try await client.execute(
                    HTTPClientRequest(url: service.queryURL + "?format=geojson&limit=50"), timeout: .seconds(30))
                #expect(response.status == .ok)
                let announced = Int(response.headers.first(name: "Content-Length") ?? "") ?? 0
                // Only `generated` differs from the earlier answer, and it has as many digits.
                #expect(announced == real.body.count)
                var received: [UInt8] = []
                await #expect(throws: (any Error).self) {
                    for try await chunk in response.body { received += chunk.readableBytesView }
                }
                #expect(received.count == 1000)
                #expect(received.starts(with: Array(real.body.prefix(40))))
                #expect(service.log.last?.status == 200)
                #expect(service.log.last?.returned == 50)
            }
        }

        @Test func slowAndStalledBodies() async throws {
            try await withService([Self.query]) { (service, client) async throws in
                let real = try await query(client, service, "limit=5")
                let chunks = (real.body.count + 999) / 1000
                #expect(chunks >= 3)
                service.enqueueFaults([.slow(chunkSize: 1000, delay: .milliseconds(40))])
                let start = ContinuousClock.now
                let slow = try await query(client, service, "limit=5")
                #expect(ContinuousClock.now - start >= .milliseconds(40) * chunks)
                #expect(slow.ids == real.ids)

                // Persistent slow mode, until cleared.
                service.slowMode = (chunkSize: 2000, delay: .milliseconds(50))
                for _ in 0..<2 {
                    let begin = ContinuousClock.now
                    #expect(try await query(client, service, "limit=5").ids == real.ids)
                    #expect(ContinuousClock.now - begin >= .milliseconds(50) * ((real.body.count + 1999) / 2000))
                }
                service.slowMode = nil

                try await withClient(readTimeout: .milliseconds(300)) { (impatient: HTTPClient) async throws in
                    service.enqueueFaults([.stalled(afterBytes: 100), .stalledBeforeHead])
                    let begin = ContinuousClock.now
                    await #expect(throws: (any Error).self) { _ = try await query(impatient, service, "limit=5") }
                    await #expect(throws: (any Error).self) { _ = try await query(impatient, service, "limit=5") }
                    #expect(ContinuousClock.now - begin < .seconds(10))
                    #expect(try await query(impatient, service, "limit=5").ids == real.ids)
                }
            }
        }

        @Test func persistentFailureAndCountFault() async throws {
            try await withService([Self.week]) { (service, client) async throws in
                service.failAlways = .serviceUnavailable(retryAfter: 30)
                for _ in 0..<3 {
                    let reply = try await query(client, service, "limit=1")
                    #expect(reply.status == 503)
                    #expect(reply.headers.first(name: "Retry-After") == "30")
                }
                // A queued one-shot fault goes first.
                service.enqueueFaults([.tooManyRequests(retryAfter: 1)])
                #expect(try await query(client, service, "limit=1").status == 429)
                #expect(try await query(client, service, "limit=1").status == 503)
                service.failAlways = nil
                #expect(try await query(client, service, "limit=1").status == 200)

                service.countFault = .response(.status(502))
                #expect(try await get(client, service.countURL).status == 502)
                #expect(try await query(client, service, "limit=1").status == 200)
                service.clearFaults()
                #expect(try await get(client, service.countURL).text == "1513")
            }
        }

        // MARK: Events

        @Test func editingEvents() async throws {
            let quakes = try Quake.load(Self.week)
            try await withService([Self.week]) { (service, client) async throws in
                let event = quakes[3]
                let bytes = try #require(service.feature(id: event.id))
                #expect(throws: FDSNTestServiceError.self) { try service.add(feature: bytes) }
                #expect(throws: FDSNTestServiceError.self) { try service.add(feature: "{\"type\":\"Feature\"}") }
                #expect(throws: FDSNTestServiceError.self) { try service.markDeleted(id: "nope") }

                // A new event: from the existing one's bytes under another id.
                let copy = String(decoding: bytes, as: UTF8.self).replacingOccurrences(
                    of: "\"id\":\"\(event.id)\"", with: "\"id\":\"zz0001\"")
                try service.add(feature: copy)
                #expect(service.eventCount == quakes.count + 1)
                #expect(try await query(client, service, "limit=2000").ids.filter { $0 == "zz0001" }.count == 1)

                // Magnitude and location edits move it in and out of the filters.
                try service.setMagnitude(id: "zz0001", mag: 9.9, updated: event.updated + 5)
                #expect(try await query(client, service, "minmagnitude=9.8").ids == ["zz0001"])
                #expect(service.event(id: "zz0001")?.updated == event.updated + 5)
                try service.setLocation(id: "zz0001", longitude: 179.5, latitude: -20, depth: 600)
                #expect(
                    try await query(client, service, "minmagnitude=9.8&latitude=-20&longitude=-179.5&maxradiuskm=120")
                        .ids == ["zz0001"])
                let moved = try await query(client, service, "minmagnitude=9.8")
                let geometry = moved.features.first?["geometry"] as? [String: Any]
                #expect(geometry?["coordinates"] as? [Double] == [179.5, -20, 600])

                // A new time re-sorts it: it becomes the newest.
                try service.update(id: "zz0001", properties: ["time": .int(1_397_600_000_000), "place": "nowhere"])
                let newest = try await query(client, service, "limit=1")
                #expect(newest.ids == ["zz0001"])
                #expect((newest.features[0]["properties"] as? [String: Any])?["place"] as? String == "nowhere")

                // Upsert replaces; remove forgets.
                #expect(try service.upsert(feature: bytes) == true)
                #expect(service.remove(id: "zz0001"))
                #expect(!service.remove(id: "zz0001"))
                #expect(service.eventCount == quakes.count)
                #expect(service.feature(id: event.id) == bytes)
                #expect(
                    service.events(matching: .init(limit: 3)).map(\.id)
                        == Array(Self.newestFirst(quakes).map(\.id).prefix(3)))
                #expect(service.count(matching: .init(minMagnitude: 5)) == quakes.filter { $0.mag! >= 5 }.count)
            }
        }

        @Test func serverHandlerHookAndQueryDecoding() async throws {
            try await FeedTestServer.withServer { server in
                server.setHandler("/echo") { request in
                    .text(
                        request.query.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: ";"))
                }
                try await withClient { client in
                    let echo = try await get(client, server.url("/echo?a=1&b=x%20y&c=p+q&a=2&flag&d=%E2%9C%93"))
                    #expect(echo.text == "a=2;b=x y;c=p q;d=✓;flag=")
                    // A script overrides the handler until cleared; then the handler answers again.
                    server.setResponses("/echo", [.status(503)])
                    #expect(try await get(client, server.url("/echo?a=1")).status == 503)
                    server.setResponses("/echo", [])
                    #expect(try await get(client, server.url("/echo?a=1")).text == "a=1")
                    server.removeHandler("/echo")
                    #expect(try await get(client, server.url("/echo")).status == 404)
                }
                #expect(server.requestCount("/echo") == 4)
                #expect(server.requests("/echo").first?.query["b"] == "x y")
            }
        }

        // MARK: Scale

        /// 200,000 generated features (about 140 MB) load in seconds and a few hundred MB, and windows of
        /// 20,000 come back whole. (Generating the file with Python takes about 8 s of the test's time.)
        @Test(.timeLimit(.minutes(5))) func largeGeneratedFeedLoads() async throws {
            try await withTemporaryDirectory { directory in
                let feed = directory.appendingPathComponent("large.geojson")
                let generated = try await ChildProcess.run(
                    "/usr/bin/python3",
                    [
                        Fixtures.packageRoot.appendingPathComponent("scripts/gen-feed.py").path, "--features", "200000",
                        feed.path,
                    ],
                    timeout: .seconds(240))
                #expect(generated.status == 0, "\(generated.stderr)")

                try await FDSNTestService.withService { service, _ in
                    let before = fdsnResidentBytes()
                    let clock = ContinuousClock()
                    let start = clock.now
                    let loaded = try service.add(featuresOf: feed)
                    let elapsed = clock.now - start
                    let grown = fdsnResidentBytes() - before
                    print("FDSNTestService: 200,000 features loaded in \(elapsed), resident +\(grown / 1_000_000) MB")
                    #expect(loaded == 200_000)
                    #expect(service.eventCount == 200_000)
                    #expect(elapsed < (Sanitizer.isActive ? .seconds(120) : .seconds(30)))
                    if !Sanitizer.isActive { #expect(grown < 1_000_000_000) }

                    let range = try #require(service.timeRange)
                    try await withClient { client in
                        let all = try await get(client, service.countURL + "?format=geojson")
                        #expect(all.json["count"] as? Int == 200_000)
                        let refused = try await get(client, service.queryURL + "?format=geojson")
                        #expect(refused.text == FDSNTestService.searchLimitMessage(matching: 200_000, limit: 20000))

                        // A window of about 19,000 events (the feed spreads 200,000 over 30 days).
                        let from = range.lowerBound + (range.upperBound - range.lowerBound) / 3
                        let to = from + 30 * 86_400_000 / 200_000 * 19_000
                        let window =
                            "starttime=\(FDSNTestService.formatTime(from))&endtime=\(FDSNTestService.formatTime(to))"
                        let expected = service.count(
                            matching: .init(startTime: from, endTime: to, includeDeleted: .include))
                        #expect(expected > 15_000 && expected <= 20_000)
                        let begin = clock.now
                        let reply = try await get(client, service.queryURL + "?format=geojson&" + window)
                        print(
                            "FDSNTestService: \(reply.body.count) bytes for \(expected) events in \(clock.now - begin)")
                        #expect(reply.status == 200)
                        let times = reply.features.map {
                            (($0["properties"] as! [String: Any])["time"] as! NSNumber).int64Value
                        }
                        #expect(times.count == expected)
                        #expect(times.allSatisfy { $0 >= from && $0 <= to })
                        #expect(times == times.sorted(by: >))

                        let page = try await get(client, service.queryURL + "?format=geojson&limit=20000&offset=180001")
                        #expect(page.features.count == 20_000)
                    }
                }
            }
        }
    }
}

/// The process's resident set size in bytes (Linux; 0 elsewhere).
private func fdsnResidentBytes() -> Int {
    guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return 0 }
    for line in status.split(separator: "\n") where line.hasPrefix("VmRSS:") {
        return (Int(line.filter(\.isNumber)) ?? 0) * 1024
    }
    return 0
}
