import Foundation
import QuakeConfigValues
import QuakeModel
@testable import QuakeStore
import Testing

@testable import QuakeDaemon

/// The pieces of the FDSN client that need no server: URLs, parameters, times, the search-limit
/// message, regions in the configuration.
@Suite struct CatalogServiceTests {
    @Test(arguments: [
        ("https://earthquake.usgs.gov/fdsnws/event/1/", "https://earthquake.usgs.gov/fdsnws/event/1/"),
        ("https://earthquake.usgs.gov/fdsnws/event/1", "https://earthquake.usgs.gov/fdsnws/event/1/"),
        ("https://earthquake.usgs.gov/fdsnws/event/1/query", "https://earthquake.usgs.gov/fdsnws/event/1/"),
        ("http://127.0.0.1:8080/fdsnws/event/1/count", "http://127.0.0.1:8080/fdsnws/event/1/"),
        ("  https://example.org  ", "https://example.org/"),
    ])
    func baseURLs(text: String, base: String) throws {
        #expect(try CatalogService(parsing: text).base.absoluteString == base)
    }

    @Test(arguments: [
        "", "earthquake.usgs.gov/fdsnws/event/1/", "ftp://example.org/", "file:///tmp/x", "https:///nohost",
        "https://example.org/query?format=geojson", "https://example.org/a b/", "https://example.org/#x",
    ])
    func refusedURLs(text: String) {
        #expect(throws: CatalogURLError.self) { try CatalogService(parsing: text) }
    }

    @Test func queryParameters() throws {
        let service = try CatalogService(parsing: "https://example.org/fdsnws/event/1/")
        var query = CatalogQuery(start: 1_546_300_800_000, end: 1_546_387_200_000, minMagnitude: 4.5)
        query.region = .box(minLat: 30, maxLat: 40, minLon: 170, maxLon: -170)
        let url = service.queryURL(query).absoluteString
        #expect(url.hasPrefix("https://example.org/fdsnws/event/1/query?format=geojson&orderby=time-asc&"))
        // endtime is inclusive in FDSN: one millisecond before the window's end.
        #expect(url.contains("starttime=2019-01-01T00:00:00.000&endtime=2019-01-01T23:59:59.999"))
        #expect(url.contains("minmagnitude=4.5"))
        // Across the antimeridian, as longitudes up to 360.
        #expect(url.contains("minlongitude=170&maxlongitude=190"))
        #expect(!url.contains("includedeleted") && !url.contains("updatedafter"))
        query.region = .near(lat: 35.5, lon: -120.25, radiusKm: 300)
        query.updatedAfter = 1_700_000_000_123
        query.includeDeleted = true
        let sync = service.countURL(query).absoluteString
        #expect(sync.hasPrefix("https://example.org/fdsnws/event/1/count?"))
        #expect(sync.contains("latitude=35.5&longitude=-120.25&maxradiuskm=300"))
        #expect(sync.contains("updatedafter=2023-11-14T22:13:20.123") && sync.contains("includedeleted=true"))
    }

    @Test(arguments: [
        (Int64(0), "1970-01-01T00:00:00.000"), (1_700_000_000_123, "2023-11-14T22:13:20.123"),
        (-1, "1969-12-31T23:59:59.999"), (951_782_400_000, "2000-02-29T00:00:00.000"),
    ])
    func fdsnTimes(ms: Int64, text: String) {
        #expect(CatalogQuery.fdsnTime(ms) == text)
    }

    @Test func searchLimitMessages() {
        let usgs = """
            Error 400: Bad Request

            20001 matching events exceeds search limit of 20000. Modify the search to match fewer events.

            Usage details are available from https://earthquake.usgs.gov/fdsnws/event/1
            """
        guard case .overLimit(let matching, let limit)? = CatalogFailure.overLimit(body: usgs) else {
            Issue.record("not read as over the limit")
            return
        }
        #expect(matching == 20001 && limit == 20000)
        // Numbers missing: still a refusal to split on, of unknown size.
        guard case .overLimit(nil, nil)? = CatalogFailure.overLimit(body: "too many: exceeds search limit") else {
            Issue.record("not read as over the limit without numbers")
            return
        }
        #expect(CatalogFailure.overLimit(body: "Error 400: Bad Request\n\nBad starttime value") == nil)
    }

    @Test(arguments: [
        ("35.68,139.69,300", CatalogRegion.near(lat: 35.68, lon: 139.69, radiusKm: 300)),
        ("32,-125,42,-114", CatalogRegion.box(minLat: 32, maxLat: 42, minLon: -125, maxLon: -114)),
        ("50,170,60,-170", CatalogRegion.box(minLat: 50, maxLat: 60, minLon: 170, maxLon: -170)),
    ])
    func regions(text: String, region: CatalogRegion) throws {
        #expect(try ConfigValue.region(text) == region)
        // And back: what --check-config prints reads as the same region.
        #expect(try ConfigValue.region(ConfigValue.text(region: region)) == region)
        var configuration = DaemonConfiguration()
        try configuration.apply(.catalogRegion, text, source: "test")
        #expect(configuration.text(for: .catalogRegion) == [ConfigValue.text(region: region)])
    }

    @Test(arguments: ["1,2", "1,2,3,4,5", "91,0,10", "0,181,10", "0,0,0", "0,0,30000", "40,0,30,10", "0,5,10,5", "a,b,c"])
    func refusedRegions(text: String) {
        #expect(throws: ConfigValue.Problem.self) { try ConfigValue.region(text) }
    }

    /// A catalog's first run: `catalog-since` outside backfilled times; inside them, the job's
    /// bound when it is earlier (an old job), else `catalog-since` too, in the same query.
    @Test func firstRunPieces() {
        typealias Piece = CatalogSync.Piece
        typealias Coverage = CatalogSync.Coverage
        let since: Int64 = 1_000_000
        // No backfill: one query from `since`.
        #expect(CatalogSync.firstRunPieces(from: 0, to: 500, since: since, coverage: []) == [Piece(start: 0, end: 500, updatedAfter: since)])
        // A recent job (created after `since`): still one query, from `since`.
        let recent = Coverage(start: 100, end: 400, updatedAfter: since + 5000)
        #expect(CatalogSync.firstRunPieces(from: 0, to: 500, since: since, coverage: [recent]) == [Piece(start: 0, end: 500, updatedAfter: since)])
        // An old job: its times are asked from its bound, the rest from `since`.
        let old = Coverage(start: 100, end: 400, updatedAfter: since - 7000)
        #expect(
            CatalogSync.firstRunPieces(from: 0, to: 500, since: since, coverage: [old]) == [
                Piece(start: 0, end: 100, updatedAfter: since), Piece(start: 100, end: 400, updatedAfter: since - 7000),
                Piece(start: 400, end: 500, updatedAfter: since),
            ])
        // Overlapping jobs: the newer one's knowledge wins where both fetched; a job reaching past
        // the store's times is clipped to them.
        let older = Coverage(start: -50, end: 300, updatedAfter: since - 9000)
        #expect(
            CatalogSync.firstRunPieces(from: 0, to: 500, since: since, coverage: [old, older]) == [
                Piece(start: 0, end: 100, updatedAfter: since - 9000), Piece(start: 100, end: 400, updatedAfter: since - 7000),
                Piece(start: 400, end: 500, updatedAfter: since),
            ])
        // A recent job beside an old one: the recent one's times join `since`'s query.
        let beside = Coverage(start: 400, end: 450, updatedAfter: since + 1)
        #expect(
            CatalogSync.firstRunPieces(from: 0, to: 500, since: since, coverage: [old, beside]) == [
                Piece(start: 0, end: 100, updatedAfter: since), Piece(start: 100, end: 400, updatedAfter: since - 7000),
                Piece(start: 400, end: 500, updatedAfter: since),
            ])
        // Jobs outside the store's times, or empty: nothing changes.
        let outside = [Coverage(start: 600, end: 700, updatedAfter: 0), Coverage(start: 200, end: 200, updatedAfter: 0)]
        #expect(CatalogSync.firstRunPieces(from: 0, to: 500, since: since, coverage: outside) == [Piece(start: 0, end: 500, updatedAfter: since)])
        #expect(CatalogSync.firstRunPieces(from: 5, to: 5, since: since, coverage: [old]).isEmpty)
        // The pieces always tile the times asked about.
        for coverage in [[old], [old, older], [old, beside], outside] {
            let pieces = CatalogSync.firstRunPieces(from: 0, to: 500, since: since, coverage: coverage)
            #expect(pieces.first?.start == 0 && pieces.last?.end == 500)
            for (a, b) in zip(pieces, pieces.dropFirst()) { #expect(a.end == b.start && a.updatedAfter != b.updatedAfter) }
        }
    }

    /// Which jobs cover the sync's query: the same service, no higher magnitude floor, no other region.
    @Test func backfillCoverage() throws {
        func job(catalog: String = "https://example.org/fdsnws/event/1/", minMagnitude: Double? = nil, region: CatalogRegion? = nil)
            -> BackfillJobRecord
        {
            BackfillJobRecord(
                id: 1, catalog: catalog, startTime: 0, endTime: 10, minMagnitude: minMagnitude, region: region, state: .done,
                createdAt: 0, finishedAt: 1, cursor: 10, span: 10, windowsDone: 1, eventsFetched: 0, eventsImported: 0,
                lastToken: nil, error: nil)
        }
        let url = try CatalogService(parsing: "https://example.org/fdsnws/event/1").base.absoluteString
        #expect(CatalogSync.sameService(job().catalog, url))
        #expect(CatalogSync.sameService("https://example.org/fdsnws/event/1/query", url))
        #expect(!CatalogSync.sameService("https://example.com/fdsnws/event/1/", url))
        let box = CatalogRegion.box(minLat: 30, maxLat: 40, minLon: 130, maxLon: 140)
        #expect(CatalogSync.covers(job(), minMagnitude: nil, region: nil))
        #expect(CatalogSync.covers(job(), minMagnitude: 2.5, region: box))
        #expect(CatalogSync.covers(job(minMagnitude: 2.5), minMagnitude: 4.5, region: nil))
        #expect(!CatalogSync.covers(job(minMagnitude: 4.5), minMagnitude: 2.5, region: nil))
        #expect(!CatalogSync.covers(job(minMagnitude: 4.5), minMagnitude: nil, region: nil))
        #expect(CatalogSync.covers(job(region: box), minMagnitude: nil, region: box))
        #expect(!CatalogSync.covers(job(region: box), minMagnitude: nil, region: nil))
    }
}
