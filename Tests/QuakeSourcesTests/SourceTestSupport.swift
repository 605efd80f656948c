import Foundation
import QuakeModel
import QuakeSources
import Testing

/// A fixture's bytes.
func fixture(_ name: String) throws -> [UInt8] {
    let url = try #require(Bundle.module.url(forResource: "Fixtures/\(name)", withExtension: nil))
    return Array(try Data(contentsOf: url))
}

struct Parsed {
    var items: [SourceItem] = []
    var problems: [SourceProblem] = []
    var skipped = 0
    var error: SourceError?

    var reports: [SourceReport] {
        items.compactMap { if case .report(let r) = $0 { r } else { nil } }
    }
    func report(_ id: String) -> SourceReport? { reports.first { $0.id == id } }
}

/// Feeds `bytes` to `reader` in chunks of `chunk` bytes, then finishes it: the items, the
/// skipped events, and the error that rejected the answer, if one did.
func parse(_ reader: some SourceReader, _ bytes: [UInt8], chunk: Int = 65536) -> Parsed {
    var reader = reader
    var parsed = Parsed()
    do {
        var i = 0
        while i < bytes.count {
            let end = min(bytes.count, i + chunk)
            try reader.consume(Array(bytes[i..<end])) { parsed.items.append($0) }
            i = end
        }
        try reader.finish { parsed.items.append($0) }
    } catch let error as SourceError {
        parsed.error = error
    } catch {
        Issue.record("unexpected error \(error)")
    }
    parsed.problems = reader.problems
    parsed.skipped = reader.skippedCount
    return parsed
}

/// Feeds `bytes` to a QuakeMLReader in chunks of `chunk` bytes.
func parseQuakeML(_ bytes: [UInt8], chunk: Int = 65536, source: String = "test") -> Parsed {
    parse(QuakeMLReader(source: source), bytes, chunk: chunk)
}

/// Feeds `bytes` to an FDSNTextReader in chunks of `chunk` bytes.
func parseFDSNText(_ bytes: [UInt8], chunk: Int = 65536, source: String = "test") -> Parsed {
    parse(FDSNTextReader(source: source), bytes, chunk: chunk)
}

/// Milliseconds of a UTC time written in full.
func ms(_ text: String) -> Int64 { SourceTime.milliseconds(text)! }
