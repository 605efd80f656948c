import Foundation
import NIOCore
import QuakeProtocol
import QuakeStore
import ServiceLifecycle
import NIOConcurrencyHelpers
import Varlink

/// Remote-change notifications: tells every subscriber the newest history token.
///
/// Each committed transaction is encoded once, as a whole `changed` reply frame, and the same
/// bytes go to every subscriber: no JSON work per subscriber. Each subscriber has one slot holding
/// the latest frame, not a queue: a subscriber that reads slowly gets the newest head when it next
/// looks, and memory stays constant however far behind it is.
///
/// It learns of commits from the store itself (``QuakeStore/commits(after:pollInterval:)``), once
/// for all subscribers: every write path (imports, deletes, retention, and another process such
/// as `quaked --once` on the same file) is announced without a publish call of its own.
public final class ChangeBroadcaster: Service, Sendable {
    /// What a subscriber learns: the newest head, and its `changed` reply, ready to write.
    public struct Change: Sendable, Equatable {
        public var head: HistoryToken
        public var author: HistoryAuthor?
        /// Encoded once; every subscriber writes the same buffer (ByteBuffer is copy-on-write).
        public var frame: ByteBuffer
    }

    /// What a subscriber is woken for.
    enum Event: Sendable, Equatable {
        case change(Change)
        /// Nothing changed for the subscriber's heartbeat interval.
        case heartbeat
    }

    /// One subscriber: the newest change not yet sent, the newest head sent, and when its next
    /// heartbeat is due.
    ///
    /// A change is written by the publisher itself, at once and without a task switch, when the
    /// subscriber can take it (``VarlinkCallContext/trySend``: its socket keeps up and nothing else
    /// is being written to it). Otherwise it waits in the one slot, replacing an older one, and the
    /// subscriber's own task writes it, awaiting the socket: a slow reader gets the latest head,
    /// never a queue. Waiting costs no timer: the broadcaster's one ticker flags due heartbeats.
    /// Replies stay in order and their heads strictly increase: the publisher writes only while
    /// the task is not writing, and only heads above the last one sent.
    final class Subscription: Sendable {
        private struct State {
            var pending: Change?
            var lastSent: HistoryToken
            var heartbeatDue: ContinuousClock.Instant
            var heartbeatPending = false
            /// The first reply (`subscribed`) has gone out: changes may follow.
            var ready = false
            /// The task is writing a reply.
            var writing = false
        }
        private let state: NIOLockedValueBox<State>
        private let wakeup = Wakeup()
        private let sendNow: (@Sendable (ByteBuffer) -> Bool)?
        /// The connection's event loop: the publisher offers changes from it.
        let eventLoop: (any EventLoop)?
        let heartbeat: Duration

        init(heartbeat: Duration, sendNow: (@Sendable (ByteBuffer) -> Bool)?, eventLoop: (any EventLoop)?) {
            self.heartbeat = heartbeat
            self.sendNow = sendNow
            self.eventLoop = eventLoop
            self.state = NIOLockedValueBox(State(lastSent: 0, heartbeatDue: .now + heartbeat))
        }

        /// The newest head sent (or announced in the first reply).
        var lastSent: HistoryToken { state.withLockedValue { $0.lastSent } }

        /// The first reply, announcing `head`, has been written; later changes go out from now on.
        func markReady(announced head: HistoryToken) {
            let waiting = state.withLockedValue { state in
                state.ready = true
                state.lastSent = max(state.lastSent, head)
                return state.pending != nil
            }
            if waiting { wakeup.signal() }
        }

        fileprivate func offer(_ change: Change) {
            let queued = state.withLockedValue { state -> Bool in
                guard change.head > state.lastSent else { return false }
                if state.ready, !state.writing, state.pending == nil, let sendNow, sendNow(change.frame) {
                    state.lastSent = change.head
                    state.heartbeatDue = .now + heartbeat
                    return false
                }
                if let current = state.pending, current.head >= change.head { return false }
                state.pending = change
                return true
            }
            if queued { wakeup.signal() }
        }

        /// Flags the heartbeat when it is due (called by the ticker).
        fileprivate func tick(now: ContinuousClock.Instant) {
            let due = state.withLockedValue { state -> Bool in
                guard state.pending == nil, !state.heartbeatPending, now >= state.heartbeatDue else { return false }
                state.heartbeatPending = true
                return true
            }
            if due { wakeup.signal() }
        }

        /// The next reply to write; nil when the task is cancelled. Call ``finishedWriting()``
        /// once it is written.
        func next() async -> Event? {
            while !Task.isCancelled {
                if let event = take() { return event }
                await wakeup.wait()
            }
            return nil
        }

        func finishedWriting() {
            let waiting = state.withLockedValue { state in
                state.writing = false
                return state.pending != nil
            }
            if waiting { wakeup.signal() }
        }

        private func take() -> Event? {
            state.withLockedValue { state in
                guard state.ready, !state.writing else { return nil }
                let event: Event
                if let change = state.pending, change.head > state.lastSent {
                    event = .change(change)
                    state.lastSent = change.head
                } else if state.heartbeatPending {
                    event = .heartbeat
                } else {
                    state.pending = nil
                    return nil
                }
                state.pending = nil
                state.heartbeatPending = false
                state.heartbeatDue = .now + heartbeat
                state.writing = true
                return event
            }
        }
    }

    private let store: QuakeStore
    private let storeID: String
    private let subscriptions = NIOLockedValueBox<[ObjectIdentifier: Subscription]>([:])
    /// Told, for each commit of this process that had subscribers, how long it took from the
    /// commit until every subscriber had been offered the change (the metrics' latency).
    private let notified: (@Sendable (Duration) -> Void)?

    /// Registers its series (``BroadcastMetrics``) in `metrics`, if given.
    public init(store: QuakeStore, metrics: QuakedMetrics? = nil) {
        self.store = store
        self.storeID = store.storeID
        guard let metrics else {
            self.notified = nil
            return
        }
        let series = BroadcastMetrics(metrics)
        self.notified = { @Sendable latency in series.recordNotification(latency: latency) }
        metrics.onScrape { [weak self] in
            guard let self else { return }
            series.update(subscribers: self.count)
        }
    }

    /// Follows the store's commits, and flags due heartbeats, until graceful shutdown.
    public func run() async throws {
        do {
            try await cancelWhenGracefulShutdown {
                try await withThrowingTaskGroup(of: Void.self) { group in
                    group.addTask {
                        for try await commit in self.store.commits() {
                            self.announce(commit)
                        }
                    }
                    group.addTask {
                        while true {
                            try await Task.sleep(for: Self.tick)
                            let now = ContinuousClock.now
                            for subscription in self.subscriptions.withLockedValue({ Array($0.values) }) {
                                subscription.tick(now: now)
                            }
                        }
                    }
                    try await group.next()
                    group.cancelAll()
                }
            }
        } catch is CancellationError {
            // Shutdown.
        }
    }

    /// How often due heartbeats are looked for: their precision.
    static let tick = Duration.milliseconds(250)

    /// The number of subscribers.
    public var count: Int { subscriptions.withLockedValue { $0.count } }

    /// The publication under way (its loops still offering it) and the newest commit waiting for
    /// it to finish.
    private struct Flight {
        var inFlight = false
        var waiting: StoreCommit?
    }
    private let flight = NIOLockedValueBox(Flight())

    /// Publishes `commit`, one publication at a time: a commit that comes while the loops are
    /// still offering the one before waits for them, replacing any older commit waiting (each
    /// subscriber wants the newest head, not every head). So a stream of commits costs the loops
    /// at most one offer per subscriber at a time, however fast it comes and however many
    /// subscribers there are; a single commit is published at once.
    func announce(_ commit: StoreCommit) {
        let start = flight.withLockedValue { flight -> Bool in
            if flight.inFlight {
                flight.waiting = commit
                return false
            }
            flight.inFlight = true
            return true
        }
        if start { publish(commit) }
    }

    private func publish(_ commit: StoreCommit) {
        publish(head: commit.token, author: commit.author, committedAt: commit.committedAt) { [self] in
            let next = flight.withLockedValue { flight -> StoreCommit? in
                defer { flight.waiting = nil }
                if flight.waiting == nil { flight.inFlight = false }
                return flight.waiting
            }
            if let next { publish(next) }
        }
    }

    /// Announces a committed transaction to every subscriber. Subscribers are offered the change
    /// from their connection's event loop, one task per loop: a write then needs no hop from
    /// thread to thread, and the loops write in parallel.
    ///
    /// `committedAt` (a commit of this process) starts the latency clock: the last loop to finish
    /// offering stops it. One measurement per commit, none per subscriber.
    /// `done` runs once every subscriber has been offered it.
    func publish(
        head: HistoryToken, author: HistoryAuthor?, committedAt: ContinuousClock.Instant? = nil,
        done: (@Sendable () -> Void)? = nil
    ) {
        let change = Change(
            head: head, author: author, frame: Self.frame(.changed, storeID: storeID, head: head, author: author))
        let all = subscriptions.withLockedValue({ Array($0.values) })
        var byLoop: [ObjectIdentifier: (loop: any EventLoop, subscriptions: [Subscription])] = [:]
        for subscription in all {
            guard let loop = subscription.eventLoop else {
                subscription.offer(change)
                continue
            }
            byLoop[ObjectIdentifier(loop), default: (loop, [])].subscriptions.append(subscription)
        }
        // The last part to finish (a loop's, or the subscriptions without one, offered above)
        // stops the latency clock of a commit of this process and ends the publication.
        let notified = all.isEmpty ? nil : self.notified
        let countdown: Countdown? =
            if (notified != nil && committedAt != nil) || done != nil {
                Countdown(parts: byLoop.count + 1) {
                    if let notified, let committedAt { notified(ContinuousClock.now - committedAt) }
                    done?()
                }
            } else {
                nil
            }
        for (loop, subscriptions) in byLoop.values {
            loop.execute {
                for subscription in subscriptions { subscription.offer(change) }
                countdown?.partDone()
            }
        }
        countdown?.partDone()  // the subscriptions without a loop, offered above
    }

    /// Runs its action when the last of its parts is done (a publication's loops: the latency
    /// metric, and the end of the publication for ``announce(_:)``).
    private final class Countdown: Sendable {
        private let remaining: NIOLockedValueBox<Int>
        private let action: @Sendable () -> Void

        init(parts: Int, action: @escaping @Sendable () -> Void) {
            self.remaining = NIOLockedValueBox(parts)
            self.action = action
        }

        func partDone() {
            let last = remaining.withLockedValue { remaining in
                remaining -= 1
                return remaining == 0
            }
            if last { action() }
        }
    }

    /// A Subscribe reply frame (with `continues`).
    static func frame(
        _ event: IOQuaked.SubscribeEvent, storeID: String, head: HistoryToken, author: HistoryAuthor? = nil
    ) -> ByteBuffer {
        ByteBuffer(bytes: VarlinkReply.frame(
            IOQuaked.Subscribe.Reply(
                event: event, storeId: storeID, headToken: Int(head), author: author.map(IOQuaked.Author.init)),
            continues: true))
    }

    /// Runs `body` with a subscription that receives every publication while `body` runs. Nothing
    /// is sent before `body` calls ``Subscription/markReady(announced:)``.
    func withSubscription<T>(
        heartbeat: Duration, sendNow: (@Sendable (ByteBuffer) -> Bool)?, eventLoop: (any EventLoop)?,
        _ body: (Subscription) async throws -> T
    ) async rethrows -> T {
        let subscription = Subscription(heartbeat: heartbeat, sendNow: sendNow, eventLoop: eventLoop)
        let key = ObjectIdentifier(subscription)
        subscriptions.withLockedValue { $0[key] = subscription }
        defer { _ = subscriptions.withLockedValue { $0.removeValue(forKey: key) } }
        return try await body(subscription)
    }
}
