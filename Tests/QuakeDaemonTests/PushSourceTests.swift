import Foundation
import QuakeProtocol
import QuakeStore
import QuakeTestSupport
import Testing

@testable import QuakeDaemon

/// `source = NAME emsc ws://... catch-up=...` and `source = NAME geonet URL` in a real quaked: a
/// real websocket server on 127.0.0.1 (``PushTestServer``) and an ``FDSNTestService`` as the
/// catch-up service; a local HTTP server serving GeoNet's real answer.
extension EndToEnd {
    @Suite("emsc and geonet sources")
    struct PushSourceTests {
        static func now() -> Int64 { SourceDaemon.now() }

        /// EMSC's websocket message for one event, as EMSC sends it (depth negative in the
        /// geometry, positive in the properties; times with one fractional digit).
        static func message(
            _ action: String = "create", id: String, time: Int64, latitude: Double, longitude: Double,
            magnitude: Double, updated: Int64
        ) -> String {
            """
            {"action":"\(action)","data":{"type":"Feature","id":"\(id)","geometry":{"type":"Point",\
            "coordinates":[\(longitude),\(latitude),-10.0]},"properties":{"lastupdate":"\(iso(updated))",\
            "magtype":"ml","evtype":"ke","lon":\(longitude),"auth":"EMSC","lat":\(latitude),"depth":10.0,\
            "unid":"\(id)","mag":\(magnitude),"time":"\(iso(time))","source_id":"1","source_catalog":"EMSC-RTS",\
            "flynn_region":"A TEST REGION"}}}
            """
        }

        static func iso(_ milliseconds: Int64) -> String {
            let formatter = ISO8601DateFormatter()
            formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
            return formatter.string(from: Date(timeIntervalSince1970: Double(milliseconds) / 1000))
        }

        /// The ids of the source's reports in the store, one entry per stored report.
        static func reportIDs(_ daemon: DaemonHarness, source: String) throws -> [String] {
            try daemon.withStore { store in
                try store.allQuakes().flatMap { quake in
                    try store.reports(ofEvent: quake.id).filter { $0.source == source }.map(\.id)
                }
            }
        }

        static func metrics(_ daemon: DaemonHarness) async throws -> Exposition {
            try Exposition(try await daemon.call(IOQuaked.Metrics.self, .init()).text)
        }

        @Test(
            "emsc: the first connect catches up, pushed messages arrive, bad ones are counted and skipped, a dropped connection reconnects and its catch-up brings what was missed, nothing twice"
        )
        func emscStreamAndCatchUp() async throws {
            try await PushTestServer.withServer { socket in
                try await FeedTestServer.withServer { http in
                    let catchUp = FDSNTestService(on: http, basePath: "/emsc/fdsnws/event/1/")
                    let hour: Int64 = 3_600_000
                    let start = Self.now()
                    // Published before quaked starts: the first catch-up brings it.
                    try catchUp.add(
                        feature: SourceDaemon.feature(
                            id: "20260101_0000001", net: "EMSC", time: start - 5 * hour, latitude: 40, longitude: 20,
                            magnitude: 4.1, updated: start - 4 * hour))
                    try await withTemporaryDirectory { dir in
                        let config = dir.appendingPathComponent("quaked.conf")
                        try SourceDaemon.writeConfig(
                            config, sources: ["emsc emsc \(socket.url) catch-up=\(catchUp.baseURL) format=xml overlap=1m"])
                        let daemon = try await DaemonHarness(in: dir, ["--config", config.path])
                        try await waitUntil(timeout: .seconds(30)) {
                            try Self.reportIDs(daemon, source: "emsc").contains("20260101_0000001")
                        }
                        let firstQuery = try #require(catchUp.queryRequests.first)
                        #expect(firstQuery.query["updatedafter"] != nil)
                        #expect(firstQuery.query["format"] == "xml")
                        try await waitUntil(timeout: .seconds(30)) { socket.openConnections == 1 }

                        // Pushed over the socket: in the store within seconds.
                        let pushed = Self.now()
                        try await socket.send(
                            Self.message(
                                id: "20260101_0000002", time: pushed - 60_000, latitude: 36, longitude: 28,
                                magnitude: 3.2, updated: pushed))
                        try await waitUntil(timeout: .seconds(30)) {
                            try Self.reportIDs(daemon, source: "emsc").contains("20260101_0000002")
                        }

                        // Bad messages between good ones: counted, skipped, the daemon goes on.
                        try await socket.send("this is not JSON")
                        try await socket.sendBinary([0, 1, 2, 3])
                        try await socket.send(#"{"action":"explode","data":{}}"#)
                        try await socket.send(
                            Self.message(
                                id: "20260101_0000003", time: pushed - 30_000, latitude: -30, longitude: -71,
                                magnitude: 2.7, updated: pushed))
                        try await waitUntil(timeout: .seconds(30)) {
                            try Self.reportIDs(daemon, source: "emsc").contains("20260101_0000003")
                        }
                        #expect(daemon.process.isRunning)
                        // 5 messages, 3 of them bad; connected, after one catch-up.
                        try await waitUntil(timeout: .seconds(30)) {
                            let metrics = try await Self.metrics(daemon)
                            return metrics.value("quaked_source_bad_messages_total", ["source": "emsc"]) == 3
                                && metrics.value("quaked_source_messages_total", ["source": "emsc"]) == 5
                                && metrics.value("quaked_source_connected", ["source": "emsc"]) == 1
                                && metrics.value(
                                    "quaked_source_catch_ups_total", ["source": "emsc", "result": "success"]) == 1
                        }
                        // The delay from each report's lastupdate to its commit: the catch-up's report
                        // (4 hours old) and the two pushed ones (within the hour), not the bad messages.
                        let delays = try await Self.metrics(daemon)
                        let emsc = ["source": "emsc"]
                        let bucket = "quaked_source_report_delay_seconds_bucket"
                        #expect(delays.value("quaked_source_report_delay_seconds_count", emsc) == 3)
                        #expect(delays.value(bucket, emsc.merging(["le": "3600.0"]) { $1 }) == 2)
                        #expect(delays.value(bucket, emsc.merging(["le": "+Inf"]) { $1 }) == 3)

                        // Published while the socket is down (never sent over it), plus a copy of a
                        // pushed report: the reconnect's catch-up brings the one, the other stays one.
                        let missed = Self.now()
                        try catchUp.add(
                            feature: SourceDaemon.feature(
                                id: "20260101_0000004", net: "EMSC", time: missed - 120_000, latitude: 10,
                                longitude: 120, magnitude: 5.0, updated: missed))
                        try catchUp.add(
                            feature: SourceDaemon.feature(
                                id: "20260101_0000002", net: "EMSC", time: pushed - 60_000, latitude: 36,
                                longitude: 28, magnitude: 3.2, updated: pushed))
                        catchUp.clearLog()
                        await socket.dropConnections()
                        try await waitUntil(timeout: .seconds(30)) {
                            try Self.reportIDs(daemon, source: "emsc").contains("20260101_0000004")
                        }
                        #expect(socket.upgrades >= 2)
                        // The reconnect's catch-up asked from the newest stored lastupdate less the overlap.
                        let again = try #require(catchUp.queryRequests.first)
                        let expected = CatalogQuery.fdsnTime(pushed - 60_000)
                        #expect(again.query["updatedafter"] == expected, "\(again.uri)")

                        let ids = try Self.reportIDs(daemon, source: "emsc")
                        #expect(ids.sorted() == ["20260101_0000001", "20260101_0000002", "20260101_0000003", "20260101_0000004"])
                        #expect(try daemon.withStore { try $0.allQuakes().count } == 4)
                        try await waitUntil(timeout: .seconds(30)) {
                            let metrics = try await Self.metrics(daemon)
                            return metrics.value("quaked_source_reconnects_total", ["source": "emsc"]) ?? 0 >= 1
                                && metrics.value(
                                    "quaked_source_catch_ups_total", ["source": "emsc", "result": "success"]) ?? 0 >= 2
                        }

                        // Status: the source, caught up and without an error.
                        try await waitUntil(timeout: .seconds(30)) {
                            let source = try await daemon.getStatus().sources?.first { $0.name == "emsc" }
                            return source?.lastSuccess != nil && source?.lastError == nil
                        }
                        try await daemon.stop()
                    }
                }
            }
        }

        @Test(
            "emsc: a server gone is the source's error in status; Refresh(source) catches up without the socket; quaked --once runs the catch-up only"
        )
        func emscDisconnectedRefreshOnce() async throws {
            let socket = try await PushTestServer.start()
            try await FeedTestServer.withServer { http in
                let catchUp = FDSNTestService(on: http, basePath: "/emsc/fdsnws/event/1/")
                let start = Self.now()
                try catchUp.add(
                    feature: SourceDaemon.feature(
                        id: "20260102_0000001", net: "EMSC", time: start - 600_000, latitude: 45, longitude: 16,
                        magnitude: 4.0, updated: start - 300_000))
                try await withTemporaryDirectory { dir in
                    let config = dir.appendingPathComponent("quaked.conf")
                    try SourceDaemon.writeConfig(
                        config, sources: ["emsc emsc \(socket.url) catch-up=\(catchUp.baseURL) format=xml"])
                    let daemon = try await DaemonHarness(in: dir, ["--config", config.path])
                    try await waitUntil(timeout: .seconds(30)) { socket.openConnections == 1 }
                    try await waitUntil(timeout: .seconds(30)) {
                        try Self.reportIDs(daemon, source: "emsc") == ["20260102_0000001"]
                    }
                    await socket.shutdown()
                    try await waitUntil(timeout: .seconds(30)) {
                        let source = try await daemon.getStatus().sources?.first { $0.name == "emsc" }
                        return source?.lastError?.contains("the websocket is disconnected") == true
                    }
                    let metrics = try await Self.metrics(daemon)
                    #expect(metrics.value("quaked_source_connected", ["source": "emsc"]) == 0)

                    try catchUp.add(
                        feature: SourceDaemon.feature(
                            id: "20260102_0000002", net: "EMSC", time: start - 60_000, latitude: -20, longitude: 170,
                            magnitude: 5.5, updated: Self.now()))
                    let reply = try await daemon.call(IOQuaked.Refresh.self, .init(source: "emsc"))
                    let result = try #require(reply.sourceResults?.first)
                    #expect(result.source == "emsc")
                    #expect(result.result == .imported, "\(result)")
                    #expect(try Self.reportIDs(daemon, source: "emsc").sorted() == ["20260102_0000001", "20260102_0000002"])
                    #expect(daemon.process.isRunning)
                    try await daemon.stop()

                    // --once: the catch-up, no socket (the server is gone: it would fail).
                    try catchUp.add(
                        feature: SourceDaemon.feature(
                            id: "20260102_0000003", net: "EMSC", time: start - 30_000, latitude: 60, longitude: -150,
                            magnitude: 3.9, updated: Self.now()))
                    let once = try await ChildProcess.run(
                        BuiltProducts.path("quaked"),
                        [
                            "--state-directory", daemon.stateDirectory.path, "--socket",
                            dir.appendingPathComponent("q.sock").path, "--config", config.path, "--once",
                        ], timeout: .seconds(60))
                    #expect(once.status == 0, "\(once.stderr)")
                    #expect(
                        try Self.reportIDs(daemon, source: "emsc").sorted()
                            == ["20260102_0000001", "20260102_0000002", "20260102_0000003"])
                }
            }
        }

        @Test("Reload: an emsc source added connects, a changed URL moves to the new server, a removed one disconnects")
        func emscReload() async throws {
            try await PushTestServer.withServer { first in
                try await PushTestServer.withServer { second in
                    try await FeedTestServer.withServer { http in
                        let catchUp = FDSNTestService(on: http, basePath: "/emsc/fdsnws/event/1/")
                        try await withTemporaryDirectory { dir in
                            let config = dir.appendingPathComponent("quaked.conf")
                            let gfz = FDSNTestService(on: http, basePath: "/gfz/fdsnws/event/1/")
                            try SourceDaemon.writeConfig(config, sources: ["gfz fdsn \(gfz.baseURL) interval=1h"])
                            let daemon = try await DaemonHarness(in: dir, ["--config", config.path])

                            // Added.
                            try SourceDaemon.writeConfig(
                                config,
                                sources: [
                                    "gfz fdsn \(gfz.baseURL) interval=1h",
                                    "emsc emsc \(first.url) catch-up=\(catchUp.baseURL) format=xml",
                                ])
                            _ = try await daemon.call(IOQuaked.Reload.self, .init())
                            try await waitUntil(timeout: .seconds(30)) { first.openConnections == 1 }
                            let pushed = Self.now()
                            try await first.send(
                                Self.message(
                                    id: "20260103_0000001", time: pushed - 60_000, latitude: 38, longitude: 23,
                                    magnitude: 3.0, updated: pushed))
                            try await waitUntil(timeout: .seconds(30)) {
                                try Self.reportIDs(daemon, source: "emsc") == ["20260103_0000001"]
                            }

                            // Changed: the new URL's server, the old one's connection closed.
                            try SourceDaemon.writeConfig(
                                config,
                                sources: [
                                    "gfz fdsn \(gfz.baseURL) interval=1h",
                                    "emsc emsc \(second.url) catch-up=\(catchUp.baseURL) format=xml",
                                ])
                            _ = try await daemon.call(IOQuaked.Reload.self, .init())
                            try await waitUntil(timeout: .seconds(30)) {
                                second.openConnections == 1 && first.openConnections == 0
                            }
                            try await second.send(
                                Self.message(
                                    id: "20260103_0000002", time: pushed - 30_000, latitude: -6, longitude: 130,
                                    magnitude: 4.5, updated: Self.now()))
                            try await waitUntil(timeout: .seconds(30)) {
                                try Self.reportIDs(daemon, source: "emsc").sorted() == [
                                    "20260103_0000001", "20260103_0000002",
                                ]
                            }

                            // Removed: disconnected, and not connecting again.
                            try SourceDaemon.writeConfig(config, sources: ["gfz fdsn \(gfz.baseURL) interval=1h"])
                            _ = try await daemon.call(IOQuaked.Reload.self, .init())
                            try await waitUntil(timeout: .seconds(30)) { second.openConnections == 0 }
                            let upgrades = second.upgrades
                            try await Task.sleep(for: .seconds(1))
                            #expect(second.upgrades == upgrades)
                            #expect(first.upgrades == 1)
                            #expect(daemon.process.isRunning)
                            try await daemon.stop()
                        }
                    }
                }
            }
        }

        @Test(
            "geonet: the first run imports GeoNet's real answer, the second is a 304, a quality: deleted retraction removes the report"
        )
        func geonet() async throws {
            try await FeedTestServer.withServer { http in
                // The real answer, with one of its deleted events still standing.
                let deleted = #""publicID": "2019p166058""#
                let real = GeoNetFixtures.mmi4
                #expect(real.contains(deleted))
                let standing = Self.undelete("2019p166058", in: real)
                #expect(standing != real)
                func answer(_ text: String, etag: String) -> TestResponse {
                    TestResponse(
                        body: .bytes(Array(text.utf8)), contentType: "application/vnd.geo+json;version=2",
                        lastModified: TestResponse.defaultLastModified, etag: etag)
                }
                http.setResponse("/quake", answer(standing, etag: "\"one\""))
                try await withTemporaryDirectory { dir in
                    let config = dir.appendingPathComponent("quaked.conf")
                    try SourceDaemon.writeConfig(
                        config, sources: ["geonet geonet \(http.url("/quake?MMI=-1")) interval=1h"])
                    let daemon = try await DaemonHarness(in: dir, ["--config", config.path])
                    try await waitUntil(timeout: .seconds(30)) {
                        try daemon.withStore { try $0.sourceStates().first { $0.name == "geonet" }?.lastSuccess != nil }
                    }
                    // 88 features, 6 deleted now: 82 reports.
                    let first = try daemon.withStore { try $0.sourceStates().first { $0.name == "geonet" } }
                    #expect(first?.reportCount == 82)
                    let kept = try daemon.withStore { try $0.reports(ofEvent: "2019p166058") }
                    #expect(kept.map(\.source) == ["geonet"])
                    #expect(kept.first?.agency == "WEL")
                    #expect(try daemon.withStore { try $0.quake(id: "2019p159004") } == nil)

                    // The second run: a conditional GET answered 304, a success without changes.
                    let head = try daemon.withStore { try $0.head() }
                    let second = try await daemon.call(IOQuaked.Refresh.self, .init(source: "geonet"))
                    #expect(second.sourceResults?.first?.result == .imported)
                    let requests = http.requests("/quake")
                    #expect(requests.count == 2)
                    #expect(requests.last?.header("If-None-Match") == "\"one\"")
                    #expect(requests.last?.header("If-Modified-Since") == TestResponse.defaultLastModified)
                    #expect(try daemon.withStore { try $0.head() } == head)

                    // GeoNet retracts it: gone from the store.
                    http.setResponse("/quake", answer(real, etag: "\"two\""))
                    let third = try await daemon.call(IOQuaked.Refresh.self, .init(source: "geonet"))
                    #expect(third.sourceResults?.first?.result == .imported)
                    #expect(try daemon.withStore { try $0.quake(id: "2019p166058") } == nil)
                    #expect(try daemon.withStore { try $0.sourceStates().first { $0.name == "geonet" }?.reportCount } == 81)
                    let metrics = try await Self.metrics(daemon)
                    #expect(metrics.value("quaked_source_runs_total", ["source": "geonet", "result": "success"]) == 3)
                    try await daemon.stop()
                }
            }
        }

        /// GeoNet's answer with the feature of `id` `best` instead of `deleted`.
        static func undelete(_ id: String, in text: String) -> String {
            guard let idRange = text.range(of: #""publicID": "\#(id)""#),
                let quality = text.range(of: #""quality": "deleted""#, range: idRange.upperBound..<text.endIndex)
            else { return text }
            return text.replacingCharacters(in: quality, with: #""quality": "best""#)
        }
    }
}
