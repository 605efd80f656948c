import Foundation
import QuakeModel
import QuakeSources
import Testing

@Suite struct QuakeMLErrorTests {
    static let fixtures = [
        "INGV__qquake__events.xml", "mightymatth__earthquake-tools__geofon_test.xml",
        "mightymatth__earthquake-tools__iris_test.xml", "mightymatth__earthquake-tools__uspbr_test.xml",
        "WayneCrawford__tiskitpy__test_eqcat.qml", "obspy__obspy__usgs_event.xml", "SeisComP3__seiscomp3__event-6.txt",
        "anowacki__QuakeML.jl__2004-12-26_mag6+.qml", "GeoNet__QuakeML-XSLT__3506628.xml",
        "obspy__obspy__neries_events.xml",
    ]

    @Test(arguments: fixtures) func chunkingDoesNotMatter(name: String) throws {
        let bytes = try fixture(name)
        let whole = parseQuakeML(bytes, chunk: bytes.count + 1)
        for chunk in [1, 7, 4096] {
            let cut = parseQuakeML(bytes, chunk: chunk)
            #expect(cut.items == whole.items, "\(name) in chunks of \(chunk)")
            #expect(cut.error?.kind == whole.error?.kind)
            #expect(cut.error?.line == whole.error?.line)
        }
    }

    @Test func truncatedDocumentsAreErrors() throws {
        let bytes = try fixture("mightymatth__earthquake-tools__geofon_test.xml")
        // Cut inside the root's name, "<q:quakem" reads as a start tag of another element.
        #expect(parseQuakeML(Array(bytes.prefix(10))).error?.kind == .notQuakeML)
        for cut in [200, 2000, bytes.count - 20] {
            let parsed = parseQuakeML(Array(bytes.prefix(cut)), chunk: 512)
            let error = try #require(parsed.error, "cut at \(cut)")
            #expect(error.kind == .malformedXML)
            #expect(error.line != nil)
            #expect(error.source == "test")
        }
        // A cut between events: the first event came out before the error.
        let events = parseQuakeML(Array(bytes.prefix(cut(bytes, after: "</event>"))))
        #expect(events.error?.kind == .malformedXML)
    }

    @Test func malformedXMLSaysWhereAndWhat() throws {
        let parsed = parse("<q:quakeml xmlns:q=\"http://quakeml.org/xmlns/quakeml/1.2\">\n<eventParameters>\n<event></eventParameters>")
        let error = try #require(parsed.error)
        #expect(error.kind == .malformedXML)
        #expect(error.line == 3)
        #expect(error.message.contains("opening and ending tag mismatch"))
        #expect(error.path == "quakeml/eventParameters/event")
        #expect(error.description.hasPrefix("source test: line 3, column"))
        #expect(parse("<a>").error?.kind == .malformedXML)  // shorter than libxml2's 4-byte start
        #expect(parse("<?xml version=\"1.0\"?>").error?.kind == .malformedXML)
        #expect(parse("{\"type\": \"FeatureCollection\"}").error?.kind == .malformedXML)
    }

    /// Bytes that are not in the declared encoding: libxml2 raises it without its parser
    /// context (to the thread's handler, the reader's while it parses), an error like any other.
    @Test func bytesNotInTheDeclaredEncoding() throws {
        let doc = Array("<?xml version=\"1.0\" encoding=\"US-ASCII\"?>\n<quakeml xmlns=\"http://quakeml.org/xmlns/quakeml/1.2\"><eventParameters><event publicID=\"smi:x/".utf8)
            + [0xE9] + Array("\"/></eventParameters></quakeml>".utf8)
        for chunk in [1, 7, 4096] {
            let error = try #require(parseQuakeML(doc, chunk: chunk).error, "in chunks of \(chunk)")
            #expect(error.kind == .malformedXML)
            #expect(error.message.contains("libxml2"), "\(error.message)")
        }
    }

    @Test func htmlPagesAreRecognized() throws {
        for page in [
            "<!DOCTYPE html>\n<html><head><title>503</title></head></html>", "\n  <HTML><BODY>Error</BODY></HTML>",
            "<html lang=\"en\">", "<?xml version=\"1.0\"?>\n<html xmlns=\"http://www.w3.org/1999/xhtml\"><body/></html>",
        ] {
            for chunk in [1, 4096] {
                let error = try #require(parse(page, chunk: chunk).error, "\(page)")
                #expect(error.kind == .htmlPage)
                #expect(error.message == "the service answered with an HTML page, not QuakeML: check the URL")
            }
        }
    }

    @Test func otherXMLIsNotQuakeML() {
        let parsed = parse("<feed xmlns=\"http://www.w3.org/2005/Atom\"><entry/></feed>")
        #expect(parsed.error?.kind == .notQuakeML)
        #expect(parsed.error?.message.contains("<feed>") == true)
    }

    @Test func emptyAnswerIsNoEvents() {
        for body in ["", " ", "\n\n  \r\n"] {
            let parsed = parse(body)
            #expect(parsed.error == nil && parsed.items.isEmpty)
        }
    }

    @Test func unimportableEventsAreSkippedWithReasons() {
        func event(_ id: String, _ origin: String) -> String {
            "<event publicID=\"smi:x/\(id)\"><type>earthquake</type>\(origin)</event>"
        }
        func origin(time: String = "2020-01-01T00:00:00Z", lat: String = "1", lon: String = "2") -> String {
            "<origin publicID=\"o\"><time><value>\(time)</value></time><latitude><value>\(lat)</value></latitude>"
                + "<longitude><value>\(lon)</value></longitude></origin>"
        }
        let doc = quakeml(
            event("none", "") + event("lat", origin(lat: "90.5")) + event("lon", origin(lon: "-180.01"))
                + event("nan", origin(lat: "NaN")) + event("time", origin(time: "2020-01-01"))
                + event("ok", origin()) + "<event><origin/></event>"
                + "<event publicID=\"smi:x/gone\"><type>not existing</type></event>"
                + "<event publicID=\"smi:x/del\"><type>deleted</type><creationInfo><modificationTime>2020-02-02T00:00:00Z</modificationTime></creationInfo></event>")
        let parsed = parse(doc)
        #expect(parsed.error == nil)
        #expect(parsed.items == [
            .report(SourceReport(source: "test", id: "ok", time: ms("2020-01-01T00:00:00Z"), latitude: 1, longitude: 2, eventType: "earthquake")),
            .retraction(source: "test", id: "gone", updated: nil),
            .retraction(source: "test", id: "del", updated: ms("2020-02-02T00:00:00Z")),
        ])
        #expect(parsed.skipped == 6)
        #expect(parsed.problems.map(\.kind) == [.noOrigin, .badCoordinates, .badCoordinates, .badCoordinates, .badTime, .noID])
        #expect(parsed.problems.map(\.id) == ["none", "lat", "lon", "nan", "time", nil])
        #expect(parsed.problems[1].path == "origin/latitude/value")
        #expect(parsed.problems[0].line == 1)
    }

    @Test func preferredOriginAndMagnitude() throws {
        let doc = quakeml(
            """
            <event publicID="smi:x/e"><preferredOriginID>o2</preferredOriginID><preferredMagnitudeID>m2</preferredMagnitudeID>
            <magnitude publicID="m1"><mag><value>3</value></mag><type>ML</type></magnitude>
            <magnitude publicID="m2"><mag><value>4</value></mag><type>Mw</type><creationInfo><agencyID>MAG</agencyID></creationInfo></magnitude>
            <origin publicID="o1"><time><value>2020-01-01T00:00:00Z</value></time><latitude><value>1</value></latitude><longitude><value>1</value></longitude></origin>
            <origin publicID="o2"><time><value>2020-01-01T00:00:01Z</value></time><latitude><value>2</value></latitude><longitude><value>2</value></longitude>
            <depth><value>12345</value></depth><evaluationStatus>bogus</evaluationStatus><evaluationMode>manual</evaluationMode>
            <creationInfo><agencyURI>smi:smi-registry/organization/ORG</agencyURI><creationTime>2020-03-01T00:00:00Z</creationTime></creationInfo></origin>
            <ext:thing xmlns:ext="http://example.org/ext"><origin><latitude><value>99</value></latitude></origin></ext:thing>
            <script/>
            </event>
            """)
        let r = try #require(parse(doc).reports.first)
        #expect(r.time == ms("2020-01-01T00:00:01Z") && r.latitude == 2 && r.depth == 12.345)
        #expect(r.magnitude == 4 && r.magnitudeType == "Mw")
        #expect(r.evaluationMode == .manual && r.evaluationStatus == nil)
        #expect(r.agency == "MAG")  // agencyID anywhere beats an agencyURI
        #expect(r.updated == ms("2020-03-01T00:00:00Z"))
    }

    @Test func eventIDs() throws {
        let ids = [
            "smi:org.gfz-potsdam.de/geofon/gfz2021inzw": "gfz2021inzw",
            "quakeml:eu.emsc/event/20120404_0000041": "20120404_0000041",
            "smi:webservices.ingv.it/fdsnws/event/1/query?eventId=26359881": "26359881",
            "smi:service.iris.edu/fdsnws/event/1/query?eventid=11409051": "11409051",
            "quakeml:comcat.cr.usgs.gov/fdsnws/event/1/query?eventid=ci37285320&amp;amp;format=quakeml": "ci37285320",
            "quakeml:us.anss.org/event/us7000abcd": "us7000abcd",
            "smi:ISC/evid=7453151": "7453151",
            "smi:geonet.org.nz/event/3506628g": "3506628g",
            "plain": "plain",
        ]
        for (publicID, id) in ids {
            let doc = quakeml(
                "<event publicID=\"\(publicID)\"><origin><time><value>2020-01-01T00:00:00Z</value></time>"
                    + "<latitude><value>1</value></latitude><longitude><value>1</value></longitude></origin></event>")
            #expect(parse(doc).reports.first?.id == id, "\(publicID)")
        }
        let comcat = quakeml(
            "<event xmlns:catalog=\"http://anss.org/xmlns/catalog/0.1\" catalog:eventsource=\"us\" catalog:eventid=\"7000abcd\" publicID=\"quakeml:x/y\">"
                + "<origin><time><value>2020-01-01T00:00:00Z</value></time><latitude><value>1</value></latitude><longitude><value>1</value></longitude></origin></event>")
        #expect(parse(comcat).reports.first?.id == "us7000abcd")
    }

    private func quakeml(_ events: String) -> String {
        "<?xml version=\"1.0\"?><q:quakeml xmlns:q=\"http://quakeml.org/xmlns/quakeml/1.2\" xmlns=\"http://quakeml.org/xmlns/bed/1.2\"><eventParameters publicID=\"smi:x\">"
            + events + "</eventParameters></q:quakeml>"
    }

    private func parse(_ text: String, chunk: Int = 4096) -> Parsed { parseQuakeML(Array(text.utf8), chunk: chunk) }

    private func cut(_ bytes: [UInt8], after marker: String) -> Int {
        let m = Array(marker.utf8)
        for i in 0...(bytes.count - m.count) where bytes[i..<i + m.count].elementsEqual(m) { return i + m.count }
        return bytes.count
    }
}

struct Stop: Error {}

@Suite struct ThrowingBodyTests {
    /// A body that throws on some items: the readers stay usable, and every item still comes
    /// out once, in order.
    @Test func quakemlResumes() throws {
        let bytes = try fixture("INGV__qquake__events.xml")
        let expected = parseQuakeML(bytes).items
        let reader = QuakeMLReader(source: "test")
        var items: [SourceItem] = []
        var calls = 0
        func take(_ item: SourceItem) throws {
            calls += 1
            if calls % 3 == 0 { throw Stop() }
            items.append(item)
        }
        var chunks = stride(from: 0, to: bytes.count, by: 20_000).map { Array(bytes[$0..<min(bytes.count, $0 + 20_000)]) }
        chunks.append([])
        for chunk in chunks {
            do { try reader.consume(chunk, take) } catch is Stop {}
        }
        while true {
            do {
                try reader.finish(take)
                break
            } catch is Stop {}
        }
        // Each item reached the body once, in order; those whose delivery threw are the caller's.
        #expect(calls == expected.count)
        #expect(items == expected.enumerated().filter { ($0.offset + 1) % 3 != 0 }.map(\.element))
    }

    @Test func fdsnTextResumes() throws {
        let bytes = try fixture("EMSC-CSEM__webservices101__emsc_services_fdsnws_text.txt")
        let expected = parseFDSNText(bytes).items
        var reader = FDSNTextReader(source: "test")
        var items: [SourceItem] = []
        var calls = 0
        func take(_ item: SourceItem) throws {
            calls += 1
            if calls == 2 { throw Stop() }
            items.append(item)
        }
        do { try reader.consume(bytes, take) } catch is Stop {}
        try reader.finish(take)
        #expect(items == expected.enumerated().filter { $0.offset != 1 }.map(\.element))
    }
}
