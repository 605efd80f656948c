import Foundation
import QuakeAssociation
import QuakeModel
import QuakeProtocol
import QuakeStore
import QuakeTestSupport
import Testing
import Varlink

@testable import QuakeDaemon

/// GetReports and GetStatus's sources against a real daemon: with a USGS feed only, and with two fdsn
/// sources reporting one quake.
extension EndToEnd {
    @Suite("Sources in the interface")
    struct SourceInterfaceTests {
        static let feed = Fixtures.usgs("lhayesgolding__EarthquakeData__all_hour.geojson")

        /// A config with the sources, quick retries, and no feed.
        static func writeConfig(_ url: URL, sources: [String]) throws {
            try SourceDaemon.writeConfig(url, sources: sources)
        }

        @Test("a feed's quake has no reports, an unknown id is NoSuchQuake, and GetStatus has no sources")
        func feedOnly() async throws {
            try await withTemporaryDirectory { dir in
                let daemon = try await DaemonHarness(in: dir, ["--feed", Self.feed.absoluteString, "--interval", "1h"])
                try await waitUntil(timeout: .seconds(20)) { try await daemon.getStatus().headToken == 1 }
                let id = try #require(try daemon.withStore { try $0.allQuakes().first?.id })

                let reports = try await daemon.call(IOQuaked.GetReports.self, .init(id: id))
                #expect(reports.reports.isEmpty)
                // On the wire: an empty list, not an absent member.
                let raw = try await daemon.call(IOQuaked.GetReports.name, ["id": id])
                #expect((raw["parameters"] as? [String: Any])?["reports"] as? [Any] != nil, "\(raw)")

                let unknown = try await daemon.result(IOQuaked.GetReports.self, .init(id: "no-such-quake"))
                #expect(unknown.error?.name == IOQuaked.NoSuchQuake.name)
                #expect(try unknown.error?.decode(IOQuaked.NoSuchQuake.self).id == "no-such-quake")
                let malformed = try await daemon.call(IOQuaked.GetReports.name, ["id": 17])
                #expect(malformed["error"] as? String == OrgVarlinkService.InvalidParameter.name, "\(malformed)")

                let status = try await daemon.getStatus()
                #expect(status.sources == nil)
                #expect(status.association == nil, "no association before a source imports")
                let rawStatus = try await daemon.call(IOQuaked.GetStatus.name)
                #expect((rawStatus["parameters"] as? [String: Any])?["sources"] == nil, "\(rawStatus)")

                // Counted per method, like every call.
                let metrics = try await daemon.call(IOQuaked.Metrics.self, .init()).text
                #expect(metrics.contains(#"method="io.quaked.GetReports""#), "\(metrics)")
                #expect(try await daemon.stop() == 0)
            }
        }

        /// One call's first reply, as bytes (the reply's `parameters`), on a fresh connection.
        static func rawReply(_ socket: String, _ call: String) async throws -> [UInt8] {
            let frame = try await onBlockingThread { () throws -> [UInt8] in
                let client = try UnixSocketClient(path: socket)
                try client.send(call)
                return try #require(try client.receiveBytes(timeout: .seconds(30)))
            }
            let reply = try VarlinkReply(parsing: frame.last == 0 ? Array(frame.dropLast()) : frame)
            #expect(reply.error == nil, "\(String(decoding: frame, as: UTF8.self))")
            return reply.parameters
        }

        /// Get, Snapshot and FetchHistory carry the event's `agency` and `contributors` as a typed
        /// array (the generated types decode the replies strictly), and the update that the second
        /// agency made has a `contributors` FieldChange whose values are FieldValue's
        /// `contributors` member, never a JSON string.
        static func expectContributors(_ expected: [IOQuaked.Contributor], of event: String, socket: String) async throws {
            let preferred = try #require(expected.first)
            let get = try IOQuaked.Get.Reply.decode(
                json: try await rawReply(socket, #"{"method":"io.quaked.Get","parameters":{"id":"\#(event)"}}"#))
            #expect(get.quake.contributors == expected)
            #expect(get.quake.agency == preferred.agency)

            let snapshotBytes = try await rawReply(socket, #"{"method":"io.quaked.Snapshot","parameters":{},"more":true}"#)
            let snapshot = try IOQuaked.Snapshot.Reply.decode(json: snapshotBytes)
            #expect(snapshot.quakes.map(\.contributors) == [expected])
            let text = String(decoding: snapshotBytes, as: UTF8.self)
            #expect(text.contains(#""contributors":[{"source":"\#(preferred.source)""#), "\(text)")

            let historyBytes = try await rawReply(socket, #"{"method":"io.quaked.FetchHistory","parameters":{"after":0}}"#)
            let history = try IOQuaked.FetchHistory.Reply.decode(json: historyBytes)
            let changes = history.transactions.flatMap(\.changes)
            #expect(changes.map(\.kind) == [.insert, .update], "\(changes)")
            #expect(changes.last?.quake?.contributors == expected)
            let change = try #require(changes.last?.fields?.first { $0.field == "contributors" })
            #expect(change.new?.contributors == expected)
            #expect(change.new?.string == nil && change.old?.string == nil)
            #expect(change.old?.contributors?.count == 1)
            #expect(change.old?.contributors?.first?.preferred == true)
            // In the bytes (history's stored form, its own key order): the member is an array of objects.
            let historyText = String(decoding: historyBytes, as: UTF8.self)
            #expect(historyText.contains(#""new":{"contributors":[{""#), "\(historyText)")
            #expect(historyText.contains(#""old":{"contributors":[{""#), "\(historyText)")
        }

        @Test("two fdsn sources: GetReports gives both reports, the preferred first; GetStatus and quakectl show them")
        func twoSources() async throws {
            try await FeedTestServer.withServer { server in
                let alpha = FDSNTestService(on: server, basePath: "/alpha/fdsnws/event/1/")
                let beta = FDSNTestService(on: server, basePath: "/beta/fdsnws/event/1/")
                let now = Int64(Date().timeIntervalSince1970 * 1000)
                let time = now - 3_600_000
                try alpha.add(
                    feature: SourceSyncTests.feature(
                        id: "aa0001", net: "aa", time: time, latitude: 42.5, longitude: 13.25, magnitude: 4.4,
                        updated: now - 1_800_000))
                try beta.add(
                    feature: SourceSyncTests.feature(
                        id: "bb0001", net: "bb", time: time + 5000, latitude: 42.68, longitude: 13.25, magnitude: 4.6,
                        updated: now - 1_800_000))
                try await withTemporaryDirectory { dir in
                    let config = dir.appendingPathComponent("quaked.conf")
                    try Self.writeConfig(
                        config,
                        sources: ["alpha fdsn \(alpha.baseURL) format=xml", "beta fdsn \(beta.baseURL) format=text"])
                    let daemon = try await DaemonHarness(in: dir, ["--config", config.path])
                    try await waitUntil(timeout: .seconds(30)) {
                        try await daemon.getStatus().sources?.filter { $0.lastSuccess != nil }.count == 2
                    }
                    // One event for both; its id is the report that founded it (whichever source ran first).
                    let quakes = try daemon.withStore { try $0.allQuakes() }
                    #expect(quakes.count == 1, "\(quakes.map(\.id))")
                    let event = try #require(quakes.first?.id)
                    #expect(["aa0001", "bb0001"].contains(event))
                    let reports = try await daemon.call(IOQuaked.GetReports.self, .init(id: event)).reports
                    #expect(Set(reports.map(\.source)) == ["alpha", "beta"], "\(reports)")
                    #expect(reports.map(\.preferred) == [true, false])
                    let stored = try daemon.withStore { try $0.reports(ofEvent: event) }
                    #expect(reports.map(\.id) == stored.map(\.id), "the store's order, the preferred first")
                    let beta1 = try #require(reports.first { $0.source == "beta" })
                    #expect(beta1.id == "bb0001" && beta1.mag == 4.6 && beta1.time == Int(time + 5000))

                    let status = try await daemon.getStatus()
                    let sources = try #require(status.sources)
                    #expect(sources.map(\.name) == ["alpha", "beta"])
                    #expect(sources.map(\.reports) == [1, 1])
                    #expect(sources.allSatisfy { $0.position != nil && $0.lastError == nil && $0.lastQuery != nil })

                    // quakectl: the table under show, the section in status, and both in --json.
                    let socket = ["--socket", daemon.socketPath]
                    let show = try await ChildProcess.run(BuiltProducts.path("quakectl"), ["show", event] + socket)
                    #expect(show.status == 0, "\(show.stderr)")
                    let table = show.stdout.components(separatedBy: "\nreports\n").last ?? ""
                    #expect(
                        table.contains("  * ") && table.contains("bb0001") && table.contains("aa0001"),
                        "\(show.stdout)")
                    let json = try await ChildProcess.run(
                        BuiltProducts.path("quakectl"), ["show", event, "--json"] + socket)
                    let object = try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any]
                    #expect((object?["reports"] as? [Any])?.count == 2, "\(json.stdout)")
                    let text = try await ChildProcess.run(BuiltProducts.path("quakectl"), ["status"] + socket)
                    #expect(text.stdout.contains("\nsources\n  alpha  1 report · last success "), "\(text.stdout)")

                    // The event's agency and contributors: GetReports' reports, in its order.
                    let expected = reports.map { r in
                        IOQuaked.Contributor(
                            source: r.source, agency: r.agency, id: r.id, time: r.time, lat: r.lat, lon: r.lon,
                            depth: r.depth, mag: r.mag, magType: r.magType,
                            status: r.status ?? (r.mode == "automatic" ? "automatic" : nil), updated: r.updated,
                            preferred: r.preferred)
                    }
                    #expect((object?["contributors"] as? [[String: Any]])?.map { $0["source"] as? String } == reports.map(\.source))
                    try await Self.expectContributors(expected, of: event, socket: daemon.socketPath)
                    #expect(try await daemon.stop() == 0)
                }
            }
        }
    }
}

/// The store's sources and reports as the interface gives them (IOQuaked+Store), without a daemon.
@Suite("Sources in the interface, from a store")
struct SourceInterfaceMappingTests {
    static let ingv = SourceReport(
        source: "ingv", id: "20250305_0000090", agency: "INGV", time: 1_741_132_809_120, latitude: 42.5,
        longitude: 13.25, depth: 9.8, magnitude: 4.4, magnitudeType: "ML", place: "Central Italy",
        eventType: "earthquake", evaluationMode: .manual, evaluationStatus: .reviewed, updated: 1_741_133_000_000)
    static let emsc = SourceReport(
        source: "emsc", id: "20250305_0000012", time: 1_741_132_810_000, latitude: 42.52, longitude: 13.2,
        magnitude: 4.5, evaluationMode: .automatic)

    @Test("GetReports: every source's report, the preferred first and marked; GetStatus: a status per source")
    func storeMapping() async throws {
        try await withTemporaryDirectory { dir in
            let store = try QuakeStore(directory: dir)
            defer { try? store.close() }
            #expect(try store.interfaceSources() == nil, "no sources: GetStatus leaves the member out")

            let now = Date(timeIntervalSince1970: 1_741_133_100)
            _ = try await store.importSource(
                "ingv", items: [.report(Self.ingv)], position: 1, query: nil, association: AssociationConfiguration(),
                now: now)
            _ = try await store.importSource(
                "emsc", items: [.report(Self.emsc)], position: 2, query: "https://example.org/query?a=1",
                association: AssociationConfiguration(), now: now)
            let events = try store.allQuakes()
            #expect(events.map(\.id) == [Self.ingv.id], "one event, named after its first report")

            let reports = try store.interfaceReports(ofEvent: Self.ingv.id)
            #expect(
                reports == [
                    IOQuaked.Report(
                        source: "ingv", agency: "INGV", id: "20250305_0000090", time: 1_741_132_809_120, lat: 42.5,
                        lon: 13.25, depth: 9.8, mag: 4.4, magType: "ML", place: "Central Italy", type: "earthquake",
                        status: "reviewed", mode: "manual", updated: 1_741_133_000_000, preferred: true),
                    IOQuaked.Report(
                        source: "emsc", id: "20250305_0000012", time: 1_741_132_810_000, lat: 42.52, lon: 13.2,
                        mag: 4.5, mode: "automatic", preferred: false),
                ])
            #expect(throws: IOQuaked.NoSuchQuake(id: "nope")) { try store.interfaceReports(ofEvent: "nope") }

            let sources = try #require(try store.interfaceSources())
            #expect(
                sources == [
                    IOQuaked.SourceStatus(
                        name: "emsc", position: 2, lastAttempt: 1_741_133_100_000, lastSuccess: 1_741_133_100_000,
                        lastQuery: "https://example.org/query?a=1", reports: 1),
                    IOQuaked.SourceStatus(
                        name: "ingv", position: 1, lastAttempt: 1_741_133_100_000, lastSuccess: 1_741_133_100_000,
                        reports: 1),
                ])

            // A failed run: its error, the position kept.
            try await store.recordSourceFailure("ingv", error: "HTTP 503", now: now.addingTimeInterval(60))
            let failed = try #require(try store.interfaceSources()?.last)
            #expect(failed.lastError == "HTTP 503" && failed.position == 1 && failed.lastAttempt == 1_741_133_160_000)
        }
    }
}
