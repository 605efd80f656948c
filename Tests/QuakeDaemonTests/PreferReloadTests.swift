import Foundation
import QuakeProtocol
import QuakeStore
import QuakeTestSupport
import Testing

@testable import QuakeDaemon

/// `prefer` in a real quaked: a reload with a bad line keeps the running configuration (and the
/// preferred report); a good one re-prefers the stored quake at once, as an update a history
/// client sees.
extension EndToEnd {
    @Suite("prefer at a reload")
    struct PreferReloadTests {
        @Test("Reload with a bad prefer line is refused naming the line; with prefer = ingv region=<Italy> the quake in Italy shows INGV's report")
        func reloadChangesThePreference() async throws {
            try await FeedTestServer.withServer { server in
                let emsc = FDSNTestService(on: server, basePath: "/emsc/fdsnws/event/1/")
                let ingv = FDSNTestService(on: server, basePath: "/ingv/fdsnws/event/1/")
                let time = SourceSyncTests.now() - 3_600_000
                let updated = SourceSyncTests.now() - 1_800_000
                // Both reviewed (QuakeML carries the status): the region decides once it is declared. INGV's 3 s later, 10 km south.
                try emsc.add(
                    feature: SourceSyncTests.feature(
                        id: "em0001", net: "em", time: time, latitude: 42.44, longitude: 13.4, magnitude: 4.4,
                        updated: updated))
                try ingv.add(
                    feature: SourceSyncTests.feature(
                        id: "in0001", net: "in", time: time + 3000, latitude: 42.35, longitude: 13.4, magnitude: 4.2,
                        updated: updated))
                try await withTemporaryDirectory { dir in
                    let config = dir.appendingPathComponent("quaked.conf")
                    let sources = [
                        "emsc fdsn \(emsc.baseURL) format=xml interval=1h",
                        "ingv fdsn \(ingv.baseURL) format=xml interval=1h",
                    ]
                    try SourceSyncTests.writeConfig(config, sources: sources)
                    let daemon = try await DaemonHarness(in: dir, ["--config", config.path])
                    try await waitUntil(timeout: .seconds(30)) {
                        try daemon.withStore { try $0.sourceStates().filter { $0.lastSuccess != nil }.count == 2 }
                    }
                    let quakes = try daemon.withStore { try $0.allQuakes() }
                    #expect(quakes.count == 1, "\(quakes.map(\.id))")
                    let id = try #require(quakes.first?.id)
                    func preferredSource() throws -> String? {
                        try daemon.withStore { try $0.reports(ofEvent: id).first?.source }
                    }
                    #expect(try preferredSource() == "emsc", "EMSC is the first source")
                    #expect(try daemon.withStore { try $0.quake(id: id)?.lat } == 42.44)
                    let head = try await daemon.getStatus().headToken

                    // A bad prefer line (line 6): refused, naming the line; the running one stays.
                    try SourceSyncTests.writeConfig(config, sources: sources)
                    try FileHandle(forWritingTo: config).append("prefer = ingv region=italy.geojson\n")
                    let refused = try await daemon.result(IOQuaked.Reload.self, .init())
                    #expect(refused.error?.name == IOQuaked.ReloadFailed.name, "\(refused)")
                    let failure = try refused.error?.decode(IOQuaked.ReloadFailed.self)
                    #expect(failure?.place == config.path + ":6", "\(String(describing: failure))")
                    #expect(failure?.reason.contains("by its absolute path") == true, "\(String(describing: failure))")
                    #expect(daemon.process.isRunning)
                    #expect(try preferredSource() == "emsc")

                    // A good one: the sources run at once and the store re-prefers: an update.
                    try SourceSyncTests.writeConfig(config, sources: sources)
                    try FileHandle(forWritingTo: config).append("prefer = ingv region=35,6,48,19\n")
                    let accepted = try await daemon.result(IOQuaked.Reload.self, .init())
                    #expect(accepted.error == nil, "\(accepted)")
                    try await waitUntil(timeout: .seconds(30)) { try preferredSource() == "ingv" }
                    #expect(try daemon.withStore { try $0.quake(id: id)?.lat } == 42.35)
                    #expect(try daemon.withStore { try $0.allQuakes().map(\.id) } == [id], "the id clients saw stays")
                    let page = try await daemon.call(IOQuaked.FetchHistory.self, .init(after: head))
                    let changes = page.transactions.flatMap(\.changes)
                    #expect(changes.map(\.quakeId) == [id] && changes.map(\.kind) == [.update], "\(changes)")
                    #expect(try daemon.withStore { try $0.checkIntegrity() } == [])
                    #expect(try await daemon.stop() == 0)
                }
            }
        }
    }
}

extension FileHandle {
    /// Appends `text` to the file and closes it.
    fileprivate func append(_ text: String) throws {
        defer { try? close() }
        try seekToEnd()
        try write(contentsOf: Data(text.utf8))
    }
}
