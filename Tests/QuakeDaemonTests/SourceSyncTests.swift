import Foundation
import QuakeProtocol
import QuakeSources
import QuakeStore
import QuakeTestSupport
import Testing
import Logging

@testable import QuakeDaemon

/// `source = NAME fdsn URL` against real FDSN services over HTTP and a real quaked process: two
/// agencies' reports of one quake become one quake, the next run asks with `updatedafter`, a
/// failing source records its error while the other goes on, and 204 is a success.
extension EndToEnd {
    @Suite("fdsn sources")
    struct SourceSyncTests {
        /// A USGS feature as FDSNTestService holds it, and writes as QuakeML or text (``SourceDaemon``).
        static func feature(
            id: String, net: String, time: Int64, latitude: Double, longitude: Double, magnitude: Double,
            updated: Int64
        ) -> String {
            SourceDaemon.feature(
                id: id, net: net, time: time, latitude: latitude, longitude: longitude, magnitude: magnitude,
                updated: updated)
        }

        static func now() -> Int64 { SourceDaemon.now() }

        /// A config with the sources, quick retries, and no feed.
        static func writeConfig(_ url: URL, sources: [String]) throws {
            try SourceDaemon.writeConfig(url, sources: sources)
        }

        @Test(
            "two agencies (QuakeML and text) reporting one quake 5 s and 20 km apart give one quake naming both; the next run asks with updatedafter"
        )
        func twoAgenciesOneQuake() async throws {
            try await FeedTestServer.withServer { server in
                let alpha = FDSNTestService(on: server, basePath: "/alpha/fdsnws/event/1/")
                let beta = FDSNTestService(on: server, basePath: "/beta/fdsnws/event/1/")
                let time = Self.now() - 3_600_000
                let updated = Self.now() - 1_800_000
                try alpha.add(
                    feature: Self.feature(
                        id: "aa0001", net: "aa", time: time, latitude: 42.5, longitude: 13.25, magnitude: 4.4,
                        updated: updated))
                // 5 s later and 0.18 degrees north: about 20 km.
                try beta.add(
                    feature: Self.feature(
                        id: "bb0001", net: "bb", time: time + 5000, latitude: 42.68, longitude: 13.25, magnitude: 4.6,
                        updated: updated))
                // Another quake only beta has, far away.
                try beta.add(
                    feature: Self.feature(
                        id: "bb0002", net: "bb", time: time - 600_000, latitude: -20, longitude: 170, magnitude: 5.1,
                        updated: updated))
                try await withTemporaryDirectory { dir in
                    let config = dir.appendingPathComponent("quaked.conf")
                    try Self.writeConfig(
                        config,
                        sources: [
                            "alpha fdsn \(alpha.baseURL) format=xml overlap=1m",
                            "beta fdsn \(beta.baseURL) format=text min-magnitude=1",
                        ])
                    var daemon = try await DaemonHarness(in: dir, ["--config", config.path])
                    try await waitUntil(timeout: .seconds(30)) {
                        try daemon.withStore { store in
                            try store.sourceStates().filter { $0.lastSuccess != nil }.count == 2
                        }
                    }
                    let quakes = try daemon.withStore { try $0.allQuakes() }.sorted { $0.id < $1.id }
                    #expect(quakes.count == 2, "\(quakes.map(\.id))")
                    let joint = try #require(quakes.first { $0.ids?.contains("aa0001") == true }, "\(quakes.map(\.ids))")
                    // Named after the report that came first (the two sources run at once).
                    #expect(["aa0001", "bb0001"].contains(joint.id))
                    #expect(joint.ids?.contains("aa0001") == true && joint.ids?.contains("bb0001") == true)
                    #expect(joint.sources?.contains("aa") == true && joint.sources?.contains("bb") == true)
                    let reports = try daemon.withStore { try $0.reports(ofEvent: joint.id) }
                    #expect(Set(reports.map(\.source)) == ["alpha", "beta"])
                    #expect(quakes.contains { $0.id == "bb0002" })
                    // The delay from each report's updated to its commit: alpha's one report, 30
                    // minutes old; beta's text answers carry no update time, so nothing for beta.
                    let metrics = try Exposition(try await daemon.call(IOQuaked.Metrics.self, .init()).text)
                    let alphaDelay = ["source": "alpha"]
                    let bucket = "quaked_source_report_delay_seconds_bucket"
                    #expect(metrics.value("quaked_source_report_delay_seconds_count", alphaDelay) == 1)
                    #expect(metrics.value(bucket, alphaDelay.merging(["le": "900.0"]) { $1 }) == 0)
                    #expect(metrics.value(bucket, alphaDelay.merging(["le": "3600.0"]) { $1 }) == 1)
                    #expect(metrics.value("quaked_source_report_delay_seconds_count", ["source": "beta"]) == nil)

                    // The queries: each service in its format, ordered by time, with nodata=204 and
                    // the filters; the first run's updatedafter is a day back (since=1d).
                    let alphaFirst = try #require(alpha.log.first { $0.endpoint == .query })
                    #expect(alphaFirst.status == 200)
                    #expect(alphaFirst.query?.format == "xml" && alphaFirst.query?.orderBy == .time)
                    #expect(alphaFirst.query?.noData == 204)
                    let firstAfter = try #require(alphaFirst.query?.updatedAfter)
                    #expect(abs(firstAfter - (Self.now() - 86_400_000)) < 120_000)
                    let betaFirst = try #require(beta.log.first { $0.endpoint == .query })
                    #expect(betaFirst.query?.format == "text" && betaFirst.query?.minMagnitude == 1)
                    #expect(betaFirst.request.header("User-Agent")?.hasPrefix("quaked/") == true)

                    // A restart: the next run asks for what changed since the kept position, less the overlap.
                    #expect(try await daemon.stop() == 0)
                    let position = try #require(try daemon.withStore { try $0.sourcePosition("alpha") })
                    #expect(abs(position - Self.now()) < 120_000)
                    alpha.clearLog()
                    // Meanwhile alpha revised its magnitude.
                    try alpha.setMagnitude(id: "aa0001", mag: 4.7, updated: Self.now())
                    daemon = try await DaemonHarness(in: dir, ["--config", config.path])
                    try await waitUntil(timeout: .seconds(30)) {
                        alpha.log.contains { $0.endpoint == .query && $0.status == 200 }
                    }
                    let second = try #require(alpha.log.first { $0.endpoint == .query })
                    #expect(second.query?.updatedAfter == position - 60_000)
                    try await waitUntil(timeout: .seconds(30)) {
                        try daemon.withStore { try $0.reports(ofEvent: joint.id).contains { $0.magnitude == 4.7 } }
                    }
                    // Still one quake for the pair, and the store checks out.
                    #expect(try daemon.withStore { try $0.allQuakes().count } == 2)
                    #expect(try daemon.withStore { try $0.checkIntegrity() } == [])
                    #expect(try await daemon.stop() == 0)
                }
            }
        }

        @Test(
            "a source answering an HTML page records its error and imports nothing, the other keeps importing; a 204 is a success without changes"
        )
        func failingSourceAndNoData() async throws {
            try await FeedTestServer.withServer { server in
                let broken = FDSNTestService(on: server, basePath: "/broken/fdsnws/event/1/")
                let good = FDSNTestService(on: server, basePath: "/good/fdsnws/event/1/")
                let time = Self.now() - 3_600_000
                try broken.add(
                    feature: Self.feature(
                        id: "xx0001", net: "xx", time: time, latitude: 10, longitude: 10, magnitude: 3,
                        updated: time))
                try good.add(
                    feature: Self.feature(
                        id: "gg0001", net: "gg", time: time, latitude: 40, longitude: -120, magnitude: 3.5,
                        updated: time))
                broken.failAlways = .maintenancePage()
                try await withTemporaryDirectory { dir in
                    let config = dir.appendingPathComponent("quaked.conf")
                    try Self.writeConfig(
                        config,
                        sources: ["broken fdsn \(broken.baseURL)", "good fdsn \(good.baseURL) format=text"])
                    let daemon = try await DaemonHarness(in: dir, ["--config", config.path])
                    // The broken source fails again and again (backing off), the good one imports.
                    try await waitUntil(timeout: .seconds(30)) {
                        let stored = try daemon.withStore { try $0.quake(id: "gg0001") != nil }
                        return broken.log.filter { $0.endpoint == .query }.count >= 3 && stored
                    }
                    let states = try daemon.withStore { try $0.sourceStates() }
                    let brokenState = try #require(states.first { $0.name == "broken" })
                    #expect(brokenState.lastSuccess == nil && brokenState.position == nil)
                    let error = try #require(brokenState.lastError)
                    #expect(error.contains("HTML page"), "\(error)")
                    #expect(error.contains("nothing was imported"), "\(error)")
                    #expect(brokenState.reportCount == 0)
                    #expect(try daemon.withStore { try $0.quake(id: "xx0001") } == nil)
                    let goodState = try #require(states.first { $0.name == "good" })
                    #expect(goodState.lastError == nil && goodState.reportCount == 1)
                    // The log names the source and what to do.
                    #expect(daemon.process.stderr.contains("source run failed"), "\(daemon.process.stderr.suffix(2000))")
                    #expect(daemon.process.stderr.contains("source.name=broken"), "\(daemon.process.stderr.suffix(2000))")

                    // The service recovers, with nothing new: 204, a success that changes nothing.
                    let head = try daemon.withStore { try $0.head() }
                    broken.removeAll()
                    broken.failAlways = nil
                    try await waitUntil(timeout: .seconds(30)) {
                        try daemon.withStore { try $0.sourceStates().first { $0.name == "broken" }?.lastSuccess != nil }
                    }
                    #expect(broken.log.last { $0.endpoint == .query }?.status == 204)
                    let recovered = try #require(try daemon.withStore { try $0.sourceStates() }.first { $0.name == "broken" })
                    #expect(recovered.lastError == nil && recovered.position != nil && recovered.reportCount == 0)
                    #expect(try daemon.withStore { try $0.head() } == head, "a 204 makes no history")
                    // The metrics count each source's runs.
                    let metrics = try await daemon.call(IOQuaked.Metrics.self, .init()).text
                    let runs = metrics.split(separator: "\n").filter { $0.hasPrefix("quaked_source_runs_total{") }
                    #expect(runs.contains { $0.contains(#"source="broken""#) && $0.contains(#"result="failed""#) })
                    #expect(runs.contains { $0.contains(#"source="good""#) && $0.contains(#"result="success""#) })
                    #expect(try await daemon.stop() == 0)
                }
            }
        }

        @Test("event-retention: a source's report of a quake older than the retention is left out, a newer one imported")
        func eventRetentionLeavesOldReportsOut() async throws {
            try await FeedTestServer.withServer { server in
                let service = FDSNTestService(on: server, basePath: "/old/fdsnws/event/1/")
                let recent = Self.now() - 1_800_000
                let old = Self.now() - 3 * 3_600_000
                try service.add(
                    feature: Self.feature(
                        id: "rr0001", net: "rr", time: recent, latitude: 1, longitude: 2, magnitude: 3, updated: recent))
                try service.add(
                    feature: Self.feature(
                        id: "rr0002", net: "rr", time: old, latitude: 1, longitude: 20, magnitude: 3, updated: recent))
                try await withTemporaryDirectory { dir in
                    let config = dir.appendingPathComponent("quaked.conf")
                    try Self.writeConfig(config, sources: ["old fdsn \(service.baseURL)"])
                    try (String(contentsOf: config, encoding: .utf8) + "event-retention = 2h\n")
                        .write(to: config, atomically: true, encoding: .utf8)
                    let daemon = try await DaemonHarness(in: dir, ["--config", config.path])
                    try await waitUntil(timeout: .seconds(30)) {
                        try daemon.withStore { try $0.sourceStates().first?.lastSuccess != nil }
                    }
                    #expect(try daemon.withStore { try $0.allQuakes().map(\.id) } == ["rr0001"])
                    #expect(try daemon.withStore { try $0.sourceStates().first?.reportCount } == 1)
                    #expect(try await daemon.stop() == 0)
                }
            }
        }

        @Test("a reload adds a source, which starts at once, and removes one, which stops asking")
        func reloadAddsAndRemovesSources() async throws {
            try await FeedTestServer.withServer { server in
                let first = FDSNTestService(on: server, basePath: "/first/fdsnws/event/1/")
                let second = FDSNTestService(on: server, basePath: "/second/fdsnws/event/1/")
                let time = Self.now() - 3_600_000
                try second.add(
                    feature: Self.feature(
                        id: "ss0001", net: "ss", time: time, latitude: 1, longitude: 2, magnitude: 3, updated: time))
                try await withTemporaryDirectory { dir in
                    let config = dir.appendingPathComponent("quaked.conf")
                    try Self.writeConfig(config, sources: ["first fdsn \(first.baseURL)"])
                    // The first source fails, so it is asked again every few hundred ms while it runs.
                    first.failAlways = .serviceUnavailable(retryAfter: nil)
                    let daemon = try await DaemonHarness(in: dir, ["--config", config.path])
                    try await waitUntil(timeout: .seconds(30)) { first.log.filter { $0.status == 503 }.count >= 2 }
                    try Self.writeConfig(config, sources: ["second fdsn \(second.baseURL) format=text"])
                    daemon.process.signal(SIGHUP)
                    try await waitUntil(timeout: .seconds(30)) {
                        try daemon.withStore { try $0.quake(id: "ss0001") != nil }
                    }
                    // The removed source is asked no more (it was retried within 300 ms).
                    first.clearLog()
                    try await Task.sleep(for: .seconds(1))
                    #expect(first.log.isEmpty)
                    #expect(try await daemon.stop() == 0)
                }
            }
        }

        @Test("quaked --once runs each source once: a line per source, exit 1 when one fails")
        func onceRunsEachSource() async throws {
            try await FeedTestServer.withServer { server in
                let good = FDSNTestService(on: server, basePath: "/good/fdsnws/event/1/")
                let broken = FDSNTestService(on: server, basePath: "/broken/fdsnws/event/1/")
                let time = Self.now() - 3_600_000
                try good.add(
                    feature: Self.feature(
                        id: "gg0001", net: "gg", time: time, latitude: 1, longitude: 2, magnitude: 3, updated: time))
                try await withTemporaryDirectory { dir in
                    let config = dir.appendingPathComponent("quaked.conf")
                    try Self.writeConfig(config, sources: ["good fdsn \(good.baseURL)"])
                    let arguments = [
                        "--once", "--config", config.path, "--state-directory", dir.appendingPathComponent("state").path,
                    ]
                    let ok = try await ChildProcess.run(BuiltProducts.path("quaked"), arguments)
                    #expect(ok.status == 0, "\(ok.stderr)")
                    #expect(ok.stdout.contains("source good: 1 reports: 1 new"), "\(ok.stdout)")
                    let json = try await ChildProcess.run(BuiltProducts.path("quaked"), arguments + ["--json"])
                    #expect(json.stdout.contains(#""source":"good""#), "\(json.stdout)")
                    broken.failAlways = .serviceUnavailable(retryAfter: nil)
                    try Self.writeConfig(config, sources: ["good fdsn \(good.baseURL)", "broken fdsn \(broken.baseURL)"])
                    let failed = try await ChildProcess.run(BuiltProducts.path("quaked"), arguments)
                    #expect(failed.status == 1)
                    #expect(failed.stderr.contains("source broken:") && failed.stderr.contains("503"), "\(failed.stderr)")
                }
            }
        }
    }
}

/// The query a source sends, and how a rejected answer is described, without a network.
@Suite("fdsn source queries")
struct SourceQueryTests {
    @Test("the query: format (geojson as json), orderby, updatedafter, the filters as a circle or a box, nodata")
    func queryURL() throws {
        var source = try SourceConfiguration(
            parsing: "emsc fdsn https://www.seismicportal.eu/fdsnws/event/1/ format=geojson min-magnitude=2.5 region=35,6,48,19")
        #expect(
            SourceSync.queryURL(source, updatedAfter: 1_741_132_809_120).absoluteString
                == "https://www.seismicportal.eu/fdsnws/event/1/query?format=json&orderby=time&updatedafter=2025-03-05T00:00:09.120&minmagnitude=2.5&minlatitude=35&maxlatitude=48&minlongitude=6&maxlongitude=19&nodata=204"
        )
        source.format = .text
        source.minMagnitude = nil
        source.region = .near(lat: 42.5, lon: 13.25, radiusKm: 300)
        #expect(
            SourceSync.queryURL(source, updatedAfter: 0).absoluteString
                == "https://www.seismicportal.eu/fdsnws/event/1/query?format=text&orderby=time&updatedafter=1970-01-01T00:00:00.000&latitude=42.5&longitude=13.25&maxradiuskm=300&nodata=204"
        )
        #expect(SourceSync.makeReader(source) is FDSNTextReader)
    }

    @Test(
        "a run that fails imports nothing and says why: malformed QuakeML, text of the wrong width, 429 with Retry-After, 404",
        arguments: [
            ("xml", "malformed", "the answer is not QuakeML"),
            ("text", "columns", "the answer is not FDSN text"),
            ("xml", "429", "answered 429"),
            ("xml", "404", "is this an FDSN event service?"),
        ])
    func failedRuns(format: String, fault: String, expected: String) async throws {
        try await FeedTestServer.withServer { server in
            let service = FDSNTestService(on: server)
            let time = Int64(Date().timeIntervalSince1970 * 1000) - 3_600_000
            try service.add(
                feature: EndToEnd.SourceSyncTests.feature(
                    id: "ff0001", net: "ff", time: time, latitude: 1, longitude: 2, magnitude: 3, updated: time))
            var url = service.baseURL
            switch fault {
            case "malformed": service.failAlways = .malformedXML()
            case "columns": service.failAlways = .wrongColumnCount()
            case "429": service.failAlways = .tooManyRequests(retryAfter: 7)
            default: url = server.url("/nothing/fdsnws/event/1/")
            }
            try await withTemporaryDirectory { dir in
                let store = try QuakeStore(directory: dir)
                let configuration = DaemonConfiguration(defaults: DefaultPaths(environment: ["HOME": dir.path]))
                let clients = FeedHTTPClients(configuration: FeedPuller.clientConfiguration(limits: configuration.pullLimits))
                let source = try SourceConfiguration(parsing: "ff fdsn \(url) format=\(format)")
                let sync = SourceSync(
                    store: store, clients: clients, settings: .init(configuration, source: source),
                    logger: Logger(label: "test") { _ in SwiftLogNoOpLogHandler() })
                let asked = Date()
                let outcome = await sync.runOnce(sync.currentSettings)
                let answered = Date()
                guard case .failed(let failure) = outcome else {
                    Issue.record("the run did not fail: \(outcome)")
                    try await clients.shutdown()
                    try store.close()
                    return
                }
                #expect(failure.message.contains(expected), "\(failure.message)")
                #expect(failure.message.contains("nothing was imported"), "\(failure.message)")
                if fault == "429" {
                    // 7 s after the answer came, which was between asking and the run's end (however
                    // slow the machine).
                    let retryAfter = try #require(failure.retryAfter)
                    #expect(
                        retryAfter >= asked.addingTimeInterval(7) && retryAfter <= answered.addingTimeInterval(7),
                        "Retry-After is kept for the backoff: \(retryAfter), asked \(asked), answered \(answered)")
                }
                let state = try #require(try store.sourceStates().first)
                #expect(state.lastError == failure.message && state.position == nil && state.reportCount == 0)
                #expect(try store.count() == 0)
                #expect(sync.status.consecutiveFailures == 1)
                try await clients.shutdown()
                try store.close()
            }
        }
    }
}
