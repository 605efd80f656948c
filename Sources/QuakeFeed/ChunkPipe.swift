import Foundation

/// One chunk's worth of parsed features, handed from the producer (a ``FeedSink``, which reads and
/// parses the document) to the consumer (the store's import, which applies them inside its write
/// transaction).
public struct ParsedBatch: Sendable {
    public internal(set) var elements: [ParsedElement]
    /// The texts of the decoded records (see ``ParsedElement/Content/record(_:)``).
    public internal(set) var arena: [UInt8] = []
    /// The chunk the batch was parsed from: most undecoded elements are in it.
    var chunk: [UInt8] = []
    /// The undecoded elements that straddled chunks, back to back.
    var bytes: [UInt8] = []
    /// The parser's position after this batch: bytes consumed and `features` elements seen.
    public internal(set) var bytesConsumed: Int
    public internal(set) var featureCount: Int

    /// Decodes an element the producer passed on undecoded (``ParsedElement/Content/raw``), exactly
    /// as the producer would have: the decoded element and the arena its texts are in. Throws
    /// ``FeedError``.
    public func decode(_ bytes: ParsedElement.RawBytes, index: Int, offset: Int) throws -> (
        DecodedElement, arena: [UInt8]
    ) {
        let (buffer, range) =
            switch bytes {
            case .chunk(let range): (chunk, range)
            case .copied(let range): (self.bytes, range)
            }
        return try buffer.withUnsafeBytes { buffer in
            try FeedParser.decodeElement(UnsafeRawBufferPointer(rebasing: buffer[range]), index: index, base: offset)
        }
    }
}

/// One element of `features`, as the producer passes it on.
public struct ParsedElement: Sendable {
    public enum Content: Sendable {
        /// Decoded on the producer's side; its texts are in the batch's `arena`.
        case record(FeatureRecord)
        /// Decoded on the producer's side, and not importable.
        case skipped(SkipReason)
        /// Validated but not decoded: the element's bytes (document offset `offset`) are in the
        /// batch; the consumer decodes them (``ParsedBatch/decode(_:index:offset:)``) only if it
        /// needs to, when the stored row differs.
        case raw(id: String?, hasAliases: Bool, bytes: RawBytes, offset: Int)
    }
    /// Where the bytes of an undecoded element are in its batch.
    public enum RawBytes: Sendable {
        /// In `chunk`.
        case chunk(Range<Int>)
        /// In `bytes`.
        case copied(Range<Int>)
    }
    public var index: Int
    /// ``FeedElement/hash``.
    public var hash: UInt64
    public var content: Content
}

/// Hands parsed batches from an async producer (an HTTP body, a file reader, parsed as it arrives)
/// to a consumer that runs synchronously on a thread of its own: the store's import, inside one
/// SQLite write transaction on the database's writer thread. Parsing and SQLite thus run on two
/// threads at once.
///
/// Bounded: the producer waits while `capacity` batches (one per received chunk) are queued, so a
/// fast download never piles up in memory ahead of the import. The consumer blocks its own
/// (writer) thread while the queue is empty, never a thread of Swift's cooperative pool.
public final class ChunkPipe: @unchecked Sendable {
    private let condition = NSCondition()
    private let capacity: Int
    // All below guarded by `condition`.
    private var queue: [ParsedBatch] = []
    private var head = 0
    private var finished = false
    private var failure: (any Error)?
    private var consumerGone = false
    private var waitingProducer: CheckedContinuation<Void, any Error>?
    private var decodeOnProducer = true

    public init(capacity: Int = 8) {
        self.capacity = capacity
    }

    /// The consumer stopped reading (the import failed or finished early).
    public struct ConsumerGone: Error {}

    /// Runs the producer: `produce` writes the document to a ``FeedSink`` on this pipe (at most
    /// `maxBytes` of it), then the end of the document is checked and the pipe finished, with the
    /// error that stopped the document if one did (the consumer throws it at its next receive).
    public func produce(maxBytes: Int?, _ produce: (FeedSink) async throws -> Void) async {
        let sink = FeedSink(pipe: self, maxBytes: maxBytes)
        do {
            try await produce(sink)
            try await sink.finish()
            finish()
        } catch is ConsumerGone {
            // The consumer stopped first, or the sink already failed the pipe with the
            // parser's error; that error is the one to report.
        } catch {
            finish(throwing: error)
        }
    }

    /// Queues a chunk; suspends while the queue is full. Throws ``ConsumerGone`` once the consumer
    /// has stopped, and `CancellationError` when the task is cancelled while waiting.
    func send(_ chunk: ParsedBatch) async throws {
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                condition.lock()
                defer { condition.unlock() }
                if consumerGone {
                    continuation.resume(throwing: ConsumerGone())
                    return
                }
                if Task.isCancelled {
                    continuation.resume(throwing: CancellationError())
                    return
                }
                queue.append(chunk)
                condition.signal()
                if queue.count - head < capacity {
                    continuation.resume()
                } else {
                    waitingProducer = continuation
                }
            }
        } onCancel: {
            condition.lock()
            let waiting = waitingProducer
            waitingProducer = nil
            condition.unlock()
            waiting?.resume(throwing: CancellationError())
        }
    }

    /// The producer is done: with `error`, the consumer fails with it at its next receive.
    func finish(throwing error: (any Error)? = nil) {
        condition.lock()
        if !finished {
            finished = true
            failure = error
        }
        condition.broadcast()
        condition.unlock()
    }

    /// The next chunk, blocking until one arrives; `nil` at the end. Throws the producer's error.
    public func receive() throws -> ParsedBatch? {
        condition.lock()
        defer { condition.unlock() }
        while head == queue.count && !finished {
            condition.wait()
        }
        if let failure { throw failure }
        guard head < queue.count else { return nil }
        let chunk = queue[head]
        queue[head].elements = []
        queue[head].arena = []
        queue[head].chunk = []
        queue[head].bytes = []
        head += 1
        if head == queue.count {
            queue.removeAll(keepingCapacity: true)
            head = 0
        }
        if let waiting = waitingProducer, queue.count - head < capacity {
            waitingProducer = nil
            waiting.resume()
        }
        return chunk
    }

    /// Whether the producer should decode the elements it parses. The import turns this off while
    /// most features are found unchanged by their hash (a re-import: decoding them would be
    /// wasted) and on while most are new or changed (decoding then overlaps the SQLite work).
    public var decodeEagerly: Bool {
        get {
            condition.lock()
            defer { condition.unlock() }
            return decodeOnProducer
        }
        set {
            condition.lock()
            decodeOnProducer = newValue
            condition.unlock()
        }
    }

    /// The consumer stops reading: queued chunks are dropped and the producer's next send throws.
    public func closeConsumer() {
        condition.lock()
        consumerGone = true
        queue.removeAll()
        head = 0
        let waiting = waitingProducer
        waitingProducer = nil
        condition.unlock()
        waiting?.resume(throwing: ConsumerGone())
    }
}
