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
    /// A transaction was applied to the cache (committed with its token). `before` holds, for
    /// updates that carry no quake, the row as the cache had it. `isBacklog` is true for
    /// transactions at or before the position where the watch was asked to start (`sinceNow`).
    case applied(IOQuaked.Transaction, storeId: String, before: [String: IOQuaked.Quake], isBacklog: Bool)
}

/// The `watch` loop: keeps a ``QuakeCache`` in step with quaked and reports each change once.
///
/// It subscribes first, then catches up from the cache's token with paged FetchHistory, then
/// catches up again whenever a notification (or heartbeat) shows a newer head; so nothing that
/// commits between the catch-up and the tail is missed. Each history transaction is applied to
/// the cache in one SQLite transaction and reported right after its commit; one already applied
/// is never applied or reported again. When the daemon goes away the cache stays, and the loop
/// reconnects with backoff and resumes from the saved token.
public struct Watcher: Sendable {
    public struct Options: Sendable {
        public var socketPath: String
        /// A durable client name: quaked keeps history this client has not acknowledged.
        public var clientName: String?
        /// Report the backlog as such (``WatchEvent/applied(_:storeId:before:isBacklog:)``).
        public var sinceNow = false
        public var heartbeatSeconds = 30
        public var initialBackoff: Duration = .milliseconds(200)
        public var maxBackoff: Duration = .seconds(5)
        public var pageLimit = 100
        public var snapshotPageSize = 1000

        public init(socketPath: String) {
            self.socketPath = socketPath
        }
    }

    public typealias Handler = @Sendable (WatchEvent) async throws -> Void

    public let options: Options
    public let cache: QuakeCache

    public init(options: Options, cache: QuakeCache) {
        self.options = options
        self.cache = cache
    }

    /// Runs until cancelled, or until a failure retrying cannot fix (permission denied, or an
    /// error `handle` throws).
    public func run(_ handle: @escaping Handler) async throws {
        var backoff = options.initialBackoff
        var away = false
        var printFrom: Int?
        while true {
            do {
                try await session(printFrom: &printFrom, handle: handle) {
                    backoff = options.initialBackoff
                    try await handle(.connected(afterOutage: away))
                    away = false
                }
            } catch let error as QuakedConnectionError where error.kind == .permissionDenied {
                throw error
            } catch let error as OrgVarlinkService.Failure {
                throw error  // PermissionDenied, InvalidParameter, ...: retrying changes nothing
            } catch is CancellationError {
                throw CancellationError()
            } catch let error as HandlerError {
                throw error.underlying
            } catch {
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

    private func session(
        printFrom: inout Int?, handle: @escaping Handler, connected: () async throws -> Void
    ) async throws {
        let subscription = try await QuakedConnection.connect(to: options.socketPath)
        let requests: QuakedConnection
        do {
            requests = try await QuakedConnection.connect(to: options.socketPath)
        } catch {
            await subscription.close()
            throw error
        }
        do {
            try await follow(subscription, requests, printFrom: &printFrom, handle: handle, connected: connected)
        } catch {
            await subscription.close()
            await requests.close()
            throw error
        }
    }

    private func follow(
        _ subscription: QuakedConnection, _ requests: QuakedConnection, printFrom: inout Int?,
        handle: @escaping Handler, connected: () async throws -> Void
    ) async throws {
        var events = try await subscription.subscribe(
            client: options.clientName, heartbeatSeconds: options.heartbeatSeconds
        ).makeAsyncIterator()
        guard let first = try await events.next() else { throw VarlinkConnectionError.closed }
        do { try await connected() } catch { throw HandlerError(underlying: error) }
        if options.sinceNow && printFrom == nil { printFrom = first.headToken }
        let floor = printFrom
        try await catchUp(requests, storeId: first.storeId, head: first.headToken, backlogThrough: floor, handle: handle)

        // A daemon that stops sending (not even heartbeats) is treated as gone.
        let lastEvent = EventClock()
        let silence = Duration.seconds(options.heartbeatSeconds * 3 + 5)
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                while true {
                    try await Task.sleep(for: .seconds(1))
                    if ContinuousClock.now - lastEvent.last > silence {
                        await subscription.close()
                        return
                    }
                }
            }
            while let event = try await events.next() {
                lastEvent.touch()
                try await catchUp(
                    requests, storeId: event.storeId, head: event.headToken, backlogThrough: floor, handle: handle)
                // A long catch-up (a reset of a large store) is not silence.
                lastEvent.touch()
            }
            group.cancelAll()
        }
        throw VarlinkConnectionError.closed
    }

    /// Brings the cache to `head` of `storeId`, resetting it from a snapshot when history cannot.
    func catchUp(
        _ connection: QuakedConnection, storeId: String, head: Int, backlogThrough: Int?, handle: @escaping Handler
    ) async throws {
        var position = try cache.position()
        if position == nil {
            position = try await reset(connection, reason: "new cache", handle: handle)
        } else if position?.storeId != storeId {
            position = try await reset(connection, reason: "quaked now serves another store", handle: handle)
        }
        guard var position else { return }
        // The next page is asked for while this one is applied: quaked writes page n + 1 while
        // the cache takes page n, so a long catch-up is as fast as the slower of the two.
        var prefetched: Result<IOQuaked.FetchHistory.Reply, any Error>?
        while position.token != head || prefetched != nil {
            let fetched: Result<IOQuaked.FetchHistory.Reply, any Error>
            if let prefetched = prefetched.take() {
                fetched = prefetched
            } else {
                fetched = await fetchPage(connection, position)
            }
            let page: IOQuaked.FetchHistory.Reply
            switch fetched {
            case .success(let reply) where reply.storeId == position.storeId:
                page = reply
            case .success:
                position = try await reset(connection, reason: "quaked now serves another store", handle: handle)
                continue
            case .failure(let error):
                position = try await reset(connection, reason: try Self.resetReason(error, position), handle: handle)
                continue
            }
            var following = position
            following.token = max(position.token, page.nextAfter)
            if page.hasMore {
                async let next = fetchPage(connection, following)
                try await apply(page, handle: handle, backlogThrough: backlogThrough)
                prefetched = await next
            } else {
                try await apply(page, handle: handle, backlogThrough: backlogThrough)
            }
            position = following
            // Without more, the head may still have moved on while paging; the next event says so.
            if !page.hasMore { break }
        }
        if let name = options.clientName {
            try await connection.acknowledge(client: name, token: position.token)
        }
    }

    /// One page after the position, as a result (so that it can be fetched beside other work).
    private func fetchPage(_ connection: QuakedConnection, _ position: QuakeCache.Position) async -> Result<
        IOQuaked.FetchHistory.Reply, any Error
    > {
        do {
            return .success(
                try await connection.fetchHistory(
                    storeId: position.storeId, after: position.token, limit: options.pageLimit,
                    client: options.clientName))
        } catch {
            return .failure(error)
        }
    }

    /// Why history cannot continue from `position` (the cache starts over from a snapshot), or the
    /// error itself when starting over would not help.
    static func resetReason(_ error: any Error, _ position: QuakeCache.Position) throws -> String {
        switch error as? IOQuaked.Failure {
        case .tokenExpired: "history after token \(position.token) has been purged"
        case .tokenAhead: "token \(position.token) is ahead of the store (restored from an older copy?)"
        case .storeMismatch: "quaked now serves another store"
        default: throw error
        }
    }

    /// Applies a page's transactions to the cache, each in its own SQLite transaction, and reports
    /// each one right after its commit.
    private func apply(_ page: IOQuaked.FetchHistory.Reply, handle: @escaping Handler, backlogThrough: Int?)
        async throws
    {
        for transaction in page.transactions {
            guard let before = try cache.apply(transaction, storeId: page.storeId) else { continue }
            let backlog = backlogThrough.map { transaction.token <= $0 } ?? false
            do {
                try await handle(.applied(transaction, storeId: page.storeId, before: before, isBacklog: backlog))
            } catch {
                throw HandlerError(underlying: error)
            }
        }
    }

    /// Replaces the cache by a snapshot. Returns the new position.
    func reset(_ connection: QuakedConnection, reason: String, handle: @escaping Handler) async throws
        -> QuakeCache.Position
    {
        try cache.beginReset()
        var storeId: String?
        var token = 0
        for try await page in try await connection.snapshot(pageSize: options.snapshotPageSize) {
            try cache.stage(page.quakes)
            storeId = page.storeId
            token = page.token
        }
        guard let storeId else { throw VarlinkConnectionError.invalidReply("Snapshot sent no page") }
        let count = try cache.finishReset(storeId: storeId, token: token)
        do {
            try await handle(.reset(storeId: storeId, token: token, quakes: count, reason: reason))
        } catch {
            throw HandlerError(underlying: error)
        }
        return QuakeCache.Position(storeId: storeId, token: token, appliedAt: 0)
    }
}

/// When the subscription last said something.
final class EventClock: Sendable {
    private let instant = NIOLockedValueBox(ContinuousClock.now)
    var last: ContinuousClock.Instant { instant.withLockedValue { $0 } }
    func touch() { instant.withLockedValue { $0 = .now } }
}
