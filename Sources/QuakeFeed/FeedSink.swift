import Foundation

/// Where a producer writes a feed document's bytes (QuakeStore's `importFeed` makes one, with
/// ``ChunkPipe/produce(maxBytes:_:)``, and adds `sendFile`: QuakeFeed itself does no I/O).
///
/// The sink parses each chunk as it arrives, on the producer's side, and hands the parsed features
/// to the consumer through its ``ChunkPipe``, so parsing and SQLite work overlap. A parse error (or
/// going over `maxBytes`: ``TooLarge``) is handed to the consumer the same way; `send` then throws
/// ``ChunkPipe/ConsumerGone``.
public struct FeedSink: Sendable {
    let pipe: ChunkPipe
    private let state: SinkState

    /// The document is larger than the sink's `maxBytes`. Thrown to the consumer, by
    /// ``ChunkPipe/receive()``, in place of the chunk that goes over.
    public struct TooLarge: Error, Sendable {
        /// The sink's maximum.
        public var maxBytes: Int
        /// The elements of `features` parsed before the chunk that went over.
        public var featureIndex: Int
    }

    init(pipe: ChunkPipe, maxBytes: Int?) {
        self.pipe = pipe
        self.state = SinkState(maxBytes: maxBytes)
    }

    /// Passes the next chunk of the document to the import; waits while the import is behind.
    public func send(_ chunk: [UInt8]) async throws {
        guard !chunk.isEmpty else { return }
        if let batch = try parse(chunk) { try await pipe.send(batch) }
    }

    /// Parses a chunk; returns the batch to send, if any. On a parse error the pipe fails with it.
    private func parse(_ chunk: [UInt8]) throws -> ParsedBatch? {
        do {
            return try state.consume(chunk, decode: pipe.decodeEagerly)
        } catch {
            pipe.finish(throwing: error)
            throw ChunkPipe.ConsumerGone()
        }
    }

    /// The end of the document: checks it is complete and sends the last batch.
    func finish() async throws {
        let batch: ParsedBatch
        do {
            batch = try state.finish()
        } catch {
            pipe.finish(throwing: error)
            throw ChunkPipe.ConsumerGone()
        }
        try await pipe.send(batch)
    }
}

/// The sink's parser: makes each chunk the batch the consumer gets (the feed-parser fuzz target
/// calls it directly). Used by one producer at a time; the lock only makes that safe to assume.
final class SinkState: @unchecked Sendable {
    private let lock = NSLock()
    private var parser = FeedParser()
    private let maxBytes: Int?

    init(maxBytes: Int?) {
        self.maxBytes = maxBytes
    }

    func consume(_ chunk: [UInt8], decode: Bool) throws -> ParsedBatch? {
        lock.lock()
        defer { lock.unlock() }
        if let maxBytes, parser.bytesConsumed + chunk.count > maxBytes {
            throw FeedSink.TooLarge(maxBytes: maxBytes, featureIndex: parser.featureCount)
        }
        var batch = ParsedBatch(elements: [], bytesConsumed: 0, featureCount: 0)
        batch.chunk = chunk
        try chunk.withUnsafeBytes { chunkBytes in
            let chunkStart = chunkBytes.baseAddress.map { Int(bitPattern: $0) } ?? 0
            try parser.consume(chunkBytes, decode: decode) { element in
                let content: ParsedElement.Content
                switch element.decoded {
                case .record(let record):
                    content = .record(record)
                case .skipped(let reason, _):
                    content = .skipped(reason)
                case nil:
                    let start = element.bytes.baseAddress.map { Int(bitPattern: $0) - chunkStart } ?? 0
                    let location: ParsedElement.RawBytes
                    if start >= 0 && start + element.bytes.count <= chunkBytes.count {
                        location = .chunk(start..<start + element.bytes.count)
                    } else {
                        // Straddled chunks: the parser put it together in its own buffer.
                        let copied = batch.bytes.count
                        batch.bytes.append(contentsOf: element.bytes)
                        location = .copied(copied..<batch.bytes.count)
                    }
                    content = .raw(
                        id: element.id, hasAliases: element.hasAliases, bytes: location, offset: element.offset)
                }
                batch.elements.append(ParsedElement(index: element.index, hash: element.hash, content: content))
            }
        }
        guard !batch.elements.isEmpty else { return nil }
        batch.arena = parser.takeArena()
        batch.bytesConsumed = parser.bytesConsumed
        batch.featureCount = parser.featureCount
        return batch
    }

    func finish() throws -> ParsedBatch {
        lock.lock()
        defer { lock.unlock() }
        try parser.finish()
        return ParsedBatch(elements: [], bytesConsumed: parser.bytesConsumed, featureCount: parser.featureCount)
    }
}
