import Foundation
import QuakeModel
import QuakeSources
import Testing

/// A generated QuakeML 1.2 document, produced a piece at a time: never held whole.
struct GeneratedQuakeML {
    static let head = Array(
        """
        <?xml version="1.0" encoding="UTF-8"?>
        <q:quakeml xmlns="http://quakeml.org/xmlns/bed/1.2" xmlns:q="http://quakeml.org/xmlns/quakeml/1.2">
        <eventParameters publicID="smi:test/ep">

        """.utf8)
    static let tail = Array("</eventParameters>\n</q:quakeml>\n".utf8)

    static func event(_ i: Int) -> [UInt8] {
        let lat = Double(i % 180) - 89.5
        let lon = Double(i % 360) - 179.5
        return Array(
            """
              <event publicID="smi:test/event/ev\(i)">
                <preferredOriginID>smi:test/origin/\(i)</preferredOriginID>
                <preferredMagnitudeID>smi:test/magnitude/\(i)</preferredMagnitudeID>
                <type>earthquake</type>
                <description><type>region name</type><text>Region \(i % 97) with some words to make it longer</text></description>
                <creationInfo><agencyID>TEST</agencyID><creationTime>2024-01-01T00:00:00Z</creationTime></creationInfo>
                <origin publicID="smi:test/origin/\(i)">
                  <time><value>2024-01-01T00:00:\(String(format: "%02d", i % 60)).\(i % 1000)Z</value><uncertainty>0.5</uncertainty></time>
                  <latitude><value>\(lat)</value><uncertainty>1.2</uncertainty></latitude>
                  <longitude><value>\(lon)</value><uncertainty>1.3</uncertainty></longitude>
                  <depth><value>\(i % 700 * 1000)</value><uncertainty>2000</uncertainty></depth>
                  <evaluationMode>automatic</evaluationMode>
                  <quality><usedPhaseCount>42</usedPhaseCount><standardError>0.8</standardError></quality>
                </origin>
                <magnitude publicID="smi:test/magnitude/\(i)">
                  <mag><value>\(Double(i % 90) / 10)</value></mag>
                  <type>ML</type>
                  <originID>smi:test/origin/\(i)</originID>
                </magnitude>
              </event>

            """.utf8)
    }

    /// Calls `body` with consecutive chunks of `chunkSize` bytes of a document of `events` events.
    static func chunks(events: Int, chunkSize: Int, _ body: ([UInt8]) throws -> Void) rethrows {
        var buffer = head
        for i in 0..<events {
            buffer += event(i)
            while buffer.count >= chunkSize {
                try body(Array(buffer.prefix(chunkSize)))
                buffer.removeFirst(chunkSize)
            }
        }
        buffer += tail
        try body(buffer)
    }
}

@Suite struct QuakeMLStreamingTests {
    /// 40,000 events (about 40 MB) in 64 KB chunks: resident memory after the first 2,000
    /// events grows by less than 12 MB to the end, and every event comes out right. Measured in a
    /// process of its own (an exit test): the suites that run beside this one in the test process
    /// move its resident memory by hundreds of megabytes.
    @Test func largeDocumentStreamsInFlatMemory() async {
        let child = await #expect(
            processExitsWith: .success, observing: [\.standardOutputContent]
        ) {
            let events = 40_000
            let reader = QuakeMLReader(source: "big")
            var count = 0
            var bytes = 0
            var baseline = 0
            var peak = 0
            var lastChecked: SourceReport?
            do {
                try GeneratedQuakeML.chunks(events: events, chunkSize: 64 * 1024) { chunk in
                    bytes += chunk.count
                    try reader.consume(chunk) { item in
                        guard case .report(let r) = item else { exitFailing("not a report: \(item)") }
                        if count == 2000 { baseline = residentBytes() }
                        if count % 997 == 0 {
                            lastChecked = r
                            if r.id != "ev\(count)" { exitFailing("event \(count) came out as \(r.id)") }
                        }
                        count += 1
                    }
                    if baseline > 0 { peak = max(peak, residentBytes()) }
                }
                try reader.finish { _ in count += 1 }
            } catch {
                exitFailing("the document did not parse: \(error)")
            }
            if count != events { exitFailing("\(count) events came out of \(events)") }
            if reader.skippedCount != 0 { exitFailing("\(reader.skippedCount) events were skipped") }
            if bytes <= 40_000_000 { exitFailing("the document was only \(bytes) bytes") }
            if lastChecked?.depth != Double(39_880 % 700) { exitFailing("event 39,880's depth is \(String(describing: lastChecked?.depth))") }
            let growth = peak - baseline
            print("QuakeMLStreamingTests: resident growth \(growth >> 10) KB over \(bytes >> 20) MB")
            // Under a sanitizer, its shadow memory and quarantine are what this would measure.
            if !underSanitizer, growth >= 12 << 20 {
                exitFailing("resident memory grew by \(growth >> 20) MB over \(bytes >> 20) MB of input")
            }
        }
        echoChild(child)
    }

    @Test func generatedEventValues() throws {
        var doc = GeneratedQuakeML.head + GeneratedQuakeML.event(1234) + GeneratedQuakeML.tail
        var parsed = parseQuakeML(doc)
        let r = try #require(parsed.reports.first)
        #expect(r == SourceReport(
            source: "test", id: "ev1234", agency: "TEST", time: ms("2024-01-01T00:00:34.234Z"), latitude: 64.5,
            longitude: -25.5, depth: 534, magnitude: 6.4, magnitudeType: "ML", place: "Region 70 with some words to make it longer",
            eventType: "earthquake", evaluationMode: .automatic, updated: ms("2024-01-01T00:00:00Z")))
        doc = GeneratedQuakeML.head + GeneratedQuakeML.tail
        parsed = parseQuakeML(doc)
        #expect(parsed.items.isEmpty && parsed.error == nil)
    }
}

/// Ends an exit test's child process with a failure, after recording why (Swift Testing passes
/// the child's issues to the parent, which reports them beside the exit status).
func exitFailing(_ message: String) -> Never {
    Issue.record(Comment(rawValue: message))
    exit(EXIT_FAILURE)
}

/// Prints what an exit test's child wrote (its figures, and on a failure its reason).
func echoChild(_ result: ExitTest.Result?) {
    guard let result else { return }
    for bytes in [result.standardOutputContent, result.standardErrorContent] where !bytes.isEmpty {
        print(String(decoding: bytes, as: UTF8.self), terminator: "")
    }
}

func residentBytes() -> Int {
    guard let text = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8) else { return 0 }
    let fields = text.split(separator: " ")
    return (fields.count > 1 ? Int(fields[1]) ?? 0 : 0) * Int(sysconf(Int32(_SC_PAGESIZE)))
}

/// Whether a sanitizer runtime is linked in (scripts/test-asan, scripts/test-tsan).
let underSanitizer: Bool = {
    guard let process = dlopen(nil, RTLD_NOW) else { return false }
    return dlsym(process, "__asan_init") != nil || dlsym(process, "__tsan_init") != nil
}()
