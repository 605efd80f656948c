import Foundation
import Logging
import QuakeFeed
import QuakeStore
import QuakeVarlink

/// The io.quaked interface (and org.varlink.service): decodes each call's parameters, calls the
/// daemon, encodes the reply. Every failure is a typed Varlink error; no call can stop the daemon.
public struct QuakedMethods: ControlMethods {
    let store: QuakeStore
    let scheduler: FeedScheduler
    let reloader: Reloader
    let broadcaster: ChangeBroadcaster
    let logger: Logger

    public init(
        store: QuakeStore, scheduler: FeedScheduler, reloader: Reloader, broadcaster: ChangeBroadcaster, logger: Logger
    ) {
        self.store = store
        self.scheduler = scheduler
        self.reloader = reloader
        self.broadcaster = broadcaster
        self.logger = logger
    }

    public func handle(
        _ call: VarlinkCall, peer: PeerCredentials?, reply: @escaping @Sendable (VarlinkReply) async throws -> Void
    ) async throws {
        do {
            try await dispatch(call, peer: peer, reply: reply)
        } catch let error as MethodError {
            try await reply(VarlinkReply(parameters: .object(error.parameters), error: error.name))
        } catch let error as DecodingError {
            try await reply(
                VarlinkReply(
                    parameters: .object(["parameter": .string(Self.parameterName(error))]),
                    error: VarlinkErrorName.invalidParameter))
        } catch let error as HistoryError {
            switch error {
            case .tokenExpired(let after, let oldest, let head):
                try await reply(
                    VarlinkReply(
                        parameters: .object([
                            "after": .number(Double(after)), "oldestToken": .number(Double(oldest)),
                            "headToken": .number(Double(head)),
                        ]), error: "io.quaked.TokenExpired"))
            case .tokenAhead(let after, let head):
                try await reply(
                    VarlinkReply(
                        parameters: .object(["after": .number(Double(after)), "headToken": .number(Double(head))]),
                        error: "io.quaked.TokenAhead"))
            }
        }
    }

    private func dispatch(
        _ call: VarlinkCall, peer: PeerCredentials?, reply: @escaping @Sendable (VarlinkReply) async throws -> Void
    ) async throws {
        switch call.method {
        case "org.varlink.service.GetInfo":
            try await reply(
                VarlinkReply(
                    parameters: .object([
                        "vendor": .string("quaked"), "product": .string("quaked"),
                        "version": .string(QuakedVersion.string), "url": .string("https://github.com/quaked/quaked"),
                        "interfaces": .array([.string("org.varlink.service"), .string(QuakedInterface.name)]),
                    ])))
        case "org.varlink.service.GetInterfaceDescription":
            struct Parameters: Decodable { var interface: String }
            let parameters = try VarlinkCoding.decode(Parameters.self, from: call.parameters)
            let text: String
            switch parameters.interface {
            case QuakedInterface.name: text = QuakedInterface.description
            case "org.varlink.service": text = QuakedInterface.serviceDescription
            default: throw MethodError(VarlinkErrorName.interfaceNotFound, ["interface": .string(parameters.interface)])
            }
            try await reply(VarlinkReply(parameters: .object(["description": .string(text)])))
        case "io.quaked.GetStatus":
            try await reply(try Self.reply(try status()))
        case "io.quaked.Refresh":
            try await refresh(call, reply: reply)
        case "io.quaked.Subscribe":
            try await subscribe(call, reply: reply)
        case "io.quaked.FetchHistory":
            try await fetchHistory(call, reply: reply)
        case "io.quaked.Acknowledge":
            struct Parameters: Decodable {
                var client: String
                var token: Int64
            }
            let parameters = try VarlinkCoding.decode(Parameters.self, from: call.parameters)
            try Self.validate(client: parameters.client)
            try await store.acknowledge(client: parameters.client, token: parameters.token)
            try await reply(VarlinkReply(parameters: .object([:])))
        case "io.quaked.Snapshot":
            try await snapshot(call, reply: reply)
        case "io.quaked.Query":
            try await query(call, reply: reply)
        case "io.quaked.Get":
            struct Parameters: Decodable { var id: String }
            let parameters = try VarlinkCoding.decode(Parameters.self, from: call.parameters)
            guard let quake = try store.quake(id: parameters.id) else {
                throw MethodError("io.quaked.NoSuchQuake", ["id": .string(parameters.id)])
            }
            try await reply(VarlinkReply(parameters: .object(["quake": try VarlinkCoding.value(quake)])))
        case "io.quaked.Delete":
            try requireAdministrator(peer)
            struct Parameters: Decodable { var ids: [String] }
            let parameters = try VarlinkCoding.decode(Parameters.self, from: call.parameters)
            let report = try await store.delete(ids: parameters.ids)
            if let token = report.token {
                broadcaster.publish(head: token, author: .delete)
                logger.info(
                    "deleted by request",
                    metadata: [
                        "history.token": "\(token)", "quakes": "\(report.deleted.count)",
                        "peer": "\(peer.map { "\($0)" } ?? "?")",
                    ])
            }
            try await reply(try Self.reply(report))
        case "io.quaked.Reload":
            try requireAdministrator(peer)
            do {
                try await reloader.reload()
            } catch {
                throw MethodError("io.quaked.ReloadFailed", ["reason": .string("\(error)")])
            }
            try await reply(VarlinkReply(parameters: .object([:])))
        default:
            if call.interface != QuakedInterface.name && call.interface != "org.varlink.service" {
                throw MethodError(VarlinkErrorName.interfaceNotFound, ["interface": .string(call.interface)])
            }
            throw MethodError(VarlinkErrorName.methodNotFound, ["method": .string(call.method)])
        }
    }

    // MARK: Methods

    private func refresh(_ call: VarlinkCall, reply: @escaping @Sendable (VarlinkReply) async throws -> Void)
        async throws
    {
        struct Parameters: Decodable { var feed: String? }
        let parameters = try VarlinkCoding.decode(Parameters.self, from: call.parameters)
        let results: [(FeedStatus, PullResult)]
        do {
            results = try await scheduler.refresh(feed: parameters.feed)
        } catch let error as UnknownFeed {
            throw MethodError("io.quaked.NoSuchFeed", ["feed": .string(error.name)])
        }
        try await reply(
            try Self.reply(
                RefreshReply(
                    results: results.map { RefreshReply.Result(status: $0.0, result: $0.1) },
                    headToken: try store.head())))
    }

    private func subscribe(_ call: VarlinkCall, reply: @escaping @Sendable (VarlinkReply) async throws -> Void)
        async throws
    {
        guard call.more == true else { throw MethodError(VarlinkErrorName.expectedMore, [:]) }
        struct Parameters: Decodable {
            var client: String?
            var heartbeatSeconds: Int?
        }
        let parameters = try VarlinkCoding.decode(Parameters.self, from: call.parameters)
        if let client = parameters.client { try Self.validate(client: client) }
        let heartbeat = Duration.seconds(min(max(parameters.heartbeatSeconds ?? 30, 1), 3600))
        let storeID = store.storeID
        try await broadcaster.withSubscription { subscription in
            // Registered before the head is read: nothing committed after this read is missed.
            var lastSent = try store.head()
            if let client = parameters.client { try await store.touch(client: client, token: lastSent) }
            func send(_ event: String, head: HistoryToken, author: HistoryAuthor? = nil) async throws {
                var fields: [String: JSONValue] = [
                    "event": .string(event), "storeId": .string(storeID), "headToken": .number(Double(head)),
                ]
                if let author { fields["author"] = .string(author.rawValue) }
                // A subscriber that does not take its replies is dropped (ControlServer's write
                // timeout), never queued for: the subscription holds only the latest head.
                try await reply(VarlinkReply(parameters: .object(fields), continues: true))
            }
            try await send("subscribed", head: lastSent)
            while !Task.isCancelled {
                let change = await subscription.next(until: .now + heartbeat)
                if let change, change.head > lastSent {
                    lastSent = change.head
                    try await send("changed", head: change.head, author: change.author)
                } else {
                    try await send("heartbeat", head: max(lastSent, try store.head()))
                }
            }
        }
    }

    private func fetchHistory(_ call: VarlinkCall, reply: @escaping @Sendable (VarlinkReply) async throws -> Void)
        async throws
    {
        struct Parameters: Decodable {
            var storeId: String?
            var after: Int64
            var limit: Int?
            var maxChanges: Int?
            var client: String?
        }
        let parameters = try VarlinkCoding.decode(Parameters.self, from: call.parameters)
        try requireStore(parameters.storeId)
        if let client = parameters.client {
            try Self.validate(client: client)
            try await store.acknowledge(client: client, token: parameters.after)
        }
        let page = try store.history(
            after: parameters.after, limit: min(max(parameters.limit ?? 100, 1), 1000),
            maxChanges: max(parameters.maxChanges ?? 10_000, 1))
        struct Reply: Encodable {
            var storeId: String
            var headToken: Int64
            var oldestToken: Int64
            var transactions: [HistoryTransaction]
            var hasMore: Bool
            var nextAfter: Int64
        }
        try await reply(
            try Self.reply(
                Reply(
                    storeId: page.storeID, headToken: page.head, oldestToken: try store.oldestToken(),
                    transactions: page.transactions, hasMore: page.hasMore, nextAfter: page.nextAfter)))
    }

    private func snapshot(_ call: VarlinkCall, reply: @escaping @Sendable (VarlinkReply) async throws -> Void)
        async throws
    {
        guard call.more == true else { throw MethodError(VarlinkErrorName.expectedMore, [:]) }
        struct Parameters: Decodable { var pageSize: Int? }
        let parameters = try VarlinkCoding.decode(Parameters.self, from: call.parameters)
        let size = min(max(parameters.pageSize ?? 1000, 1), 10_000)
        let snapshot = try store.snapshot()
        var after: String?
        while true {
            try Task.checkCancellation()
            let page = try snapshot.page(after: after, limit: size)
            let last = page.count < size
            struct Page: Encodable {
                var storeId: String
                var token: Int64
                var quakes: [FeedFeature]
            }
            try await reply(
                try VarlinkReply(
                    encoding: Page(storeId: snapshot.storeID, token: snapshot.token, quakes: page),
                    continues: last ? nil : true))
            if last { return }
            after = page.last?.id
        }
    }

    private func query(_ call: VarlinkCall, reply: @escaping @Sendable (VarlinkReply) async throws -> Void) async throws
    {
        struct Parameters: Decodable {
            var minMagnitude: Double?
            var since: Int64?
            var type: String?
            var near: QuakeQuery.Near?
            var limit: Int?
            var order: String?
        }
        let parameters = try VarlinkCoding.decode(Parameters.self, from: call.parameters)
        var order = QuakeQuery.Order.time
        if let text = parameters.order {
            guard let parsed = QuakeQuery.Order(rawValue: text) else {
                throw MethodError(VarlinkErrorName.invalidParameter, ["parameter": .string("order")])
            }
            order = parsed
        }
        if let near = parameters.near,
            !(-90...90).contains(near.lat) || !(-180...180).contains(near.lon) || near.radiusKm < 0
        {
            throw MethodError(VarlinkErrorName.invalidParameter, ["parameter": .string("near")])
        }
        let result = try store.query(
            QuakeQuery(
                minMagnitude: parameters.minMagnitude, since: parameters.since, type: parameters.type,
                near: parameters.near,
                limit: min(max(parameters.limit ?? 1000, 0), 100_000), order: order))
        struct Reply: Encodable {
            var quakes: [FeedFeature]
            var total: Int
            var headToken: Int64
        }
        try await reply(try Self.reply(Reply(quakes: result.quakes, total: result.total, headToken: result.head)))
    }

    func status() throws -> StatusReply {
        let path = store.path
        let bytes = ["", "-wal"].reduce(0) { total, suffix in
            total + ((try? FileManager.default.attributesOfItem(atPath: path + suffix)[.size] as? Int) ?? 0)
        }
        let head = try store.head()
        return StatusReply(
            version: QuakedVersion.string, storeId: store.storeID, headToken: head,
            oldestToken: try store.oldestToken(), quakeCount: try store.count(), databaseBytes: bytes,
            lastChange: try store.lastChange(), feeds: scheduler.statuses().map(FeedStatusReply.init),
            subscribers: broadcaster.count,
            clients: try store.clients().map {
                ClientStatusReply(
                    name: $0.name, token: $0.token, lag: max(0, head - $0.token),
                    lastSeen: Date(timeIntervalSince1970: Double($0.lastSeen) / 1000))
            })
    }

    // MARK: Checks

    private func requireAdministrator(_ peer: PeerCredentials?) throws {
        guard let peer, peer.isAdministrator(adminGroup: reloader.configuration.adminGroup) else {
            throw MethodError(VarlinkErrorName.permissionDenied, [:])
        }
    }

    private func requireStore(_ storeID: String?) throws {
        if let storeID, storeID != store.storeID {
            throw MethodError("io.quaked.StoreMismatch", ["storeId": .string(store.storeID)])
        }
    }

    static func validate(client: String) throws {
        guard (1...200).contains(client.utf8.count), !client.contains(where: \.isNewline) else {
            throw MethodError(VarlinkErrorName.invalidParameter, ["parameter": .string("client")])
        }
    }

    static func reply(_ value: some Encodable) throws -> VarlinkReply {
        try VarlinkReply(encoding: value)
    }

    /// The name of the parameter a decoding error is about.
    static func parameterName(_ error: DecodingError) -> String {
        let path: [any CodingKey]
        switch error {
        case .typeMismatch(_, let context), .valueNotFound(_, let context), .dataCorrupted(let context):
            path = context.codingPath
        case .keyNotFound(let key, let context):
            path = context.codingPath + [key]
        @unknown default:
            path = []
        }
        return path.first?.stringValue ?? "parameters"
    }
}

/// A typed Varlink error reply.
struct MethodError: Error {
    var name: String
    var parameters: [String: JSONValue]

    init(_ name: String, _ parameters: [String: JSONValue]) {
        self.name = name
        self.parameters = parameters
    }
}
