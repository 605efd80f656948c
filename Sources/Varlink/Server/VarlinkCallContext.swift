import NIOCore

/// How a method replies to one call: once, or (for a call made with `more`) several times, every
/// reply but the last with `continues`. A call made with `oneway` gets no reply: replying to it
/// writes nothing.
public struct VarlinkCallContext<Reply: VarlinkValue>: Sendable {
    /// The caller accepts several replies.
    public let more: Bool
    public let oneway: Bool
    /// Who called (SO_PEERCRED), if the transport knows.
    public let peer: PeerCredentials?
    let write: @Sendable (ByteBuffer) async throws -> Void
    let sendNow: (@Sendable (ByteBuffer) -> Bool)?
    /// The event loop of the connection, when there is one: ``trySend`` costs least from it.
    public let eventLoop: (any EventLoop)?
    /// Told once the last reply has been written: a call its client leaves right after reading
    /// that reply was answered, not cut short by the disconnection.
    let answered: (@Sendable () -> Void)?

    public init(
        more: Bool, oneway: Bool, peer: PeerCredentials?, write: @escaping @Sendable (ByteBuffer) async throws -> Void,
        sendNow: (@Sendable (ByteBuffer) -> Bool)? = nil, eventLoop: (any EventLoop)? = nil,
        answered: (@Sendable () -> Void)? = nil
    ) {
        self.more = more
        self.oneway = oneway
        self.peer = peer
        self.write = write
        self.sendNow = sendNow
        self.eventLoop = eventLoop
        self.answered = answered
    }

    /// Sends a frame at once, without waiting, if the connection can take it now: nothing else is
    /// being written to it and its outbound buffer is below NIO's high watermark. Returns false
    /// otherwise (then reply the usual way). For fan-out: one writer can serve many subscribers
    /// without a task switch each, and a client that reads slowly is never queued for.
    public var trySend: (@Sendable (ByteBuffer) -> Bool)? { oneway ? nil : sendNow }

    /// Sends a reply. `continues` is only for calls made with `more`: asking for it otherwise is a
    /// programming error (the reply goes out as the last one).
    public func reply(_ reply: Reply, continues: Bool = false) async throws {
        guard !oneway else { return }
        try await self.reply(
            frame: ByteBuffer(bytes: VarlinkReply.frame(reply, continues: continues && more)), continues: continues)
    }

    /// Sends a frame encoded once for many callers (a notification to every subscriber): the
    /// buffer is shared, not copied. To a call made with `more` the frame is one of its continuing
    /// replies; to any other call it is the reply.
    public func reply(frame: ByteBuffer) async throws {
        guard !oneway else { return }
        try await write(frame)
        if !more { answered?() }
    }

    /// Sends a reply encoded in a frame of its own making (``VarlinkReply/beginFrame(_:)`` and
    /// ``VarlinkReply/endFrame(_:continues:)``), whose `continues` the caller wrote as it says
    /// here: `continues` only for calls made with `more`, and the reply without it is the last.
    public func reply(frame: ByteBuffer, continues: Bool) async throws {
        guard !oneway else { return }
        assert(!continues || more, "continues on a call made without more")
        try await write(frame)
        if !(continues && more) { answered?() }
    }

    /// Requires the call to have been made with `more` (else `ExpectedMore`).
    public func requireMore() throws {
        guard more else { throw OrgVarlinkService.ExpectedMore() }
    }
}

/// One call on its way to a method: its parameters' JSON text, and how to reply.
public struct VarlinkRequest: Sendable {
    public let call: VarlinkCall
    public let peer: PeerCredentials?
    let write: @Sendable (ByteBuffer) async throws -> Void
    let sendNow: (@Sendable (ByteBuffer) -> Bool)?
    let eventLoop: (any EventLoop)?
    let answered: (@Sendable () -> Void)?

    /// The parameters, decoded strictly (an error names the field: InvalidParameter).
    public func parameters<P: VarlinkValue>(_ type: P.Type) throws(VarlinkParameterError) -> P {
        try P.decode(json: call.parameters)
    }

    public func context<R: VarlinkValue>() -> VarlinkCallContext<R> {
        VarlinkCallContext(
            more: call.more, oneway: call.oneway, peer: peer, write: write, sendNow: sendNow, eventLoop: eventLoop,
            answered: answered)
    }
}

/// One interface a ``VarlinkServer`` serves: its name, its description (the interface file's
/// text) and the function that handles a call of one of its members. Generated code makes these
/// (`IOQuaked.handler(service)`). `handle` returns false for a member the interface lacks.
public struct VarlinkInterfaceHandler: Sendable {
    public let name: String
    public let description: String
    public let handle: @Sendable (_ member: String, _ request: VarlinkRequest) async throws -> Bool

    public init(
        name: String, description: String,
        handle: @escaping @Sendable (_ member: String, _ request: VarlinkRequest) async throws -> Bool
    ) {
        self.name = name
        self.description = description
        self.handle = handle
    }
}
