import QuakeModel
import Synchronization

/// The items read from one connection's socket and not yet handed to the caller: the reader
/// appends as messages come, the delivery loop takes them in arrival order, a batch at a time,
/// once the catch-up is done. One reader and one taker.
final class PendingItems: Sendable {
    private struct State {
        var items: [SourceItem] = []
        var finished = false
    }

    private let state = Mutex(State())
    /// A wake-up for the taker: at most one is kept, so an append while the taker is busy is
    /// never lost and never piles up.
    private let signal: AsyncStream<Void>
    private let wake: AsyncStream<Void>.Continuation

    init() {
        (signal, wake) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
    }

    /// Adds an item; false when `limit` items are already waiting, and then, at once, the
    /// waiting items are dropped and no more are taken (as ``finish(discard:)``), so that the
    /// taker never gets part of an overflowing buffer.
    func append(_ item: SourceItem, limit: Int) -> Bool {
        let added = state.withLock { state -> Bool in
            guard !state.finished else { return false }
            guard state.items.count < limit else {
                state.finished = true
                state.items.removeAll()
                return false
            }
            state.items.append(item)
            return true
        }
        if added { wake.yield(()) } else { wake.finish() }
        return added
    }

    /// No more items will come (the socket ended); `discard` drops those still waiting.
    func finish(discard: Bool = false) {
        state.withLock { state in
            state.finished = true
            if discard { state.items.removeAll() }
        }
        wake.finish()
    }

    var isFinished: Bool { state.withLock { $0.finished } }

    /// Up to `max` of the waiting items, oldest first, waiting for one when there are none; nil
    /// once the reader has finished and every item has been taken. Throws `CancellationError`
    /// when the task is cancelled while it waits.
    func take(max: Int) async throws -> [SourceItem]? {
        var iterator = signal.makeAsyncIterator()
        while true {
            let batch = state.withLock { state -> [SourceItem]? in
                if state.items.isEmpty { return state.finished ? nil : [] }
                let n = Swift.min(max, state.items.count)
                defer { state.items.removeFirst(n) }
                return Array(state.items.prefix(n))
            }
            guard let batch else { return nil }
            if !batch.isEmpty { return batch }
            // Nothing yet: an append or finish after the check above has left a wake-up behind.
            _ = await iterator.next()
            try Task.checkCancellation()
        }
    }
}
