import Dispatch
import GRDB
import NIOConcurrencyHelpers

/// Tells everyone in this process waiting for one store's commits that a write through it has
/// committed, so they need not wait for a poll to find out.
///
/// A broadcast counter, not a one-slot flag: each waiter remembers the generation it has dealt
/// with, so a signal is never lost between a waiter's check and its sleep, and one waiter taking
/// it does not hide it from the others.
///
/// A signal may carry the commit itself (the head and its author, as the committing connection
/// read them right after its commit), so that those told need not read the store to learn it.
final class CommitSignal: Sendable {
    private struct State {
        var generation: UInt64 = 0
        /// When the last signal came: when a commit of this process was last announced.
        var signalled: ContinuousClock.Instant?
        /// The newest commit a signal carried.
        var commit: StoreCommit?
        /// The writer's current transaction took a history token (``arm()``): its commit is
        /// announced.
        var armed = false
        var nextWaiterID: UInt64 = 0
        var waiters: [UInt64: CheckedContinuation<Void, Never>] = [:]
    }
    private let state = NIOLockedValueBox(State())

    /// How many signals there have been. Read it before looking at the store; then
    /// ``wait(past:)`` returns at once if a commit was signalled since.
    var generation: UInt64 {
        state.withLockedValue { $0.generation }
    }

    /// The generation, when its signal came (nil before the first) and the newest commit a signal
    /// carried, read together.
    var lastSignal: (generation: UInt64, at: ContinuousClock.Instant?, commit: StoreCommit?) {
        state.withLockedValue { ($0.generation, $0.signalled, $0.commit) }
    }

    /// Called by the writer, in a transaction, when it takes a history token: the commit that
    /// ends the transaction is to be announced (``CommitAnnouncer``).
    func arm() {
        state.withLockedValue { $0.armed = true }
    }

    /// Whether the transaction that just ended had armed the signal; disarms it.
    func takeArmed() -> Bool {
        state.withLockedValue { state in
            defer { state.armed = false }
            return state.armed
        }
    }

    /// Called after a transaction that created a history transaction has committed, with the
    /// head as the committing connection read it then, if it did.
    func signal(_ commit: StoreCommit? = nil) {
        let waiters = state.withLockedValue { state -> [CheckedContinuation<Void, Never>] in
            state.generation &+= 1
            let now = ContinuousClock.now
            state.signalled = now
            if var commit, commit.token > state.commit?.token ?? 0 {
                commit.committedAt = now
                state.commit = commit
            }
            defer { state.waiters.removeAll() }
            return Array(state.waiters.values)
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Returns once the generation is not `seen` any more (at once if it already is not), at
    /// `deadline` if one is given, or when the task is cancelled.
    ///
    /// One continuation whichever comes first: a signal resumes the waiting task directly. (A
    /// task group racing a sleep against the signal cost a commit's announcement several more
    /// hand-offs between threads: the group's children, and the cancelled sleep awaited.) The
    /// deadline is a Dispatch timer that resumes the waiter only if it is still waiting.
    func wait(past seen: UInt64, until deadline: ContinuousClock.Instant? = nil) async {
        let id = state.withLockedValue { state -> UInt64 in
            defer { state.nextWaiterID &+= 1 }
            return state.nextWaiterID
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let resumeNow = state.withLockedValue { state -> Bool in
                    // The cancellation flag is set before `onCancel` runs: either `onCancel` finds
                    // this waiter, or this check sees the flag.
                    if state.generation != seen || Task.isCancelled { return true }
                    if let deadline, deadline <= .now { return true }
                    state.waiters[id] = continuation
                    return false
                }
                if resumeNow {
                    continuation.resume()
                } else if let deadline {
                    let nanoseconds = max(0, ContinuousClock.now.duration(to: deadline) / .nanoseconds(1))
                    DispatchQueue.global().asyncAfter(deadline: .now() + .nanoseconds(Int(nanoseconds))) { [state] in
                        state.withLockedValue { $0.waiters.removeValue(forKey: id) }?.resume()
                    }
                }
            }
        } onCancel: {
            state.withLockedValue { $0.waiters.removeValue(forKey: id) }?.resume()
        }
    }
}

/// Announces the store writer's commits that took a history token: one observer for the writer
/// connection's lifetime, added when it opens.
///
/// Not `afterNextTransaction` in each write: adding a transaction observer makes GRDB drop every
/// cached statement that can delete rows (whether deletes may use SQLite's truncate optimization
/// depends on the observers), so each write prepared its delete statements again.
final class CommitAnnouncer: TransactionObserver {
    private let signal: CommitSignal

    init(signal: CommitSignal) { self.signal = signal }

    func observes(eventsOfKind eventKind: DatabaseEventKind) -> Bool { false }
    func databaseDidChange(with event: DatabaseEvent) {}

    func databaseDidCommit(_ db: Database) {
        if signal.takeArmed() { signal.signal(QuakeStore.committed(db)) }
    }

    func databaseDidRollback(_ db: Database) {
        _ = signal.takeArmed()
    }
}
