import Logging
import NIOCore
import NIOConcurrencyHelpers

/// A Varlink server: serves the given interfaces (and org.varlink.service) on every connection a
/// listener accepts, one child task per connection, so one client never delays another.
///
/// It knows nothing of any one interface: the interfaces, the service's identity and the error
/// replies for broken limits are given to it. On each connection, calls are handled one after
/// the other (Varlink does not pipeline); a call's parameters are decoded strictly by the
/// interface's generated code, and every failure is a typed error reply:
/// - not a Varlink call, or `parameters` not an object: `InvalidParameter` (`message`, `parameters`);
/// - a field a method does not declare, at any depth, or a wrong type: `InvalidParameter` naming it;
/// - `oneway` with `more`: `InvalidParameter` naming `oneway`, and the connection is closed (a
///   protocol error: the caller cannot expect both no reply and many);
/// - an unknown interface or method: `InterfaceNotFound`, `MethodNotFound`.
public final class VarlinkServer: Sendable {
    /// What org.varlink.service.GetInfo says.
    public struct Info: Sendable {
        public var vendor, product, version, url: String
        public init(vendor: String, product: String, version: String, url: String) {
            self.vendor = vendor
            self.product = product
            self.version = version
            self.url = url
        }
    }

    public struct Limits: Sendable {
        /// Largest message accepted (bytes before the NUL).
        public var maxMessageSize = 1 << 20
        /// How long a started message may take to end with its NUL.
        public var messageDeadline: TimeAmount = .seconds(10)
        /// Connections served at once; one more has its first call (or, after a second of silence,
        /// nothing) answered `tooManyConnections` and is closed.
        public var maxConnections = 4096
        /// A client whose socket does not take a reply within this time is disconnected: a client
        /// that stopped reading holds no memory and no task for longer.
        public var writeTimeout: Duration = .seconds(10)
        public init() {}
    }

    /// The error replies (whole frames) the server sends by itself when a limit is broken; each
    /// service names these errors in its own interface.
    public struct LimitReplies: Sendable {
        public var messageTooLarge: @Sendable (_ limit: Int) -> [UInt8]
        public var messageTimeout: @Sendable (_ seconds: Int) -> [UInt8]
        public var tooManyConnections: @Sendable (_ limit: Int) -> [UInt8]
        public init(
            messageTooLarge: @escaping @Sendable (_ limit: Int) -> [UInt8],
            messageTimeout: @escaping @Sendable (_ seconds: Int) -> [UInt8],
            tooManyConnections: @escaping @Sendable (_ limit: Int) -> [UInt8]
        ) {
            self.messageTooLarge = messageTooLarge
            self.messageTimeout = messageTimeout
            self.tooManyConnections = tooManyConnections
        }
    }

    /// An accepted connection and who is on the other end.
    ///
    /// Replies are written to the channel itself (see ``serve(_:)-(Connection)``), so the async
    /// wrapper has no outbound writer (`Never`): one it had would have to be finished, and a
    /// connection accepted but never served (still queued when the server shuts down) would stop
    /// the process ("Deinited NIOAsyncWriter without calling finish()").
    public struct Connection: Sendable {
        public var channel: NIOAsyncChannel<ByteBuffer, Never>
        /// From SO_PEERCRED at accept time; nil only if the kernel would not say.
        public var peer: PeerCredentials?
    }

    public typealias Listener = NIOAsyncChannel<Connection, Never>

    /// How one call ended, for a server's metrics: told once per message, when it has been
    /// handled (a call made with `more` when its last reply is written or it fails).
    public struct CallOutcome: Sendable, Hashable {
        /// The qualified method (`io.quaked.GetStatus`) when this server serves it; nil for a
        /// message that is no call, a call of an interface or method it does not serve, and
        /// `oneway` with `more`. So the values are bounded by the served interfaces.
        public var method: String?
        /// nil when the call succeeded; else the qualified name of the error replied (also for
        /// oneway calls, which get no reply), ``disconnected`` when the connection failed under
        /// the call (the client went away, a write failed or timed out), or ``internal`` when the
        /// method failed with an error that is no Varlink error (the connection is closed).
        public var error: String?

        public static let disconnected = "disconnected"
        public static let `internal` = "internal"

        public init(method: String?, error: String?) {
            self.method = method
            self.error = error
        }
    }

    private let interfaces: [String: VarlinkInterfaceHandler]
    private let limits: Limits
    private let limitReplies: LimitReplies
    private let logger: Logger
    private let callObserver: (@Sendable (CallOutcome) -> Void)?
    private let connections = NIOLockedValueBox(0)
    /// Writes in progress, by connection: what the sweeper checks against the write timeout.
    private let writes = NIOLockedValueBox<[ObjectIdentifier: WriteWatch]>([:])

    /// One connection's write in progress, if any: when it started, and the channel to close when
    /// it takes longer than the write timeout.
    final class WriteWatch: Sendable {
        let channel: any Channel
        private let started = NIOLockedValueBox<ContinuousClock.Instant?>(nil)

        init(channel: any Channel) {
            self.channel = channel
        }

        func begin() { started.withLockedValue { $0 = .now } }
        func end() { started.withLockedValue { $0 = nil } }

        /// Whether a write is waiting now.
        var isBusy: Bool { started.withLockedValue { $0 != nil } }

        /// Whether a write has been waiting since before `deadline`.
        func isStalled(before deadline: ContinuousClock.Instant) -> Bool {
            started.withLockedValue { $0.map { $0 < deadline } ?? false }
        }

        /// Writes `frame` to the channel and waits until the socket took it. The write counts as
        /// waiting until then, when its future completes on the event loop, and not until the
        /// awaiting task resumes: on a busy machine the task may resume long after, and the
        /// sweeper must not take that for a client that stopped reading. (The future's callbacks
        /// run in order, so the watch has ended before the task resumes and begins the next one.)
        func write(_ frame: ByteBuffer) async throws {
            begin()
            let written = channel.eventLoop.makePromise(of: Void.self)
            written.futureResult.whenComplete { _ in self.end() }
            channel.writeAndFlush(frame, promise: written)
            try await written.futureResult.get()
        }
    }

    public init(
        info: Info, interfaces: [VarlinkInterfaceHandler], limits: Limits = .init(), limitReplies: LimitReplies,
        logger: Logger, callObserver: (@Sendable (CallOutcome) -> Void)? = nil
    ) {
        let names = [OrgVarlinkService.interfaceName] + interfaces.map(\.name)
        var all = Dictionary(uniqueKeysWithValues: interfaces.map { ($0.name, $0) })
        let descriptions = Dictionary(uniqueKeysWithValues: interfaces.map { ($0.name, $0.description) })
        all[OrgVarlinkService.interfaceName] = OrgVarlinkService.handler(
            ServiceInterface(info: info, names: names, descriptions: descriptions))
        self.interfaces = all
        self.limits = limits
        self.limitReplies = limitReplies
        self.logger = logger
        self.callObserver = callObserver
    }

    /// Sets up an accepted channel (for a listener's child channel initializer): message limits,
    /// NUL framing, and the peer's credentials.
    public static func makeConnection(
        _ channel: any Channel, limits: Limits, limitReplies: LimitReplies
    ) -> EventLoopFuture<Connection> {
        PeerCredentials.read(from: channel).flatMapThrowing { peer in
            try channel.pipeline.syncOperations.addHandler(
                MessageLimitsHandler(
                    maxMessageSize: limits.maxMessageSize, deadline: limits.messageDeadline, replies: limitReplies))
            // The limits handler has already refused anything longer.
            try channel.pipeline.syncOperations.addHandler(
                ByteToMessageHandler(NULFrameDecoder(maxMessageSize: limits.maxMessageSize + 1)))
            return Connection(
                channel: try NIOAsyncChannel<ByteBuffer, Never>(wrappingChannelSynchronously: channel), peer: peer)
        }
    }

    /// Serves every connection the listener accepts until cancelled (open connections are
    /// cancelled with it).
    public func serve(_ listener: Listener) async throws {
        try await withThrowingDiscardingTaskGroup { group in
            group.addTask { try await self.sweepStalledWrites() }
            try await listener.executeThenClose { inbound in
                for try await connection in inbound {
                    group.addTask { await self.serve(connection) }
                }
            }
            group.cancelAll()
        }
    }

    /// Closes the connections whose current write has waited longer than the write timeout (a
    /// client that stopped reading). One task for all connections: a reply's write costs no
    /// timer of its own, which matters when one notification goes to thousands of subscribers.
    func sweepStalledWrites() async throws {
        let interval = min(max(limits.writeTimeout / 4, .milliseconds(10)), .seconds(1))
        while true {
            try await Task.sleep(for: interval)
            let deadline = ContinuousClock.now - limits.writeTimeout
            let stalled = writes.withLockedValue { $0.values.filter { $0.isStalled(before: deadline) } }
            for watch in stalled {
                logger.notice("disconnecting a client that stopped reading its replies")
                watch.channel.close(promise: nil)
            }
        }
    }

    /// Serves one connection until the client closes it (or breaks a limit).
    public func serve(_ connection: Connection) async {
        let admitted = connections.withLockedValue { count in
            guard count < limits.maxConnections else { return false }
            count += 1
            return true
        }
        defer { if admitted { connections.withLockedValue { $0 -= 1 } } }
        var logger = self.logger
        logger[metadataKey: "peer"] = "\(connection.peer.map { "\($0)" } ?? "unknown")"
        do {
            let watch = WriteWatch(channel: connection.channel.channel)
            let key = ObjectIdentifier(watch)
            writes.withLockedValue { $0[key] = watch }
            defer { _ = writes.withLockedValue { $0.removeValue(forKey: key) } }
            let channel = connection.channel.channel
            try await connection.channel.executeThenClose { inbound, _ in
                // Replies go to the channel itself, one at a time, each awaited until the kernel
                // took it: cheaper than NIOAsyncChannel's writer when one notification goes to
                // thousands of subscribers, and still never more than one reply buffered per
                // client. The sweeper closes the channel under a write that takes too long; the
                // write then throws.
                let write: @Sendable (ByteBuffer) async throws -> Void = { frame in try await watch.write(frame) }
                // Without waiting: only while nothing else is written and the socket keeps up.
                let sendNow: @Sendable (ByteBuffer) -> Bool = { frame in
                    guard channel.isActive, channel.isWritable, !watch.isBusy else { return false }
                    channel.writeAndFlush(frame, promise: nil)
                    return true
                }
                guard admitted else {
                    // The refusal is the reply to the client's first call, so a client that sends
                    // at once reads it rather than a broken pipe; one that sends nothing for a
                    // second gets it unprompted. Either way the connection is closed after it.
                    try? await withThrowingTaskGroup(of: Void.self) { group in
                        group.addTask { for try await _ in inbound { return } }
                        group.addTask { try await Task.sleep(for: .seconds(1)) }
                        _ = try await group.next()
                        group.cancelAll()
                    }
                    try await write(ByteBuffer(bytes: limitReplies.tooManyConnections(limits.maxConnections)))
                    return
                }
                // Calls are handled while a second task watches the channel: when the peer goes
                // away (closed cleanly or abruptly, before or after a reply, with a write in
                // flight or none), the call in hand is cancelled at once. A Subscribe ends with
                // its connection, not at its next failed write, which a subscriber sent to
                // without waiting (``sendNow``) might never make.
                let closed = Wakeup()
                channel.closeFuture.whenComplete { _ in closed.signal() }
                try await withThrowingTaskGroup(of: Void.self) { group in
                    group.addTask {
                        // Oversized and never-ending messages never get here: MessageLimitsHandler
                        // answers and closes first.
                        for try await frame in inbound {
                            let keepOpen = try await self.handle(
                                Array(frame.readableBytesView), peer: connection.peer, write: write, sendNow: sendNow,
                                eventLoop: channel.eventLoop)
                            if !keepOpen { return }
                        }
                    }
                    group.addTask { await closed.wait() }
                    defer { group.cancelAll() }
                    try await group.next()
                }
            }
        } catch {
            logger.debug("connection ended", metadata: ["error": "\(error)"])
        }
    }

    /// Handles one message; returns false when the connection must close.
    func handle(
        _ frame: [UInt8], peer: PeerCredentials?, write: @escaping @Sendable (ByteBuffer) async throws -> Void,
        sendNow: (@Sendable (ByteBuffer) -> Bool)? = nil, eventLoop: (any EventLoop)? = nil
    ) async throws -> Bool {
        let reply = { (bytes: [UInt8]) in ByteBuffer(bytes: bytes) }
        // What the observer is told; set as the message goes, told once on the way out.
        var outcome = CallOutcome(method: nil, error: nil)
        defer { callObserver?(outcome) }
        let call: VarlinkCall
        do {
            call = try VarlinkCall(parsing: frame)
        } catch {
            // Not a call this server can read: say so; the framing is intact, so the connection
            // stays usable.
            outcome.error = OrgVarlinkService.InvalidParameter.name
            try await write(reply(VarlinkReply.frame(error: OrgVarlinkService.InvalidParameter(parameter: error.parameterName))))
            return true
        }
        if call.oneway && call.more {
            outcome.error = OrgVarlinkService.InvalidParameter.name
            try await write(reply(VarlinkReply.frame(error: OrgVarlinkService.InvalidParameter(parameter: "oneway"))))
            return false
        }
        // A oneway call gets no reply, not even an error.
        let respond: @Sendable (ByteBuffer) async throws -> Void = call.oneway ? { @Sendable _ in } : write
        do {
            guard let interface = interfaces[call.interface] else {
                throw OrgVarlinkService.InterfaceNotFound(interface: call.interface)
            }
            let answered = NIOLockedValueBox(false)
            let request = VarlinkRequest(
                call: call, peer: peer, write: respond, sendNow: call.oneway ? nil : sendNow, eventLoop: eventLoop,
                answered: { answered.withLockedValue { $0 = true } })
            outcome.method = call.method
            guard try await interface.handle(call.member, request) else {
                outcome.method = nil
                throw OrgVarlinkService.MethodNotFound(method: call.method)
            }
            // A call cancelled because its connection closed (a Subscribe whose client went
            // away ends quietly) was cut short by the disconnection, not answered; one whose
            // client read its last reply and left at once was answered.
            if Task.isCancelled, !answered.withLockedValue({ $0 }) { outcome.error = CallOutcome.disconnected }
        } catch let error as VarlinkParameterError {
            outcome.error = OrgVarlinkService.InvalidParameter.name
            try await respond(reply(VarlinkReply.frame(error: OrgVarlinkService.InvalidParameter(parameter: error.parameter))))
        } catch let error as any VarlinkError {
            outcome.error = type(of: error).name
            try await respond(reply(VarlinkReply.frame(error: error)))
        } catch {
            outcome.error = Self.isDisconnection(error) ? CallOutcome.disconnected : CallOutcome.internal
            throw error
        }
        return true
    }

    /// Whether a method failed because its connection did: a write to a closed or reset socket,
    /// or the task cancelled with the connection.
    static func isDisconnection(_ error: any Error) -> Bool {
        error is CancellationError || error is ChannelError || error is IOError || Task.isCancelled
    }
}

extension VarlinkParameterError {
    /// The member of a call message that was wrong: `message` for bytes that are no call at all.
    var parameterName: String { path.isEmpty ? "message" : parameter }
}

/// org.varlink.service, from the server's identity and the interfaces it serves.
private struct ServiceInterface: OrgVarlinkService.Service {
    let info: VarlinkServer.Info
    let names: [String]
    let descriptions: [String: String]

    func getInfo(
        _ parameters: OrgVarlinkService.GetInfo.Parameters, _ call: VarlinkCallContext<OrgVarlinkService.GetInfo.Reply>
    ) async throws {
        try await call.reply(
            .init(vendor: info.vendor, product: info.product, version: info.version, url: info.url, interfaces: names))
    }

    func getInterfaceDescription(
        _ parameters: OrgVarlinkService.GetInterfaceDescription.Parameters,
        _ call: VarlinkCallContext<OrgVarlinkService.GetInterfaceDescription.Reply>
    ) async throws {
        let text =
            parameters.interface == OrgVarlinkService.interfaceName
            ? OrgVarlinkService.interfaceDescription : descriptions[parameters.interface]
        guard let text else { throw OrgVarlinkService.InterfaceNotFound(interface: parameters.interface) }
        try await call.reply(.init(description: text))
    }
}
