import Foundation
import QuakeProtocol
import QuakeStore
import QuakeTestSupport
import Testing

@testable import QuakeDaemon

/// The USGS summary feed beside an `fdsn` source, in a real quaked process: the feed's quake is
/// the store's source `usgs`, and another agency's report of it joins the same quake (one row,
/// both named, the USGS-only fields kept) as an update a history client sees.
extension EndToEnd {
    @Suite("the summary feed beside sources")
    struct UsgsBesideSourcesTests {
        static func now() -> Int64 { Int64(Date().timeIntervalSince1970 * 1000) }

        /// A summary feed holding one quake, with the fields only the USGS has.
        static func feed(id: String, time: Int64, updated: Int64, latitude: Double, longitude: Double) -> String {
            let code = id.dropFirst(2)
            return """
                {"type":"FeatureCollection","metadata":{"generated":\(updated),"url":"https://earthquake.usgs.gov/earthquakes/feed/v1.0/summary/all_day.geojson",\
                "title":"USGS All Earthquakes, Past Day","status":200,"api":"1.14.1","count":1},"features":[\
                {"type":"Feature","properties":{"mag":4.5,"place":"10 km N of Testville","time":\(time),"updated":\(updated),\
                "tz":null,"url":"https://earthquake.usgs.gov/earthquakes/eventpage/\(id)",\
                "detail":"https://earthquake.usgs.gov/earthquakes/feed/v1.0/detail/\(id).geojson","felt":12,"cdi":3.4,\
                "mmi":null,"alert":null,"status":"reviewed","tsunami":0,"sig":345,"net":"us","code":"\(code)",\
                "ids":",\(id),","sources":",us,","types":",origin,phase-data,","nst":40,"dmin":0.5,"rms":0.8,"gap":30,\
                "magType":"mb","type":"earthquake","title":"M 4.5 - 10 km N of Testville"},\
                "geometry":{"type":"Point","coordinates":[\(longitude),\(latitude),10]},"id":"\(id)"}]}
                """
        }

        @Test(
            "a summary feed's quake and an fdsn source's report of it 3 s and 10 km away: one quake naming both, the USGS fields kept, one insert then an update"
        )
        func feedAndSourceOneQuake() async throws {
            try await FeedTestServer.withServer { server in
                let time = Self.now() - 3_600_000
                let updated = Self.now() - 1_800_000
                server.setResponse(
                    "/feed",
                    .text(Self.feed(id: "us7000qqqq", time: time, updated: updated, latitude: 35.25, longitude: -117.5)))
                let emsc = FDSNTestService(on: server, basePath: "/emsc/fdsnws/event/1/")
                // 3 s later and 0.09 degrees north: about 10 km.
                try emsc.add(
                    feature: SourceSyncTests.feature(
                        id: "em0001", net: "em", time: time + 3000, latitude: 35.34, longitude: -117.5, magnitude: 4.3,
                        updated: updated))
                // The source fails until the feed's quake is stored: the feed comes first, in plain mode,
                // and the source's first import turns the store to association mode.
                emsc.failAlways = .serviceUnavailable(retryAfter: nil)
                try await withTemporaryDirectory { dir in
                    let config = dir.appendingPathComponent("quaked.conf")
                    try """
                    feed = \(server.url("/feed"))
                    retry-initial-delay = 50ms
                    retry-max-delay = 300ms
                    source = emsc fdsn \(emsc.baseURL) format=text

                    """.write(to: config, atomically: true, encoding: .utf8)
                    let daemon = try await DaemonHarness(in: dir, ["--config", config.path])
                    try await waitUntil(timeout: .seconds(30)) {
                        try daemon.withStore { try $0.quake(id: "us7000qqqq") != nil }
                    }
                    #expect(try daemon.withStore { try $0.isAssociationMode() } == false)
                    emsc.failAlways = nil
                    try await waitUntil(timeout: .seconds(30)) {
                        try daemon.withStore {
                            try $0.sourceStates().first { $0.name == "emsc" }?.lastSuccess != nil
                        }
                    }
                    #expect(try daemon.withStore { try $0.isAssociationMode() } == true)

                    // One quake: the feed's id, both agencies named, the USGS-only fields there.
                    let quakes = try daemon.withStore { try $0.allQuakes() }
                    #expect(quakes.count == 1, "\(quakes.map(\.id))")
                    let quake = try #require(quakes.first)
                    #expect(quake.id == "us7000qqqq")
                    // The usgs report is preferred (first in the order, equally reviewed): `ids` is its row's
                    // (the USGS's own ids) then the other members' ids, `sources` the feed's contributors
                    // then the other members' agencies.
                    #expect(quake.ids == ",us7000qqqq,em0001,", "\(quake.ids ?? "")")
                    #expect(quake.sources?.contains("us") == true && quake.sources?.contains("em") == true, "\(quake.sources ?? "")")
                    #expect(quake.url == "https://earthquake.usgs.gov/earthquakes/eventpage/us7000qqqq")
                    #expect(quake.felt == 12 && quake.sig == 345)
                    let reports = try daemon.withStore { try $0.reports(ofEvent: quake.id) }
                    #expect(Set(reports.map(\.source)) == ["usgs", "emsc"])
                    #expect(try daemon.withStore { try $0.checkIntegrity() } == [])

                    // A client following history saw it inserted once; the second agency is an update.
                    var changes: [(token: Int, change: IOQuaked.Change)] = []
                    var cursor = 0
                    while true {
                        let page = try await daemon.call(IOQuaked.FetchHistory.self, .init(after: cursor))
                        for transaction in page.transactions {
                            changes += transaction.changes.map { (transaction.token, $0) }
                        }
                        cursor = page.nextAfter
                        if !page.hasMore { break }
                    }
                    let inserts = changes.filter { $0.change.kind == .insert }
                    #expect(inserts.map(\.change.quakeId) == ["us7000qqqq"], "\(changes.map { ($0.token, $0.change.quakeId, $0.change.kind) })")
                    #expect(!changes.contains { $0.change.kind == .delete })
                    let insertToken = try #require(inserts.first?.token)
                    #expect(
                        changes.contains { $0.token > insertToken && $0.change.kind == .update && $0.change.quakeId == "us7000qqqq" },
                        "\(changes.map { ($0.token, $0.change.quakeId, $0.change.kind) })")
                    #expect(try await daemon.stop() == 0)
                }
            }
        }

        @Test(
            "the source first, then the feed: the feed's report joins the source's quake as an update, its USGS fields and its preference applied"
        )
        func sourceThenFeed() async throws {
            try await FeedTestServer.withServer { server in
                let time = Self.now() - 3_600_000
                let updated = Self.now() - 1_800_000
                // The feed fails until the source's quake is stored.
                server.setResponse("/feed", .serviceUnavailable())
                let emsc = FDSNTestService(on: server, basePath: "/emsc/fdsnws/event/1/")
                try emsc.add(
                    feature: SourceSyncTests.feature(
                        id: "em0001", net: "em", time: time + 3000, latitude: 35.34, longitude: -117.5, magnitude: 4.3,
                        updated: updated))
                try await withTemporaryDirectory { dir in
                    let config = dir.appendingPathComponent("quaked.conf")
                    try """
                    feed = \(server.url("/feed"))
                    retry-initial-delay = 50ms
                    retry-max-delay = 300ms
                    source = emsc fdsn \(emsc.baseURL) format=text

                    """.write(to: config, atomically: true, encoding: .utf8)
                    let daemon = try await DaemonHarness(in: dir, ["--config", config.path])
                    try await waitUntil(timeout: .seconds(30)) {
                        try daemon.withStore { try $0.quake(id: "em0001") != nil }
                    }
                    server.setResponse(
                        "/feed",
                        .text(Self.feed(id: "us7000qqqq", time: time, updated: updated, latitude: 35.25, longitude: -117.5)))
                    try await waitUntil(timeout: .seconds(30)) {
                        try daemon.withStore { try $0.quake(id: "em0001")?.url != nil }
                    }
                    let quakes = try daemon.withStore { try $0.allQuakes() }
                    #expect(quakes.count == 1, "\(quakes.map(\.id))")
                    let quake = try #require(quakes.first)
                    // The event keeps its id; the usgs report, first in the order, is now preferred.
                    #expect(quake.id == "em0001")
                    #expect(quake.net == "us" && quake.mag == 4.5, "\(quake.net ?? "") \(quake.mag ?? 0)")
                    #expect(quake.sources?.contains("us") == true && quake.sources?.contains("em") == true, "\(quake.sources ?? "")")
                    #expect(quake.felt == 12 && quake.sig == 345)
                    #expect(try daemon.withStore { try $0.checkIntegrity() } == [])
                    let page = try await daemon.call(IOQuaked.FetchHistory.self, .init(after: 0))
                    let changes = page.transactions.flatMap(\.changes)
                    #expect(
                        changes.map { "\($0.quakeId) \($0.kind)" }.filter { !$0.hasSuffix("update") } == ["em0001 insert"],
                        "\(changes.map { "\($0.quakeId) \($0.kind)" })")
                    #expect(changes.contains { $0.quakeId == "em0001" && $0.kind == .update })
                    #expect(try await daemon.stop() == 0)
                }
            }
        }

        @Test("a reload's association settings reach the feed's imports: wider windows join the feed's quake and the source's")
        func reloadAppliesToTheFeed() async throws {
            try await FeedTestServer.withServer { server in
                let time = Self.now() - 3_600_000
                let updated = Self.now() - 1_800_000
                server.setResponse(
                    "/feed",
                    .text(Self.feed(id: "us7000qqqq", time: time, updated: updated, latitude: 35.25, longitude: -117.5)))
                let emsc = FDSNTestService(on: server, basePath: "/emsc/fdsnws/event/1/")
                try emsc.add(
                    feature: SourceSyncTests.feature(
                        id: "em0001", net: "em", time: time + 3000, latitude: 35.34, longitude: -117.5, magnitude: 4.3,
                        updated: updated))
                try await withTemporaryDirectory { dir in
                    let config = dir.appendingPathComponent("quaked.conf")
                    func write(distance: String) throws {
                        try """
                        feed = \(server.url("/feed"))
                        interval = 1s
                        retry-initial-delay = 50ms
                        retry-max-delay = 300ms
                        associate-distance = \(distance)
                        source = emsc fdsn \(emsc.baseURL) format=text

                        """.write(to: config, atomically: true, encoding: .utf8)
                    }
                    // 10 km apart, a 5 km window: two quakes.
                    try write(distance: "5km")
                    let daemon = try await DaemonHarness(in: dir, ["--config", config.path])
                    try await waitUntil(timeout: .seconds(30)) {
                        try daemon.withStore { store in
                            try store.sourceStates().first { $0.name == "emsc" }?.lastSuccess != nil
                                && store.quake(id: "us7000qqqq") != nil
                        }
                    }
                    #expect(try daemon.withStore { try $0.allQuakes().count } == 2)
                    // The source fails from now on: only the feed's imports can regroup.
                    emsc.failAlways = .serviceUnavailable(retryAfter: nil)
                    try write(distance: "100km")
                    daemon.process.signal(SIGHUP)
                    try await waitUntil(timeout: .seconds(30)) {
                        daemon.process.stderr.contains("configuration reloaded")
                    }
                    // The USGS revises its quake; the feed's next import associates under the new windows.
                    server.setResponse(
                        "/feed",
                        .text(
                            Self.feed(
                                id: "us7000qqqq", time: time, updated: updated + 60_000, latitude: 35.25, longitude: -117.5)))
                    try await waitUntil(timeout: .seconds(30)) {
                        try daemon.withStore { try $0.allQuakes().count == 1 }
                    }
                    let quake = try #require(try daemon.withStore { try $0.allQuakes().first })
                    #expect(quake.sources?.contains("us") == true && quake.sources?.contains("em") == true, "\(quake.sources ?? "")")
                    #expect(try daemon.withStore { try $0.checkIntegrity() } == [])
                    #expect(try await daemon.stop() == 0)
                }
            }
        }
    }
}
