import Foundation
import QuakeModel
import QuakeSources
import Testing

@Suite struct FDSNTextWriterTests {
    static let header14 =
        "#EventID|Time|Latitude|Longitude|Depth/km|Author|Catalog|Contributor|ContributorID|MagType|Magnitude|"
        + "MagAuthor|EventLocationName|EventType\n"
    static let header13 =
        "#EventID|Time|Latitude|Longitude|Depth/km|Author|Catalog|Contributor|ContributorID|MagType|Magnitude|"
        + "MagAuthor|EventLocationName\n"

    static func lines(_ bytes: [UInt8]) -> [String] {
        String(decoding: bytes, as: UTF8.self).split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
    }

    @Test func fourteenColumns() {
        let text = String(
            decoding: FDSNTextWriter(catalog: "quaked").document([QuakeMLWriterTests.full]), as: UTF8.self)
        #expect(
            text == Self.header14
                + "us7000abcd|2025-11-22T02:57:00.123|35.5|139.25|10.123|us|quaked|us|us7000abcd|mww|6.1|us|"
                + "15 km N of Town, Japan|earthquake\n")
    }

    @Test func thirteenColumns() {
        let writer = FDSNTextWriter(layout: .thirteen)
        var out: [UInt8] = []
        writer.appendHeader(to: &out)
        writer.append(QuakeMLWriterTests.full, to: &out)
        #expect(
            String(decoding: out, as: UTF8.self)
                == Self.header13
                + "us7000abcd|2025-11-22T02:57:00.123|35.5|139.25|10.123|us||us|us7000abcd|mww|6.1|us|"
                + "15 km N of Town, Japan\n")
        #expect(FDSNTextWriter.columns.count == 14)
    }

    @Test func missingAndNonFiniteValuesAreEmptyColumns() {
        let bare = SourceReport(source: "s", id: "bare", time: -1, latitude: .nan, longitude: -.infinity)
        var infinite = QuakeMLWriterTests.full
        infinite.magnitude = .infinity
        infinite.depth = .nan
        let lines = Self.lines(FDSNTextWriter().document([bare, infinite]))
        #expect(lines[1] == "bare|1969-12-31T23:59:59.999|||||||bare|||||")
        #expect(lines[2].split(separator: "|", omittingEmptySubsequences: false)[4] == "")
        #expect(lines[2].split(separator: "|", omittingEmptySubsequences: false)[10] == "")
        #expect(lines[3] == "")
    }

    @Test func hostileTextKeepsTheColumns() {
        var report = QuakeMLWriterTests.full
        report.id = "#1|2\n3"
        report.place = QuakeMLWriterTests.hostile + " a|b\r\nc\u{2028}d"
        report.agency = "A|B"
        report.magnitudeType = "M\tw"
        report.eventType = "quarry\nblast"
        for layout in FDSNTextWriter.Layout.allCases {
            let lines = Self.lines(FDSNTextWriter(layout: layout, catalog: "c|d").document([report, report]))
            #expect(lines.count == 4 && lines[3] == "")
            for line in lines.dropLast() {
                #expect(line.split(separator: "|", omittingEmptySubsequences: false).count == layout.rawValue)
                #expect(!line.unicodeScalars.contains { $0.value < 0x20 || (0x7F...0x9F).contains($0.value) })
            }
            let columns = lines[1].split(separator: "|", omittingEmptySubsequences: false).map(String.init)
            #expect(columns[0] == "_1/2 3")
            #expect(columns[5] == "A/B" && columns[6] == "c/d" && columns[8] == "#1/2 3")
            #expect(columns[9] == "M w")
            #expect(columns[12].hasPrefix("Ünïcödé 🌋 A&B <x/> \"q\" 'a' ]]> &amp; "))
            #expect(columns[12].hasSuffix(" a/b  c d"))
            if layout == .fourteen { #expect(columns[13] == "quarry blast") }
        }
    }

    @Test func retractionsHaveNoLine() {
        let writer = FDSNTextWriter()
        var out: [UInt8] = []
        writer.appendHeader(to: &out)
        writer.append(.retraction(source: "s", id: "gone", updated: 5), to: &out)
        writer.append(.report(QuakeMLWriterTests.full), to: &out)
        #expect(Self.lines(out).count == 3)
        #expect(Self.lines(out)[1].hasPrefix("us7000abcd|"))
    }

    @Test func numbersReadBackExactly() {
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<500 {
            var report = QuakeMLWriterTests.full
            report.latitude = Double.random(in: -90...90, using: &generator)
            report.longitude = Double.random(in: -180...180, using: &generator)
            report.depth = Double.random(in: -5...700, using: &generator)
            report.magnitude = Double.random(in: -1...9.5, using: &generator)
            let columns = Self.lines(FDSNTextWriter().document([report]))[1]
                .split(separator: "|", omittingEmptySubsequences: false)
            #expect(Double(String(columns[2])) == report.latitude)
            #expect(Double(String(columns[3])) == report.longitude)
            #expect(Double(String(columns[4])) == report.depth)
            #expect(Double(String(columns[10])) == report.magnitude)
        }
    }
}
