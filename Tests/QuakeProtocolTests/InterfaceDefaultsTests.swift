import Foundation
import QuakeProtocol
import Testing
import VarlinkIDL

/// io.quaked.varlink's comments state the defaults and limits ``IOQuaked/Defaults`` defines.
@Suite struct InterfaceDefaultsTests {
    static func interface() throws -> VarlinkInterface {
        let file = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Sources/QuakeProtocol/io.quaked.varlink")
        return try VarlinkInterface(parsing: try String(contentsOf: file, encoding: .utf8))
    }

    /// A method's comment as one line of words.
    static func documentation(_ method: String) throws -> String {
        let method = try #require(try interface().methods.first { $0.name == method })
        return method.documentation.joined(separator: " ").split(whereSeparator: \.isWhitespace).joined(separator: " ")
    }

    /// 10000 as the interface writes it: 10,000.
    static func n(_ value: Int) -> String {
        value.formatted(.number.grouping(.automatic).locale(Locale(identifier: "en_US")))
    }

    @Test func subscribe() throws {
        let d = IOQuaked.Defaults.self
        let text = try Self.documentation("Subscribe")
        let range = "\(d.heartbeatSecondsRange.lowerBound) to \(d.heartbeatSecondsRange.upperBound)"
        #expect(text.contains("heartbeatSeconds (default \(d.heartbeatSeconds), \(range))"), "\(text)")
        #expect(d.heartbeat(nil) == .seconds(d.heartbeatSeconds))
        #expect(d.heartbeat(0) == .seconds(1) && d.heartbeat(100_000) == .seconds(3600))
    }

    @Test func fetchHistory() throws {
        let d = IOQuaked.Defaults.self
        let text = try Self.documentation("FetchHistory")
        #expect(
            text.contains(
                "at most limit (default \(Self.n(d.historyLimit)), maximum \(Self.n(d.historyLimitMaximum)))"),
            "\(text)")
        #expect(text.contains("maxChanges changes (default \(Self.n(d.historyMaxChanges));"), "\(text)")
        #expect(d.historyLimit(nil) == d.historyLimit && d.historyLimit(5000) == d.historyLimitMaximum)
        #expect(d.historyMaxChanges(nil) == d.historyMaxChanges && d.historyMaxChanges(0) == 1)
    }

    @Test func snapshot() throws {
        let d = IOQuaked.Defaults.self
        let text = try Self.documentation("Snapshot")
        #expect(
            text.contains(
                "at most pageSize quakes (default \(Self.n(d.snapshotPageSize)), maximum \(Self.n(d.snapshotPageSizeMaximum)))"),
            "\(text)")
        #expect(d.snapshotPageSize(nil) == d.snapshotPageSize && d.snapshotPageSize(1_000_000) == d.snapshotPageSizeMaximum)
    }
}
