import Foundation
import QuakeVarlink
import Synchronization

/// The `watch` loop: keeps a ``QuakeCache`` in step with quaked and prints each change once.
///
/// It subscribes first, then catches up from the cache's token with paged FetchHistory, then
/// catches up again whenever a notification (or heartbeat) shows a newer head; so nothing that
/// commits between the catch-up and the tail is missed. Each history transaction is applied to
/// the cache in one SQLite transaction and printed right after its commit; one already applied
/// is never applied or printed again. When the daemon goes away the cache stays, and the loop
/// reconnects with backoff and resumes from the saved token.
public struct Watcher: Sendable {
    public struct Options: Sendable {
        public var socketPath: String
        /// A durable client name: quaked keeps history this client has not acknowledged.
        public var clientName: String?
        /// Apply the backlog without printing it.
        public var sinceNow = false
        /// Print only changes with a magnitude of at least this (the cache keeps everything).
        public var minMagnitude: Double?
        public var heartbeatSeconds = 30
        public var initialBackoff: Duration = .milliseconds(200)
        public var maxBackoff: Duration = .seconds(5)
        public var pageLimit = 100
        public var snapshotPageSize = 1000

        public init(socketPath: String) {
            self.socketPath = socketPath
        }
    }

    public let options: Options
    public let cache: QuakeCache
    public let style: OutputStyle

    public init(options: Options, cache: QuakeCache, style: OutputStyle) {
        self.options = options
        self.cache = cache
        self.style = style
    }

    /// Runs until cancelled, or until a failure retrying cannot fix (permission denied).
    public func run() async throws {
        var backoff = options.initialBackoff
        var away = false
        var printFrom: Int64?
        while true {
            do {
                try await session(printFrom: &printFrom) {
                    backoff = options.initialBackoff
                    if away {
                        Console.err("quakectl: reconnected to quaked; catching up from the cache's token.\n")
                        away = false
                    }
                }
            } catch let error as QuakectlError where error.exitCode == QuakectlError.permissionDenied {
                throw error
            } catch let error as VarlinkCallError where error.name == VarlinkErrorName.permissionDenied {
                throw QuakectlError.from(error)
            } catch is CancellationError {
                throw CancellationError()
            } catch {
                if Task.isCancelled { throw CancellationError() }
                if !away {
                    let reason = QuakectlError.from(error).message
                    Console.err("quakectl: \(reason) Retrying; the cache is kept.\n")
                    away = true
                }
            }
            try await Task.sleep(for: backoff)
            backoff = min(backoff * 2, options.maxBackoff)
        }
    }

    /// One connection's worth of watching; returns or throws when the connection ends.
    private func session(printFrom: inout Int64?, connected: () -> Void) async throws {
        let subscription = try await QuakedConnection.connect(to: options.socketPath)
        let requests: QuakedConnection
        do {
            requests = try await QuakedConnection.connect(to: options.socketPath)
        } catch {
            await subscription.close()
            throw error
        }
        do {
            try await follow(subscription, requests, printFrom: &printFrom, connected: connected)
        } catch {
            await subscription.close()
            await requests.close()
            throw error
        }
    }

    private func follow(
        _ subscription: QuakedConnection, _ requests: QuakedConnection, printFrom: inout Int64?,
        connected: () -> Void
    ) async throws {

        var events = try await subscription.subscribe(
            client: options.clientName, heartbeatSeconds: options.heartbeatSeconds
        ).makeAsyncIterator()
        guard let first = try await events.next() else { throw VarlinkConnectionError.closed }
        connected()
        if options.sinceNow && printFrom == nil { printFrom = first.headToken }
        let floor = printFrom
        try await catchUp(requests, storeId: first.storeId, head: first.headToken, printAfter: floor)

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
                try await catchUp(requests, storeId: event.storeId, head: event.headToken, printAfter: floor)
                // A long catch-up (a reset of a large store) is not silence.
                lastEvent.touch()
            }
            group.cancelAll()
        }
        throw VarlinkConnectionError.closed
    }

    /// Brings the cache to `head` of `storeId`, resetting it from a snapshot when history cannot.
    func catchUp(_ connection: QuakedConnection, storeId: String, head: Int64, printAfter: Int64?) async throws {
        var position = try cache.position()
        if position == nil {
            position = try await reset(connection, reason: "new cache")
        } else if position?.storeId != storeId {
            position = try await reset(connection, reason: "quaked now serves another store")
        }
        guard var position else { return }
        var acknowledged = false
        while position.token != head || !acknowledged {
            if position.token == head {
                if let name = options.clientName {
                    try await connection.acknowledge(client: name, token: position.token)
                }
                acknowledged = true
                break
            }
            let page: QuakedAPI.HistoryPage
            do {
                page = try await connection.fetchHistory(
                    storeId: position.storeId, after: position.token, limit: options.pageLimit,
                    client: options.clientName)
            } catch let error as VarlinkCallError {
                let reason: String
                switch error.name {
                case QuakedAPI.Errors.tokenExpired:
                    reason = "history after token \(position.token) has been purged"
                case QuakedAPI.Errors.tokenAhead:
                    reason = "token \(position.token) is ahead of the store (restored from an older copy?)"
                case QuakedAPI.Errors.storeMismatch:
                    reason = "quaked now serves another store"
                default:
                    throw error
                }
                position = try await reset(connection, reason: reason)
                continue
            }
            if page.storeId != position.storeId {
                position = try await reset(connection, reason: "quaked now serves another store")
                continue
            }
            for transaction in page.transactions {
                guard let before = try cache.apply(transaction, storeId: page.storeId) else { continue }
                if printAfter.map({ transaction.token > $0 }) ?? true {
                    print(transaction, storeId: page.storeId, before: before)
                }
            }
            position.token = max(position.token, page.nextAfter)
            if !page.hasMore {
                // The head may have moved on while paging; the next event says so.
                if let name = options.clientName {
                    try await connection.acknowledge(client: name, token: position.token)
                }
                break
            }
        }
    }

    /// Replaces the cache by a snapshot and says so in one line. Returns the new position.
    func reset(_ connection: QuakedConnection, reason: String) async throws -> QuakeCache.Position {
        try cache.beginReset()
        var storeId: String?
        var token: Int64 = 0
        for try await page in try await connection.snapshot(pageSize: options.snapshotPageSize) {
            try cache.stage(page.quakes)
            storeId = page.storeId
            token = page.token
        }
        guard let storeId else { throw VarlinkConnectionError.invalidReply("Snapshot sent no page") }
        let count = try cache.finishReset(storeId: storeId, token: token)
        if style.json {
            Console.line(
                Self.json(WatchLine(event: "reset", storeId: storeId, token: token, quakes: count, reason: reason)))
        } else {
            Console.line(
                style.bold("reset")
                    + "    cache replaced (\(reason)): \(Formatting.earthquakes(count)) at token \(token) of store \(storeId)"
            )
        }
        return QuakeCache.Position(storeId: storeId, token: token, appliedAt: 0)
    }

    private func print(_ transaction: QuakedAPI.Transaction, storeId: String, before: [String: QuakedAPI.Quake]) {
        var text = ""
        for change in transaction.changes where passes(change, before: before[change.quakeId]) {
            if style.json {
                text +=
                    Self.json(
                        WatchLine(
                            event: "change", storeId: storeId, token: transaction.token, author: transaction.author,
                            change: change)) + "\n"
            } else {
                text += ChangeText.line(change, before: before[change.quakeId], style) + "\n"
            }
        }
        if !text.isEmpty { Console.out(text) }
    }

    /// `--min-mag`: an update passes when the old or the new magnitude does.
    func passes(_ change: QuakedAPI.Change, before: QuakedAPI.Quake?) -> Bool {
        guard let min = options.minMagnitude else { return true }
        var mags = [change.quake?.mag, change.tombstone?.mag, before?.mag, ChangeText.newValue(change, "mag")]
        if case .number(let old)? = change.fields?.first(where: { $0.field == "mag" })?.old { mags.append(old) }
        return mags.contains { ($0 ?? -.infinity) >= min }
    }

    struct WatchLine: Encodable {
        var event: String
        var storeId: String
        var token: Int64
        var author: String?
        var change: QuakedAPI.Change?
        var quakes: Int?
        var reason: String?
    }

    static func json(_ value: some Encodable) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return (try? String(decoding: encoder.encode(value), as: UTF8.self)) ?? "{}"
    }
}

/// When the subscription last said something.
final class EventClock: Sendable {
    private let instant = Mutex(ContinuousClock.now)
    var last: ContinuousClock.Instant { instant.withLock { $0 } }
    func touch() { instant.withLock { $0 = .now } }
}
