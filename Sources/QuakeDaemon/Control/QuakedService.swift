import Foundation
import Logging
import NIOCore
import QuakeFeed
import QuakeModel
import QuakeProtocol
import QuakeStore
import Varlink

/// io.quaked: each method takes its parameters already decoded (strictly, by the generated
/// code), calls the store, the scheduler or the reloader, and replies with the generated types.
/// Failures are the interface's typed errors; no call can stop the daemon.
public struct QuakedService: IOQuaked.Service {
    let store: QuakeStore
    let scheduler: FeedScheduler
    let reloader: Reloader
    let broadcaster: ChangeBroadcaster
    let metrics: MetricsExporter
    let backfills: BackfillRunner
    let catalogSync: CatalogSync
    /// The configured sources' runs (`Refresh(source:)`, `Backfill(source:)`).
    let sources: SourceSyncs
    let logger: Logger

    init(
        store: QuakeStore, scheduler: FeedScheduler, reloader: Reloader, broadcaster: ChangeBroadcaster,
        metrics: MetricsExporter, backfills: BackfillRunner, catalogSync: CatalogSync, sources: SourceSyncs,
        logger: Logger
    ) {
        self.sources = sources
        self.backfills = backfills
        self.catalogSync = catalogSync
        self.store = store
        self.scheduler = scheduler
        self.reloader = reloader
        self.broadcaster = broadcaster
        self.metrics = metrics
        self.logger = logger
    }

    public func getStatus(
        _ parameters: IOQuaked.GetStatus.Parameters, _ call: VarlinkCallContext<IOQuaked.GetStatus.Reply>
    ) async throws {
        try await call.reply(try status())
    }

    func status() throws -> IOQuaked.GetStatus.Reply {
        let path = store.path
        let bytes = ["", "-wal"].reduce(0) { total, suffix in
            total + ((try? FileManager.default.attributesOfItem(atPath: path + suffix)[.size] as? Int) ?? 0)
        }
        let head = try store.head()
        return IOQuaked.GetStatus.Reply(
            version: QuakedVersion.string, storeId: store.storeID, headToken: Int(head),
            oldestToken: Int(try store.oldestToken()), quakeCount: try store.count(), databaseBytes: bytes,
            lastChange: try store.lastChange().map(IOQuaked.FeedStatus.milliseconds),
            feeds: scheduler.statuses().map(IOQuaked.FeedStatus.init), subscribers: broadcaster.count,
            clients: try store.clients().map {
                IOQuaked.ClientStatus(
                    name: $0.name, token: Int($0.token), lag: Int(max(0, head - $0.token)), lastSeen: Int($0.lastSeen),
                    lastError: $0.lastError, lastErrorAt: $0.lastErrorAt.map(Int.init))
            }, catalog: catalogSync.describe(),
            backfills: try store.unfinishedBackfillJobs().map(backfills.describe),
            sources: try store.interfaceSources(), association: try associationStatus())
    }

    /// GetStatus's `association`: the store's counts and the windows in force; nil before the
    /// store follows sources.
    func associationStatus() throws -> IOQuaked.AssociationStatus? {
        guard let counts = try store.associationCounts() else { return nil }
        let association = reloader.configuration.association
        return IOQuaked.AssociationStatus(
            timeSeconds: Double(association.associateTimeMilliseconds) / 1000,
            distanceKm: association.associateDistanceKm, events: counts.events, reports: counts.reports,
            joined: Int(counts.joined), new: Int(counts.created), merged: Int(counts.merged),
            split: Int(counts.split))
    }

    public func refresh(_ parameters: IOQuaked.Refresh.Parameters, _ call: VarlinkCallContext<IOQuaked.Refresh.Reply>)
        async throws
    {
        if parameters.feed != nil, parameters.source != nil {
            throw OrgVarlinkService.InvalidParameter(parameter: "source")
        }
        if let name = parameters.source {
            guard let sync = sources.sync(named: name) else { throw IOQuaked.NoSuchSource(source: name) }
            let outcome = await sync.refresh()
            try await call.reply(
                .init(
                    results: [], headToken: Int(try store.head()),
                    sourceResults: [IOQuaked.SourceRefreshResult(source: name, outcome: outcome)]))
            return
        }
        let results: [(FeedStatus, PullResult)]
        var sourceResults: [IOQuaked.SourceRefreshResult]?
        do {
            if parameters.feed != nil {
                results = try await scheduler.refresh(feed: parameters.feed)
            } else {
                // Every feed and every source, at once (no feed is fine when a source is configured).
                let scheduler = scheduler
                let anySource = !sources.syncs.isEmpty
                async let feeds: [(FeedStatus, PullResult)] = {
                    do {
                        return try await scheduler.refresh(feed: nil)
                    } catch is UnknownFeed where anySource {
                        return []
                    }
                }()
                sourceResults = await refreshEverySource()
                results = try await feeds
            }
        } catch let error as UnknownFeed {
            throw IOQuaked.NoSuchFeed(feed: error.name)
        }
        try await call.reply(
            .init(
                results: results.map { IOQuaked.RefreshResult(status: $0.0, result: $0.1) },
                headToken: Int(try store.head()), sourceResults: sourceResults))
    }

    /// Runs every configured source now, together (each joining a run in progress), in
    /// configuration order; nil when none is configured.
    private func refreshEverySource() async -> [IOQuaked.SourceRefreshResult]? {
        let syncs = sources.syncs
        guard !syncs.isEmpty else { return nil }
        let outcomes = await withTaskGroup(of: (Int, SourceSync.Outcome).self) { group in
            for (index, sync) in syncs.enumerated() {
                group.addTask { (index, await sync.refresh()) }
            }
            var outcomes: [Int: SourceSync.Outcome] = [:]
            for await (index, outcome) in group { outcomes[index] = outcome }
            return outcomes
        }
        return syncs.indices.compactMap { index in
            outcomes[index].map { IOQuaked.SourceRefreshResult(source: syncs[index].name, outcome: $0) }
        }
    }

    public func subscribe(
        _ parameters: IOQuaked.Subscribe.Parameters, _ call: VarlinkCallContext<IOQuaked.Subscribe.Reply>
    ) async throws {
        try call.requireMore()
        if let client = parameters.client { try Self.validate(client: client) }
        let heartbeat = IOQuaked.Defaults.heartbeat(parameters.heartbeatSeconds)
        let storeID = store.storeID
        let filter = try QuakeFilter.from(parameters.filter)
        // A filtered subscriber's changes go through this task, which asks the store whether they
        // hold anything the filter sends; unfiltered ones may be sent straight from the event loop.
        try await broadcaster.withSubscription(
            heartbeat: heartbeat, sendNow: filter == nil ? call.trySend : nil, eventLoop: call.eventLoop
        ) { subscription in
            // Registered before the head is read: nothing committed after this read is missed.
            let announced = try store.head()
            if let client = parameters.client { try await store.touch(client: client, token: announced) }
            // A subscriber that does not take its replies is dropped (the server's write timeout),
            // never queued for: the subscription holds only the latest head.
            try await call.reply(frame: ChangeBroadcaster.frame(.subscribed, storeID: storeID, head: announced))
            subscription.markReady(announced: announced)
            var checked = announced
            while let event = await subscription.next() {
                defer { subscription.finishedWriting() }
                switch event {
                case .change(let change):
                    if let filter {
                        let sends = try Self.history {
                            try store.sendsChanges(after: checked, through: change.head, filter: filter)
                        }
                        checked = max(checked, change.head)
                        if !sends { continue }
                    }
                    try await call.reply(frame: change.frame)
                case .heartbeat:
                    let head = max(subscription.lastSent, try store.head())
                    try await call.reply(frame: ChangeBroadcaster.frame(.heartbeat, storeID: storeID, head: head))
                }
            }
        }
    }

    public func fetchHistory(
        _ parameters: IOQuaked.FetchHistory.Parameters, _ call: VarlinkCallContext<IOQuaked.FetchHistory.Reply>
    ) async throws {
        try requireStore(parameters.storeId)
        let after = HistoryToken(parameters.after)
        let filter = try QuakeFilter.from(parameters.filter)
        if let client = parameters.client {
            try Self.validate(client: client)
            try await store.acknowledge(client: client, token: after)
        }
        let limit = IOQuaked.Defaults.historyLimit(parameters.limit)
        let maxChanges = IOQuaked.Defaults.historyMaxChanges(parameters.maxChanges)
        // Called with more: page after page, each read once the one before has been sent (the
        // write waits for the socket, so a client that reads slowly holds the stream back and at
        // most one page is in memory), until the page that reaches the head.
        var next = after
        while true {
            var reply = IOQuaked.FetchHistory.ReplyWriter(filtered: filter != nil)
            let page = try Self.history {
                try store.visitHistory(after: next, limit: limit, maxChanges: maxChanges, filter: filter, &reply)
            }
            let continues = call.more && page.hasMore
            try await call.reply(frame: reply.frame(page, continues: continues), continues: continues)
            guard continues else { return }
            try Task.checkCancellation()
            next = page.nextAfter
        }
    }

    public func acknowledge(
        _ parameters: IOQuaked.Acknowledge.Parameters, _ call: VarlinkCallContext<IOQuaked.Acknowledge.Reply>
    ) async throws {
        try Self.validate(client: parameters.client)
        if let error = parameters.error, error.count > 1000 {
            throw OrgVarlinkService.InvalidParameter(parameter: "error")
        }
        try await store.acknowledge(
            client: parameters.client, token: HistoryToken(parameters.token), error: parameters.error)
        try await call.reply(.init())
    }

    public func snapshot(_ parameters: IOQuaked.Snapshot.Parameters, _ call: VarlinkCallContext<IOQuaked.Snapshot.Reply>)
        async throws
    {
        try call.requireMore()
        let size = IOQuaked.Defaults.snapshotPageSize(parameters.pageSize)
        let filter = try QuakeFilter.from(parameters.filter)
        let snapshot = try store.snapshot()
        defer { snapshot.close() }
        var after: String?
        while true {
            try Task.checkCancellation()
            let page = try snapshot.page(after: after, limit: size, filter: filter)
            let last = page.count < size
            try await call.reply(
                .init(storeId: snapshot.storeID, token: Int(snapshot.token), quakes: page.map(IOQuaked.Quake.init)),
                continues: !last)
            if last { return }
            after = page.last?.id
        }
    }

    public func query(_ parameters: IOQuaked.Query.Parameters, _ call: VarlinkCallContext<IOQuaked.Query.Reply>)
        async throws
    {
        if let near = parameters.near {
            guard (-90...90).contains(near.lat) else { throw OrgVarlinkService.InvalidParameter(parameter: "near.lat") }
            guard (-180...180).contains(near.lon) else {
                throw OrgVarlinkService.InvalidParameter(parameter: "near.lon")
            }
            guard near.radiusKm >= 0 else { throw OrgVarlinkService.InvalidParameter(parameter: "near.radiusKm") }
        }
        if let limit = parameters.limit, limit < 0 { throw OrgVarlinkService.InvalidParameter(parameter: "limit") }
        var query = QuakeQuery()
        query.filter = try QuakeFilter.from(parameters.filter)
        let order: QuakeQuery.Order =
            switch parameters.order {
            case .magnitude: .magnitude
            case .time, nil: .time
            }
        query.minMagnitude = parameters.minMagnitude
        query.since = parameters.since.map(Int64.init)
        query.type = parameters.type
        query.near = parameters.near.map { QuakeQuery.Near(lat: $0.lat, lon: $0.lon, radiusKm: $0.radiusKm) }
        query.limit = min(parameters.limit ?? 1000, 100_000)
        query.order = order
        let result = try store.query(query)
        try await call.reply(
            .init(quakes: result.quakes.map(IOQuaked.Quake.init), total: result.total, headToken: Int(result.head)))
    }

    public func get(_ parameters: IOQuaked.Get.Parameters, _ call: VarlinkCallContext<IOQuaked.Get.Reply>) async throws {
        guard let quake = try store.quake(id: parameters.id) else { throw IOQuaked.NoSuchQuake(id: parameters.id) }
        try await call.reply(.init(quake: IOQuaked.Quake(quake)))
    }

    public func getReports(
        _ parameters: IOQuaked.GetReports.Parameters, _ call: VarlinkCallContext<IOQuaked.GetReports.Reply>
    ) async throws {
        try await call.reply(.init(reports: try store.interfaceReports(ofEvent: parameters.id)))
    }

    public func delete(_ parameters: IOQuaked.Delete.Parameters, _ call: VarlinkCallContext<IOQuaked.Delete.Reply>)
        async throws
    {
        try requireAdministrator(call.peer)
        let report = try await store.delete(ids: parameters.ids)
        if let token = report.token {
            logger.info(
                "deleted by request",
                metadata: [
                    "history.token": "\(token)", "quakes": "\(report.deleted.count)",
                    "peer": "\(call.peer.map { "\($0)" } ?? "?")",
                ])
        }
        try await call.reply(.init(token: report.token.map(Int.init), deleted: report.deleted, notFound: report.notFound))
    }

    public func reload(_ parameters: IOQuaked.Reload.Parameters, _ call: VarlinkCallContext<IOQuaked.Reload.Reply>)
        async throws
    {
        try requireAdministrator(call.peer)
        do {
            try await reloader.reload()
        } catch {
            throw IOQuaked.ReloadFailed(QuakedError(error))
        }
        try await call.reply(.init())
    }

    public func metrics(_ parameters: IOQuaked.Metrics.Parameters, _ call: VarlinkCallContext<IOQuaked.Metrics.Reply>)
        async throws
    {
        try await call.reply(.init(text: metrics.text()))
    }

    // MARK: Backfill

    public func backfill(_ parameters: IOQuaked.Backfill.Parameters, _ call: VarlinkCallContext<IOQuaked.Backfill.Reply>)
        async throws
    {
        try requireAdministrator(call.peer)
        let now = Int(QuakeTime.now())
        let start = parameters.start
        let end = parameters.end ?? now
        guard start >= 0 else { throw OrgVarlinkService.InvalidParameter(parameter: "start") }
        guard end > start else { throw OrgVarlinkService.InvalidParameter(parameter: "end") }
        if let m = parameters.minMagnitude, !(m.isFinite && (-2...10).contains(m)) {
            throw OrgVarlinkService.InvalidParameter(parameter: "minMagnitude")
        }
        var region: CatalogRegion?
        if let near = parameters.near {
            guard (-90...90).contains(near.lat) else { throw OrgVarlinkService.InvalidParameter(parameter: "near.lat") }
            guard (-180...180).contains(near.lon) else { throw OrgVarlinkService.InvalidParameter(parameter: "near.lon") }
            guard near.radiusKm > 0, near.radiusKm <= 20_038 else {
                throw OrgVarlinkService.InvalidParameter(parameter: "near.radiusKm")
            }
            region = .near(lat: near.lat, lon: near.lon, radiusKm: near.radiusKm)
        }
        if let box = parameters.box {
            guard parameters.near == nil else { throw OrgVarlinkService.InvalidParameter(parameter: "box") }
            guard (-90...90).contains(box.minLat), (-90...90).contains(box.maxLat), box.minLat <= box.maxLat else {
                throw OrgVarlinkService.InvalidParameter(parameter: "box.minLat")
            }
            guard (-180...180).contains(box.minLon), (-180...180).contains(box.maxLon), box.minLon != box.maxLon else {
                throw OrgVarlinkService.InvalidParameter(parameter: "box.minLon")
            }
            region = .box(minLat: box.minLat, maxLat: box.maxLat, minLon: box.minLon, maxLon: box.maxLon)
        }
        var minMagnitude = parameters.minMagnitude
        let catalog: CatalogService
        if let name = parameters.source {
            guard parameters.catalog == nil else { throw OrgVarlinkService.InvalidParameter(parameter: "source") }
            guard let sync = sources.sync(named: name) else { throw IOQuaked.NoSuchSource(source: name) }
            // The source's URL; its min-magnitude and region unless the call sets its own.
            let source = sync.currentSettings.source
            catalog = source.service
            minMagnitude = minMagnitude ?? source.minMagnitude
            if region == nil { region = source.region }
        } else if let text = parameters.catalog {
            guard let parsed = try? CatalogService(parsing: text) else {
                throw OrgVarlinkService.InvalidParameter(parameter: "catalog")
            }
            catalog = parsed
        } else {
            catalog = backfills.defaultCatalog
        }
        let job = try await store.createBackfillJob(
            catalog: catalog.description, start: Int64(start), end: Int64(end), minMagnitude: minMagnitude,
            region: region, span: Int64(end - start), source: parameters.source)
        logger.info(
            "backfill job created",
            metadata: [
                "backfill.id": "\(job.id)", "backfill.catalog": "\(catalog)",
                "backfill.source": "\(parameters.source ?? "usgs")", "peer": "\(call.peer.map { "\($0)" } ?? "?")",
            ])
        backfills.enqueued()
        if call.more {
            try await follow(job.id) { try await call.reply(.init(job: $0), continues: $1) }
        } else {
            try await call.reply(.init(job: backfills.describe(job)))
        }
    }

    public func backfillStatus(
        _ parameters: IOQuaked.BackfillStatus.Parameters, _ call: VarlinkCallContext<IOQuaked.BackfillStatus.Reply>
    ) async throws {
        guard let id = parameters.id else {
            try await call.reply(.init(jobs: try store.backfillJobs(limit: 100).map(backfills.describe)))
            return
        }
        guard let job = try store.backfillJob(id: Int64(id)) else { throw IOQuaked.NoSuchBackfill(id: id) }
        if call.more {
            try await follow(job.id) { try await call.reply(.init(jobs: [$0]), continues: $1) }
        } else {
            try await call.reply(.init(jobs: [backfills.describe(job)]))
        }
    }

    public func backfillCancel(
        _ parameters: IOQuaked.BackfillCancel.Parameters, _ call: VarlinkCallContext<IOQuaked.BackfillCancel.Reply>
    ) async throws {
        try requireAdministrator(call.peer)
        guard let job = try await backfills.cancel(id: Int64(parameters.id)) else {
            throw IOQuaked.NoSuchBackfill(id: parameters.id)
        }
        try await call.reply(.init(job: backfills.describe(job)))
    }

    /// Replies with the job as it changes, the last reply when it has ended. A client that hangs
    /// up ends the replies, not the job.
    private func follow(
        _ id: Int64, _ send: (IOQuaked.BackfillJob, _ continues: Bool) async throws -> Void
    ) async throws {
        for await job in backfills.updates(of: id) {
            let ended = job.state != .queued && job.state != .running
            try await send(job, !ended)
            if ended { return }
        }
    }

    // MARK: Checks

    private func requireAdministrator(_ peer: PeerCredentials?) throws {
        guard let peer, peer.isAdministrator(adminGroup: reloader.configuration.adminGroup) else {
            throw OrgVarlinkService.PermissionDenied()
        }
    }

    private func requireStore(_ storeID: String?) throws {
        if let storeID, storeID != store.storeID { throw IOQuaked.StoreMismatch(storeId: store.storeID) }
    }

    static func validate(client: String) throws {
        guard (1...200).contains(client.utf8.count), !client.contains(where: \.isNewline) else {
            throw OrgVarlinkService.InvalidParameter(parameter: "client")
        }
    }

    /// Runs a history read, turning the store's history errors into the interface's.
    static func history<T>(_ read: () throws -> T) throws -> T {
        do {
            return try read()
        } catch let error as HistoryError {
            switch error {
            case .tokenExpired(let after, let oldest, let head):
                throw IOQuaked.TokenExpired(after: Int(after), oldestToken: Int(oldest), headToken: Int(head))
            case .tokenAhead(let after, let head):
                throw IOQuaked.TokenAhead(after: Int(after), headToken: Int(head))
            }
        }
    }
}

extension IOQuaked.SourceRefreshResult {
    /// One source's run as Refresh answers it: imported (204 included) with the reports stored or
    /// retracted and the events changed, or failed with its error.
    init(source: String, outcome: SourceSync.Outcome) {
        switch outcome {
        case .imported(let report, _, _):
            self.init(
                source: source, result: .imported, reports: report.applied,
                events: report.created + report.updated + report.deleted, token: report.token.map(Int.init),
                error: nil)
        case .failed(let failure):
            self.init(source: source, result: .failed, error: failure.message)
        }
    }
}
