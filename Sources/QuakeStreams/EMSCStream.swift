import Logging
import NIOCore
import NIOPosix
import QuakeModel
import QuakeSources
import Synchronization
import WSClient

/// EMSC's real-time websocket (`wss://www.seismicportal.eu/standing_order/websocket`) as a
/// stream of ``SourceItem``s that loses nothing: connected with swift-websocket's
/// `WebSocketClient` (its framing, pings and TLS), each text message read by
/// `EMSCMessageReader`, the items handed to the caller in the order the socket sent them.
///
/// ```swift
/// let stream = EMSCStream(.init(url: url, source: "emsc"), logger: logger)
/// await stream.run(
///     catchUp: { catchUp in /* FDSN query, updatedafter = newest lastupdate stored less an overlap; import */ },
///     deliver: { items in /* QuakeStore.importSource(source, items: items, ...) */ })
/// ```
///
/// ``run(catchUp:deliver:)`` runs until its task is cancelled, one connection after another:
///
/// - **Connecting and keeping the connection.** Once the upgrade succeeds, the socket is read
///   continuously. WSClient's auto-ping sends a ping every ``Configuration/pingInterval`` and
///   closes the connection when the last ping has had no pong by the next one, so a half-open
///   connection is found dead at most two intervals after its last sign of life (the timeout is
///   the interval: WSClient has no separate setting, and consumes pongs itself, so this is the
///   library's rule, not one built on top). A connection that ends for any reason (the server's
///   close, a reset, the ping timeout, a refused connection or upgrade) is followed by another
///   after ``ReconnectBackoff``'s capped, fully jittered delay; the backoff starts over after a
///   connection that lasted ``Configuration/healthyAfter``. A connection not upgraded within
///   ``Configuration/handshakeTimeout`` (a server that accepts and never answers, or closes
///   during the upgrade) is given up too: each connection runs on a one-thread event loop group
///   of its own, shut down to end a stalled upgrade, which WSClient would otherwise wait for
///   forever, cancellation or not.
/// - **Nothing lost: catch-up first, then the buffered messages.** On every connection, the
///   first and every reconnect, once the socket is open, `catchUp` is called (with
///   ``CatchUp/connection``: 1 for the first). The caller asks the FDSN service for what was
///   published since its newest stored report, less an overlap. Meanwhile the socket keeps
///   being read (so pongs are seen) and its messages are buffered; they are handed to `deliver`
///   only after `catchUp` returns, in arrival order. Messages are never delivered before the
///   catch-up, so the newest stored `lastupdate` the catch-up starts from never moves past a
///   gap. A message may repeat a report the catch-up imported, or be an older revision of it:
///   both are harmless, as the store keeps one report per id and ignores an older `updated`
///   (`Associator.revise`).
/// - **A failed catch-up** (it throws) is tried again on the same connection after the backoff,
///   the messages still buffered; if the socket ends meanwhile, the buffered messages are
///   dropped and the next connection catches up again (from the same stored position, so they
///   come back).
/// - **A failed delivery** (`deliver` throws) closes the connection, drops what is buffered and
///   reconnects: the next catch-up brings back what was not stored. So does a buffer of
///   ``Configuration/maxPendingItems`` (a catch-up that takes too long while messages pour in).
/// - **Bad input is skipped, never fatal.** A binary message, a text message that is not UTF-8,
///   one over ``Configuration/maxMessageBytes``, one that is not EMSC's message (not strict
///   JSON, an unknown `action`, no `data`), or one whose event cannot be imported (no id, a bad
///   time, impossible coordinates) is logged at warning with the reason and an excerpt,
///   counted (``Counters/badMessages``), reported as ``Event/badMessage(_:)``, and skipped;
///   the connection and the messages around it go on. (A single frame over
///   `maxMessageBytes` is a protocol violation NIO's decoder cannot skip: that connection
///   ends, and the next one catches up.)
///
/// Counters and the connection's state are in ``status``; every step is also an ``Event`` for
/// the `onEvent` closure (metrics, tests). `catchUp` and `deliver` are never called
/// concurrently with each other, nor with themselves.
public final class EMSCStream: Sendable {
    /// What to connect to and how to keep the connection.
    public struct Configuration: Sendable, Hashable {
        /// `wss://www.seismicportal.eu/standing_order/websocket` (`ws://` for plain TCP).
        public var url: String
        /// The configured source's name: every item's `source`.
        public var source: String
        /// A ping every this often; the connection is dead when a ping's pong has not come by
        /// the next ping.
        public var pingInterval: Duration
        /// The reconnect delays.
        public var backoff: ReconnectBackoff
        /// A connection that lasted this long was healthy: the next reconnect's backoff starts over.
        public var healthyAfter: Duration
        /// The largest message read (and the largest frame): larger messages are skipped as bad.
        public var maxMessageBytes: Int
        /// The most items buffered while a catch-up or a delivery runs before the connection is
        /// given up (and caught up again on the next one).
        public var maxPendingItems: Int
        /// The most items handed to `deliver` at once.
        public var maxBatch: Int
        /// How long a closing connection waits for the server's close frame.
        public var closeTimeout: Duration
        /// How long the connection and websocket upgrade may take: a server that accepts and
        /// never answers, or closes during the upgrade, is given up after this.
        public var handshakeTimeout: Duration

        public init(
            url: String, source: String, pingInterval: Duration = .seconds(15),
            backoff: ReconnectBackoff = ReconnectBackoff(), healthyAfter: Duration = .seconds(60),
            maxMessageBytes: Int = 1 << 20, maxPendingItems: Int = 100_000, maxBatch: Int = 1000,
            closeTimeout: Duration = .seconds(5), handshakeTimeout: Duration = .seconds(30)
        ) {
            self.url = url
            self.source = source
            self.pingInterval = pingInterval
            self.backoff = backoff
            self.healthyAfter = healthyAfter
            self.maxMessageBytes = max(maxMessageBytes, 1)
            self.maxPendingItems = max(maxPendingItems, 1)
            self.maxBatch = max(maxBatch, 1)
            self.closeTimeout = closeTimeout
            self.handshakeTimeout = handshakeTimeout
        }
    }

    /// What `catchUp` is told.
    public struct CatchUp: Sendable, Hashable {
        /// The connection it is for: 1 for the first, then one more for each reconnect.
        public var connection: Int
        /// 1 for the connection's first try, then one more for each retry after a failure.
        public var attempt: Int
        /// Whether this catch-up follows a reconnect.
        public var isReconnect: Bool { connection > 1 }
    }

    /// Running totals since the stream was made.
    public struct Counters: Sendable, Hashable {
        /// Complete websocket messages received, good and bad.
        public var messages = 0
        /// Messages read into an item.
        public var reports = 0
        /// Messages skipped as bad (see ``BadMessage``).
        public var badMessages = 0
        /// Items handed to `deliver` (a `deliver` that threw counts none of its batch).
        public var delivered = 0
        /// Connections tried after the first.
        public var reconnects = 0
        /// Catch-ups that returned.
        public var catchUps = 0
        /// Catch-ups that threw.
        public var catchUpFailures = 0

        public init() {}
    }

    /// Where the stream is.
    public enum ConnectionState: String, Sendable, Hashable {
        /// Connecting, or upgrading to a websocket.
        case connecting
        /// Connected; `catchUp` runs and messages are buffered.
        case catchingUp = "catching-up"
        /// Connected and caught up: messages are delivered as they come.
        case streaming
        /// Waiting for the backoff before reconnecting.
        case waiting
        /// `run` has not started or has returned.
        case stopped
    }

    /// The state, the counters and the last message and error.
    public struct Status: Sendable, Hashable {
        public var state: ConnectionState = .stopped
        /// The current (or last) connection's number, 1 for the first; 0 before any.
        public var connection = 0
        public var counters = Counters()
        /// When the last message (good or bad) arrived, in milliseconds since the epoch.
        public var lastMessageTime: Int64?
        /// Why the last connection ended or the last catch-up failed.
        public var lastError: String?
    }

    /// A message skipped: why, and its first bytes.
    public struct BadMessage: Sendable, Hashable, CustomStringConvertible {
        public enum Kind: String, Sendable, Hashable {
            /// A binary message: EMSC sends text.
            case binary
            /// A text message whose bytes are not UTF-8.
            case notUTF8 = "not-utf8"
            /// Over ``Configuration/maxMessageBytes``.
            case tooLarge = "too-large"
            /// Frames that make no message: a continuation without a first frame, or a new
            /// message before the last one's final frame (the unfinished one is skipped).
            case fragmentation
            /// Not EMSC's message: not strict JSON, or not `{"action": "create"|"update",
            /// "data": Feature}` (`SourceError`).
            case notAMessage = "not-a-message"
            /// EMSC's message, but its event cannot be imported: no id, a bad time, impossible
            /// coordinates (`SourceProblem`).
            case eventSkipped = "event-skipped"
        }

        public var kind: Kind
        /// What was wrong, with the reader's position when it has one.
        public var reason: String
        /// The message's first bytes as text (invalid UTF-8 replaced), for the log.
        public var excerpt: String

        public var description: String { "\(kind.rawValue): \(reason) (message: \(excerpt))" }
    }

    /// Each step of the stream, for metrics and tests; called on the stream's tasks, so keep it short.
    public enum Event: Sendable, Hashable {
        case connecting(connection: Int)
        /// The upgrade succeeded; the catch-up starts.
        case connected(connection: Int)
        case catchUpFinished(connection: Int)
        case catchUpFailed(connection: Int, error: String)
        case badMessage(BadMessage)
        /// The connection ended (or never opened), and why.
        case disconnected(connection: Int, reason: String)
        /// The next connection is tried after `delay`, the `attempt`th in a row since a healthy one.
        case waiting(attempt: Int, delay: Duration)
    }

    public let configuration: Configuration
    private let logger: Logger
    private let onEvent: @Sendable (Event) -> Void
    private let state = Mutex(Status())

    /// - Parameters:
    ///   - onEvent: told of each step (``Event``).
    public init(
        _ configuration: Configuration, logger: Logger = Logger(label: "quaked.emsc"),
        onEvent: @escaping @Sendable (Event) -> Void = { _ in }
    ) {
        self.configuration = configuration
        var logger = logger
        logger[metadataKey: "source.name"] = "\(configuration.source)"
        self.logger = logger
        self.onEvent = onEvent
    }

    /// The state and counters now.
    public var status: Status { state.withLock { $0 } }

    /// Connects, catches up, delivers, reconnects, until the task is cancelled (see the type's
    /// comment). `catchUp` is called once the socket is open on every connection and must
    /// import what was published since the newest stored report (less an overlap); `deliver`
    /// gets the socket's items after it, in order, in batches of up to
    /// ``Configuration/maxBatch``. Neither is called concurrently. An error thrown by either is
    /// logged and handled as the type's comment says; it never ends `run`.
    public func run(
        catchUp: @escaping @Sendable (CatchUp) async throws -> Void,
        deliver: @escaping @Sendable ([SourceItem]) async throws -> Void
    ) async {
        defer { update { $0.state = .stopped } }
        var failures = 0
        var connection = 0
        while !Task.isCancelled {
            connection += 1
            let number = connection
            update {
                $0.state = .connecting
                $0.connection = number
                if number > 1 { $0.counters.reconnects += 1 }
            }
            onEvent(.connecting(connection: number))
            let started = ContinuousClock.now
            let outcome = await connect(number, catchUp: catchUp, deliver: deliver)
            if Task.isCancelled { return }
            let lasted = started.duration(to: .now)
            update { $0.lastError = outcome.reason }
            logger.log(
                level: outcome.upgraded ? .notice : .warning,
                outcome.upgraded ? "the websocket connection ended" : "cannot open the websocket connection",
                metadata: [
                    "source.connection": "\(number)", "source.reason": "\(outcome.reason)",
                    "source.url": "\(configuration.url)",
                ])
            onEvent(.disconnected(connection: number, reason: outcome.reason))
            if outcome.upgraded && lasted >= configuration.healthyAfter { failures = 0 }
            failures += 1
            let delay = configuration.backoff.delay(attempt: failures)
            update { $0.state = .waiting }
            onEvent(.waiting(attempt: failures, delay: delay))
            do {
                try await Task.sleep(for: delay)
            } catch {
                return
            }
        }
    }

    // MARK: One connection

    private struct Outcome {
        /// Whether the websocket upgrade succeeded.
        var upgraded: Bool
        var reason: String
    }

    /// Why a connection is given up on purpose.
    private enum GiveUp: Error, CustomStringConvertible {
        case overflow(Int)
        case delivery(any Error)

        var description: String {
            switch self {
            case .overflow(let limit):
                "over \(limit) items waited for the catch-up or delivery; dropped, to be caught up again"
            case .delivery(let error): "the delivery failed (\(error)); to be caught up again"
            }
        }
    }

    /// One connection on an event loop group of its own, with a watchdog on the upgrade.
    ///
    /// WSClient waits for the upgrade's answer without a timeout and without heeding
    /// cancellation (`EventLoopFuture.get`), and with remote half-closure allowed, a server that
    /// closes during the upgrade leaves it waiting too. Shutting the group down closes the
    /// channel, which fails the upgrade: so a connection not upgraded within
    /// ``Configuration/handshakeTimeout``, or cancelled before its upgrade, ends.
    private func connect(
        _ connection: Int, catchUp: @escaping @Sendable (CatchUp) async throws -> Void,
        deliver: @escaping @Sendable ([SourceItem]) async throws -> Void
    ) async -> Outcome {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let upgraded = Shared(false)
        let abandoned = Shared<String?>(nil)
        let timeout = configuration.handshakeTimeout
        let grace = configuration.closeTimeout
        // The session's outcome, or nil when it is given up on. The session runs as a task of its
        // own because a shutdown of its loop that comes before WSClient has scheduled its connect
        // (NIO: "Cannot schedule tasks on an EventLoop that has already shut down") leaves
        // WSClient waiting for ever; a session not ended `grace` after the shutdown is left
        // behind (its loop is gone: it can do nothing more), so that it never holds `run`.
        let (ends, end) = AsyncStream<Outcome?>.makeStream()
        let session = Task {
            end.yield(
                await self.session(connection, group: group, upgraded: upgraded, catchUp: catchUp, deliver: deliver))
        }
        let ended: Outcome? = await withTaskCancellationHandler {
            await withTaskGroup(of: Void.self) { tasks -> Outcome? in
                tasks.addTask {
                    // Wakes at the timeout, or at once when cancelled (the connection's end, or run's).
                    try? await Task.sleep(for: timeout)
                    let stop =
                        upgraded.withLock { $0 } ? nil : Task.isCancelled ? "cancelled" : "no websocket upgrade within \(timeout)"
                    guard let stop else { return }
                    abandoned.withLock { $0 = $0 ?? stop }
                    try? await group.shutdownGracefully()
                    // Not a child: the give-up must come even when this task is cancelled.
                    Task {
                        try? await Task.sleep(for: grace)
                        end.yield(nil)
                    }
                }
                var first: Outcome?
                for await value in ends {
                    first = value
                    break
                }
                // Ended (or given up on): the watchdog's shutdown is harmless now.
                abandoned.withLock { $0 = $0 ?? "ended" }
                tasks.cancelAll()
                return first
            }
        } onCancel: {
            session.cancel()
        }
        try? await group.shutdownGracefully()
        guard let outcome = ended else {
            let reason = abandoned.withLock { $0 } ?? "cancelled"
            logger.warning(
                "the websocket connection did not end after its event loop was shut down; left behind",
                metadata: ["source.connection": "\(connection)", "source.reason": "\(reason)"])
            return Outcome(upgraded: false, reason: reason)
        }
        if let reason = abandoned.withLock({ $0 }), reason != "ended", !outcome.upgraded {
            return Outcome(upgraded: false, reason: reason)
        }
        return outcome
    }

    /// The connection itself: WSClient's connect and upgrade, then the reader and the delivery
    /// side by side until the socket ends and what it sent is delivered; why it ended.
    private func session(
        _ connection: Int, group: any EventLoopGroup, upgraded: Shared<Bool>,
        catchUp: @escaping @Sendable (CatchUp) async throws -> Void,
        deliver: @escaping @Sendable ([SourceItem]) async throws -> Void
    ) async -> Outcome {
        let configuration = self.configuration
        let ended = Shared<String?>(nil)
        let client = WebSocketClientConfiguration(
            maxFrameSize: configuration.maxMessageBytes,
            closeTimeout: configuration.closeTimeout,
            autoPing: .enabled(timePeriod: configuration.pingInterval),
            // Checked here instead, so that a bad text message is skipped, not the connection closed.
            validateUTF8: false)
        do {
            let close = try await WebSocketClient.connect(
                url: configuration.url, configuration: client, eventLoopGroup: group, logger: logger
            ) { inbound, _, _ in
                upgraded.withLock { $0 = true }
                self.update { $0.state = .catchingUp }
                self.onEvent(.connected(connection: connection))
                self.logger.info(
                    "websocket connected; catching up", metadata: ["source.connection": "\(connection)"])
                let pending = PendingItems()
                try await withThrowingTaskGroup(of: Void.self) { group in
                    group.addTask {
                        // The reader: ends when the socket does, or on an overflow.
                        if let reason = await self.read(inbound, into: pending) {
                            ended.withLock { $0 = reason }
                        }
                    }
                    group.addTask {
                        try await self.deliverLoop(
                            connection, pending: pending, catchUp: catchUp, deliver: deliver)
                    }
                    while try await group.next() != nil {}
                }
            }
            if let reason = ended.withLock({ $0 }) {
                return Outcome(upgraded: true, reason: reason)
            }
            let reason =
                close.map { "the server closed the websocket (\($0.closeCode)\($0.reason.map { ": \($0)" } ?? ""))" }
                ?? "the connection closed without a close frame: dropped by the server or the network, or closed when no pong came within the ping interval"
            return Outcome(upgraded: upgraded.withLock { $0 }, reason: reason)
        } catch {
            let reason: String
            if let giveUp = error as? GiveUp {
                reason = giveUp.description
            } else if let ended = ended.withLock({ $0 }) {
                reason = ended
            } else {
                reason = "\(error)"
            }
            return Outcome(upgraded: upgraded.withLock { $0 }, reason: reason)
        }
    }

    /// Catches up (retrying after the backoff while the socket lasts), then hands the buffered
    /// and arriving items to `deliver` until the socket ends and everything is delivered.
    private func deliverLoop(
        _ connection: Int, pending: PendingItems, catchUp: @Sendable (CatchUp) async throws -> Void,
        deliver: @Sendable ([SourceItem]) async throws -> Void
    ) async throws {
        var attempt = 0
        while true {
            attempt += 1
            do {
                try await catchUp(CatchUp(connection: connection, attempt: attempt))
                update {
                    $0.counters.catchUps += 1
                    $0.state = .streaming
                }
                onEvent(.catchUpFinished(connection: connection))
                break
            } catch {
                if Task.isCancelled { throw CancellationError() }
                let message = "the catch-up failed: \(error)"
                update {
                    $0.counters.catchUpFailures += 1
                    $0.lastError = message
                }
                onEvent(.catchUpFailed(connection: connection, error: "\(error)"))
                logger.warning(
                    "the catch-up failed; messages stay buffered until it succeeds",
                    metadata: ["source.connection": "\(connection)", "error": "\(error)", "source.attempt": "\(attempt)"])
                if pending.isFinished {
                    // The socket is gone: the next connection catches up again, these with it.
                    pending.finish(discard: true)
                    return
                }
                try await Task.sleep(for: configuration.backoff.delay(attempt: attempt))
            }
        }
        while let batch = try await pending.take(max: configuration.maxBatch) {
            do {
                try await deliver(batch)
            } catch {
                if Task.isCancelled { throw CancellationError() }
                throw GiveUp.delivery(error)
            }
            update { $0.counters.delivered += batch.count }
        }
    }

    /// Reads messages until the socket ends; returns why, unless it simply ended (then WSClient
    /// knows more: a close frame or none). Never throws: a broken socket ends the reading, and
    /// what was read is still delivered.
    private func read(_ inbound: WebSocketInboundStream, into pending: PendingItems) async -> String? {
        var message: Message?
        do {
            for try await frame in inbound {
                switch frame.opcode {
                case .text, .binary:
                    if let unfinished = message {
                        skip(
                            .fragmentation, "a new message began before the last one's final frame",
                            bytes: unfinished.bytes)
                    }
                    message = Message(isText: frame.opcode == .text)
                case .continuation:
                    if message == nil {
                        skip(.fragmentation, "a continuation frame without a first frame", bytes: Array(frame.data.readableBytesView))
                        continue
                    }
                }
                message!.append(frame.data, limit: configuration.maxMessageBytes)
                guard frame.fin, let complete = message else { continue }
                message = nil
                if !handle(complete, pending: pending) {
                    // The buffer dropped what it held (PendingItems.append).
                    return GiveUp.overflow(configuration.maxPendingItems).description
                }
            }
            pending.finish()
            return nil
        } catch {
            pending.finish()
            return "the connection failed: \(error)"
        }
    }

    /// One complete message: counted, read, buffered or skipped. False when the buffer is full.
    private func handle(_ message: Message, pending: PendingItems) -> Bool {
        let now = QuakeTime.now()
        update {
            $0.counters.messages += 1
            $0.lastMessageTime = now
        }
        if message.tooLarge {
            skip(
                .tooLarge, "the message is over \(configuration.maxMessageBytes) bytes (\(message.size))",
                bytes: message.bytes, cut: true)
            return true
        }
        guard message.isText else {
            skip(.binary, "a binary message (\(message.size) bytes): EMSC sends its messages as text", bytes: message.bytes)
            return true
        }
        guard String(validating: message.bytes, as: UTF8.self) != nil else {
            skip(.notUTF8, "a text message that is not UTF-8", bytes: message.bytes)
            return true
        }
        var reader = EMSCMessageReader(source: configuration.source)
        let item: SourceItem
        do {
            guard let read = try reader.read(message.bytes) else {
                skip(
                    .eventSkipped, reader.problems.first.map { "\($0)" } ?? "the event cannot be imported",
                    bytes: message.bytes)
                return true
            }
            item = read
        } catch {
            skip(.notAMessage, "\(error)", bytes: message.bytes)
            return true
        }
        // Counted once buffered (or refused), so that a count seen means the buffer has it.
        let added = pending.append(item, limit: configuration.maxPendingItems)
        update { $0.counters.reports += 1 }
        return added
    }

    /// Counts, logs and reports a bad message; `cut` says `bytes` is only its beginning.
    private func skip(_ kind: BadMessage.Kind, _ reason: String, bytes: [UInt8], cut: Bool = false) {
        let bad = BadMessage(kind: kind, reason: reason, excerpt: Self.excerpt(bytes, cut: cut))
        update { $0.counters.badMessages += 1 }
        logger.warning(
            "websocket message skipped",
            metadata: [
                "source.bad": "\(kind.rawValue)", "source.reason": "\(reason)", "source.excerpt": "\(bad.excerpt)",
            ])
        onEvent(.badMessage(bad))
    }

    /// The first bytes of a message as one line of text, "…" after it when there is more.
    static func excerpt(_ bytes: [UInt8], cut: Bool = false, limit: Int = 160) -> String {
        var text = String(decoding: bytes.prefix(limit), as: UTF8.self)
        text = String(text.map { $0.isNewline || $0 == "\t" ? " " : $0 })
        return cut || bytes.count > limit ? text + "…" : text
    }

    private func update(_ body: (inout Status) -> Void) {
        state.withLock { body(&$0) }
    }

    /// A value the connection's tasks share.
    final class Shared<Value: Sendable>: Sendable {
        private let value: Mutex<Value>
        init(_ value: Value) { self.value = Mutex(value) }
        func withLock<R>(_ body: (inout Value) -> R) -> R { value.withLock { body(&$0) } }
    }

    /// A message being put together from its frames.
    private struct Message {
        var isText: Bool
        var bytes: [UInt8] = []
        /// Every byte received, kept or not.
        var size = 0
        var tooLarge = false

        init(isText: Bool) { self.isText = isText }

        /// Adds a frame's data; past `limit`, keeps only the first bytes (for the excerpt).
        mutating func append(_ data: ByteBuffer, limit: Int) {
            size += data.readableBytes
            if tooLarge { return }
            if size > limit {
                tooLarge = true
                bytes.append(contentsOf: data.readableBytesView.prefix(max(0, 160 - bytes.count)))
                bytes = Array(bytes.prefix(160))
                return
            }
            bytes.append(contentsOf: data.readableBytesView)
        }
    }
}
