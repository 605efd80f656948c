import NIOConcurrencyHelpers

/// Tells everyone in this process waiting for one store's commits that a write through it has
/// committed, so they need not wait for a poll to find out.
///
/// A broadcast counter, not a one-slot flag: each waiter remembers the generation it has dealt
/// with, so a signal is never lost between a waiter's check and its sleep, and one waiter taking
/// it does not hide it from the others.
final class CommitSignal: Sendable {
    private struct State {
        var generation: UInt64 = 0
        /// When the last signal came: when a commit of this process was last announced.
        var signalled: ContinuousClock.Instant?
        var nextWaiterID: UInt64 = 0
        var waiters: [UInt64: CheckedContinuation<Void, Never>] = [:]
    }
    private let state = NIOLockedValueBox(State())

    /// How many signals there have been. Read it before looking at the store; then
    /// ``wait(past:)`` returns at once if a commit was signalled since.
    var generation: UInt64 {
        state.withLockedValue { $0.generation }
    }

    /// The generation and when its signal came (nil before the first), read together.
    var lastSignal: (generation: UInt64, at: ContinuousClock.Instant?) {
        state.withLockedValue { ($0.generation, $0.signalled) }
    }

    /// Called after a transaction that created a history transaction has committed.
    func signal() {
        let waiters = state.withLockedValue { state -> [CheckedContinuation<Void, Never>] in
            state.generation &+= 1
            state.signalled = .now
            defer { state.waiters.removeAll() }
            return Array(state.waiters.values)
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Returns once the generation is not `seen` any more (at once if it already is not), or when
    /// the task is cancelled.
    func wait(past seen: UInt64) async {
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
                    state.waiters[id] = continuation
                    return false
                }
                if resumeNow { continuation.resume() }
            }
        } onCancel: {
            state.withLockedValue { $0.waiters.removeValue(forKey: id) }?.resume()
        }
    }

    /// ``wait(past:)``, but no later than `deadline`.
    func wait(past seen: UInt64, until deadline: ContinuousClock.Instant) async {
        if generation != seen { return }
        await withTaskGroup(of: Void.self) { group in
            group.addTask { try? await Task.sleep(until: deadline, clock: .continuous) }
            group.addTask { await self.wait(past: seen) }
            await group.next()
            group.cancelAll()
        }
    }
}
