import Foundation
import QuakeProtocol
import NIOConcurrencyHelpers
import Varlink

/// What a ``Watcher`` tells its caller. It prints nothing itself: the caller decides how each
/// event looks (quakectl prints lines or JSON).
public enum WatchEvent: Sendable {
    /// Connected to quaked (again); `afterOutage` is true when a connection had been lost.
    case connected(afterOutage: Bool)
    /// The connection was lost or could not be made; the cache is kept and the watcher retries.
    /// Sent once per outage.
    case disconnected(reason: any Error)
    /// The cache was replaced by a snapshot: a new cache, an expired or foreign token, another store.
    case reset(storeId: String, token: Int, quakes: Int, reason: String)
    /// A transaction to deliver: it is committed to the cache (with its token) after the handler
    /// returns, at once or with the rest of its catch-up page (see ``Watcher``). `before` holds,
    /// for updates and leaves that carry no quake, the row as the cache had it before this
    /// transaction (the page's earlier transactions counted). `isBacklog` is true for
    /// transactions at or before the position where the watch was asked to start (`sinceNow`).
    case applied(IOQuaked.Transaction, storeId: String, before: [String: IOQuaked.Quake], isBacklog: Bool)
    /// `lastCount`: the newest quakes of the cache when the watch started, oldest first. Sent once.
    case recent([IOQuaked.Quake])
    /// The cache failed (a ``WatchCacheError`` that is not permanent: a database that went away,
    /// say). Nothing applied is lost; the watcher retries with backoff. Sent once per outage.
    case cacheUnavailable(reason: any Error)
    /// The cache works again after ``cacheUnavailable(reason:)``: a catch-up went through.
    case cacheRecovered
}

/// Asks a running ``Watcher`` to stop (quakectl's SIGTERM, SIGINT and SIGHUP): what is being
/// delivered is finished (delivered, then committed to the cache), then the watch returns: the
/// catch-up page in hand when the cache commits pages, else the transaction in hand.
public final class WatchStop: Sendable {
    private let state = NIOLockedValueBox<(requested: Bool, connections: [QuakedConnection])>((false, []))

    public init() {}

    public var isRequested: Bool { state.withLockedValue { $0.requested } }

    /// Requests the stop and stops the watch's connections, which ends any wait on them (through
    /// ssh, each ends its own ssh child too, which the closed connection would wait for).
    public func request() async {
        let connections = state.withLockedValue { state in
            state.requested = true
            return state.connections
        }
        for connection in connections { await connection.stop() }
    }

    /// Connections a stop closes. Returns false when the stop was already requested.
    func register(_ connections: [QuakedConnection]) -> Bool {
        state.withLockedValue { state in
            if state.requested { return false }
            state.connections = connections
            return true
        }
    }
}

/// The `watch` loop: keeps a ``WatchCache`` (``QuakeCache`` for `watch`, a PostgreSQL table for
/// `sync`) in step with quaked and reports each change once.
///
/// It subscribes first, then catches up from the cache's token with paged FetchHistory, then
/// catches up again whenever a notification (or heartbeat) shows a newer head; so nothing that
/// commits between the catch-up and the tail is missed. Each transaction is reported
/// (delivered) before the cache commits it; one committed is never applied or reported again.
/// A ``QuakeCache`` commits a FetchHistory page at a time: every transaction of the page is
/// reported, then the page is applied in one SQLite transaction with the position at its last
/// token, so a crash in between reports that page again on the next run (at most
/// ``Options/pageLimit`` transactions and about ``Watcher/pageChanges`` changes, or one larger
/// transaction), never not at all. At the
/// live tail a page is one transaction. Other caches (and ``Options/commitEachTransaction``)
/// commit each transaction right after reporting it. When the daemon goes away the cache stays,
/// and the loop reconnects with backoff and resumes from the saved token.
public struct Watcher: Sendable {
    public struct Options: Sendable {
        /// quaked's socket, or an ssh route to a quaked on another host (each connection is its
        /// own `ssh HOST quakectl bridge`).
        public var endpoint: QuakedEndpoint
        /// A durable client name: quaked keeps history this client has not acknowledged.
        public var clientName: String?
        /// A start position for a cache that has none (`--since now`, as Kafka's
        /// `auto.offset.reset=latest`): when the cache holds no position, or one it cannot use
        /// (another store, another filter, an expired token: the cases that reset it), the
        /// transactions up to quaked's head when the watch connects are applied as backlog
        /// (``WatchEvent/applied(_:storeId:before:isBacklog:)``), not reported as news. A cache
        /// with a usable position resumes from it: everything after it is news, also what
        /// changed while the watch was not running.
        public var sinceNow = false
        public var heartbeatSeconds = IOQuaked.Defaults.heartbeatSeconds
        public var initialBackoff: Duration = .milliseconds(200)
        public var maxBackoff: Duration = .seconds(5)
        /// The most transactions a catch-up's FetchHistory page asks for; below it, pages are
        /// sized to hold about ``Watcher/pageChanges`` changes.
        public var pageLimit = IOQuaked.Defaults.historyLimit
        /// Commit each transaction of a catch-up's page to the cache as soon as it is delivered,
        /// rather than the whole page at once after its last (a ``QuakeCache``'s default): for a
        /// handler with effects costlier to repeat than a printed line (`watch --exec` running
        /// its command for each change), so that a crash repeats at most one transaction's.
        public var commitEachTransaction = false
        public var snapshotPageSize = IOQuaked.Defaults.snapshotPageSize
        /// Sent to quaked with every call: the cache keeps only the quakes it matches, and a cache
        /// kept with another filter starts over from a snapshot.
        public var filter: IOQuaked.Filter?
        /// Report the newest this many quakes once, when the watch starts (``WatchEvent/recent(_:)``).
        public var lastCount: Int?

        public init(endpoint: QuakedEndpoint) {
            self.endpoint = endpoint
        }

        public init(socketPath: String) {
            self.init(endpoint: .socket(socketPath))
        }
    }

    public typealias Handler = @Sendable (WatchEvent) async throws -> Void

    /// `watch --exec` with `--batch` or `--quiet-hours`: after a transaction is reported, the
    /// entries `entries` makes of it are queued in the ``QuakeCache``'s outbox in the SQLite
    /// transaction that applies it; then `queued` is called when there were any. Only a
    /// `QuakeCache` has an outbox (``init(options:cache:outbox:)``).
    public struct Outbox: Sendable {
        public var entries:
            @Sendable (_ transaction: IOQuaked.Transaction, _ storeId: String, _ before: [String: IOQuaked.Quake], _ isBacklog: Bool)
                -> [OutboxEntry]
        public var queued: @Sendable () -> Void

        public init(
            entries: @escaping @Sendable (IOQuaked.Transaction, String, [String: IOQuaked.Quake], Bool) -> [OutboxEntry],
            queued: @escaping @Sendable () -> Void
        ) {
            self.entries = entries
            self.queued = queued
        }
    }

    public let options: Options
    public let cache: any WatchCache
    /// The outbox and the cache that keeps it (the same as ``cache``), when there is one.
    private let outbox: (cache: QuakeCache, outbox: Outbox)?
    /// ``cache`` when it can commit a page of transactions at once (a ``QuakeCache``).
    private let pageCache: QuakeCache?

    public init(options: Options, cache: any WatchCache) {
        self.options = options
        self.cache = cache
        outbox = nil
        pageCache = cache as? QuakeCache
    }

    /// A watch whose transactions also queue `outbox`'s entries in `cache`'s outbox, each in the
    /// SQLite transaction that applies it.
    public init(options: Options, cache: QuakeCache, outbox: Outbox) {
        self.options = options
        self.cache = cache
        self.outbox = (cache, outbox)
        pageCache = cache
    }

    /// Runs until cancelled or stopped, or until a failure retrying cannot fix (permission
    /// denied, or an error `handle` throws). `health` is kept up to date as the watch goes (a
    /// service reads it for systemd's watchdog); a session it finds stalled is ended, reported
    /// once as ``WatchEvent/disconnected(reason:)`` with a ``WatchStalled``, and started again.
    public func run(stop: WatchStop = WatchStop(), health: WatchHealth? = nil, _ handle: @escaping Handler)
        async throws
    {
        let health = health ?? WatchHealth(heartbeatSeconds: options.heartbeatSeconds)
        var backoff = options.initialBackoff
        var away = false
        let cacheAway = NIOLockedValueBox(false)
        var start = StartPoint.undecided
        let recentDone = NIOLockedValueBox(options.lastCount == nil)
        while true {
            if stop.isRequested { return }
            do {
                try await session(
                    start: &start, quiet: away, stop: stop, recentDone: recentDone, cacheAway: cacheAway,
                    health: health, handle: handle
                ) {
                    backoff = options.initialBackoff
                    try await handle(.connected(afterOutage: away))
                    away = false
                }
            } catch let error as QuakedConnectionError where error.kind == .permissionDenied {
                throw error
            } catch let error as QuakedRemoteError where error.isPermanent {
                throw error  // no ssh, no remote quakectl, no permission: retrying changes nothing
            } catch let error as OrgVarlinkService.Failure {
                throw error  // PermissionDenied, InvalidParameter, ...: retrying changes nothing
            } catch let error as any WatchCacheError {
                if error.isPermanent { throw error }
                if stop.isRequested { return }
                if !cacheAway.withLockedValue({ $0 }) {
                    cacheAway.withLockedValue { $0 = true }
                    try await handle(.cacheUnavailable(reason: error))
                }
            } catch is CancellationError {
                throw CancellationError()
            } catch let error as HandlerError {
                // A delivery the stop interrupted (a command being retried): it comes again next time.
                if stop.isRequested, error.underlying is CancellationError { return }
                throw error.underlying
            } catch {
                if stop.isRequested { return }
                if Task.isCancelled { throw CancellationError() }
                if !away {
                    away = true
                    try await handle(.disconnected(reason: error))
                }
            }
            try await Task.sleep(for: backoff)
            backoff = min(backoff * 2, options.maxBackoff)
        }
    }

    /// An error thrown by the caller's handler: it ends the watch, it is not a lost connection.
    struct HandlerError: Error {
        var underlying: any Error
    }

    /// One connection for the subscription and one for requests, until one of them fails.
    /// `quiet`: during an outage already reported, an ssh route's retries do not repeat ssh's or
    /// the remote bridge's message on stderr each time.
    private func session(
        start: inout StartPoint, quiet: Bool, stop: WatchStop, recentDone: NIOLockedValueBox<Bool>,
        cacheAway: NIOLockedValueBox<Bool>, health: WatchHealth, handle: @escaping Handler,
        connected: () async throws -> Void
    ) async throws {
        var endpoint = options.endpoint
        if quiet, case .ssh(var route) = endpoint {
            route.quiet = true
            endpoint = .ssh(route)
        }
        try await QuakedConnection.with(endpoint) { subscription in
            try await QuakedConnection.with(endpoint) { requests in
                // A stop closes both, which ends any wait on them.
                guard stop.register([subscription, requests]) else { throw CancellationError() }
                let context = Context(
                    stop: stop, recentDone: recentDone, cacheAway: cacheAway, health: health, handle: handle)
                try await follow(subscription, requests, start: &start, context: context, connected: connected)
            }
        }
    }

    /// What a session's steps share.
    struct Context: Sendable {
        let stop: WatchStop
        /// Whether ``WatchEvent/recent(_:)`` has been sent (or is not wanted).
        let recentDone: NIOLockedValueBox<Bool>
        /// Whether ``WatchEvent/cacheUnavailable(reason:)`` was sent and the cache has not worked since.
        let cacheAway: NIOLockedValueBox<Bool>
        let health: WatchHealth
        let handle: Handler
    }

    /// Where `sinceNow` starts reporting news; decided at the watch's first connection and
    /// settled by its first catch-up.
    enum StartPoint: Equatable {
        /// Not connected yet.
        case undecided
        /// The cache's position looked usable: it resumes from it, unless the first catch-up
        /// finds it unusable after all (an expired token), which makes it a start.
        case resuming
        /// Reporting news: everything after the cache's position (or no `sinceNow`).
        case resumed
        /// A start: transactions up to this token are backlog.
        case backlogThrough(Int)

        var floor: Int? {
            if case .backlogThrough(let token) = self { token } else { nil }
        }
    }

    /// One session: subscribe, catch up, then follow the notifications, until the connection
    /// fails. A watchdog beside it ends the session when ``WatchHealth`` finds it stalled (quaked
    /// silent, or the cache not moving towards the head), by closing both connections, which
    /// fails whatever waits on them.
    private func follow(
        _ subscription: QuakedConnection, _ requests: QuakedConnection, start: inout StartPoint,
        context: Context, connected: () async throws -> Void
    ) async throws {
        let health = context.health
        health.sessionStarted()
        defer { health.sessionEnded() }
        let stalled = NIOLockedValueBox<WatchHealth.Stall?>(nil)
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                while true {
                    try await Task.sleep(for: .seconds(1))
                    if let stall = health.stall() {
                        stalled.withLockedValue { $0 = stall }
                        await subscription.close()
                        await requests.close()
                        return
                    }
                }
            }
            defer { group.cancelAll() }
            do {
                try await followSession(subscription, requests, start: &start, context: context, connected: connected)
            } catch {
                if let stall = stalled.withLockedValue({ $0 }) { throw WatchStalled(stall: stall) }
                throw error
            }
            if let stall = stalled.withLockedValue({ $0 }) { throw WatchStalled(stall: stall) }
        }
        throw VarlinkConnectionError.closed
    }

    private func followSession(
        _ subscription: QuakedConnection, _ requests: QuakedConnection, start: inout StartPoint,
        context: Context, connected: () async throws -> Void
    ) async throws {
        var events = try await subscription.subscribe(
            client: options.clientName, heartbeatSeconds: options.heartbeatSeconds, filter: options.filter
        ).makeAsyncIterator()
        guard let first = try await events.next() else { throw VarlinkConnectionError.closed }
        context.health.heard(head: first.headToken)
        do { try await connected() } catch { throw HandlerError(underlying: error) }
        // The cache's position as the session starts, read once for both decisions below.
        let position = try await cache.position()
        if start == .undecided {
            if options.sinceNow {
                let usable = position.map { $0.storeId == first.storeId && $0.filter == options.filter?.key } ?? false
                start = usable ? .resuming : .backlogThrough(first.headToken)
            } else {
                start = .resumed
            }
        }
        // A cache kept with the same filter: its newest quakes are the ones to show first.
        if let position, position.filter == options.filter?.key {
            try await sendRecent(context)
        }
        try await catchUp(requests, storeId: first.storeId, head: first.headToken, start: &start, context: context)
        if start == .resuming { start = .resumed }
        if context.cacheAway.withLockedValue({ $0 }) {
            context.cacheAway.withLockedValue { $0 = false }
            do { try await context.handle(.cacheRecovered) } catch { throw HandlerError(underlying: error) }
        }
        while let event = try await events.next() {
            context.health.heard(head: event.headToken)
            try await catchUp(requests, storeId: event.storeId, head: event.headToken, start: &start, context: context)
        }
    }

    /// Sends ``WatchEvent/recent(_:)`` once, from the cache as it is.
    private func sendRecent(_ context: Context) async throws {
        guard let count = options.lastCount, !context.recentDone.withLockedValue({ $0 }) else { return }
        context.recentDone.withLockedValue { $0 = true }
        let quakes = try await cache.newest(count)
        do { try await context.handle(.recent(quakes)) } catch { throw HandlerError(underlying: error) }
    }

    /// Brings the cache to `head` of `storeId`, resetting it from a snapshot when history cannot.
    func catchUp(
        _ connection: QuakedConnection, storeId: String, head: Int, start: inout StartPoint, context: Context
    ) async throws {
        // A position that turns out unusable on the first catch-up makes `sinceNow` a start after all.
        func reset(_ connection: QuakedConnection, reason: String, context: Context) async throws -> WatchPosition {
            if start == .resuming { start = .backlogThrough(head) }
            return try await self.reset(connection, reason: reason, context: context)
        }
        var position = try await cache.position()
        if position == nil {
            position = try await reset(connection, reason: "new cache", context: context)
        } else if position?.storeId != storeId {
            position = try await reset(connection, reason: "quaked now serves another store", context: context)
        } else if position?.filter != options.filter?.key {
            position = try await reset(
                connection, reason: "the cache was kept with another filter; starting over with this one",
                context: context)
        }
        guard var position else { return }
        // One FetchHistory call made with more streams the pages (HistoryPages): quaked reads
        // and writes page n + 1 while this side decodes it, and the page before it is applied
        // meanwhile. The next page is read (from the socket, and decoded) while this one is
        // applied, so a long catch-up is as fast as the slowest of quaked's reading, the
        // decoding and the cache's writing, not their sum.
        var pages = HistoryPages()
        var prefetched: Result<IOQuaked.FetchHistory.Reply, any Error>?
        while position.token != head || prefetched != nil {
            let fetched: Result<IOQuaked.FetchHistory.Reply, any Error>
            if let prefetched = prefetched.take() {
                fetched = prefetched
            } else {
                (fetched, pages) = await pages.next(connection, after: position, options: options)
            }
            let page: IOQuaked.FetchHistory.Reply
            switch fetched {
            case .success(let reply) where reply.storeId == position.storeId:
                page = reply
                context.health.heard(head: head)
            case .success:
                // quaked answers another store's token with StoreMismatch, so this is a service
                // that changed stores mid-call: the connection is out of step; the next session
                // finds the new store and resets.
                if pages.isOpen { await connection.close() }
                throw VarlinkConnectionError.closed
            case .failure(let error):
                position = try await reset(connection, reason: try Self.resetReason(error, position), context: context)
                continue
            }
            var following = position
            following.token = max(position.token, page.nextAfter)
            if page.hasMore {
                let current = pages
                let options = options
                async let next = current.next(connection, after: following, options: options)
                try await apply(page, context: context, backlogThrough: start.floor)
                (prefetched, pages) = await next
            } else {
                try await apply(page, context: context, backlogThrough: start.floor)
            }
            if options.filter != nil, following.token > (page.transactions.last?.token ?? 0) {
                // The filter left the page's last transactions out: the cache is at its end all the same.
                try await cache.advance(storeId: following.storeId, to: following.token)
            }
            position = following
            context.health.moved(to: position.token)
            // Without more, the head may still have moved on while paging; the next event says so.
            if !page.hasMore { break }
        }
        // A call with more is read to its end (its last page has hasMore false) before the loop
        // ends: the connection serves the next call.
        assert(!pages.isOpen, "a catch-up left its FetchHistory call unread")
        context.health.atHead(position.token)
        if let name = options.clientName {
            try await connection.acknowledge(client: name, token: position.token)
        }
    }

    /// About how many changes a catch-up's page holds: quaked's `maxChanges` for the call.
    /// Pages of a few thousand changes let decoding and applying overlap from the start and
    /// bound what is in memory (a page being applied, the next being decoded, one in the socket).
    /// Both sides do a quake's work once a page (quaked writes its object once, the decoder takes
    /// its repeats as decoded, the cache writes its row once), so in a history that revises the
    /// same quakes again and again, as a catch-up after downtime does, a larger page costs less a
    /// change: in `quake-bench protocol`'s catch-up, pages of 2,000 changes took about a third
    /// more CPU in both processes than pages of 4,000, and pages of 8,000 about a tenth less.
    public static let pageChanges = 8000

    /// A catch-up's FetchHistory call made with more, read page by page. A value: the read in
    /// flight (beside the page being applied) takes a copy and hands back the one after it.
    struct HistoryPages: Sendable {
        /// The open call's replies; nil when none is open (none yet, or the last one ended).
        private var replies: TypedReplies<IOQuaked.FetchHistory.Reply>.Iterator?

        /// Whether a call is open: a page with `hasMore` came and its call has not ended.
        var isOpen: Bool { replies != nil }

        /// The next page after `position`: the open call's next reply, or the first of a new call
        /// (none open yet, or the last one ended while `hasMore`, as from a quaked that answers
        /// a call with more once). An error (an error reply: the call has ended) is returned as
        /// the result, so that the read can run beside other work.
        func next(_ connection: QuakedConnection, after position: WatchPosition, options: Options) async -> (
            Result<IOQuaked.FetchHistory.Reply, any Error>, HistoryPages
        ) {
            var pages = self
            do {
                if var replies = pages.replies {
                    pages.replies = nil
                    if let reply = try await replies.next() {
                        if reply.hasMore { pages.replies = replies }
                        return (.success(reply), pages)
                    }
                }
                var replies = try await connection.fetchHistoryPages(
                    storeId: position.storeId, after: position.token, limit: options.pageLimit,
                    maxChanges: Watcher.pageChanges, client: options.clientName, filter: options.filter
                ).makeAsyncIterator()
                guard let reply = try await replies.next() else { throw VarlinkConnectionError.closed }
                if reply.hasMore { pages.replies = replies }
                return (.success(reply), pages)
            } catch {
                return (.failure(error), pages)
            }
        }
    }

    /// Why history cannot continue from `position` (the cache starts over from a snapshot), or the
    /// error itself when starting over would not help.
    static func resetReason(_ error: any Error, _ position: WatchPosition) throws -> String {
        switch error as? IOQuaked.Failure {
        case .tokenExpired: "history after token \(position.token) has been purged"
        case .tokenAhead: "token \(position.token) is ahead of the store (restored from an older copy?)"
        case .storeMismatch: "quaked now serves another store"
        default: throw error
        }
    }

    /// Delivers a page's transactions, then commits them to the cache: a catch-up's page (a
    /// ``QuakeCache``, not ``Options/commitEachTransaction``) all in one cache transaction once
    /// the whole page is delivered (``deliverTogether(_:into:storeId:context:backlogThrough:)``),
    /// otherwise each transaction in its own, right after it is delivered. A live tail's page is
    /// one transaction either way.
    private func apply(_ page: IOQuaked.FetchHistory.Reply, context: Context, backlogThrough: Int?) async throws {
        if let pageCache, !options.commitEachTransaction, page.transactions.count > 1 {
            try await deliverTogether(
                page.transactions[...], into: pageCache, storeId: page.storeId, context: context,
                backlogThrough: backlogThrough)
        } else {
            try await deliverEach(page, context: context, backlogThrough: backlogThrough)
        }
    }

    /// Delivers each of a page's transactions (reports it), then applies it to the cache in one
    /// cache transaction. Delivery comes first: a watch stopped between the two delivers the
    /// transaction again when it next runs, never not at all. A stop (``WatchStop``) lets the
    /// transaction in hand finish, delivered and applied, and then ends the watch; so does a
    /// cancellation, which cannot interrupt a delivery either.
    private func deliverEach(_ page: IOQuaked.FetchHistory.Reply, context: Context, backlogThrough: Int?) async throws {
        let cache = cache
        for transaction in page.transactions {
            if context.stop.isRequested || Task.isCancelled { throw CancellationError() }
            guard let before = try await cache.prepare(transaction, storeId: page.storeId) else { continue }
            let backlog = backlogThrough.map { transaction.token <= $0 } ?? false
            let storeId = page.storeId
            let handle = context.handle
            let outbox = outbox
            // Unstructured on purpose: cancelling the watch does not reach into a delivery.
            let health = context.health
            let delivery = Task {
                health.delivering(true)
                do {
                    try await handle(.applied(transaction, storeId: storeId, before: before, isBacklog: backlog))
                } catch {
                    health.delivering(false)
                    throw HandlerError(underlying: error)
                }
                health.delivering(false)
                if let outbox {
                    let queued = outbox.outbox.entries(transaction, storeId, before, backlog)
                    try outbox.cache.apply(transaction, storeId: storeId, outbox: queued)
                    if !queued.isEmpty { outbox.outbox.queued() }
                } else {
                    try await cache.apply(transaction, storeId: storeId)
                }
                health.moved(to: transaction.token)
            }
            try await delivery.value
        }
    }

    /// Delivers every transaction of `transactions` (reports each, in order, and makes its
    /// outbox entries), then commits them all to `cache` in one SQLite transaction, rows,
    /// outbox entries and the position at the last one's token together. A crash before the
    /// commit delivers the page again on the next run: at most a page's transactions come twice
    /// (at most ``Options/pageLimit`` transactions and about ``pageChanges`` changes, or one
    /// larger transaction), none never. A stop
    /// (``WatchStop``) or a cancellation lets the page in hand finish, delivered and committed.
    /// When a delivery fails (the handler throws: a stop interrupting it, say), the transactions
    /// delivered before it are committed, then the failure ends the page.
    private func deliverTogether(
        _ transactions: ArraySlice<IOQuaked.Transaction>, into cache: QuakeCache, storeId: String, context: Context,
        backlogThrough: Int?
    ) async throws {
        if context.stop.isRequested || Task.isCancelled { throw CancellationError() }
        guard let (start, before) = try cache.prepare(page: transactions, storeId: storeId) else { return }
        let handle = context.handle
        let outbox = outbox?.outbox
        let health = context.health
        // Unstructured on purpose: cancelling the watch does not reach into a delivery.
        let delivery = Task {
            var queued: [OutboxEntry] = []
            var delivered = start
            do {
                for index in start..<transactions.endIndex {
                    let transaction = transactions[index]
                    let backlog = backlogThrough.map { transaction.token <= $0 } ?? false
                    let rows = before[index - start]
                    health.delivering(true)
                    try await handle(.applied(transaction, storeId: storeId, before: rows, isBacklog: backlog))
                    health.delivering(false)
                    if let outbox { queued += outbox.entries(transaction, storeId, rows, backlog) }
                    delivered = index + 1
                }
            } catch {
                health.delivering(false)
                if delivered > start,
                    (try? cache.apply(page: transactions[start..<delivered], storeId: storeId, outbox: queued)) == true
                {
                    if !queued.isEmpty { outbox?.queued() }
                    health.moved(to: transactions[delivered - 1].token)
                }
                throw HandlerError(underlying: error)
            }
            try cache.apply(page: transactions[start...], storeId: storeId, outbox: queued)
            if !queued.isEmpty { outbox?.queued() }
            health.moved(to: transactions[transactions.endIndex - 1].token)
        }
        try await delivery.value
    }

    /// Replaces the cache by a snapshot (of the filter's quakes). Returns the new position.
    func reset(_ connection: QuakedConnection, reason: String, context: Context) async throws
        -> WatchPosition
    {
        let handle = context.handle
        let count: Int
        var storeId: String?
        var token = 0
        do {
            try await cache.beginReset()
            for try await page in try await connection.snapshot(pageSize: options.snapshotPageSize, filter: options.filter) {
                try await cache.stage(page.quakes)
                context.health.staged()
                storeId = page.storeId
                token = page.token
            }
            guard let storeId else { throw VarlinkConnectionError.invalidReply("Snapshot sent no page") }
            count = try await cache.finishReset(storeId: storeId, token: token, filter: options.filter?.key)
        } catch {
            await cache.abandonReset()
            throw error
        }
        guard let storeId else { throw VarlinkConnectionError.invalidReply("Snapshot sent no page") }
        do {
            try await handle(.reset(storeId: storeId, token: token, quakes: count, reason: reason))
        } catch {
            throw HandlerError(underlying: error)
        }
        context.health.moved(to: token)
        try await sendRecent(context)
        return WatchPosition(storeId: storeId, token: token, filter: options.filter?.key)
    }
}
