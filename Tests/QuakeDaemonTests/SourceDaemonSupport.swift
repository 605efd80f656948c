import Foundation
import QuakeTestSupport

/// What the daemon tests with fdsn sources share: a quaked.conf with sources, quick retries and
/// no feed, the USGS features the ``FDSNTestService``s hold (and write as QuakeML or text), and
/// the time in ms. SourceSyncTests, SourceInterfaceTests and SourceRunsTests use it.
enum SourceDaemon {
    static func now() -> Int64 { Int64(Date().timeIntervalSince1970 * 1000) }

    /// `feed = none`, retries after 50 ms to 300 ms, the `extra` lines, then a `source =` line each.
    static func writeConfig(_ url: URL, sources: [String], extra: [String] = []) throws {
        try ("feed = none\nretry-initial-delay = 50ms\nretry-max-delay = 300ms\n"
            + extra.map { $0 + "\n" }.joined() + sources.map { "source = \($0)\n" }.joined())
            .write(to: url, atomically: true, encoding: .utf8)
    }

    /// A USGS feature as FDSNTestService holds it: reviewed, 10 km deep, magnitude type ml.
    static func feature(
        id: String, net: String, time: Int64, latitude: Double, longitude: Double, magnitude: Double, updated: Int64
    ) -> String {
        """
        {"type":"Feature","properties":{"mag":\(magnitude),"place":"near a test town","time":\(time),\
        "updated":\(updated),"status":"reviewed","net":"\(net)","code":"\(id.dropFirst(2))","ids":",\(id),",\
        "type":"earthquake","magType":"ml"},"geometry":{"type":"Point","coordinates":[\(longitude),\(latitude),10]},\
        "id":"\(id)"}
        """
    }
}
