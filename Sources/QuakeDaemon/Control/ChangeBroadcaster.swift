import Foundation
import QuakeProtocol
import QuakeStore
import ServiceLifecycle
import Synchronization
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
        public var frame: [UInt8]
    }

    final class Subscription: Sendable {
        private let pending = Mutex<Change?>(nil)
        fileprivate let wakeup = Wakeup()

        fileprivate func offer(_ change: Change) {
            pending.withLock { pending in
                if let current = pending, current.head >= change.head { return }
                pending = change
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
            pending.withLock { pending in
                defer { pending = nil }
                return pending
            }
        }
    }

    private let store: QuakeStore
    private let storeID: String
    private let subscriptions = Mutex<[ObjectIdentifier: Subscription]>([:])

    public init(store: QuakeStore) {
        self.store = store
        self.storeID = store.storeID
    }

    /// Follows the store's commits until graceful shutdown.
    public func run() async throws {
        do {
            try await cancelWhenGracefulShutdown {
                for try await commit in self.store.commits() {
                    self.publish(head: commit.token, author: commit.author)
                }
            }
        } catch is CancellationError {
            // Shutdown.
        }
    }

    /// The number of subscribers.
    public var count: Int { subscriptions.withLock { $0.count } }

    /// Announces a committed transaction to every subscriber.
    func publish(head: HistoryToken, author: HistoryAuthor?) {
        let change = Change(
            head: head, author: author, frame: Self.frame(.changed, storeID: storeID, head: head, author: author))
        for subscription in subscriptions.withLock({ Array($0.values) }) {
            subscription.offer(change)
        }
    }

    /// A Subscribe reply frame (with `continues`).
    static func frame(
        _ event: IOQuaked.SubscribeEvent, storeID: String, head: HistoryToken, author: HistoryAuthor? = nil
    ) -> [UInt8] {
        VarlinkReply.frame(
            IOQuaked.Subscribe.Reply(
                event: event, storeId: storeID, headToken: Int(head), author: author.map(IOQuaked.Author.init)),
            continues: true)
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
