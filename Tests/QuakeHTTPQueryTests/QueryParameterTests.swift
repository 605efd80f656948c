import QuakeFeed
import QuakeHTTPQuery
import Testing

/// The catalog service's query parameters, read without a server: the query string, the FDSN
/// event query and the summary feeds' four parameters (QuakeHTTPTests asks the same of a real
/// server over HTTP; the `http-query` fuzz target asks it of any bytes).
@Suite("query parameters")
struct QueryParameterTests {
    static func query(_ raw: String) throws -> FDSNQuery { try FDSNQuery(QueryString.items(raw)) }

    static func rejection(_ raw: String) -> String? {
        do {
            _ = try query(raw)
            return nil
        } catch let error as ParameterError {
            return error.message
        } catch {
            return "\(error)"
        }
    }

    @Test("a query string: pairs in order, percent escapes and + decoded, a malformed escape nil")
    func queryString() throws {
        let items = try #require(QueryString.items("a=1&place=San+Jos%C3%A9&&empty=&flag"))
        #expect(items.map(\.name) == ["a", "place", "empty", "flag"])
        #expect(items.map(\.value) == ["1", "San José", "", ""])
        #expect(QueryString.items("a=%zz") == nil)
        #expect(QueryString.items("a=%C3") == nil, "not UTF-8")
        #expect(QueryString.percentDecoded("a+b", plusIsSpace: false) == "a+b")
    }

    @Test("an FDSN query: times, magnitudes, a circle, order, limit and offset, format and nodata")
    func fdsnQuery() throws {
        let q = try Self.query(
            "starttime=2024-01-01&endtime=2024-01-02T12:00:00Z&minmag=4.5&latitude=42&longitude=13"
                + "&maxradius=2&minradius=1&orderby=magnitude-asc&limit=10&offset=3&format=text&nodata=404")
        #expect(q.selection.filter.since == 1_704_067_200_000)
        #expect(q.selection.until == 1_704_196_800_000)
        #expect(q.selection.filter.minMagnitude == 4.5)
        guard case .circle(let lat, let lon, let radiusKm) = q.selection.filter.region else {
            Issue.record("no circle: \(String(describing: q.selection.filter.region))")
            return
        }
        #expect(lat == 42 && lon == 13)
        #expect(abs(radiusKm - 2 * FDSNQuery.kmPerDegree) < 1e-9)
        #expect(q.selection.minDistanceKm.map { abs($0 - FDSNQuery.kmPerDegree) < 1e-9 } == true)
        #expect(q.selection.order == .magnitudeAscending)
        #expect(q.selection.limit == 10)
        #expect(q.selection.offset == 2, "offset 1 is the first event")
        #expect(q.format == .text)
        #expect(q.noData == 404)
        // Names in any ASCII case; a box.
        let box = try Self.query("MINLATITUDE=-10&maxlat=10&minlon=100")
        #expect(box.selection.filter.region == .box(minLat: -10, maxLat: 10, minLon: 100, maxLon: 180))
        #expect(try Self.query("").format == .xml, "QuakeML unless told otherwise")
    }

    @Test("a bad parameter is refused with a message naming it and what it takes")
    func rejections() {
        let cases: [(String, String)] = [
            ("color=red", "Unknown parameter color"),
            ("minmag=3&minmagnitude=4", "minmagnitude is given twice (also as minmag)"),
            ("starttime=yesterday", "starttime=yesterday is not a time"),
            ("starttime=2024-01-02&endtime=2024-01-01", "endtime is before starttime"),
            ("minmagnitude=13", "minmagnitude=13 is not a magnitude"),
            ("minlatitude=1&maxradius=2", "cannot be combined"),
            ("maxradius=1&maxradiuskm=100", "give one"),
            ("orderby=depth", "orderby=depth is not an order"),
            ("limit=0", "limit=0 is not a limit"),
            ("format=csv", "format=csv is not a format"),
            ("nodata=500", "nodata=500 is not a status"),
            ("includearrivals=maybe", "is not a boolean"),
            ("eventid=", "eventid is empty"),
            ("a=%g1", "malformed %-escape"),
        ]
        for (raw, expected) in cases {
            let message = Self.rejection(raw)
            #expect(message?.contains(expected) == true, "\(raw): \(message ?? "accepted")")
        }
    }

    @Test("the summary feeds: their paths, and a circle and a magnitude narrowing one")
    func summaryFeeds() throws {
        #expect(SummaryFeed.all.count == 20)
        let feed = try #require(SummaryFeed(path: "/feeds/4.5_week.geojson"))
        #expect(feed.path == "/feeds/4.5_week.geojson")
        #expect(SummaryFeed(path: "/feeds/3.0_week.geojson") == nil)
        let now: Int64 = 1_700_000_000_000
        let selection = try feed.selection(
            QueryString.items("minmagnitude=5&latitude=-41&longitude=174&maxradiuskm=500"), now: now)
        #expect(selection.filter.since == now - 7 * 86_400_000)
        #expect(selection.filter.minMagnitude == 5, "the larger of the feed's 4.5 and the query's")
        #expect(selection.filter.region == .circle(lat: -41, lon: 174, radiusKm: 500))
        let lower = try feed.selection(QueryString.items("minmagnitude=2"), now: now)
        #expect(lower.filter.minMagnitude == 4.5, "a query never widens the feed")
        #expect(throws: ParameterError.self) { try feed.selection(QueryString.items("latitude=1"), now: now) }
        #expect(throws: ParameterError.self) { try feed.selection(QueryString.items("maxradiuskm=-1"), now: now) }
        // Other parameters are the feed's readers' business, not an error.
        #expect(try feed.selection(QueryString.items("_=1"), now: now).filter.region == nil)
    }
}
