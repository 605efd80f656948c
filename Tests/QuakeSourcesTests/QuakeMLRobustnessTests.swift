import Foundation
import QuakeModel
@testable import QuakeSources
import Testing

@Suite(.serialized) struct QuakeMLRobustnessTests {
    static let event =
        "<event publicID=\"smi:x/a\"><origin><time><value>2020-01-01T00:00:00Z</value></time>"
        + "<latitude><value>1</value></latitude><longitude><value>2</value></longitude></origin></event>"

    /// A reader dropped before `finish` (a cancelled download), mid-document and mid-event, one
    /// full piece parsed, frees its libxml2 parser context: 1,000 abandoned readers leave resident
    /// memory where they found it. (A leaked context, with its input buffer of a piece, name
    /// dictionary and stacks, is over 64 KB: 1,000 of them would add more than 64 MB.) Measured in
    /// a process of its own (an exit test), since the suites that run beside this one in the test
    /// process move its resident memory by hundreds of megabytes.
    @Test func abandonedReadersFreeTheirParsers() async {
        let child = await #expect(
            processExitsWith: .success, observing: [\.standardOutputContent]
        ) {
            let prefix = Array(
                ("<q:quakeml xmlns:q=\"http://quakeml.org/xmlns/quakeml/1.2\" xmlns=\"http://quakeml.org/xmlns/bed/1.2\">"
                    + "<eventParameters publicID=\"smi:x\">"
                    + String(repeating: QuakeMLRobustnessTests.event,
                             count: QuakeMLReader.pieceBytes / QuakeMLRobustnessTests.event.utf8.count + 20)
                    + "<event publicID=\"smi:x/b\"><description><text>cut here").utf8)
            func abandon(_ count: Int) {
                for _ in 0..<count {
                    let reader = QuakeMLReader(source: "x")
                    var items = 0
                    do { try reader.consume(prefix) { _ in items += 1 } } catch { exitFailing("consume threw \(error)") }
                    if items == 0 { exitFailing("a full piece gave no event") }
                }
            }
            abandon(100)
            let baseline = residentBytes()
            abandon(1_000)
            let growth = residentBytes() - baseline
            print("QuakeMLRobustnessTests: resident growth over 1,000 abandoned readers: \(growth >> 10) KB")
            if !underSanitizer, growth >= 16 << 20 {
                exitFailing("resident memory grew by \(growth >> 20) MB over 1,000 abandoned readers")
            }
        }
        echoChild(child)
    }

    /// Readers in many tasks at once, each parsing on its task's thread: all finish, with the
    /// same items.
    @Test func manyReadersAtOnce() async throws {
        let bytes = try fixture("INGV__qquake__events.xml")
        let expected = parseQuakeML(bytes).items
        let results = await withTaskGroup(of: [SourceItem].self) { group in
            for task in 0..<32 {
                group.addTask { parseQuakeML(bytes, chunk: 512 + task * 97).items }
            }
            return await group.reduce(into: []) { $0.append($1) }
        }
        #expect(results.count == 32)
        #expect(results.allSatisfy { $0 == expected })
    }

    /// Entity expansion (the "billion laughs") is refused by libxml2, not expanded.
    @Test func entityExpansionIsRefused() throws {
        var dtd = "<!DOCTYPE q [<!ENTITY a \"aaaaaaaaaa\">"
        var previous = "a"
        for name in ["b", "c", "d", "e", "f", "g", "h", "i", "j"] {
            dtd += "<!ENTITY \(name) \"" + String(repeating: "&\(previous);", count: 10) + "\">"
            previous = name
        }
        dtd += "]>"
        let doc = "<?xml version=\"1.0\"?>" + dtd
            + "<quakeml xmlns=\"http://quakeml.org/xmlns/quakeml/1.2\"><eventParameters><event publicID=\"smi:x/a\"><description><type>region name</type><text>&j;</text></description></event></eventParameters></quakeml>"
        let start = ContinuousClock.now
        let parsed = parseQuakeML(Array(doc.utf8))
        #expect(ContinuousClock.now - start < .seconds(5))
        #expect(parsed.error?.kind == .malformedXML || parsed.skipped == 1)
    }

    /// libxml2's warnings (a relative namespace URI) leave the document readable.
    @Test func warningsDoNotStopTheParse() {
        let doc = "<quakeml xmlns=\"http://quakeml.org/xmlns/quakeml/1.2\" xmlns:rel=\"relative/uri\"><eventParameters>"
            + Self.event + "<rel:x/>" + Self.event + "</eventParameters></quakeml>"
        let parsed = parseQuakeML(Array(doc.utf8))
        #expect(parsed.error == nil)
        #expect(parsed.items.count == 2)
    }

    /// QuakeML without any namespace, a byte order mark, and CDATA text are read.
    @Test func lenientButXML() throws {
        let doc = [0xEF, 0xBB, 0xBF] + Array(
            ("<quakeml><eventParameters><event publicID=\"smi:x/a\"><description><type>region name</type>"
                + "<text><![CDATA[A & B]]></text></description><origin><time><value>2020-01-01T00:00:00Z</value></time>"
                + "<latitude><value>1</value></latitude><longitude><value>2</value></longitude></origin></event>"
                + "</eventParameters></quakeml>").utf8)
        let parsed = parseQuakeML(doc)
        #expect(parsed.error == nil)
        #expect(parsed.reports.first?.place == "A & B")
    }

    @Test func tooManyOriginsSkipTheEvent() {
        let origin = "<origin><time><value>2020-01-01T00:00:00Z</value></time><latitude><value>1</value></latitude><longitude><value>2</value></longitude></origin>"
        let doc = "<quakeml xmlns=\"http://quakeml.org/xmlns/quakeml/1.2\"><eventParameters><event publicID=\"smi:x/a\">"
            + String(repeating: origin, count: 300) + "</event></eventParameters></quakeml>"
        let parsed = parseQuakeML(Array(doc.utf8))
        #expect(parsed.items.isEmpty)
        #expect(parsed.problems.map(\.kind) == [.tooLarge])
    }
}
