import Foundation
import NIOCore
import QuakeFeed
import QuakeStore

/// Hands items from a producer thread that may block (the store's reading thread) to an async
/// consumer, at most `capacity` items ahead: the producer waits while the consumer is behind,
/// so a slow client holds the reading back instead of filling memory.
final class Handoff<Element: Sendable>: @unchecked Sendable {
    private let condition = NSCondition()
    private let capacity: Int
    // Guarded by `condition`.
    private var buffer: [Element] = []
    private var finished = false
    private var failure: (any Error)?
    private var cancelled = false
    private var waiter: CheckedContinuation<Element?, any Error>?

    init(capacity: Int) {
        self.capacity = max(1, capacity)
    }

    /// Producer: adds `element`, waiting while `capacity` are already waiting. False once the
    /// consumer is gone (the producer should stop).
    func put(_ element: Element) -> Bool {
        condition.lock()
        while buffer.count >= capacity && !cancelled { condition.wait() }
        if cancelled {
            condition.unlock()
            return false
        }
        if let waiter {
            self.waiter = nil
            condition.unlock()
            waiter.resume(returning: element)
            return true
        }
        buffer.append(element)
        condition.unlock()
        return true
    }

    /// Producer: no more items (`error` when it failed).
    func finish(_ error: (any Error)?) {
        condition.lock()
        finished = true
        failure = error
        let waiter = self.waiter
        self.waiter = nil
        condition.unlock()
        if let error { waiter?.resume(throwing: error) } else { waiter?.resume(returning: nil) }
    }

    /// Consumer: gone; the producer's waiting `put` returns false.
    func cancel() {
        condition.lock()
        cancelled = true
        condition.broadcast()
        let waiter = self.waiter
        self.waiter = nil
        condition.unlock()
        waiter?.resume(throwing: CancellationError())
    }

    /// Consumer: the next item, nil at the end; throws the producer's error.
    func next() async throws -> Element? {
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Element?, any Error>) in
                condition.lock()
                if !buffer.isEmpty {
                    let element = buffer.removeFirst()
                    condition.signal()
                    condition.unlock()
                    continuation.resume(returning: element)
                } else if cancelled {
                    condition.unlock()
                    continuation.resume(throwing: CancellationError())
                } else if finished {
                    let failure = self.failure
                    condition.unlock()
                    if let failure { continuation.resume(throwing: failure) } else { continuation.resume(returning: nil) }
                } else {
                    waiter = continuation
                    condition.unlock()
                }
            }
        } onCancel: {
            cancel()
        }
    }
}

/// A body written in pieces of about ``chunkBytes``: bytes are appended to ``buffer`` and
/// flushed to the writer whenever that much has gathered.
struct ChunkedBody {
    static let chunkBytes = 32 * 1024
    var buffer: [UInt8] = []
    let writer: any HTTPResponseWriter
    /// Pieces written so far.
    private(set) var pieces = 0

    init(writer: any HTTPResponseWriter) {
        self.writer = writer
        buffer.reserveCapacity(Self.chunkBytes + 4096)
    }

    mutating func flushIfFull() async throws {
        if buffer.count >= Self.chunkBytes { try await flush() }
    }

    mutating func flush() async throws {
        guard !buffer.isEmpty else { return }
        let bytes = ByteBuffer(bytes: buffer)
        buffer.removeAll(keepingCapacity: true)
        pieces += 1
        try await writer.writeBody(bytes)
    }
}

extension QuakeStore {
    /// Streams `selection` to an async consumer: `begin` gets the count and token of the state
    /// the quakes are read in (return false to read none), then `each` every quake in order,
    /// then `end` (not called when `begin` returned false). The store reads at most two batches
    /// ahead of the consumer.
    func streamSelection(
        _ selection: QuakeSelection,
        begin: (QuakeSelectionCount) async throws -> Bool,
        each: (FeedFeature) async throws -> Void,
        end: () async throws -> Void
    ) async throws {
        enum Event: Sendable {
            case start(QuakeSelectionCount)
            case batch([FeedFeature])
        }
        let handoff = Handoff<Event>(capacity: 2)
        let store = self
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                do {
                    try await store.stream(
                        selection, batchSize: 128, start: { handoff.put(.start($0)) }, batch: { handoff.put(.batch($0)) })
                    handoff.finish(nil)
                } catch {
                    handoff.finish(error)
                }
            }
            do {
                var started = false
                var declined = false
                reading: while let event = try await handoff.next() {
                    switch event {
                    case .start(let counted):
                        started = true
                        if try await !begin(counted) {
                            declined = true
                            break reading
                        }
                    case .batch(let quakes):
                        for quake in quakes { try await each(quake) }
                    }
                }
                handoff.cancel()
                if started && !declined { try await end() }
            } catch {
                handoff.cancel()
                throw error
            }
            try await group.waitForAll()
        }
    }
}
