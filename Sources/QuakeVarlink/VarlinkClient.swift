import Foundation
import NIOCore
import Synchronization

/// A Varlink client over one stream connection (a Unix socket): one call at a time, each answered
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
    private let busy = Mutex(false)

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
        let channel = try await bootstrap.channelOption(ChannelOptions.autoRead, value: false)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let inbox = ReplyInbox(channel: channel)
                    try channel.pipeline.syncOperations.addHandler(
                        ByteToMessageHandler(NULFrameDecoder(maxMessageSize: maxMessageSize)))
                    try channel.pipeline.syncOperations.addHandler(ReplyHandler(inbox: inbox))
                }
            }
            .connect(unixDomainSocketPath: path).get()
        let handler = try await channel.pipeline.handler(type: ReplyHandler.self).map { $0.inbox }.get()
        return VarlinkClient(channel: channel, inbox: handler)
    }

    /// Closes the connection; a call waiting for a reply throws ``VarlinkConnectionError/closed``.
    public func close() async {
        try? await channel.close()
    }

    /// Calls `method` and returns its reply's parameters decoded as `R`. A Varlink error reply
    /// throws ``VarlinkCallError``.
    public func call<R: Decodable>(
        _ method: String, _ parameters: some Encodable & Sendable, returning: R.Type = R.self
    ) async throws -> R {
        try begin()
        defer { end() }
        try await send(method, parameters, more: false)
        let reply: ReplyFrame<R> = try await receive()
        return try reply.result()
    }

    /// Calls `method` with `more` and returns its replies as they arrive; the sequence ends after
    /// the reply without `continues`. A Varlink error reply ends it by throwing ``VarlinkCallError``.
    /// Iterate it to the end (or close the client): the connection serves no other call meanwhile.
    public func callMore<R: Decodable>(
        _ method: String, _ parameters: some Encodable & Sendable, returning: R.Type = R.self
    ) async throws -> VarlinkReplies<R> {
        try begin()
        do {
            try await send(method, parameters, more: true)
        } catch {
            end()
            throw error
        }
        return VarlinkReplies(client: self)
    }

    private func begin() throws {
        try busy.withLock { busy in
            if busy { throw VarlinkConnectionError.busy }
            busy = true
        }
    }

    fileprivate func end() {
        busy.withLock { $0 = false }
    }

    private func send(_ method: String, _ parameters: some Encodable & Sendable, more: Bool) async throws {
        let call = VarlinkCall(method: method, parameters: try VarlinkCoding.value(parameters), more: more ? true : nil)
        do {
            try await channel.writeAndFlush(ByteBuffer(bytes: try VarlinkCoding.frame(call)))
        } catch let error as ChannelError where error == .ioOnClosedChannel || error == .alreadyClosed {
            throw VarlinkConnectionError.closed
        }
    }

    fileprivate func receive<R: Decodable>() async throws -> ReplyFrame<R> {
        let frame = try await inbox.next()
        do {
            return try VarlinkCoding.decoder().decode(ReplyFrame<R>.self, from: Data(frame.readableBytesView))
        } catch {
            // A reply this client cannot read leaves the connection out of step.
            channel.close(promise: nil)
            throw VarlinkConnectionError.invalidReply("\(error)")
        }
    }

    fileprivate func receiveNext<R: Decodable>() async throws -> (R, continues: Bool) {
        let reply: ReplyFrame<R> = try await receive()
        return (try reply.result(), reply.continues)
    }
}

/// A Varlink error reply: the error's fully qualified name and its parameters.
public struct VarlinkCallError: Error, Sendable, Hashable, CustomStringConvertible {
    /// E.g. `io.quaked.NoSuchQuake`.
    public var name: String
    public var parameters: JSONValue

    public init(name: String, parameters: JSONValue) {
        self.name = name
        self.parameters = parameters
    }

    /// Decodes the error's parameters as `T`.
    public func decode<T: Decodable>(_ type: T.Type) throws -> T {
        try VarlinkCoding.decode(T.self, from: parameters)
    }

    public var description: String {
        let text = (try? String(decoding: VarlinkCoding.encoder().encode(parameters), as: UTF8.self)) ?? ""
        return "\(name) \(text)"
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
public struct VarlinkReplies<Element: Decodable>: AsyncSequence, Sendable {
    let client: VarlinkClient

    public func makeAsyncIterator() -> Iterator {
        Iterator(client: client)
    }

    public struct Iterator: AsyncIteratorProtocol {
        let client: VarlinkClient
        var finished = false

        public mutating func next() async throws -> Element? {
            guard !finished else { return nil }
            do {
                let (value, continues) = try await client.receiveNext() as (Element, continues: Bool)
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

/// One reply as received: parameters (decoded as `P`) or an error, in one pass over the bytes.
struct ReplyFrame<P: Decodable>: Decodable {
    enum Content {
        case parameters(P)
        case error(VarlinkCallError)
    }

    var content: Content
    var continues: Bool

    enum CodingKeys: String, CodingKey {
        case parameters, continues, error
    }

    init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        continues = try c.decodeIfPresent(Bool.self, forKey: .continues) ?? false
        if let name = try c.decodeIfPresent(String.self, forKey: .error) {
            let parameters = try c.decodeIfPresent(JSONValue.self, forKey: .parameters) ?? .object([:])
            content = .error(VarlinkCallError(name: name, parameters: parameters))
        } else if let parameters = try c.decodeIfPresent(P.self, forKey: .parameters) {
            content = .parameters(parameters)
        } else {
            // No parameters means an empty object.
            content = .parameters(try VarlinkCoding.decode(P.self, from: nil))
        }
    }

    func result() throws -> P {
        switch content {
        case .parameters(let p): return p
        case .error(let e): throw e
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

    private let state = Mutex(State())
    private let channel: any Channel

    init(channel: any Channel) {
        self.channel = channel
    }

    /// Whether a caller waits and nothing is queued: the handler then reads on.
    var wantsData: Bool {
        state.withLock { $0.waiter != nil && $0.frames.isEmpty }
    }

    func receive(_ frame: ByteBuffer) {
        let waiter: CheckedContinuation<ByteBuffer, any Error>? = state.withLock { s in
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
        let waiter: CheckedContinuation<ByteBuffer, any Error>? = state.withLock { s in
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
                let action: Action = state.withLock { s in
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
