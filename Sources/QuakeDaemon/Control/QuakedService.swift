import Foundation
import Logging
import NIOCore
import QuakeFeed
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
    let logger: Logger

    public init(
        store: QuakeStore, scheduler: FeedScheduler, reloader: Reloader, broadcaster: ChangeBroadcaster,
        metrics: MetricsExporter, logger: Logger
    ) {
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
            })
    }

    public func refresh(_ parameters: IOQuaked.Refresh.Parameters, _ call: VarlinkCallContext<IOQuaked.Refresh.Reply>)
        async throws
    {
        let results: [(FeedStatus, PullResult)]
        do {
            results = try await scheduler.refresh(feed: parameters.feed)
        } catch let error as UnknownFeed {
            throw IOQuaked.NoSuchFeed(feed: error.name)
        }
        try await call.reply(
            .init(results: results.map { IOQuaked.RefreshResult(status: $0.0, result: $0.1) }, headToken: Int(try store.head())))
    }

    public func subscribe(
        _ parameters: IOQuaked.Subscribe.Parameters, _ call: VarlinkCallContext<IOQuaked.Subscribe.Reply>
    ) async throws {
        try call.requireMore()
        if let client = parameters.client { try Self.validate(client: client) }
        let heartbeat = Duration.seconds(min(max(parameters.heartbeatSeconds ?? 30, 1), 3600))
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
        var reply = IOQuaked.FetchHistory.ReplyWriter(filtered: filter != nil)
        let page = try Self.history {
            try store.visitHistory(
                after: after, limit: min(max(parameters.limit ?? 100, 1), 1000),
                maxChanges: max(parameters.maxChanges ?? 10_000, 1), filter: filter, &reply)
        }
        try await call.reply(frame: ByteBuffer(bytes: reply.finish(page)))
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
        let size = min(max(parameters.pageSize ?? 1000, 1), 10_000)
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
            throw IOQuaked.ReloadFailed(reason: "\(error)")
        }
        try await call.reply(.init())
    }

    public func metrics(_ parameters: IOQuaked.Metrics.Parameters, _ call: VarlinkCallContext<IOQuaked.Metrics.Reply>)
        async throws
    {
        try await call.reply(.init(text: metrics.text()))
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
