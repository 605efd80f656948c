import Foundation
import QuakeFeed
import QuakeProtocol
import QuakeStore
import QuakeTestSupport
import Varlink
import Testing

/// The incremental catalog sync (`catalog = URL`) against a real FDSN service over HTTP: updates,
/// new events, upstream deletions delivered to a filtered watch, and the position across a restart.
extension ClientEndToEnd {
    @Suite("Catalog sync") struct CatalogSyncTests {
        static let day = Fixtures.usgs("abruzzi__earthquake-viz__all_day.geojson")
        static let week = Fixtures.usgs("abruzzi__earthquake-viz__all_week.geojson")

        static func writeConfig(_ url: URL, catalog: String?) throws {
            try """
            backfill-pause = 5ms
            retry-initial-delay = 50ms
            retry-max-delay = 200ms
            catalog-interval = 2s
            catalog-overlap = 1s
            \(catalog.map { "catalog = \($0)" } ?? "")

            """.write(to: url, atomically: true, encoding: .utf8)
        }

        @Test("updates and new events come in, deletions leave the store and reach a filtered watch, the position survives a restart")
        func syncsUpdatesAndDeletions() async throws {
            try await FDSNTestService.withService(searchLimit: 20000) { service, _ in
                // The catalog has the feed's events, and one more of the same day the feed missed.
                try service.add(featuresOf: Self.day)
                let dayDocument = try FeedDocument(contentsOf: Self.day)
                let dayIDs = Set(dayDocument.ids)
                let span = try #require(service.timeRange)
                let weekDocument = try FeedDocument(contentsOf: Self.week)
                let extra = try #require(
                    weekDocument.features.first { feature in
                        guard let id = feature["id"] as? String, !dayIDs.contains(id),
                            let time = (feature["properties"] as? [String: Any])?["time"] as? Int64
                        else { return false }
                        return span.contains(time)
                    })
                let extraID = extra["id"] as! String
                // Added upstream recently: within the first run's catalog-since (1d).
                var recent = extra
                var properties = extra["properties"] as! [String: Any]
                properties["updated"] = Int64(Date().timeIntervalSince1970 * 1000) - 3_600_000
                recent["properties"] = properties
                try service.add(feature: JSONSerialization.data(withJSONObject: recent).map { $0 })
                // The deleted event: the largest, so a --min-mag watch holds it.
                let largest = try #require(
                    dayDocument.features.max {
                        (($0["properties"] as? [String: Any])?["mag"] as? Double ?? -9)
                            < (($1["properties"] as? [String: Any])?["mag"] as? Double ?? -9)
                    })
                let deletedID = largest["id"] as! String
                let deletedMag = (largest["properties"] as! [String: Any])["mag"] as! Double
                let revisedID = try #require(dayDocument.ids.first { $0 != deletedID })
                try await withTemporaryDirectory { dir in
                    let config = dir.appendingPathComponent("quaked.conf")
                    try Self.writeConfig(config, catalog: nil)
                    let daemon = try await Quaked(in: dir, feeds: [Self.day], ["--config", config.path])
                    defer { Task { try? await daemon.stop() } }
                    #expect(try daemon.withStore { try $0.count() } == dayIDs.count)
                    // A filtered watch holding the deleted quake.
                    let cache = dir.appendingPathComponent("watch.sqlite").path
                    let watch = try startQuakectl([
                        "watch", "--json", "--heartbeat", "1", "--socket", daemon.socketPath, "--cache", cache,
                        "--min-mag", "\(deletedMag)",
                    ])
                    defer { watch.signal(SIGKILL) }
                    try await waitUntil(timeout: .seconds(20)) { watch.stdout.contains("\"snapshot\"") || watch.stdout.contains("\"ready\"") || watch.stdout.contains("\"caught-up\"") || !watch.stdout.isEmpty }
                    // Upstream: the largest quake is deleted, another revised.
                    let now = Int64(Date().timeIntervalSince1970 * 1000)
                    try service.markDeleted(id: deletedID, updated: now)
                    try service.setMagnitude(id: revisedID, mag: 5.55, updated: now)
                    // Turn the sync on with a reload: a new URL runs at once.
                    try Self.writeConfig(config, catalog: service.baseURL)
                    let reload = try await quakectl(["reload", "--socket", daemon.socketPath])
                    #expect(reload.status == 0, "\(reload.stderr)")
                    try await waitUntil(timeout: .seconds(30)) {
                        try daemon.withStore { try $0.quake(id: deletedID) == nil && $0.quake(id: extraID) != nil }
                    }
                    #expect(try daemon.withStore { try $0.quake(id: revisedID)?.mag } == 5.55)
                    // History: catalog transactions, the query asking for updates and deletions.
                    let transactions = try daemon.withStore {
                        try $0.history(after: 0, limit: 1000, maxChanges: 100_000).transactions.filter {
                            $0.author == .catalog
                        }
                    }
                    let changes = transactions.flatMap(\.changes)
                    let deletion = try #require(changes.first { $0.quakeId == deletedID })
                    #expect(deletion.kind == .delete && deletion.reason == .deletedUpstream)
                    #expect(changes.contains { $0.quakeId == revisedID && $0.kind == .update })
                    #expect(changes.contains { $0.quakeId == extraID && $0.kind == .insert })
                    #expect(changes.count == 3, "only what changed: \(changes.map { "\($0.kind):\($0.quakeId)" })")
                    let source = try #require(transactions.first?.source)
                    #expect(source.hasPrefix(service.queryURL + "?"))
                    #expect(source.contains("includedeleted=true") && source.contains("updatedafter="))
                    // The filtered watch was told: the quake left its cache.
                    try await waitUntil(timeout: .seconds(20)) {
                        let output = try? WatchOutput(watch.stdout)
                        return output?.lines.contains { $0.change?.quakeId == deletedID && $0.change?.kind == .delete }
                            == true
                    }
                    let line = try #require(
                        try WatchOutput(watch.stdout).lines.first { $0.change?.quakeId == deletedID })
                    #expect(line.change?.reason == .deletedUpstream)
                    // GetStatus shows the sync.
                    let status = try await quakectl(["status", "--socket", daemon.socketPath, "--json"])
                    let reply = try JSONDecoder().decode(IOQuaked.GetStatus.Reply.self, from: Data(status.stdout.utf8))
                    let catalog = try #require(reply.catalog)
                    #expect(catalog.url == service.baseURL && catalog.lastSuccess != nil && catalog.lastError == nil)
                    let text = try await quakectl(["status", "--socket", daemon.socketPath])
                    #expect(text.stdout.contains("catalog"), "\(text.stdout)")
                    let metrics = try await quakectl(["metrics", "--socket", daemon.socketPath])
                    #expect(metrics.stdout.contains("quaked_catalog_runs_total{result=\"success\"} "))
                    #expect(metrics.stdout.contains("quaked_catalog_last_success_timestamp_seconds "))
                    // A lagging copy of the feed (it still lists the deleted quake) does not bring it back.
                    let refresh = try await quakectl(["refresh", "--socket", daemon.socketPath])
                    #expect(refresh.status == 0, "\(refresh.stderr)")
                    #expect(try daemon.withStore { try $0.quake(id: deletedID) } == nil)
                    // Restart: the next run asks for updates after the kept position, less the overlap.
                    try await daemon.stop()
                    let position = try #require(
                        try daemon.withStore { try $0.catalogPosition(url: service.baseURL) })
                    service.clearLog()
                    try await daemon.start()
                    try await waitUntil(timeout: .seconds(30)) {
                        service.log.contains { $0.endpoint == .query && $0.status == 200 }
                    }
                    let first = try #require(service.log.first { $0.endpoint == .query })
                    #expect(first.query?.updatedAfter == position - 1000)
                    #expect(first.query?.includeDeleted == .include)
                    #expect(try daemon.withStore { try $0.checkIntegrity() } == [])
                }
            }
        }

        /// A backfill of the 4,312 events of 2019 with a search limit of 500, then `catalog` set to
        /// the same service by a reload. Returns the daemon, the job, and the service's log of the
        /// catalog's first run (from the reload to its recorded position).
        static func firstRunAfterBackfill(
            _ service: FDSNTestService, in dir: URL, config extra: String,
            beforeCatalog: (BackfillJobRecord) async throws -> Void = { _ in }
        ) async throws -> (daemon: Quaked, job: BackfillJobRecord, log: [FDSNTestService.LoggedRequest], reloadedAt: Int64, doneAt: Int64) {
            let config = dir.appendingPathComponent("quaked.conf")
            try Self.writeConfig(config, catalog: nil)
            try extra.appendTo(config)
            let daemon = try await Quaked(in: dir, feeds: [BackfillTests.feed], ["--config", config.path])
            do {
                let (job, log, reloadedAt, doneAt) = try await Self.backfillThenCatalog(
                    service, daemon: daemon, config: config, extra: extra, beforeCatalog: beforeCatalog)
                return (daemon, job, log, reloadedAt, doneAt)
            } catch {
                _ = try? await daemon.stop()
                throw error
            }
        }

        private static func backfillThenCatalog(
            _ service: FDSNTestService, daemon: Quaked, config: URL, extra: String,
            beforeCatalog: (BackfillJobRecord) async throws -> Void
        ) async throws -> (job: BackfillJobRecord, log: [FDSNTestService.LoggedRequest], reloadedAt: Int64, doneAt: Int64) {
            let range = try #require(service.timeRange)
            let backfill = try await quakectl(
                [
                    "backfill", "--socket", daemon.socketPath, "--json", "--start", "\(range.lowerBound)", "--end",
                    "\(range.upperBound + 1)", "--catalog", service.baseURL,
                ], timeout: .seconds(180))
            #expect(backfill.status == 0, "\(backfill.stderr)")
            let job = try #require(try daemon.withStore { try $0.backfillJobs().first })
            #expect(job.state == .done && job.eventsImported == 4312)
            try await beforeCatalog(job)
            service.clearLog()
            try Self.writeConfig(config, catalog: service.baseURL)
            try extra.appendTo(config)
            let reloadedAt = Int64(Date().timeIntervalSince1970 * 1000)
            let reload = try await quakectl(["reload", "--socket", daemon.socketPath])
            #expect(reload.status == 0, "\(reload.stderr)")
            try await waitUntil(timeout: .seconds(60)) {
                try daemon.withStore { try $0.catalogPosition(url: service.baseURL) } != nil
            }
            let doneAt = Int64(Date().timeIntervalSince1970 * 1000)
            return (job, service.log, reloadedAt, doneAt)
        }

        @Test("after a large backfill, a new catalog's first run asks what changed in the last catalog-since: one count, one query")
        func politeFirstRun() async throws {
            try await FDSNTestService.withService(searchLimit: 500) { service, _ in
                try service.add(featuresOf: BackfillTests.catalogFixture)
                try await withTemporaryDirectory { dir in
                    // catalog-since left at its default, 1d.
                    let (daemon, job, log, reloadedAt, doneAt) = try await Self.firstRunAfterBackfill(
                        service, in: dir, config: "")
                    defer { Task { try? await daemon.stop() } }
                    // The job took a window per 250 events or so; asking for every event updated since
                    // the oldest stored one, as the first run did before, took as many again.
                    #expect(job.windowsDone >= 4312 / 500)
                    let queries = log.filter { $0.endpoint == .query }
                    let counts = log.filter { $0.endpoint == .count }
                    #expect(queries.count == 1 && counts.count == 1, "\(log.map { "\($0.endpoint) \($0.query.map { "\($0)" } ?? "")" })")
                    #expect(log.count < job.windowsDone)
                    // updatedafter = the run's start less 1d: between the reload and the run's end.
                    let day: Int64 = 86_400_000
                    for request in log {
                        let after = try #require(request.query?.updatedAfter)
                        #expect(after >= reloadedAt - day && after <= doneAt - day, "updatedafter \(after)")
                        #expect(request.query?.includeDeleted == .include)
                    }
                    // Over every event time the store holds: the feed's 2017 events to now.
                    let query = try #require(queries.first?.query)
                    let oldest = try #require(try daemon.withStore { try $0.eventTimeSpan()?.oldest })
                    #expect(query.startTime == oldest)
                    #expect(queries.first?.matched == 0)
                    #expect(try daemon.withStore { try $0.count() } == 4312 + 8)
                }
            }
        }

        @Test("over times a backfill fetched, a first run asks from the job's creation when that is earlier: an update made after its windows is not missed")
        func firstRunAfterOldBackfill() async throws {
            try await FDSNTestService.withService(searchLimit: 500) { service, _ in
                try service.add(featuresOf: BackfillTests.catalogFixture)
                let revised = try #require(service.events(matching: FDSNTestService.Query()).dropFirst(1000).first)
                try await withTemporaryDirectory { dir in
                    // A short catalog-since, so the job (made seconds before) is older than it.
                    let (daemon, job, log, reloadedAt, doneAt) = try await Self.firstRunAfterBackfill(
                        service, in: dir, config: "catalog-since = 2s\n",
                        beforeCatalog: { _ in
                            // Revised upstream after the job fetched it, then more than catalog-since passes.
                            try service.setMagnitude(
                                id: revised.id, mag: 6.66, updated: Int64(Date().timeIntervalSince1970 * 1000))
                            try await Task.sleep(for: .seconds(3))
                        })
                    defer { Task { try? await daemon.stop() } }
                    #expect(try daemon.withStore { try $0.quake(id: revised.id)?.mag } == 6.66)
                    let queries = log.filter { $0.endpoint == .query }.compactMap(\.query)
                    // Three queries: before the job's times and after them from catalog-since, the
                    // job's times from its creation less the overlap (1s). Each with its count.
                    #expect(log.count == 6, "\(log.map { "\($0.endpoint) \($0.query.map { "\($0)" } ?? "")" })")
                    #expect(log.count < job.windowsDone)
                    let inJob = try #require(queries.first { $0.startTime == job.startTime })
                    #expect(inJob.endTime == job.endTime - 1)
                    #expect(inJob.updatedAfter == job.createdAt - 1000)
                    for query in queries where query.startTime != job.startTime {
                        let after = try #require(query.updatedAfter)
                        #expect(after >= reloadedAt - 2000 && after <= doneAt - 2000)
                    }
                }
            }
        }

        @Test("a catalog that fails is reported in status and retried; the store is untouched")
        func failingCatalog() async throws {
            try await FDSNTestService.withService { service, _ in
                try service.add(featuresOf: Self.day)
                service.failAlways = .response(.status(500, body: "broken\n"))
                try await withTemporaryDirectory { dir in
                    let config = dir.appendingPathComponent("quaked.conf")
                    try Self.writeConfig(config, catalog: service.baseURL)
                    try "backfill-attempts = 2\n".appendTo(config)
                    let daemon = try await Quaked(in: dir, feeds: [Self.day], ["--config", config.path])
                    defer { Task { try? await daemon.stop() } }
                    var seen: Any?
                    do {
                        try await waitUntil(timeout: .seconds(60)) {
                            let status = try UnixSocketClient(path: daemon.socketPath).call(IOQuaked.GetStatus.self, .init())
                            seen = status.catalog
                            return status.catalog?.lastError?.contains("500") == true
                        }
                    } catch {
                        Issue.record("the catalog status never showed the failure: \(String(describing: seen))")
                        throw error
                    }
                    #expect(try daemon.withStore { try $0.count() } == 146)
                    #expect(try daemon.withStore { try $0.catalogPosition(url: service.baseURL) } == nil)
                    // Once the service answers again, the next run succeeds.
                    service.failAlways = nil
                    try await waitUntil(timeout: .seconds(60)) {
                        try daemon.withStore { try $0.catalogPosition(url: service.baseURL) } != nil
                    }
                }
            }
        }

        @Test("bad catalog settings stop quaked with 78, naming the key")
        func badSettings() async throws {
            for (line, key) in [
                ("catalog = ftp://example.org/", "catalog"), ("catalog = http://example.org/a b/", "catalog"),
                ("catalog-region = 1,2", "catalog-region"),
                ("catalog-region = 95,0,10", "catalog-region"), ("catalog-min-magnitude = big", "catalog-min-magnitude"),
                ("catalog-interval = 0s", "catalog-interval"), ("backfill-attempts = 0", "backfill-attempts"),
            ] {
                try await withTemporaryDirectory { dir in
                    let config = dir.appendingPathComponent("quaked.conf")
                    try (line + "\n").write(to: config, atomically: true, encoding: .utf8)
                    let result = try await ChildProcess.run(
                        BuiltProducts.path("quaked"), ["--config", config.path, "--check-config"])
                    #expect(result.status == 78, "\(line)")
                    #expect(result.stderr.contains(key), "\(line): \(result.stderr)")
                }
            }
        }
    }
}

extension String {
    fileprivate func appendTo(_ url: URL) throws {
        let handle = try FileHandle(forWritingTo: url)
        defer { try? handle.close() }
        try handle.seekToEnd()
        try handle.write(contentsOf: Data(utf8))
    }
}
