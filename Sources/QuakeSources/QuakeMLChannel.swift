import Foundation
import QuakeModel

#if canImport(FoundationXML)
import FoundationXML
#endif

/// The hand-off between ``QuakeMLReader`` (the caller's thread) and its parser thread, where
/// XMLParser pulls the document through a ``QuakeMLInputStream``. Bounded: one piece of at most
/// ``QuakeMLReader/pieceBytes`` is pending at a time, and the caller waits until the parser has
/// taken all of it and asks for more (or has stopped) before it collects the items made so far.
/// Everything is guarded by `condition`.
final class QuakeMLChannel: @unchecked Sendable {
    private let condition = NSCondition()
    private var pending: [UInt8] = []
    private var pendingOffset = 0
    private var closed = false
    private var cancelled = false
    private var parserWaiting = false
    private var done = false
    private var items: [SourceItem] = []
    private var problems: [SourceProblem] = []
    private var failure: SourceError?

    // MARK: the parser thread's side

    /// XMLParser's read: blocks until bytes come, returns 0 at the end, -1 when abandoned.
    func read(into buffer: UnsafeMutablePointer<UInt8>, maxLength: Int) -> Int {
        condition.lock()
        defer { condition.unlock() }
        while pendingOffset == pending.count && !closed && !cancelled {
            parserWaiting = true
            condition.broadcast()
            condition.wait()
        }
        parserWaiting = false
        if cancelled { return -1 }
        let n = min(maxLength, pending.count - pendingOffset)
        if n == 0 { return 0 }
        pending.withUnsafeBufferPointer { buffer.update(from: $0.baseAddress! + pendingOffset, count: n) }
        pendingOffset += n
        return n
    }

    func emit(_ item: SourceItem) {
        condition.lock()
        items.append(item)
        condition.unlock()
    }

    func skip(_ problem: SourceProblem) {
        condition.lock()
        problems.append(problem)
        condition.unlock()
    }

    func fail(_ error: SourceError) {
        condition.lock()
        if failure == nil { failure = error }
        condition.unlock()
    }

    /// The parser thread has returned from `parse()`.
    func parserDone() {
        condition.lock()
        done = true
        condition.broadcast()
        condition.unlock()
    }

    // MARK: the caller's side

    /// Hands `piece` to the parser and waits until it has read all of it (or stopped); returns
    /// what it made meanwhile.
    func push(_ piece: [UInt8]) -> (items: [SourceItem], problems: [SourceProblem], failure: SourceError?) {
        condition.lock()
        defer { condition.unlock() }
        pending = piece
        pendingOffset = 0
        condition.broadcast()
        while !done && !(parserWaiting && pendingOffset == pending.count) { condition.wait() }
        pending = []
        pendingOffset = 0
        return take()
    }

    /// Tells the parser the document has ended and waits until it has finished.
    func close() -> (items: [SourceItem], problems: [SourceProblem], failure: SourceError?) {
        condition.lock()
        defer { condition.unlock() }
        closed = true
        condition.broadcast()
        while !done { condition.wait() }
        return take()
    }

    /// Makes the parser's next read fail, so its thread ends without waiting for more.
    func cancel() {
        condition.lock()
        cancelled = true
        condition.broadcast()
        condition.unlock()
    }

    private func take() -> (items: [SourceItem], problems: [SourceProblem], failure: SourceError?) {
        defer {
            items.removeAll(keepingCapacity: true)
            problems.removeAll()
        }
        return (items, problems, failure)
    }
}

/// The stream XMLParser(stream:) reads: each read takes bytes from the channel, blocking until
/// the caller has pushed some.
final class QuakeMLInputStream: InputStream {
    private let channel: QuakeMLChannel
    private var status = Stream.Status.notOpen

    init(channel: QuakeMLChannel) {
        self.channel = channel
        super.init(data: Data())
    }

    override func open() { status = .open }
    override func close() { status = .closed }
    override var streamStatus: Stream.Status { status }
    override var hasBytesAvailable: Bool { status == .open }
    override var streamError: (any Error)? { nil }

    override func read(_ buffer: UnsafeMutablePointer<UInt8>, maxLength len: Int) -> Int {
        let n = channel.read(into: buffer, maxLength: len)
        if n <= 0 { status = .atEnd }
        return n
    }

    override func getBuffer(
        _ buffer: UnsafeMutablePointer<UnsafeMutablePointer<UInt8>?>, length len: UnsafeMutablePointer<Int>
    ) -> Bool { false }
}
