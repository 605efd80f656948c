import Foundation
import QuakeStore
import Synchronization

/// Remote-change notifications: tells every subscriber the newest history token.
///
/// Each subscriber has one slot holding the latest head, not a queue: a subscriber that reads
/// slowly gets the newest head when it next looks, and memory stays constant however far behind
/// it is.
public final class ChangeBroadcaster: Sendable {
    /// What a subscriber learns.
    public struct Change: Sendable, Equatable {
        public var head: HistoryToken
        public var author: HistoryAuthor?
    }

    final class Subscription: Sendable {
        private struct State {
            var pending: Change?
        }
        private let state = Mutex(State())
        fileprivate let wakeup = Wakeup()

        fileprivate func offer(_ change: Change) {
            state.withLock { state in
                if let pending = state.pending, pending.head >= change.head { return }
                state.pending = change
            }
            wakeup.signal()
        }

        /// The newest change not yet taken, waiting up to `deadline`; nil when the deadline
        /// passed with no change (time for a heartbeat) or the task was cancelled.
        func next(until deadline: ContinuousClock.Instant) async -> Change? {
            if let change = take() { return change }
            await wakeup.wait(until: deadline)
            return take()
        }

        private func take() -> Change? {
            state.withLock { state in
                defer { state.pending = nil }
                return state.pending
            }
        }
    }

    private let subscriptions = Mutex<[ObjectIdentifier: Subscription]>([:])

    public init() {}

    /// The number of subscribers.
    public var count: Int { subscriptions.withLock { $0.count } }

    /// Announces a committed transaction.
    public func publish(head: HistoryToken, author: HistoryAuthor?) {
        let change = Change(head: head, author: author)
        for subscription in subscriptions.withLock({ Array($0.values) }) {
            subscription.offer(change)
        }
    }

    /// Runs `body` with a subscription that receives every publication while `body` runs.
    func withSubscription<T>(_ body: (Subscription) async throws -> T) async rethrows -> T {
        let subscription = Subscription()
        let key = ObjectIdentifier(subscription)
        subscriptions.withLock { $0[key] = subscription }
        defer { _ = subscriptions.withLock { $0.removeValue(forKey: key) } }
        return try await body(subscription)
    }
}
