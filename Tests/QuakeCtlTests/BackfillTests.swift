import Foundation
import QuakeProtocol
import QuakeStore
import QuakeTestSupport
import Varlink
import Testing

/// quakectl backfill and quaked's backfill jobs, against a real FDSN service over HTTP
/// (``FDSNTestService`` on 127.0.0.1) with a small search limit, faults and slow bodies.
extension ClientEndToEnd {
    @Suite("Backfill") struct BackfillTests {
        /// 4,312 real events of 2019 (an FDSN query's answer), none of them in the daemon's feed.
        static let catalogFixture = Fixtures.usgs("heltond__earthquakes__query.geojson")
        /// The daemon's own feed: 8 events of 2017.
        static let feed = Fixtures.usgs("lhayesgolding__EarthquakeData__all_hour.geojson")

        /// A config file with short pauses and retries, so that tests take seconds.
        static func config(in dir: URL, _ extra: String = "") throws -> URL {
            let url = dir.appendingPathComponent("quaked.conf")
            try """
            backfill-pause = 5ms
            backfill-attempts = 3
            retry-initial-delay = 50ms
            retry-max-delay = 200ms
            retry-after-max = 3s
            total-timeout = 10s
            \(extra)
            """.write(to: url, atomically: true, encoding: .utf8)
            return url
        }

        /// The JSON lines `quakectl backfill --json` printed, as jobs.
        static func jobs(_ stdout: String) throws -> [IOQuaked.BackfillJob] {
            try stdout.split(separator: "\n").map {
                try JSONDecoder().decode(IOQuaked.BackfillJob.self, from: Data($0.utf8))
            }
        }

        /// The quake ids each backfill transaction inserted, and every change kind seen.
        static func backfillInserts(_ daemon: Quaked) throws -> (ids: [String], transactions: [HistoryTransaction]) {
            try daemon.withStore { store in
                let all = try store.history(after: 0, limit: 100_000, maxChanges: 1_000_000).transactions
                let backfill = all.filter { $0.author == .backfill }
                return (backfill.flatMap { $0.changes.filter { $0.kind == .insert }.map(\.quakeId) }, backfill)
            }
        }

        /// The 200-answered query windows, as (start, end) in ms, in request order.
        static func answeredWindows(_ service: FDSNTestService) -> [(Int64, Int64)] {
            service.log.filter { $0.endpoint == .query && $0.status == 200 && $0.fault == nil }.compactMap {
                guard let start = $0.query?.startTime, let end = $0.query?.endTime else { return nil }
                return (start, end)
            }
        }

        @Test("windows over the search limit are split, and every event in range is imported exactly once")
        func splitsAndImportsOnce() async throws {
            try await FDSNTestService.withService(searchLimit: 500) { service, _ in
                try service.add(featuresOf: Self.catalogFixture)
                let range = try #require(service.timeRange)
                // A range inside the data, and a magnitude floor, so the query's filters matter.
                let start = range.lowerBound + 86_400_000
                let end = range.upperBound - 86_400_000
                var expectedQuery = FDSNTestService.Query(startTime: start, endTime: end - 1)
                expectedQuery.minMagnitude = 1.5
                let expected = Set(service.events(matching: expectedQuery).map(\.id))
                #expect(expected.count > 1000)
                try await withTemporaryDirectory { dir in
                    let daemon = try await Quaked(
                        in: dir, feeds: [Self.feed], ["--config", try Self.config(in: dir).path])
                    defer { Task { try? await daemon.stop() } }
                    let result = try await quakectl(
                        [
                            "backfill", "--socket", daemon.socketPath, "--json", "--start", "\(start)", "--end", "\(end)",
                            "--min-mag", "1.5", "--catalog", service.baseURL,
                        ], timeout: .seconds(120))
                    #expect(result.status == 0, "\(result.stderr)")
                    let jobs = try Self.jobs(result.stdout)
                    let last = try #require(jobs.last)
                    #expect(last.state == .done)
                    #expect(last.windowsDone == last.windowsTotal)
                    #expect(last.windowsDone >= expected.count / 500)
                    #expect(last.eventsFetched == expected.count)
                    #expect(last.eventsImported == expected.count)
                    #expect(jobs.count >= 3, "progress replies: \(jobs.count)")
                    // Stored exactly once each, by backfill transactions whose source is the query.
                    let (inserted, transactions) = try Self.backfillInserts(daemon)
                    #expect(inserted.count == expected.count)
                    #expect(Set(inserted) == expected)
                    #expect(transactions.allSatisfy { $0.source?.hasPrefix(service.queryURL + "?") == true })
                    #expect(try daemon.withStore { try $0.checkIntegrity() } == [])
                    // The windows answered tile the range: each starts a millisecond after the
                    // previous one's inclusive end, none above the limit, orderby=time-asc.
                    let windows = Self.answeredWindows(service)
                    #expect(windows.first?.0 == start)
                    #expect(windows.last?.1 == end - 1)
                    for (a, b) in zip(windows, windows.dropFirst()) { #expect(b.0 == a.1 + 1) }
                    let queries = service.log.filter { $0.endpoint == .query && $0.status == 200 }
                    #expect(queries.allSatisfy { ($0.matched ?? 0) <= 500 })
                    #expect(queries.allSatisfy { $0.query?.orderBy == .timeAscending })
                    #expect(service.log.contains { $0.endpoint == .count }, "/count sized the windows")
                    // Polite: a User-Agent naming quaked and its version.
                    let agent = service.queryRequests.first?.header("User-Agent") ?? ""
                    #expect(agent.hasPrefix("quaked/"))
                    // The metrics count the windows, the events and the transactions.
                    let metrics = try await quakectl(["metrics", "--socket", daemon.socketPath])
                    func sample(_ series: String) -> Double? {
                        metrics.stdout.split(separator: "\n").first { $0.hasPrefix(series + " ") }
                            .flatMap { Double($0.split(separator: " ").last ?? "") }
                    }
                    #expect(sample("quaked_backfill_windows_total") == Double(last.windowsDone))
                    #expect(sample("quaked_backfill_events_total") == Double(expected.count))
                    #expect(
                        sample("quaked_history_transactions_total{author=\"backfill\"}") == Double(transactions.count))
                    #expect(sample("quaked_backfill_jobs{state=\"running\"}") == 0)
                    // The same backfill again imports nothing new.
                    let again = try await quakectl(
                        [
                            "backfill", "--socket", daemon.socketPath, "--json", "--start", "\(start)", "--end", "\(end)",
                            "--min-mag", "1.5", "--catalog", service.baseURL,
                        ], timeout: .seconds(120))
                    #expect(again.status == 0, "\(again.stderr)")
                    #expect(try Self.jobs(again.stdout).last?.eventsImported == 0)
                    #expect(try Self.backfillInserts(daemon).ids.count == expected.count)
                }
            }
        }

        @Test("without /count, and with a service lying about counts, windows are split blind and nothing is lost")
        func splitsBlind() async throws {
            for lying in [false, true] {
                // About 12 events a day: even the first, day-long, window is over the limit.
                try await FDSNTestService.withService(searchLimit: 10) { service, _ in
                    try service.add(featuresOf: Self.catalogFixture)
                    if lying { service.countLies = { _ in 3 } } else { service.countAvailable = false }
                    let range = try #require(service.timeRange)
                    let end = range.lowerBound + 20 * 86_400_000
                    let expected = Set(
                        service.events(matching: .init(startTime: range.lowerBound, endTime: end - 1)).map(\.id))
                    try await withTemporaryDirectory { dir in
                        let daemon = try await Quaked(
                            in: dir, feeds: [Self.feed], ["--config", try Self.config(in: dir).path])
                        defer { Task { try? await daemon.stop() } }
                        let result = try await quakectl(
                            [
                                "backfill", "--socket", daemon.socketPath, "--start", "\(range.lowerBound)", "--end",
                                "\(end)", "--catalog", service.baseURL,
                            ], timeout: .seconds(120))
                        #expect(result.status == 0, "\(result.stderr)")
                        #expect(result.stdout.contains("backfill 1 done"), "\(result.stdout)")
                        #expect(Set(try Self.backfillInserts(daemon).ids) == expected)
                        #expect(try Self.backfillInserts(daemon).ids.count == expected.count)
                        #expect(service.log.contains { $0.endpoint == .query && $0.status == 400 }, "split after a 400")
                    }
                }
            }
        }

        @Test("429 and 503 honour Retry-After; truncated and invalid bodies are retried")
        func faultsAreRetried() async throws {
            try await FDSNTestService.withService(searchLimit: 2000) { service, _ in
                try service.add(featuresOf: Self.catalogFixture)
                let range = try #require(service.timeRange)
                let end = range.lowerBound + 20 * 86_400_000
                let expected = service.count(matching: .init(startTime: range.lowerBound, endTime: end - 1))
                service.enqueueFaults([
                    .tooManyRequests(retryAfter: 1), .truncated(afterBytes: 700), .serviceUnavailable(retryAfter: nil),
                    .html(), .response(.text("{\"type\":\"FeatureCollection\",\"features\":[{\"id\":")),
                ])
                try await withTemporaryDirectory { dir in
                    let daemon = try await Quaked(
                        in: dir, feeds: [Self.feed], ["--config", try Self.config(in: dir, "backfill-attempts = 6").path])
                    defer { Task { try? await daemon.stop() } }
                    let result = try await quakectl(
                        [
                            "backfill", "--socket", daemon.socketPath, "--start", "\(range.lowerBound)", "--end", "\(end)",
                            "--catalog", service.baseURL,
                        ], timeout: .seconds(120))
                    #expect(result.status == 0, "\(result.stderr)")
                    #expect(service.pendingFaults == 0)
                    #expect(try Self.backfillInserts(daemon).ids.count == expected)
                    // The request after the 429 waited for its Retry-After (1 s).
                    let queries = service.log.filter { $0.endpoint == .query }
                    let tooMany = try #require(queries.firstIndex { $0.status == 429 })
                    let gap = queries[tooMany + 1].request.receivedAt - queries[tooMany].request.receivedAt
                    #expect(gap >= .milliseconds(950), "retried after \(gap)")
                    #expect(try daemon.withStore { try $0.checkIntegrity() } == [])
                }
            }
        }

        @Test("a window that keeps failing fails the job with a clear error; the windows done stay")
        func persistentFailureKeepsWindowsDone() async throws {
            try await FDSNTestService.withService(searchLimit: 400) { service, _ in
                try service.add(featuresOf: Self.catalogFixture)
                let range = try #require(service.timeRange)
                // Slow answers, so the test can break the service after the first windows.
                service.slowMode = (chunkSize: 64 * 1024, delay: .milliseconds(150))
                try await withTemporaryDirectory { dir in
                    let daemon = try await Quaked(
                        in: dir, feeds: [Self.feed], ["--config", try Self.config(in: dir).path])
                    defer { Task { try? await daemon.stop() } }
                    let follower = try startQuakectl(
                        [
                            "backfill", "--socket", daemon.socketPath, "--json", "--start", "\(range.lowerBound)",
                            "--end", "\(range.upperBound + 1)", "--catalog", service.baseURL,
                        ])
                    try await waitUntil(timeout: .seconds(60)) {
                        try daemon.withStore { try $0.backfillJob(id: 1)?.windowsDone ?? 0 } >= 2
                    }
                    service.failAlways = .serviceUnavailable(retryAfter: nil)
                    let status = try await follower.wait(timeout: .seconds(60))
                    #expect(status == 1)
                    #expect(follower.stderr.contains("backfill 1 failed"), "\(follower.stderr)")
                    #expect(follower.stderr.contains("503"), "\(follower.stderr)")
                    #expect(follower.stderr.contains("windows done stay imported"), "\(follower.stderr)")
                    let job = try #require(try daemon.withStore { try $0.backfillJob(id: 1) })
                    #expect(job.state == .failed)
                    #expect(job.windowsDone >= 2)
                    // Every event before the cursor is stored, none after it.
                    let before = service.events(matching: .init(startTime: range.lowerBound, endTime: job.cursor - 1))
                    let stored = Set(try Self.backfillInserts(daemon).ids)
                    #expect(stored == Set(before.map(\.id)))
                    // And the failure is 3 attempts at one window.
                    let failed = service.log.filter { $0.endpoint == .query && $0.status == 503 }
                    #expect(failed.count == 3)
                }
            }
        }

        @Test("kill -9 mid-job: the restarted daemon resumes at the next window, nothing imported twice")
        func resumesAfterKill() async throws {
            try await FDSNTestService.withService(searchLimit: 400) { service, _ in
                try service.add(featuresOf: Self.catalogFixture)
                let range = try #require(service.timeRange)
                let expected = service.count(matching: .init(startTime: range.lowerBound, endTime: range.upperBound))
                service.slowMode = (chunkSize: 16 * 1024, delay: .milliseconds(100))
                try await withTemporaryDirectory { dir in
                    let daemon = try await Quaked(
                        in: dir, feeds: [Self.feed], ["--config", try Self.config(in: dir).path])
                    defer { Task { try? await daemon.stop() } }
                    let started = try await quakectl(
                        [
                            "backfill", "--socket", daemon.socketPath, "--detach", "--start", "\(range.lowerBound)",
                            "--end", "\(range.upperBound + 1)", "--catalog", service.baseURL,
                        ])
                    #expect(started.status == 0, "\(started.stderr)")
                    #expect(started.stdout.hasPrefix("backfill 1 "), "\(started.stdout)")
                    try await waitUntil(timeout: .seconds(60)) {
                        try daemon.withStore { try $0.backfillJob(id: 1)?.windowsDone ?? 0 } >= 3
                    }
                    daemon.kill()
                    _ = try await daemon.stop()
                    let atKill = try #require(try daemon.withStore { try $0.backfillJob(id: 1) })
                    #expect(atKill.state == .running)
                    service.slowMode = nil
                    service.clearLog()
                    try await daemon.start()
                    try await waitUntil(timeout: .seconds(60)) {
                        try daemon.withStore { try $0.backfillJob(id: 1)?.state } == .done
                    }
                    // The first window after the restart starts at the cursor the store kept.
                    let firstWindow = try #require(Self.answeredWindows(service).first)
                    #expect(firstWindow.0 == atKill.cursor)
                    let inserted = try Self.backfillInserts(daemon).ids
                    #expect(inserted.count == expected)
                    #expect(Set(inserted).count == expected)
                    let done = try #require(try daemon.withStore { try $0.backfillJob(id: 1) })
                    #expect(done.eventsImported == expected)
                    #expect(try daemon.withStore { try $0.checkIntegrity() } == [])
                }
            }
        }

        @Test("--status lists jobs, --cancel stops one, Ctrl-C detaches while the job goes on")
        func statusCancelDetach() async throws {
            try await FDSNTestService.withService(searchLimit: 400) { service, _ in
                try service.add(featuresOf: Self.catalogFixture)
                let range = try #require(service.timeRange)
                service.slowMode = (chunkSize: 16 * 1024, delay: .milliseconds(100))
                try await withTemporaryDirectory { dir in
                    let daemon = try await Quaked(
                        in: dir, feeds: [Self.feed], ["--config", try Self.config(in: dir).path])
                    defer { Task { try? await daemon.stop() } }
                    let arguments = [
                        "backfill", "--socket", daemon.socketPath, "--start", "\(range.lowerBound)", "--end",
                        "\(range.upperBound + 1)", "--catalog", service.baseURL,
                    ]
                    // Job 1 follows until Ctrl-C, then detaches; job 2 queues behind it.
                    let follower = try startQuakectl(arguments)
                    try await waitUntil(timeout: .seconds(30)) {
                        try daemon.withStore { try $0.backfillJob(id: 1)?.windowsDone ?? 0 } >= 1
                    }
                    follower.signal(SIGINT)
                    #expect(try await follower.wait(timeout: .seconds(10)) == 0)
                    #expect(follower.stderr.contains("detached: backfill 1 goes on"), "\(follower.stderr)")
                    let second = try await quakectl(arguments + ["--detach", "--json"])
                    #expect(second.status == 0, "\(second.stderr)")
                    let queued = try JSONDecoder().decode(IOQuaked.Backfill.Reply.self, from: Data(second.stdout.utf8))
                    #expect(queued.job.id == 2 && queued.job.state == .queued)
                    let list = try await quakectl(["backfill", "--socket", daemon.socketPath, "--status", "--json"])
                    let jobs = try JSONDecoder().decode(IOQuaked.BackfillStatus.Reply.self, from: Data(list.stdout.utf8))
                    #expect(jobs.jobs.map(\.id) == [2, 1])
                    #expect(jobs.jobs.map(\.state) == [.queued, .running])
                    #expect(jobs.jobs[1].windowStart != nil && jobs.jobs[1].catalog == service.baseURL)
                    // The status text shows both.
                    let text = try await quakectl(["backfill", "--socket", daemon.socketPath, "--status"])
                    #expect(text.stdout.contains("backfill 1 running") && text.stdout.contains("backfill 2 queued"))
                    // Cancel the running job: it stops, and job 2 starts.
                    let cancelled = try await quakectl(["backfill", "--socket", daemon.socketPath, "--cancel", "1"])
                    #expect(cancelled.status == 0, "\(cancelled.stderr)")
                    #expect(cancelled.stdout.contains("backfill 1 cancelled"), "\(cancelled.stdout)")
                    try await waitUntil(timeout: .seconds(30)) {
                        try daemon.withStore { try $0.backfillJob(id: 2)?.state } == .running
                    }
                    let one = try #require(try daemon.withStore { try $0.backfillJob(id: 1) })
                    #expect(one.state == .cancelled && one.finishedAt != nil)
                    // Following job 2 again with --status 2 --follow, then cancelling it: exit 1.
                    let follow = try startQuakectl(["backfill", "--socket", daemon.socketPath, "--status", "2", "--follow"])
                    try await Task.sleep(for: .milliseconds(300))
                    _ = try await quakectl(["backfill", "--socket", daemon.socketPath, "--cancel", "2"])
                    #expect(try await follow.wait(timeout: .seconds(20)) == 1)
                    #expect(follow.stderr.contains("backfill 2 was cancelled"), "\(follow.stderr)")
                    // An unknown job is a clear error.
                    let unknown = try await quakectl(["backfill", "--socket", daemon.socketPath, "--cancel", "99"])
                    #expect(unknown.status == 65)
                    #expect(unknown.stderr.contains("no backfill job 99"), "\(unknown.stderr)")
                }
            }
        }

        @Test("bad arguments exit 64 naming the flag; a URL that is no FDSN service fails the job clearly")
        func badInput() async throws {
            try await FDSNTestService.withService(searchLimit: 400) { service, server in
                try await withTemporaryDirectory { dir in
                    let daemon = try await Quaked(
                        in: dir, feeds: [Self.feed], ["--config", try Self.config(in: dir).path])
                    defer { Task { try? await daemon.stop() } }
                    let socket = ["--socket", daemon.socketPath]
                    for (arguments, message) in [
                        (["--start", "yesterday-ish"], "--start"),
                        (["--start", "2024-02-01", "--end", "2024-01-01"], "--start must be before --end"),
                        (["--start", "2024-01-01", "--end", "tomorrow"], "--end"),
                        (["--start", "2024-01-01", "--near", "10,20", "--box", "1,2,3,4"], "--box and --near"),
                        (["--start", "2024-01-01", "--near", "100,20"], "--near"),
                        (["--start", "2024-01-01", "--min-mag", "nan"], "--min-mag"),
                        (["--start", "2024-01-01", "--catalog", "ftp://example.org/"], "--catalog"),
                        ([], "--start"),
                        (["--status", "--cancel", "1"], "--status and --cancel"),
                    ] {
                        let result = try await quakectl(["backfill"] + socket + arguments)
                        #expect(result.status == 64, "\(arguments): \(result.stderr)")
                        #expect(result.stderr.contains(message), "\(arguments): \(result.stderr)")
                    }
                    // A server that answers 404 where the service should be.
                    let result = try await quakectl(
                        ["backfill"] + socket + ["--start", "2019-01-01", "--end", "2019-02-01", "--catalog", server.url("/nothing/")])
                    #expect(result.status == 1)
                    #expect(result.stderr.contains("404"), "\(result.stderr)")
                    #expect(result.stderr.contains("FDSN"), "\(result.stderr)")
                    // The daemon refuses bad parameters from any client, too.
                    let reply = try UnixSocketClient(path: daemon.socketPath).result(
                        IOQuaked.Backfill.self, .init(start: 100, end: 50))
                    let refused = try #require(reply.error, "\(reply)")
                    #expect(refused.name == OrgVarlinkService.InvalidParameter.name)
                    #expect(try OrgVarlinkService.InvalidParameter.decode(json: refused.parameters).parameter == "end")
                    #expect(try daemon.withStore { try $0.count() } == 8, "only the feed's quakes")
                }
            }
        }
    }
}
