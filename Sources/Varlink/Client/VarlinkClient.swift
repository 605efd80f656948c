import NIOCore
import NIOConcurrencyHelpers

/// A Varlink client over one stream connection (a Unix socket, or a pipe pair): one call at a time, each answered
/// by one reply, or by a sequence of replies for a call with `more`.
///
/// The connection reads only while a caller waits for a reply (autoRead is off), so a service that
/// streams faster than the caller consumes is held back by the socket, not buffered here: a
/// streamed export runs in constant memory. When the service goes away, a waiting call throws
/// ``VarlinkConnectionError/closed``; cancelling a waiting task closes the connection.
///
/// This target has no I/O of its own (it depends on NIOCore only): pass a bootstrap, e.g.
/// `ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)` from NIOPosix.
public final class VarlinkClient: Sendable {
    private let channel: any Channel
    private let inbox: ReplyInbox
    /// Whether a call is waiting for (more) replies; calls are not pipelined.
    private let busy = NIOLockedValueBox(false)

    private init(channel: any Channel, inbox: ReplyInbox) {
        self.channel = channel
        self.inbox = inbox
    }

    /// Connects to the Unix socket at `path`. Connection failures are NIO's `IOError` (with the
    /// `errno` of `connect(2)`: `ENOENT`, `ECONNREFUSED`, `EACCES`, ...).
    public static func connect(
        unixDomainSocketPath path: String, bootstrap: some NIOClientTCPBootstrapProtocol,
        maxMessageSize: Int = 64 << 20
    ) async throws -> VarlinkClient {
        try await connect(maxMessageSize: maxMessageSize) { initializer in
            try await bootstrap.channelInitializer(initializer).connect(unixDomainSocketPath: path).get()
        }
    }

    /// Makes a client on a stream channel of any kind: a pipe pair (NIOPosix's `NIOPipeBootstrap`,
    /// e.g. the stdin and stdout of an `ssh HOST quakectl bridge` child), a socket passed in, ...
    /// `makeChannel` creates the channel with `initializer` as its channel initializer, which turns
    /// autoRead off and adds the framing and the reply handler:
    ///
    ///     try await VarlinkClient.connect { initializer in
    ///         try await NIOPipeBootstrap(group: group).channelInitializer(initializer)
    ///             .takingOwnershipOfDescriptors(input: readFD, output: writeFD).get()
    ///     }
    public static func connect(
        maxMessageSize: Int = 64 << 20,
        _ makeChannel: (_ initializer: @escaping @Sendable (any Channel) -> EventLoopFuture<Void>) async throws
            -> any Channel
    ) async throws -> VarlinkClient {
        // Kept from the initializer: a peer that is gone at once (a pipe whose writer exited)
        // may have closed the channel, and emptied its pipeline, by the time it is returned.
        let made = NIOLockedValueBox<ReplyInbox?>(nil)
        let channel = try await makeChannel { channel in
            // Before the channel is registered, so that it never reads on its own.
            channel.setOption(ChannelOptions.autoRead, value: false).flatMapThrowing {
                let inbox = ReplyInbox(channel: channel)
                try channel.pipeline.syncOperations.addHandler(
                    ByteToMessageHandler(NULFrameDecoder(maxMessageSize: maxMessageSize)))
                try channel.pipeline.syncOperations.addHandler(ReplyHandler(inbox: inbox))
                made.withLockedValue { $0 = inbox }
            }
        }
        guard let inbox = made.withLockedValue({ $0 }) else {
            try? await channel.close()
            throw VarlinkConnectionError.closed
        }
        return VarlinkClient(channel: channel, inbox: inbox)
    }

    /// Closes the connection; a call waiting for a reply throws ``VarlinkConnectionError/closed``.
    public func close() async {
        try? await channel.close()
    }

    /// Calls a method and returns its reply, decoded strictly. A Varlink error reply throws
    /// ``VarlinkCallError`` (turn it into a typed error with the interface's `Failure`).
    public func call<M: VarlinkMethod>(_ method: M.Type, _ parameters: M.Parameters) async throws -> M.Reply {
        try begin()
        defer { end() }
        try await send(VarlinkCall(method: M.name, parameters: parameters.jsonBytes))
        return try await receiveNext(M.Reply.self).value
    }

    /// Calls a method with `more` and returns its replies as they arrive; the sequence ends after
    /// the reply without `continues`. A Varlink error reply ends it by throwing ``VarlinkCallError``.
    /// Iterate it to the end (or close the client): the connection serves no other call meanwhile.
    public func callMore<M: VarlinkMethod>(_ method: M.Type, _ parameters: M.Parameters) async throws
        -> VarlinkReplies<M.Reply>
    {
        try await callMore(VarlinkCall(method: M.name, parameters: parameters.jsonBytes, more: true))
    }

    /// Sends a call as it is (any method name, any parameters) and returns its one reply's raw
    /// form: for tools and tests that speak Varlink without generated types.
    public func call(_ call: VarlinkCall) async throws -> VarlinkReply {
        try begin()
        defer { end() }
        try await send(call)
        return try await receiveFrame()
    }

    func callMore<R: VarlinkValue>(_ call: VarlinkCall) async throws -> VarlinkReplies<R> {
        try begin()
        do {
            try await send(call)
        } catch {
            end()
            throw error
        }
        return VarlinkReplies(client: self)
    }

    /// Whether no call is waiting for replies: a `more` call abandoned half-way leaves the
    /// connection busy (the service may go on streaming until it notices the close).
    public var isIdle: Bool { !busy.withLockedValue { $0 } }

    private func begin() throws {
        try busy.withLockedValue { busy in
            if busy { throw VarlinkConnectionError.busy }
            busy = true
        }
    }

    fileprivate func end() {
        busy.withLockedValue { $0 = false }
    }

    private func send(_ call: VarlinkCall) async throws {
        do {
            try await channel.writeAndFlush(ByteBuffer(bytes: call.frame()))
        } catch let error as ChannelError where error == .ioOnClosedChannel || error == .alreadyClosed {
            throw VarlinkConnectionError.closed
        }
    }

    private func receiveFrame() async throws -> VarlinkReply {
        let frame = try await inbox.next()
        do {
            return try VarlinkReply(parsing: Array(frame.readableBytesView))
        } catch {
            // A reply this client cannot read leaves the connection out of step.
            channel.close(promise: nil)
            throw VarlinkConnectionError.invalidReply("\(error)")
        }
    }

    /// The next reply decoded as `R`, and whether more follow; an error reply throws.
    fileprivate func receiveNext<R: VarlinkValue>(_ type: R.Type) async throws -> (value: R, continues: Bool) {
        let frame = try await inbox.next()
        let decoded: (result: Result<R, VarlinkCallError>, continues: Bool)
        do {
            decoded = try VarlinkReply.decode(R.self, frame: Array(frame.readableBytesView))
        } catch {
            // A reply this client cannot read leaves the connection out of step.
            channel.close(promise: nil)
            throw VarlinkConnectionError.invalidReply("\(error)")
        }
        return (try decoded.result.get(), decoded.continues)
    }
}

/// Why a call got no reply.
public enum VarlinkConnectionError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The service closed the connection (it stopped, or it dropped this client).
    case closed
    /// A reply that is not a Varlink reply this client can decode.
    case invalidReply(String)
    /// A call was made while another one on the same connection was still waiting for replies.
    case busy

    public var description: String {
        switch self {
        case .closed: "the service closed the connection"
        case .invalidReply(let detail): "the service sent a reply that cannot be read: \(detail)"
        case .busy: "another call is still in progress on this connection"
        }
    }
}

/// The replies of one call made with `more`, as they arrive.
public struct VarlinkReplies<Element: VarlinkValue>: AsyncSequence, Sendable {
    let client: VarlinkClient

    public func makeAsyncIterator() -> Iterator {
        Iterator(client: client)
    }

    /// A value: a copy read on goes on from where the original was (one reader at a time).
    public struct Iterator: AsyncIteratorProtocol, Sendable {
        let client: VarlinkClient
        var finished = false

        public mutating func next() async throws -> Element? {
            guard !finished else { return nil }
            do {
                let (value, continues) = try await client.receiveNext(Element.self)
                if !continues {
                    finished = true
                    client.end()
                }
                return value
            } catch let error as VarlinkCallError {
                // An error reply is the last one; the connection stays usable.
                finished = true
                client.end()
                throw error
            } catch {
                finished = true
                throw error
            }
        }
    }
}

/// Frames received but not yet consumed, and the one caller waiting for the next.
final class ReplyInbox: Sendable {
    private struct State {
        var frames = CircularBuffer<ByteBuffer>()
        var failure: (any Error)?
        var waiter: CheckedContinuation<ByteBuffer, any Error>?
    }

    private let state = NIOLockedValueBox(State())
    private let channel: any Channel

    init(channel: any Channel) {
        self.channel = channel
    }

    /// Whether a caller waits and nothing is queued: the handler then reads on.
    var wantsData: Bool {
        state.withLockedValue { $0.waiter != nil && $0.frames.isEmpty }
    }

    func receive(_ frame: ByteBuffer) {
        let waiter: CheckedContinuation<ByteBuffer, any Error>? = state.withLockedValue { s in
            if let w = s.waiter {
                s.waiter = nil
                return w
            }
            s.frames.append(frame)
            return nil
        }
        waiter?.resume(returning: frame)
    }

    func finish(_ error: any Error) {
        let waiter: CheckedContinuation<ByteBuffer, any Error>? = state.withLockedValue { s in
            if s.failure == nil { s.failure = error }
            defer { s.waiter = nil }
            return s.waiter
        }
        waiter?.resume(throwing: error)
    }

    /// The next frame; reads from the socket only when none is queued.
    func next() async throws -> ByteBuffer {
        let channel = self.channel
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<ByteBuffer, any Error>) in
                enum Action {
                    case deliver(ByteBuffer)
                    case fail(any Error)
                    case read
                }
                let action: Action = state.withLockedValue { s in
                    if let frame = s.frames.popFirst() { return .deliver(frame) }
                    if let failure = s.failure { return .fail(failure) }
                    s.waiter = continuation
                    return .read
                }
                switch action {
                case .deliver(let frame): continuation.resume(returning: frame)
                case .fail(let error): continuation.resume(throwing: error)
                case .read: channel.read()
                }
            }
        } onCancel: {
            channel.close(promise: nil)
        }
    }
}

/// Hands decoded frames to the inbox and reads on while its caller still waits.
final class ReplyHandler: ChannelInboundHandler, Sendable {
    typealias InboundIn = ByteBuffer
    let inbox: ReplyInbox

    init(inbox: ReplyInbox) {
        self.inbox = inbox
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        inbox.receive(unwrapInboundIn(data))
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        // A read that ended mid-message delivered nothing yet: keep reading.
        if inbox.wantsData { context.read() }
        context.fireChannelReadComplete()
    }

    func channelInactive(context: ChannelHandlerContext) {
        inbox.finish(VarlinkConnectionError.closed)
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if let tooLarge = error as? NULFrameDecoder.MessageTooLarge {
            inbox.finish(VarlinkConnectionError.invalidReply("a reply is longer than \(tooLarge.limit) bytes"))
        } else {
            inbox.finish(error)
        }
        context.close(promise: nil)
    }
}
