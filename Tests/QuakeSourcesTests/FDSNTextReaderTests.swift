import Foundation
import QuakeModel
import QuakeSources
import Testing

@Suite struct FDSNTextReaderTests {
    @Test func seiscompFourteenColumns() throws {
        let parsed = parseFDSNText(try fixture("SeisComP3__seiscomp3__event-1.txt"))
        #expect(parsed.error == nil)
        #expect(parsed.reports.map(\.id) == ["rs2019qtevor", "rs2019qsodmc", "rs2019qrwzhx"])
        let r = parsed.reports[0]
        #expect(r.time == ms("2019-08-26T01:52:33.932Z"))  // no Z, 6 decimals
        #expect(r.latitude == -19.656874 && r.longitude == -69.327728)
        #expect(r.depth == 95.14685822)  // already km
        #expect(r.magnitude == 2.532054686 && r.magnitudeType == "M")
        #expect(r.agency == "scanloc_CX")
        #expect(r.place == "Tarapaca, Chile")
        #expect(parsed.reports.map(\.eventType) == ["other event", "earthquake", nil])  // last EventType empty
        #expect(parsed.reports.map(\.agency) == ["scanloc_CX", "scolv@user", "scautoloc@mars"])
    }

    @Test func obspyThirteenColumnsWithEmptyColumns() throws {
        let parsed = parseFDSNText(try fixture("obspy__obspy__events.txt"))
        #expect(parsed.error == nil)
        #expect(parsed.reports.map(\.id) == ["3337497", "2413"])
        let a = parsed.reports[0]
        #expect(a.time == ms("2012-04-11T08:38:37.000Z"))
        #expect(a.agency == "ISC" && a.magnitudeType == "MW" && a.magnitude == 8.6 && a.place == "SUMATRA")
        let b = parsed.reports[1]
        #expect(b.time == ms("1960-05-22T19:11:14Z"))
        #expect(b.depth == 0 && b.magnitude == 8.5)
        #expect(b.agency == nil && b.magnitudeType == nil && b.place == nil && b.eventType == nil)
    }

    @Test func emscHeaderWithSpacesAroundPipes() throws {
        let parsed = parseFDSNText(try fixture("EMSC-CSEM__webservices101__emsc_services_fdsnws_text.txt"))
        #expect(parsed.error == nil)
        #expect(parsed.items.count == 6)
        let chiapas = try #require(parsed.report("20170908_0000020"))
        #expect(chiapas.time == ms("2017-09-08T04:49:21.200Z"))
        #expect(chiapas.latitude == 15.02 && chiapas.longitude == -93.81 && chiapas.depth == 72)
        #expect(chiapas.magnitude == 8.1 && chiapas.magnitudeType == "mw")
        #expect(chiapas.agency == "EMSC" && chiapas.place == "OFFSHORE CHIAPAS, MEXICO")
        #expect(parsed.report("20170919_0000091")?.magnitude == 7.1)
    }

    @Test func columnsAreFoundByName() {
        let text = "#Time|EventID|Longitude|Latitude|Magnitude\n2020-01-01T00:00:00Z|x1|10.5|-20.25|\n"
        let parsed = parseFDSNText(Array(text.utf8))
        #expect(parsed.reports.count == 1)
        let r = parsed.reports[0]
        #expect(r.id == "x1" && r.latitude == -20.25 && r.longitude == 10.5 && r.magnitude == nil && r.depth == nil)
    }

    @Test func wrongColumnCountNamesTheLine() {
        let text = "#EventID|Time|Latitude|Longitude\na|2020-01-01T00:00:00|1|2\nb|2020-01-01T00:00:00|1\n"
        let parsed = parseFDSNText(Array(text.utf8))
        #expect(parsed.reports.map(\.id) == ["a"])
        #expect(parsed.error?.kind == .wrongColumns)
        #expect(parsed.error?.line == 3)
        #expect(parsed.error?.message.contains("expected 4 columns") == true)
    }

    @Test func badRowsAreSkippedWithReasons() {
        let text = """
            #EventID|Time|Latitude|Longitude|EventType
            a|2020-13-01T00:00:00|1|2|
            b|2020-01-01T00:00:00|91|2|
            c|2020-01-01T00:00:00|1|nan|
            |2020-01-01T00:00:00|1|2|
            d|2020-01-01T00:00:00|1|2|not existing
            e|2020-01-01T00:00:00.5|-90|180|earthquake
            """
        let parsed = parseFDSNText(Array(text.utf8))
        #expect(parsed.error == nil)
        #expect(parsed.items == [
            .retraction(source: "test", id: "d", updated: nil),
            .report(SourceReport(source: "test", id: "e", time: 1_577_836_800_500, latitude: -90, longitude: 180, eventType: "earthquake")),
        ])
        #expect(parsed.skipped == 4)
        #expect(parsed.problems.map(\.kind) == [.badTime, .badCoordinates, .badCoordinates, .noID])
        #expect(parsed.problems.map(\.line) == [2, 3, 4, 5])
        #expect(parsed.problems[0].id == "a" && parsed.problems[0].path == "time")
    }

    @Test func emptyBodyIsNoEvents() {
        for body in ["", "\n", "  \r\n\n"] {
            let parsed = parseFDSNText(Array(body.utf8))
            #expect(parsed.error == nil && parsed.items.isEmpty)
        }
        // A header and no rows is no events too.
        #expect(parsed("#EventID|Time|Latitude|Longitude\n").items.isEmpty)
    }

    @Test func htmlAndMissingHeaderAreErrors() throws {
        let html = parsed("<!DOCTYPE html>\n<html><body>Service unavailable</body></html>\n")
        #expect(html.error?.kind == .htmlPage)
        #expect(html.error?.message.contains("HTML page") == true)
        let csv = parseFDSNText(try fixture("SeisComP3__seiscomp3__event-8.txt"))
        #expect(csv.error?.kind == .badHeader && csv.error?.line == 1)
        #expect(parsed("#Foo|Bar\n").error?.kind == .badHeader)
        let long = parsed("#EventID|Time|Latitude|Longitude\n" + String(repeating: "x", count: 70_000))
        #expect(long.error?.kind == .lineTooLong && long.error?.line == 2)
    }

    @Test func chunkingDoesNotMatter() throws {
        for name in [
            "SeisComP3__seiscomp3__event-1.txt", "obspy__obspy__events.txt",
            "EMSC-CSEM__webservices101__emsc_services_fdsnws_text.txt",
        ] {
            let bytes = try fixture(name)
            let whole = parseFDSNText(bytes)
            for chunk in [1, 7, 4096] {
                let cut = parseFDSNText(bytes, chunk: chunk)
                #expect(cut.items == whole.items, "\(name) in chunks of \(chunk)")
                #expect(cut.error == whole.error)
            }
        }
    }

    @Test func crlfLines() {
        let parsed = parsed("#EventID|Time|Latitude|Longitude\r\na|2020-01-01T00:00:00Z|1|2\r\n")
        #expect(parsed.reports.map(\.id) == ["a"])
    }

    private func parsed(_ text: String) -> Parsed { parseFDSNText(Array(text.utf8)) }
}
