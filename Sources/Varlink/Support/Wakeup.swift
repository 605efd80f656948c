import NIOConcurrencyHelpers

/// A one-slot signal a sleeping loop can be woken with: a `signal()` before the `wait()` is
/// remembered, so a wake-up is never lost between the check and the sleep. (Not Varlink's own:
/// the one small concurrency helper quaked's daemon and client both use.)
public final class Wakeup: Sendable {
    private struct State {
        var pending = false
        var waiter: CheckedContinuation<Void, Never>?
    }
    private let state = NIOLockedValueBox(State())

    public init() {}

    public func signal() {
        let waiter = state.withLockedValue { state -> CheckedContinuation<Void, Never>? in
            guard let waiter = state.waiter else {
                state.pending = true
                return nil
            }
            state.waiter = nil
            return waiter
        }
        waiter?.resume()
    }

    /// Forgets a pending signal (its reason has been dealt with).
    public func reset() {
        state.withLockedValue { $0.pending = false }
    }

    /// Returns at the next signal, at once if one is pending, or when the task is cancelled.
    public func wait() async {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let resumeNow = state.withLockedValue { state -> Bool in
                    if state.pending || Task.isCancelled {
                        state.pending = false
                        return true
                    }
                    state.waiter = continuation
                    return false
                }
                if resumeNow { continuation.resume() }
            }
        } onCancel: {
            let waiter = state.withLockedValue { state -> CheckedContinuation<Void, Never>? in
                defer { state.waiter = nil }
                return state.waiter
            }
            waiter?.resume()
        }
    }

    /// Sleeps until `deadline` or the next signal, whichever comes first.
    public func wait(until deadline: ContinuousClock.Instant) async {
        await withTaskGroup(of: Void.self) { group in
            group.addTask { try? await Task.sleep(until: deadline, clock: .continuous) }
            group.addTask { await self.wait() }
            await group.next()
            group.cancelAll()
        }
    }
}

extension Wakeup {
    /// Sleeps for `duration` or until the next signal, whichever comes first.
    public func wait(upTo duration: Duration) async {
        await wait(until: .now + duration)
    }
}
