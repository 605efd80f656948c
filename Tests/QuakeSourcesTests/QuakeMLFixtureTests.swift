import Foundation
import QuakeModel
import QuakeSources
import Testing

/// Every QuakeML fixture, with values read from the files (see Fixtures/README.md).
@Suite struct QuakeMLFixtureTests {
    @Test func ingvThirteenEvents() throws {
        let parsed = parseQuakeML(try fixture("INGV__qquake__events.xml"), source: "ingv")
        #expect(parsed.error == nil)
        #expect(parsed.items.count == 13)
        #expect(parsed.skipped == 0)
        // The Petrinja main shock: time without Z, depth 9100 m.
        let r = try #require(parsed.report("25870121"))
        #expect(r.source == "ingv")
        #expect(r.agency == "INGV")
        #expect(r.time == ms("2020-12-29T11:19:54.080Z"))
        #expect(r.latitude == 45.4033 && r.longitude == 16.2017)
        #expect(r.depth == 9.1)
        #expect(r.magnitude == 6.3 && r.magnitudeType == "Mw")
        #expect(r.place == "Croatia [Land]")
        #expect(r.eventType == "earthquake")
        #expect(r.evaluationMode == .manual && r.evaluationStatus == .reviewed)
        let first = try #require(parsed.reports.first)
        #expect(first.id == "26359881")
        #expect(first.time == ms("2021-04-01T14:33:39.301Z"))
        #expect(first.evaluationMode == .automatic)
        #expect(first.magnitudeType == "mb")
        #expect(Set(parsed.reports.compactMap(\.magnitudeType)) == ["mb", "Mw", "ML", "Mwp"])
        #expect(parsed.reports.last?.id == "23812111")
    }

    @Test func gfzTwoEvents() throws {
        let parsed = parseQuakeML(try fixture("mightymatth__earthquake-tools__geofon_test.xml"))
        #expect(parsed.error == nil)
        #expect(parsed.reports.map(\.id) == ["gfz2021inzw", "gfz2021inyh"])
        let a = parsed.reports[0]
        #expect(a.time == ms("2021-05-02T12:07:30.939Z"))
        #expect(abs(a.latitude - -6.147405148) < 1e-12 && abs(a.longitude - 103.3460922) < 1e-12)
        #expect(abs(a.depth! - 36.03820038) < 1e-9)
        #expect(abs(a.magnitude! - 4.767178353) < 1e-12 && a.magnitudeType == "mb")
        #expect(a.evaluationMode == .automatic && a.evaluationStatus == nil)
        #expect(a.agency == "GFZ" && a.eventType == nil)
        #expect(a.place == "Southwest of Sumatra, Indonesia")
        let b = parsed.reports[1]
        #expect(b.evaluationMode == .manual && b.evaluationStatus == .confirmed)
        #expect(b.depth == 10 && b.place == "Off Coast of Pakistan")
    }

    @Test func emscQuakeML10ThreeEvents() throws {
        let parsed = parseQuakeML(try fixture("obspy__obspy__neries_events.xml"))
        #expect(parsed.error == nil)
        #expect(parsed.reports.map(\.id) == ["20120404_0000041", "20120404_0000038", "20120404_0000039"])
        let r = parsed.reports[0]
        #expect(r.time == ms("2012-04-04T14:21:42.300Z"))  // written with +00:00
        #expect(r.depth == 1.0)  // 1000 m
        #expect(r.magnitude == 4.4 && r.magnitudeType == "mb")
        #expect(r.place == "KYRGYZSTAN" && r.agency == "EMSC")
        #expect(r.eventType == nil)  // <type>null</type>
        #expect(r.updated == ms("2012-04-04T16:40:50Z"))
        #expect(parsed.reports.map(\.depth) == [1.0, 14.4, 7.0])
        #expect(parsed.reports[2].place == "CENTRAL TURKEY" && parsed.reports[2].magnitude == 3)
    }

    @Test func geonetQuakeML101DepthIsKilometres() throws {
        let parsed = parseQuakeML(try fixture("GeoNet__QuakeML-XSLT__3506628.xml"))
        #expect(parsed.error == nil)
        let r = try #require(parsed.reports.first)
        #expect(parsed.items.count == 1)
        #expect(r.id == "3506628g")
        #expect(r.time == ms("2011-05-03T00:01:00.590Z"))
        #expect(r.latitude == -43.16917 && r.longitude == 172.01764)
        #expect(r.depth == 8.0169)
        #expect(r.magnitude == 2.669 && r.magnitudeType == "ML")
        #expect(r.evaluationMode == .manual && r.evaluationStatus == .confirmed)
    }

    @Test func iscBulletinTwentyThreeEvents() throws {
        let parsed = parseQuakeML(try fixture("anowacki__QuakeML.jl__2004-12-26_mag6+.qml"))
        #expect(parsed.error == nil)
        #expect(parsed.items.count == 23)
        let main = try #require(parsed.report("7453151"))
        #expect(main.time == ms("2004-12-26T00:58:53.080Z"))
        #expect(main.latitude == 3.3148 && main.longitude == 95.9829)
        #expect(abs(main.depth! - 26.4518) < 1e-9)
        #expect(main.magnitude == 6.96 && main.magnitudeType == "mb")
        #expect(main.agency == "ISC")
        #expect(main.place == "Off west coast of northern Sumatera")
        #expect(parsed.reports.filter { $0.agency == "IDC" }.count == 1)
        #expect(parsed.reports.filter { $0.agency == "ISC" }.count == 22)
    }

    @Test func usgsQuarryTypesAndCatalogIDs() throws {
        let parsed = parseQuakeML(try fixture("obspy__obspy__usgs_event.xml"))
        #expect(parsed.error == nil)
        #expect(parsed.reports.map(\.id) == ["ci37285320", "uw60916552"])
        #expect(parsed.reports.map(\.eventType) == ["quarry blast", "quarry"])
        let a = parsed.reports[0]
        #expect(a.time == ms("2014-11-06T00:24:42.240Z"))
        #expect(a.depth == 0.01 && a.magnitude == 1.54 && a.magnitudeType == "ml")
        #expect(a.agency == "CI")
        #expect(parsed.reports[1].depth == 0 && parsed.reports[1].magnitudeType == "Md")
    }

    @Test func comcatRewrittenByObsPy() throws {
        let parsed = parseQuakeML(try fixture("WayneCrawford__tiskitpy__test_eqcat.qml"))
        #expect(parsed.error == nil)
        #expect(parsed.items.count == 9)
        let r = try #require(parsed.report("us10007ggp"))
        #expect(r.time == ms("2016-12-06T21:42:20.760Z"))
        #expect(r.depth == 31.75 && r.magnitude == 5.9 && r.magnitudeType == "mww")
        #expect(r.agency == "us" && r.evaluationMode == .manual)
        #expect(r.updated == ms("2022-05-03T18:04:05.669Z"))
        #expect(parsed.reports.contains { $0.magnitude == 7.8 })
    }

    @Test func seiscompSingleLineWithApos() throws {
        let parsed = parseQuakeML(try fixture("SeisComP3__seiscomp3__event-6.txt"))
        #expect(parsed.error == nil)
        #expect(parsed.reports.map(\.id) == ["rs2019qtevor", "rs2019qsodmc", "rs2019qrwzhx"])
        #expect(parsed.reports.map(\.eventType) == ["other event", "earthquake", nil])
        #expect(parsed.reports[2].place == "offshore Libertador O'Higgins, Chile")
        #expect(abs(parsed.reports[0].depth! - 95.14685822) < 1e-9)
        #expect(parsed.reports[0].time == ms("2019-08-26T01:52:33.932Z"))
        #expect(parsed.reports.allSatisfy { $0.agency == "gempa" })
    }

    @Test func uspBrazil() throws {
        let parsed = parseQuakeML(try fixture("mightymatth__earthquake-tools__uspbr_test.xml"))
        #expect(parsed.error == nil)
        #expect(parsed.reports.map(\.id) == ["usp2021ilss", "usp2021iljg"])
        #expect(parsed.reports.map(\.magnitudeType) == ["mb", "mB"])
        #expect(parsed.reports[1].depth == 10 && parsed.reports[1].place == "Near East Coast of Honshu, Japan")
        #expect(parsed.reports.allSatisfy { $0.agency == "USP" })
    }

    @Test func irisNotWellFormedIsAClearError() throws {
        let parsed = parseQuakeML(try fixture("mightymatth__earthquake-tools__iris_test.xml"))
        let error = try #require(parsed.error)
        #expect(error.kind == .malformedXML)
        #expect(error.line == 2)  // the extracted text starts with a newline; the browser's line is 2
        #expect(error.message.contains("start tag expected"))
        #expect(parsed.items.isEmpty)
    }

    @Test func irisWithoutTheBrowserLine() throws {
        var bytes = try fixture("mightymatth__earthquake-tools__iris_test.xml")
        for _ in 0..<2 { bytes.removeFirst(bytes.firstIndex(of: 0x0A)! + 1) }  // the empty line, the browser's
        let parsed = parseQuakeML(bytes)
        #expect(parsed.error == nil)
        let r = try #require(parsed.reports.first)
        #expect(r.id == "11409051")
        #expect(r.time == ms("2021-05-01T17:22:03.430Z"))
        #expect(abs(r.depth! - 31.860001) < 1e-9)
        #expect(r.place == "HAWAII" && r.magnitudeType == "Md")
        #expect(r.agency == "hv")
    }
}
