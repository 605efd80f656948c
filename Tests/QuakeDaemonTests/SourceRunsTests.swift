import Foundation
import QuakeProtocol
import QuakeStore
import QuakeTestSupport
import Testing
import Varlink

@testable import QuakeDaemon

/// `Refresh(source)` / `quakectl refresh --source`, `Backfill(source)` / `quakectl backfill
/// --source`, and the association's counts in GetStatus, `quakectl status` and the metrics, against
/// real quaked processes and real FDSN services over HTTP.
extension EndToEnd {
    @Suite("Source refresh, backfill and association counts")
    struct SourceRunsTests {
        static let quakectl = BuiltProducts.path("quakectl")

        static func queries(_ service: FDSNTestService) -> [FDSNTestService.LoggedRequest] {
            service.log.filter { $0.endpoint == .query }
        }

        @Test(
            "refresh --source runs one source once and prints its counts; a failing source fails with its error; an unknown one is NoSuchSource; a run in progress is joined"
        )
        func refreshSource() async throws {
            try await FeedTestServer.withServer { server in
                let alpha = FDSNTestService(on: server, basePath: "/alpha/fdsnws/event/1/")
                let broken = FDSNTestService(on: server, basePath: "/broken/fdsnws/event/1/")
                let time = SourceDaemon.now() - 3_600_000
                try alpha.add(
                    feature: SourceDaemon.feature(
                        id: "aa0001", net: "aa", time: time, latitude: 42.5, longitude: 13.25, magnitude: 4.4,
                        updated: time))
                broken.failAlways = .maintenancePage()
                try await withTemporaryDirectory { dir in
                    let config = dir.appendingPathComponent("quaked.conf")
                    try SourceDaemon.writeConfig(
                        config,
                        sources: [
                            "alpha fdsn \(alpha.baseURL) format=xml interval=1h",
                            "broken fdsn \(broken.baseURL) interval=1h",
                        ])
                    let daemon = try await DaemonHarness(in: dir, ["--config", config.path])
                    try await waitUntil(timeout: .seconds(30)) {
                        let states = try daemon.withStore { try $0.sourceStates() }
                        return states.contains { $0.name == "alpha" && $0.lastSuccess != nil }
                            && states.contains { $0.name == "broken" && $0.lastError != nil }
                    }
                    let socket = ["--socket", daemon.socketPath]

                    // A new quake at alpha: one run, one more query, the quake imported.
                    try alpha.add(
                        feature: SourceDaemon.feature(
                            id: "aa0002", net: "aa", time: time + 60_000, latitude: -20, longitude: 170,
                            magnitude: 5.0, updated: SourceDaemon.now()))
                    let asked = Self.queries(alpha).count
                    let refreshed = try await ChildProcess.run(Self.quakectl, ["refresh", "--source", "alpha"] + socket)
                    #expect(refreshed.status == 0, "\(refreshed.stderr)")
                    let head = try await daemon.getStatus().headToken
                    #expect(refreshed.stdout == "alpha: 1 report, 1 event changed · token \(head)\n", "\(refreshed.stdout)")
                    #expect(Self.queries(alpha).count == asked + 1)
                    #expect(try daemon.withStore { try $0.quake(id: "aa0002") } != nil)
                    // Again: the same answer changes nothing.
                    let again = try await ChildProcess.run(Self.quakectl, ["refresh", "--source", "alpha"] + socket)
                    #expect(again.status == 0 && again.stdout == "alpha: no changes\n", "\(again.stdout)\(again.stderr)")
                    #expect(Self.queries(alpha).count == asked + 2)

                    // The failing source: failed, exit 1, its error on stderr.
                    let failed = try await ChildProcess.run(Self.quakectl, ["refresh", "--source", "broken"] + socket)
                    #expect(failed.status == 1)
                    #expect(failed.stdout == "broken: failed\n", "\(failed.stdout)")
                    #expect(failed.stderr.contains("broken:") && failed.stderr.contains("HTML"), "\(failed.stderr)")
                    let reply = try await daemon.call(IOQuaked.Refresh.self, .init(source: "broken"))
                    let result = try #require(reply.sourceResults?.first)
                    #expect(reply.results.isEmpty && reply.sourceResults?.count == 1)
                    #expect(result.source == "broken" && result.result == .failed && result.error?.contains("HTML") == true)

                    // Unknown, and both given.
                    let unknown = try await ChildProcess.run(Self.quakectl, ["refresh", "--source", "nope"] + socket)
                    #expect(unknown.status == 64 && unknown.stderr.contains("no source named nope"), "\(unknown.stderr)")
                    let noSuch = try await daemon.result(IOQuaked.Refresh.self, .init(source: "nope"))
                    #expect(try noSuch.error?.decode(IOQuaked.NoSuchSource.self).source == "nope")
                    let both = try await daemon.result(IOQuaked.Refresh.self, .init(feed: "all_day", source: "alpha"))
                    #expect(both.error?.name == OrgVarlinkService.InvalidParameter.name)
                    #expect(try both.error?.decode(OrgVarlinkService.InvalidParameter.self).parameter == "source")
                    let usage = try await ChildProcess.run(
                        Self.quakectl, ["refresh", "--source", "alpha", "--feed", "all_day"] + socket)
                    #expect(usage.status == 64)

                    // Neither: every source, in configuration order.
                    let all = try await daemon.call(IOQuaked.Refresh.self, .init())
                    #expect(all.sourceResults?.map(\.source) == ["alpha", "broken"])
                    #expect(all.sourceResults?.map(\.result) == [.imported, .failed])

                    // Two refreshes at once while alpha answers slowly: one run, both get its outcome.
                    alpha.slowMode = (chunkSize: 64, delay: .milliseconds(100))
                    try alpha.setMagnitude(id: "aa0001", mag: 4.6, updated: SourceDaemon.now())
                    let before = Self.queries(alpha).count
                    async let first = daemon.call(IOQuaked.Refresh.self, .init(source: "alpha"))
                    async let second = daemon.call(IOQuaked.Refresh.self, .init(source: "alpha"))
                    let (one, two) = try await (first, second)
                    alpha.slowMode = nil
                    #expect(Self.queries(alpha).count == before + 1)
                    #expect(one.sourceResults == two.sourceResults)
                    #expect(one.sourceResults?.first?.reports == 1 && one.sourceResults?.first?.token != nil)
                    #expect(try await daemon.stop() == 0)
                }
            }
        }

        @Test(
            "backfill --source pages the source in its format with its min-magnitude, splits windows over the search limit, survives kill -9 and imports each event once as the source's reports"
        )
        func backfillSourceResumes() async throws {
            try await FeedTestServer.withServer { server in
                let alpha = FDSNTestService(on: server, basePath: "/alpha/fdsnws/event/1/", searchLimit: 8)
                alpha.countAvailable = false
                // 30 quakes a month ago, half an hour apart and far apart; 3 below min-magnitude.
                let base = (SourceDaemon.now() - 30 * 86_400_000) / 3_600_000 * 3_600_000
                for i in 0..<33 {
                    try alpha.add(
                        feature: SourceDaemon.feature(
                            id: "aa\(1000 + i)", net: "aa", time: base + Int64(i) * 1_800_000,
                            latitude: Double(-60 + 4 * i), longitude: Double(-170 + 10 * i),
                            magnitude: i < 30 ? 3.0 : 1.0, updated: base + 86_400_000))
                }
                try await withTemporaryDirectory { dir in
                    let config = dir.appendingPathComponent("quaked.conf")
                    try SourceDaemon.writeConfig(
                        config, sources: ["alpha fdsn \(alpha.baseURL) format=text min-magnitude=2 interval=1h"],
                        extra: ["backfill-pause = 300ms", "backfill-attempts = 3"])
                    var daemon = try await DaemonHarness(in: dir, ["--config", config.path])
                    try await waitUntil(timeout: .seconds(30)) {
                        try daemon.withStore { try $0.sourceStates().first?.lastSuccess != nil }
                    }
                    // The incremental run found nothing (all updated long ago).
                    let position = try #require(try daemon.withStore { try $0.sourcePosition("alpha") })
                    let runQuery = try #require(try daemon.withStore { try $0.sourceStates().first?.lastQuery })
                    #expect(try daemon.withStore { try $0.allQuakes().count } == 0)

                    let started = try await ChildProcess.run(
                        Self.quakectl,
                        [
                            "backfill", "--socket", daemon.socketPath, "--detach", "--source", "alpha", "--start",
                            "\(base - 3_600_000)", "--end", "\(base + 2 * 86_400_000)",
                        ])
                    #expect(started.status == 0, "\(started.stderr)")
                    #expect(started.stdout.hasPrefix("backfill 1 (source alpha) "), "\(started.stdout)")
                    try await waitUntil(timeout: .seconds(60)) {
                        try daemon.withStore { try $0.backfillJob(id: 1)?.windowsDone ?? 0 } >= 2
                    }
                    daemon.process.signal(SIGKILL)
                    _ = try await daemon.process.wait(timeout: .seconds(15))
                    let atKill = try #require(try daemon.withStore { try $0.backfillJob(id: 1) })
                    #expect(atKill.state == .running && atKill.source == "alpha")
                    #expect(atKill.minMagnitude == 2, "the source's min-magnitude")
                    // The windows imported so far moved neither the source's position nor its last run.
                    #expect(try daemon.withStore { try $0.sourcePosition("alpha") } == position)
                    #expect(try daemon.withStore { try $0.sourceStates().first?.lastQuery } == runQuery)
                    // Asked in the source's format, with its filter, ordered by time; a window over
                    // the search limit was refused and split.
                    let before = Self.queries(alpha).filter { $0.query?.startTime != nil }
                    #expect(before.allSatisfy { $0.query?.format == "text" && $0.query?.minMagnitude == 2 })
                    #expect(before.allSatisfy { $0.query?.orderBy == .timeAscending })
                    let refused = Self.queries(alpha).filter { $0.status == 400 }
                    #expect(!refused.isEmpty, "\(Self.queries(alpha).map(\.status))")
                    #expect(refused.allSatisfy { $0.request.uri.contains("starttime=") && $0.request.uri.contains("format=text") })
                    alpha.clearLog()

                    daemon = try await DaemonHarness(in: dir, ["--config", config.path])
                    try await waitUntil(timeout: .seconds(60)) {
                        try daemon.withStore { try $0.backfillJob(id: 1)?.state } == .done
                    }
                    let firstWindow = try #require(
                        Self.queries(alpha).first { $0.status == 200 && $0.query?.startTime != nil })
                    #expect(firstWindow.query?.startTime == atKill.cursor)
                    let done = try #require(try daemon.withStore { try $0.backfillJob(id: 1) })
                    #expect(done.eventsFetched == 30 && done.eventsImported == 30)
                    let quakes = try daemon.withStore { try $0.allQuakes() }
                    #expect(quakes.count == 30)
                    #expect(Set(quakes.map(\.id)) == Set((0..<30).map { "aa\(1000 + $0)" }))
                    let alphaState = try #require(try daemon.withStore { try $0.sourceStates().first })
                    #expect(alphaState.reportCount == 30)
                    // Every report inserted once, by backfill transactions.
                    let history = try daemon.withStore {
                        try $0.history(after: 0, limit: 10_000, maxChanges: 100_000).transactions
                    }
                    let inserts = history.filter { $0.author == .backfill }.flatMap {
                        $0.changes.filter { $0.kind == .insert }.map(\.quakeId)
                    }
                    #expect(inserts.count == 30 && Set(inserts).count == 30)
                    let job = try #require(try await daemon.call(IOQuaked.BackfillStatus.self, .init(id: 1)).jobs.first)
                    #expect(job.source == "alpha" && job.state == .done && job.catalog == alpha.baseURL)
                    #expect(try daemon.withStore { try $0.checkIntegrity() } == [])
                    #expect(try await daemon.stop() == 0)
                }
            }
        }

        @Test(
            "backfill --source in QuakeML: a 413 halves the window, an answer cut short is retried, every event imported once; quakectl follows the job to done"
        )
        func backfillSourceFaults() async throws {
            try await FeedTestServer.withServer { server in
                let alpha = FDSNTestService(on: server, basePath: "/alpha/fdsnws/event/1/")
                alpha.countAvailable = false
                let base = (SourceDaemon.now() - 10 * 86_400_000) / 3_600_000 * 3_600_000
                for i in 0..<10 {
                    try alpha.add(
                        feature: SourceDaemon.feature(
                            id: "aa\(2000 + i)", net: "aa", time: base + Int64(i) * 3_600_000,
                            latitude: Double(-40 + 8 * i), longitude: Double(-150 + 30 * i), magnitude: 3.5,
                            updated: base + 86_400_000))
                }
                try await withTemporaryDirectory { dir in
                    let config = dir.appendingPathComponent("quaked.conf")
                    try SourceDaemon.writeConfig(
                        config, sources: ["alpha fdsn \(alpha.baseURL) format=xml interval=1h"],
                        extra: ["backfill-pause = 5ms", "backfill-attempts = 3"])
                    let daemon = try await DaemonHarness(in: dir, ["--config", config.path])
                    try await waitUntil(timeout: .seconds(30)) {
                        try daemon.withStore { try $0.sourceStates().first?.lastSuccess != nil }
                    }
                    alpha.clearLog()
                    alpha.enqueueFaults([
                        .response(TestResponse.status(413, body: "Request Entity Too Large")), .malformedXML(),
                    ])
                    let result = try await ChildProcess.run(
                        Self.quakectl,
                        [
                            "backfill", "--socket", daemon.socketPath, "--source", "alpha", "--start", "\(base)",
                            "--end", "\(base + 86_400_000)",
                        ])
                    #expect(result.status == 0, "\(result.stderr)")
                    #expect(result.stdout.split(separator: "\n").last?.hasPrefix("backfill 1 (source alpha) done · ") == true, "\(result.stdout)")
                    let windows = Self.queries(alpha).filter { $0.request.uri.contains("starttime=") }
                    #expect(windows.first?.status == 413, "\(windows.map(\.status))")
                    // The window after the 413 is half as long; the answer cut short is asked again.
                    let second = try #require(windows.dropFirst().first?.query)
                    #expect(second.startTime == base && second.endTime == base + 43_200_000 - 1)
                    #expect(windows.dropFirst().first?.fault != nil && windows.dropFirst(2).first?.query?.startTime == base)
                    #expect(windows.allSatisfy { $0.request.uri.contains("format=xml") })
                    let quakes = try daemon.withStore { try $0.allQuakes() }
                    #expect(Set(quakes.map(\.id)) == Set((0..<10).map { "aa\(2000 + $0)" }))
                    let job = try #require(try daemon.withStore { try $0.backfillJob(id: 1) })
                    #expect(job.state == .done && job.eventsFetched == 10 && job.eventsImported == 10)
                    #expect(try daemon.withStore { try $0.checkIntegrity() } == [])
                    #expect(try await daemon.stop() == 0)
                }
            }
        }

        @Test(
            "backfill --source: an unknown source is NoSuchSource, with --catalog a usage error; a job whose source was removed fails saying so"
        )
        func backfillSourceErrors() async throws {
            try await FeedTestServer.withServer { server in
                let alpha = FDSNTestService(on: server, basePath: "/alpha/fdsnws/event/1/")
                let beta = FDSNTestService(on: server, basePath: "/beta/fdsnws/event/1/")
                alpha.countAvailable = false
                try await withTemporaryDirectory { dir in
                    let config = dir.appendingPathComponent("quaked.conf")
                    try SourceDaemon.writeConfig(
                        config, sources: ["alpha fdsn \(alpha.baseURL) interval=1h"], extra: ["backfill-pause = 10s"])
                    var daemon = try await DaemonHarness(in: dir, ["--config", config.path])
                    let now = SourceDaemon.now()
                    let range = ["--start", "\(now - 30 * 86_400_000)", "--end", "\(now - 86_400_000)"]
                    let socket = ["--socket", daemon.socketPath]
                    let unknown = try await ChildProcess.run(
                        Self.quakectl, ["backfill", "--detach", "--source", "nope"] + range + socket)
                    #expect(unknown.status == 64 && unknown.stderr.contains("no source named nope"), "\(unknown.stderr)")
                    let both = try await ChildProcess.run(
                        Self.quakectl,
                        ["backfill", "--detach", "--source", "alpha", "--catalog", alpha.baseURL] + range + socket)
                    #expect(both.status == 64, "\(both.stderr)")
                    let viaCall = try await daemon.result(
                        IOQuaked.Backfill.self,
                        .init(start: Int(now - 86_400_000), catalog: alpha.baseURL, source: "alpha"))
                    #expect(try viaCall.error?.decode(OrgVarlinkService.InvalidParameter.self).parameter == "source")

                    // A month in day windows, 10 s apart: still running when quaked stops.
                    let started = try await ChildProcess.run(
                        Self.quakectl, ["backfill", "--detach", "--source", "alpha"] + range + socket)
                    #expect(started.status == 0, "\(started.stderr)")
                    try await waitUntil(timeout: .seconds(30)) {
                        try daemon.withStore { try $0.backfillJob(id: 1)?.windowsDone ?? 0 } >= 1
                    }
                    #expect(try await daemon.stop() == 0)
                    #expect(try daemon.withStore { try $0.backfillJob(id: 1)?.state } == .running)

                    // alpha is gone from the configuration: the job fails, naming it.
                    try SourceDaemon.writeConfig(config, sources: ["beta fdsn \(beta.baseURL) interval=1h"])
                    daemon = try await DaemonHarness(in: dir, ["--config", config.path])
                    try await waitUntil(timeout: .seconds(30)) {
                        try daemon.withStore { try $0.backfillJob(id: 1)?.state } == .failed
                    }
                    let failed = try #require(try daemon.withStore { try $0.backfillJob(id: 1) })
                    #expect(
                        failed.error?.contains("source alpha, which is no longer configured") == true, "\(failed.error ?? "")")
                    #expect(try await daemon.stop() == 0)
                }
            }
        }

        @Test(
            "two sources reporting one quake: joined 1, new 1 in GetStatus, quakectl status and the metrics; a revision apart splits the event"
        )
        func associationCounts() async throws {
            try await FeedTestServer.withServer { server in
                let alpha = FDSNTestService(on: server, basePath: "/alpha/fdsnws/event/1/")
                let beta = FDSNTestService(on: server, basePath: "/beta/fdsnws/event/1/")
                let time = SourceDaemon.now() - 3_600_000
                let updated = SourceDaemon.now() - 1_800_000
                try alpha.add(
                    feature: SourceDaemon.feature(
                        id: "aa0001", net: "aa", time: time, latitude: 42.5, longitude: 13.25, magnitude: 4.4,
                        updated: updated))
                try beta.add(
                    feature: SourceDaemon.feature(
                        id: "bb0001", net: "bb", time: time + 5000, latitude: 42.68, longitude: 13.25, magnitude: 4.6,
                        updated: updated))
                try await withTemporaryDirectory { dir in
                    let config = dir.appendingPathComponent("quaked.conf")
                    try SourceDaemon.writeConfig(
                        config,
                        sources: [
                            "alpha fdsn \(alpha.baseURL) interval=1h", "beta fdsn \(beta.baseURL) format=text interval=1h",
                        ])
                    let daemon = try await DaemonHarness(in: dir, ["--config", config.path])
                    try await waitUntil(timeout: .seconds(30)) {
                        try await daemon.getStatus().sources?.filter { $0.lastSuccess != nil }.count == 2
                    }
                    let joined = try #require(try await daemon.getStatus().association)
                    #expect(
                        joined
                            == IOQuaked.AssociationStatus(
                                timeSeconds: 16, distanceKm: 100, events: 1, reports: 2, joined: 1, new: 1, merged: 0,
                                split: 0))

                    // beta moves its solution 500 km north: the event splits.
                    try beta.setLocation(id: "bb0001", longitude: 13.25, latitude: 47.2, depth: 10, updated: SourceDaemon.now())
                    let refreshed = try await daemon.call(IOQuaked.Refresh.self, .init(source: "beta"))
                    #expect(refreshed.sourceResults?.first?.result == .imported)
                    let split = try #require(try await daemon.getStatus().association)
                    #expect(split.events == 2 && split.reports == 2)
                    #expect(split.joined == 1 && split.new == 2 && split.merged == 0 && split.split == 1)

                    let status = try await ChildProcess.run(Self.quakectl, ["status", "--socket", daemon.socketPath])
                    #expect(status.status == 0, "\(status.stderr)")
                    #expect(
                        status.stdout.contains(
                            "\nassociation  within 16 s and 100 km\n  2 events of 2 reports · 1 joined, 2 new, 0 merged, 1 split\n"),
                        "\(status.stdout)")
                    #expect(status.stdout.contains("\n  beta  1 report · last success "), "\(status.stdout)")
                    let json = try await ChildProcess.run(
                        Self.quakectl, ["status", "--json", "--socket", daemon.socketPath])
                    let object = try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any]
                    let association = object?["association"] as? [String: Any]
                    #expect(association?["split"] as? Int == 1 && association?["joined"] as? Int == 1, "\(json.stdout)")

                    let metrics = try await daemon.call(IOQuaked.Metrics.self, .init()).text
                    #expect(metrics.contains("\nquaked_association_joined_reports_total 1\n"), "\(metrics)")
                    #expect(metrics.contains("\nquaked_association_events_total{change=\"new\"} 2\n"), "\(metrics)")
                    #expect(metrics.contains("\nquaked_association_events_total{change=\"split\"} 1\n"), "\(metrics)")
                    #expect(metrics.contains("\nquaked_association_events_total{change=\"merged\"} 0\n"), "\(metrics)")
                    #expect(try await daemon.stop() == 0)
                }
            }
        }
    }
}
