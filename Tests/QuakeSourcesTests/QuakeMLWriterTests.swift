import Foundation
import QuakeModel
import QuakeSources
import Testing

#if canImport(FoundationXML)
    import FoundationXML
#endif

/// QuakeMLWriter's documents, read back with FoundationXML's XMLParser (libxml2) and validated by
/// `xmllint` against the QuakeML 1.2 schema in Tests/QuakeMLSchema.
@Suite struct QuakeMLWriterTests {
    static let full = SourceReport(
        source: "test", id: "us7000abcd", agency: "us", time: 1_763_780_220_123, latitude: 35.5, longitude: 139.25,
        depth: 10.123, magnitude: 6.1, magnitudeType: "mww", place: "15 km N of Town, Japan", eventType: "earthquake",
        evaluationMode: .manual, evaluationStatus: .reviewed, updated: 1_763_780_999_001)

    /// Control characters, markup, quotes, a CDATA end, non-characters and non-ASCII.
    static let hostile =
        "Ünïcödé 🌋 A&B <x/> \"q\" 'a' ]]> &amp; \u{0}\u{7}\u{B}\u{1F}\t\n\r\u{FFFE}\u{FFFF}\u{7F}\u{85} end"
    /// What `hostile` reads back as: the forbidden characters are U+FFFD, the rest is as it was.
    static let hostileRead =
        "Ünïcödé 🌋 A&B <x/> \"q\" 'a' ]]> &amp; \u{FFFD}\u{FFFD}\u{FFFD}\u{FFFD}\t\n\r\u{FFFD}\u{FFFD}\u{7F}\u{85} end"

    @Test func documentShape() throws {
        let bytes = QuakeMLWriter(authority: "local.quaked").document(reports: [Self.full])
        let text = String(decoding: bytes, as: UTF8.self)
        #expect(text.hasPrefix("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"))
        #expect(
            text.contains(
                "<q:quakeml xmlns:q=\"http://quakeml.org/xmlns/quakeml/1.2\" xmlns=\"http://quakeml.org/xmlns/bed/1.2\">"
            ))
        #expect(text.hasSuffix("</eventParameters>\n</q:quakeml>\n"))
        let tree = try QuakeMLTree.parse(bytes)
        #expect(tree.root == "q:quakeml")
        #expect(tree.eventParametersID == "smi:local.quaked/eventParameters")
        let event = try #require(tree.events.first)
        #expect(tree.events.count == 1)
        #expect(event.publicID == "smi:local.quaked/event/us7000abcd")
        let expected: [String: String] = [
            "preferredOriginID": "smi:local.quaked/origin/us7000abcd",
            "preferredMagnitudeID": "smi:local.quaked/magnitude/us7000abcd",
            "type": "earthquake",
            "description/text": "15 km N of Town, Japan",
            "description/type": "region name",
            "creationInfo/agencyID": "us",
            "origin@publicID": "smi:local.quaked/origin/us7000abcd",
            "origin/time/value": "2025-11-22T02:57:00.123Z",
            "origin/latitude/value": "35.5",
            "origin/longitude/value": "139.25",
            "origin/depth/value": "10123",
            "origin/evaluationMode": "manual",
            "origin/evaluationStatus": "reviewed",
            "origin/creationInfo/agencyID": "us",
            "origin/creationInfo/creationTime": "2025-11-22T03:09:59.001Z",
            "magnitude@publicID": "smi:local.quaked/magnitude/us7000abcd",
            "magnitude/mag/value": "6.1",
            "magnitude/type": "mww",
            "magnitude/originID": "smi:local.quaked/origin/us7000abcd",
        ]
        #expect(event.values == expected)
        try Self.validate(bytes)
    }

    @Test func streamingEqualsTheWholeDocument() throws {
        let writer = QuakeMLWriter()
        let items: [SourceItem] = [
            .report(Self.full), .retraction(source: "test", id: "gone1", updated: nil),
            .report(SourceReport(source: "t", id: "x", time: 0, latitude: 0, longitude: 0)),
        ]
        var out: [UInt8] = []
        writer.appendHeader(to: &out)
        for item in items { writer.append(item, to: &out) }
        writer.appendFooter(to: &out)
        #expect(out == writer.document(items))
        #expect(
            try QuakeMLTree.parse(out).events.map(\.publicID)
                == ["us7000abcd", "gone1", "x"].map { "smi:local.quaked/event/\($0)" })
        try Self.validate(out)
    }

    @Test func hostileTextIsEscapedAndNeverForbidden() throws {
        var report = Self.full
        report.place = Self.hostile
        report.agency = "A&<\"'>\u{1}"
        report.magnitudeType = "M<w>\u{2}"
        report.id = "a\"b<c>&'d e/f~g\u{1}é?x=1#"
        let bytes = QuakeMLWriter().document(reports: [report])
        // No byte XML 1.0 forbids, and no raw markup from the text.
        #expect(!bytes.contains { $0 < 0x20 && $0 != 0x09 && $0 != 0x0A })
        let text = String(decoding: bytes, as: UTF8.self)
        #expect(!text.contains("<x/>") && !text.contains("\u{FFFE}") && !text.contains("\u{FFFF}"))
        let event = try #require(try QuakeMLTree.parse(bytes).events.first)
        #expect(event.values["description/text"] == Self.hostileRead)
        #expect(event.values["creationInfo/agencyID"] == "A&<\"'>\u{FFFD}")
        #expect(event.values["magnitude/type"] == "M<w>\u{FFFD}")
        // The id: letters, digits, - . _ as they are, every other UTF-8 byte ~HH.
        #expect(event.publicID == "smi:local.quaked/event/a~22b~3Cc~3E~26~27d~20e~2Ff~7Eg~01~C3~A9~3Fx~3D1~23")
        #expect(QuakeMLWriter.identifierSegment("us7000abcd") == "us7000abcd")
        // The schema's lengths: agencyID 64 characters, the magnitude type 32 (scalars, not graphemes).
        report.agency = String(repeating: "e\u{301}", count: 40)
        report.magnitudeType = String(repeating: "\r\n", count: 20)
        let long = try #require(try QuakeMLTree.parse(QuakeMLWriter().document(reports: [report])).events.first)
        #expect(long.values["creationInfo/agencyID"]?.unicodeScalars.count == 64)
        #expect(long.values["origin/creationInfo/agencyID"]?.unicodeScalars.count == 64)
        #expect(long.values["magnitude/type"] == String(repeating: "\r\n", count: 16))
        #expect(QuakeMLWriter.identifierSegment("20250305_0000090") == "20250305_0000090")
        try Self.validate(bytes)
    }

    @Test func attributesKeepTabsAndNewlines() throws {
        // An authority with whitespace would be normalised to spaces in an attribute; it is escaped instead.
        let bytes = QuakeMLWriter(authority: "a\tb\nc").document(reports: [Self.full])
        let tree = try QuakeMLTree.parse(bytes)
        #expect(tree.events.first?.publicID == "smi:a~09b~0Ac/event/us7000abcd")
    }

    @Test func depthInMetresExactly() throws {
        let cases: [(Double, String)] = [
            (10.123, "10123"), (5.0, "5000"), (0.0015, "1.5"), (1e-05, "0.01"), (-0.0, "0"), (0, "0"),
            (-1.5, "-1500"), (700, "700000"), (0.1, "100"), (33.333333333333336, "33333.333333333336"),
            (-2.71, "-2710"), (6371.0088, "6371008.8"),
        ]
        for (km, metres) in cases {
            var report = Self.full
            report.depth = km
            let event = try #require(try QuakeMLTree.parse(QuakeMLWriter().document(reports: [report])).events.first)
            #expect(event.values["origin/depth/value"] == metres, "\(km)")
        }
        // Read back (metres / 1000) as the same kilometres, for depths with up to 3 decimals.
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<2000 {
            let km = Double(Int.random(in: -5000...800_000, using: &generator)) / 1000
            var report = Self.full
            report.depth = km
            let event = try #require(try QuakeMLTree.parse(QuakeMLWriter().document(reports: [report])).events.first)
            let metres = try #require(event.values["origin/depth/value"].flatMap(Double.init))
            #expect(metres / 1000 == km, "\(km)")
        }
    }

    @Test func timesAreUTCWithMillisecondsAndZ() throws {
        let cases: [(Int64, String)] = [
            (0, "1970-01-01T00:00:00.000Z"), (-1, "1969-12-31T23:59:59.999Z"),
            (951_782_400_000, "2000-02-29T00:00:00.000Z"), (1_763_780_220_123, "2025-11-22T02:57:00.123Z"),
        ]
        for (ms, text) in cases {
            var report = Self.full
            report.time = ms
            report.updated = ms + 1
            let event = try #require(try QuakeMLTree.parse(QuakeMLWriter().document(reports: [report])).events.first)
            #expect(event.values["origin/time/value"] == text)
            #expect(event.values["origin/creationInfo/creationTime"] == QuakeTime.iso8601(ms + 1))
        }
    }

    @Test func retractionIsNotExisting() throws {
        let bytes = QuakeMLWriter().document([
            .retraction(source: "s", id: "us6000gone", updated: 1_763_780_220_123),
            .retraction(source: "s", id: "us6000gone2", updated: nil),
        ])
        let events = try QuakeMLTree.parse(bytes).events
        #expect(events.map(\.publicID) == ["smi:local.quaked/event/us6000gone", "smi:local.quaked/event/us6000gone2"])
        #expect(events[0].values == ["type": "not existing", "creationInfo/creationTime": "2025-11-22T02:57:00.123Z"])
        #expect(events[1].values == ["type": "not existing"])
        try Self.validate(bytes)
    }

    @Test func missingAndNonFiniteValuesAreLeftOut() throws {
        let bare = SourceReport(source: "s", id: "bare", time: 0, latitude: .nan, longitude: .infinity)
        var noMagnitude = Self.full
        noMagnitude.magnitude = .nan
        noMagnitude.depth = -.infinity
        noMagnitude.eventType = "induced earthquake"  // a QuakeML 1.2 draft's type, not the final one's
        let bytes = QuakeMLWriter().document(reports: [bare, noMagnitude])
        let text = String(decoding: bytes, as: UTF8.self)
        #expect(!text.lowercased().contains("nan") && !text.contains("inf"))
        let events = try QuakeMLTree.parse(bytes).events
        #expect(
            events[0].values == [
                "preferredOriginID": "smi:local.quaked/origin/bare", "type": "earthquake",
                "origin@publicID": "smi:local.quaked/origin/bare", "origin/time/value": "1970-01-01T00:00:00.000Z",
            ])
        #expect(events[1].values["type"] == "other event")
        #expect(events[1].values["origin/depth/value"] == nil)
        #expect(events[1].values["preferredMagnitudeID"] == nil)
        #expect(!events[1].values.keys.contains { $0.hasPrefix("magnitude") })
        try Self.validate(bytes)
    }

    @Test func everyEventTypeOfTheSchema() throws {
        // The writer's list is the schema's EventType enumeration.
        let schemaText = try String(
            contentsOf: Self.schema.deletingLastPathComponent().appendingPathComponent("QuakeML-BED-1.2.xsd"),
            encoding: .utf8)
        let start = try #require(schemaText.range(of: "<xs:simpleType name=\"EventType\">"))
        let end = try #require(schemaText.range(of: "</xs:simpleType>", range: start.upperBound..<schemaText.endIndex))
        let enumerations = schemaText[start.upperBound..<end.lowerBound].split(separator: "\n").compactMap { line in
            line.contains("<xs:enumeration value=\"") ? line.split(separator: "\"")[1] : nil
        }
        #expect(Set(enumerations.map(String.init)) == QuakeMLWriter.eventTypes)
        #expect(enumerations.count == 44)
        let reports = QuakeMLWriter.eventTypes.sorted().enumerated().map { index, type in
            var report = Self.full
            report.id = "e\(index)"
            report.eventType = type
            return report
        }
        let bytes = QuakeMLWriter().document(reports: reports)
        #expect(try QuakeMLTree.parse(bytes).events.map { $0.values["type"] } == reports.map(\.eventType))
        try Self.validate(bytes)
    }

    // MARK: Validation

    /// The schema's root (`QuakeML-1.2.xsd`, which imports the BED schema next to it).
    static let schema = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("QuakeMLSchema/QuakeML-1.2.xsd")

    /// `xmllint` on the PATH (Debian's libxml2-utils, which scripts/install-deps installs).
    static let xmllint: String? = {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        return path.split(separator: ":").map { "\($0)/xmllint" }.first {
            FileManager.default.isExecutableFile(atPath: $0)
        }
    }()

    /// Well-formed (XMLParser) and valid against the QuakeML 1.2 schema (xmllint). Without xmllint
    /// the check fails, saying so: a schema check that quietly does not run checks nothing.
    static func validate(_ bytes: [UInt8], sourceLocation: SourceLocation = #_sourceLocation) throws {
        _ = try QuakeMLTree.parse(bytes)
        #expect(FileManager.default.fileExists(atPath: schema.path), sourceLocation: sourceLocation)
        guard let xmllint else {
            Issue.record(
                "xmllint is not installed: run scripts/install-deps (Debian's libxml2-utils) to validate against the schema",
                sourceLocation: sourceLocation)
            return
        }
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("quakeml-\(UUID().uuidString).xml")
        try Data(bytes).write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: xmllint)
        process.arguments = ["--noout", "--nonet", "--schema", schema.path, file.path]
        let errors = Pipe()
        process.standardError = errors
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        let message = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        #expect(process.terminationStatus == 0, "xmllint: \(message)", sourceLocation: sourceLocation)
    }
}

/// A QuakeML document as XMLParser reads it: each event's leaf values by path below the event
/// (`origin/depth/value`) and its elements' `publicID`s (`origin@publicID`).
final class QuakeMLTree: NSObject, XMLParserDelegate {
    struct Event {
        var publicID: String
        var values: [String: String] = [:]
    }

    struct Malformed: Error, CustomStringConvertible {
        var description: String
    }

    var root: String?
    var eventParametersID: String?
    var events: [Event] = []
    private var stack: [String] = []
    private var hadChild: [Bool] = []
    private var text = ""

    static func parse(_ bytes: [UInt8]) throws -> QuakeMLTree {
        let tree = QuakeMLTree()
        let parser = XMLParser(data: Data(bytes))
        parser.delegate = tree
        // parse() is true for a document cut short (corelibs); parserError says so.
        guard parser.parse(), parser.parserError == nil else {
            throw Malformed(description: "\(parser.parserError.map { "\($0)" } ?? "?") at line \(parser.lineNumber)")
        }
        return tree
    }

    private var eventPath: String? {
        guard let start = stack.firstIndex(of: "event") else { return nil }
        return stack[(start + 1)...].joined(separator: "/")
    }

    func parser(
        _ parser: XMLParser, didStartElement elementName: String, namespaceURI: String?, qualifiedName: String?,
        attributes: [String: String] = [:]
    ) {
        if root == nil { root = elementName }
        if !hadChild.isEmpty { hadChild[hadChild.count - 1] = true }
        stack.append(elementName)
        hadChild.append(false)
        text = ""
        if elementName == "eventParameters" { eventParametersID = attributes["publicID"] }
        if elementName == "event" && eventPath == "" {
            events.append(Event(publicID: attributes["publicID"] ?? ""))
        } else if let path = eventPath, let id = attributes["publicID"] {
            events[events.count - 1].values[path + "@publicID"] = id
        }
    }

    func parser(_ parser: XMLParser, foundCharacters string: String) {
        text += string
    }

    func parser(_ parser: XMLParser, didEndElement elementName: String, namespaceURI: String?, qualifiedName: String?) {
        if let path = eventPath, !path.isEmpty, hadChild.last == false {
            events[events.count - 1].values[path] = text
        }
        stack.removeLast()
        hadChild.removeLast()
        text = ""
    }
}
