import Foundation
import QuakeModel
import QuakeSources
import Testing

/// Reports through the writers and back through the readers: QuakeMLWriter → QuakeMLReader and
/// FDSNTextWriter → FDSNTextReader give the same reports, but for what each format cannot carry.
@Suite struct WriterRoundTripTests {
    /// Varied reports: every evaluation mode and status, missing values, places with markup, depths
    /// with up to three decimals, old and recent times.
    static func reports(count: Int = 300, source: String = "rt") -> [SourceReport] {
        var generator = SeededRandom(seed: 20_251_122)
        let places = [
            "CENTRAL ITALY", "15 km N of Town, Japan", "Bay of \"Plenty\" & <Coast> 'NZ'", "Zürich – Ünïcödé 🌋",
            nil,
        ]
        let types = [
            "earthquake", "quarry blast", "mining explosion", "induced or triggered event", "other event", nil,
        ]
        let magnitudeTypes = ["ML", "mb", "Mww", "Mw(mB)", nil]
        let modes: [SourceReport.EvaluationMode?] = [nil] + SourceReport.EvaluationMode.allCases
        let statuses: [SourceReport.EvaluationStatus?] = [nil] + SourceReport.EvaluationStatus.allCases
        return (0..<count).map { index in
            func pick<T>(_ values: [T]) -> T { values[Int(generator.next() % UInt64(values.count))] }
            let time = Int64(generator.next() % 4_000_000_000_000) - 500_000_000_000
            let hasMagnitude = index % 7 != 3
            return SourceReport(
                source: source, id: "ev\(index)_\(generator.next() % 100_000)",
                agency: pick(["EMSC", "INGV", "us", nil]),
                time: time, latitude: Double(Int(generator.next() % 180_001)) / 1000 - 90,
                longitude: Double(Int(generator.next() % 360_001)) / 1000 - 180,
                depth: index % 5 == 0 ? nil : Double(Int(generator.next() % 700_001)) / 1000 - 3,
                magnitude: hasMagnitude ? Double(Int(generator.next() % 1000)) / 100 - 1 : nil,
                magnitudeType: hasMagnitude ? pick(magnitudeTypes) : nil, place: pick(places), eventType: pick(types),
                evaluationMode: pick(modes), evaluationStatus: pick(statuses),
                updated: index % 4 == 0 ? nil : time + Int64(generator.next() % 1_000_000))
        }
    }

    @Test func quakeMLRoundTrip() throws {
        let reports = Self.reports()
        var items: [SourceItem] = reports.map { .report($0) }
        items.insert(.retraction(source: "rt", id: "gone1", updated: 1_763_780_220_123), at: 17)
        items.insert(.retraction(source: "rt", id: "gone2", updated: nil), at: 101)
        let bytes = QuakeMLWriter(authority: "local.quaked").document(items)
        for chunk in [bytes.count, 4096, 777] {
            let reader = QuakeMLReader(source: "rt")
            var read: [SourceItem] = []
            var offset = 0
            while offset < bytes.count {
                let end = min(bytes.count, offset + chunk)
                try reader.consume(Array(bytes[offset..<end])) { read.append($0) }
                offset = end
            }
            try reader.finish { read.append($0) }
            #expect(reader.skippedCount == 0, "\(reader.problems)")
            // What QuakeML does not carry: links; a missing type is written (and read) as earthquake.
            let expected = items.map { item -> SourceItem in
                guard case .report(var report) = item else { return item }
                report.eventType = report.eventType ?? "earthquake"
                report.links = []
                return .report(report)
            }
            #expect(read.count == reports.count + 2 && read.count == expected.count)
            for (got, want) in zip(read, expected) where got != want {
                Issue.record("chunk \(chunk):\n  read \(got)\n  want \(want)")
            }
        }
    }

    @Test func fdsnTextRoundTrip() throws {
        let reports = Self.reports()
        for layout in FDSNTextWriter.Layout.allCases {
            let bytes = FDSNTextWriter(layout: layout, catalog: "quaked").document(reports)
            var reader = FDSNTextReader(source: "rt")
            var read: [SourceItem] = []
            var offset = 0
            while offset < bytes.count {
                let end = min(bytes.count, offset + 1000)
                try reader.consume(Array(bytes[offset..<end])) { read.append($0) }
                offset = end
            }
            try reader.finish { read.append($0) }
            #expect(reader.skippedCount == 0, "\(reader.problems)")
            // What the text format does not carry: evaluation, updated, links; the event type only in 14 columns.
            let expected = reports.map { report -> SourceItem in
                var report = report
                report.evaluationMode = nil
                report.evaluationStatus = nil
                report.updated = nil
                report.links = []
                if layout == .thirteen { report.eventType = nil }
                return .report(report)
            }
            #expect(read.count == reports.count && read.count == expected.count)
            for (got, want) in zip(read, expected) where got != want {
                Issue.record("\(layout):\n  read \(got)\n  want \(want)")
            }
        }
    }
}


extension WriterRoundTripTests {
    /// Hostile text: what the reader gets is what the writer means to say (forbidden characters as
    /// U+FFFD in QuakeML; `|` as `/` and control characters as spaces in text).
    @Test func hostileTextRoundTrip() throws {
        var report = QuakeMLWriterTests.full
        report.source = "rt"
        report.place = "x " + QuakeMLWriterTests.hostile + " | y"
        report.agency = "A&<\"'>"
        report.magnitudeType = "M<w>"
        let xml = QuakeMLWriter().document(reports: [report])
        let reader = QuakeMLReader(source: "rt")
        var read: [SourceItem] = []
        try reader.consume(xml) { read.append($0) }
        try reader.finish { read.append($0) }
        var expected = report
        expected.place = "x " + QuakeMLWriterTests.hostileRead + " | y"
        #expect(read == [.report(expected)])

        var text = FDSNTextReader(source: "rt")
        var rows: [SourceItem] = []
        try text.consume(FDSNTextWriter().document([report])) { rows.append($0) }
        try text.finish { rows.append($0) }
        expected.place =
            "x Ünïcödé 🌋 A&B <x/> \"q\" 'a' ]]> &amp;        \u{FFFE}\u{FFFF}   end / y"
        expected.evaluationMode = nil
        expected.evaluationStatus = nil
        expected.updated = nil
        #expect(rows == [.report(expected)])
    }
}
