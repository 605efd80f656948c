import Foundation
import NIOCore
import NIOHTTP1
import NIOHTTPCompression
import NIOPosix
import NIOConcurrencyHelpers

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// One request as the ``FeedTestServer`` received it.
public struct RecordedRequest: Sendable {
    /// The method, e.g. `"GET"`.
    public let method: String
    /// The request target as sent, e.g. `"/feed.geojson?x=1"`.
    public let uri: String
    /// The path part of ``uri`` (no query), e.g. `"/feed.geojson"`.
    public let path: String
    /// The request headers as the client sent them.
    public let headers: HTTPHeaders
    /// When the request had fully arrived (for measuring the gaps between pulls).
    public var receivedAt: ContinuousClock.Instant = .now

    /// The first value of a header (case-insensitive name), or `nil`.
    public func header(_ name: String) -> String? { headers.first(name: name) }

    /// The query parameters of ``uri``, percent-decoded (`+` decodes to a space, as in HTML forms;
    /// malformed escapes are kept as they are). A name without `=` has the value `""`; when a name
    /// comes more than once, the last value wins. Empty when the uri has no query.
    public var query: [String: String] { Self.parseQuery(uri) }

    /// The decoded parameters of the query part of `uri` (see ``query``).
    static func parseQuery(_ uri: String) -> [String: String] {
        var target = Substring(uri)
        if let fragment = target.firstIndex(of: "#") { target = target[..<fragment] }
        guard let mark = target.firstIndex(of: "?") else { return [:] }
        var result: [String: String] = [:]
        for pair in target[target.index(after: mark)...].split(separator: "&", omittingEmptySubsequences: true) {
            let name: Substring
            let value: Substring
            if let equals = pair.firstIndex(of: "=") {
                name = pair[..<equals]
                value = pair[pair.index(after: equals)...]
            } else {
                name = pair
                value = ""
            }
            result[percentDecode(name)] = percentDecode(value)
        }
        return result
    }

    /// `text` with `%XX` escapes decoded and `+` as a space (invalid UTF-8 is replaced, not rejected).
    static func percentDecode(_ text: Substring) -> String {
        func hex(_ byte: UInt8) -> UInt8? {
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
            default: nil
            }
        }
        let bytes = Array(text.utf8)
        var decoded: [UInt8] = []
        decoded.reserveCapacity(bytes.count)
        var index = 0
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "%"), index + 2 < bytes.count, let high = hex(bytes[index + 1]),
                let low = hex(bytes[index + 2])
            {
                decoded.append(high << 4 | low)
                index += 3
                continue
            }
            decoded.append(byte == UInt8(ascii: "+") ? UInt8(ascii: " ") : byte)
            index += 1
        }
        return String(decoding: decoded, as: UTF8.self)
    }
}

/// Errors of ``FeedTestServer``.
public enum FeedTestServerError: Error, CustomStringConvertible {
    /// ``FeedTestServer/waitForRequests(_:count:timeout:)`` ran out of time.
    case timedOut(path: String, expected: Int, received: Int)
    /// The server could not tell its own port.
    case noLocalAddress

    public var description: String {
        switch self {
        case .timedOut(let path, let expected, let received):
            return "timed out waiting for \(expected) request(s) to \(path); received \(received)"
        case .noLocalAddress:
            return "the test server's listening socket has no local address"
        }
    }
}

/// A real HTTP/1.1 server on 127.0.0.1 (ephemeral port) that serves scripted responses and misbehaves
/// on demand, for pointing an HTTP client at in tests.
///
/// ```swift
/// let server = try await FeedTestServer.start()
/// server.setResponses("/feed", [.status(500), .feed(Fixtures.usgs("abruzzi__earthquake-viz__all_day.geojson"))])
/// // ... client GETs server.url("/feed") ...
/// #expect(server.requestCount("/feed") == 2)
/// try await server.shutdown()
/// ```
///
/// - Each path has a script of responses: each request takes the next one and the last repeats forever.
///   A path may instead have a handler (``setHandler(_:_:)``) that computes each response from the request;
///   a script set later overrides the handler until it is cleared. A path with neither answers 404.
/// - 200 responses with `lastModified`/`etag` answer matching conditional requests with 304.
/// - Bodies are gzip-compressed (chunked) when the request accepts gzip, unless the response opts out.
/// - Keep-alive, pipelining and concurrent connections work; clients vanishing midway are ignored.
/// - Always call ``shutdown()`` (or use ``withServer(_:)``): it closes every connection, stalled ones too.
public final class FeedTestServer: Sendable {
    private struct State {
        var scripts: [String: [TestResponse]] = [:]
        var handlers: [String: @Sendable (RecordedRequest) -> TestResponse] = [:]
        var served: [String: Int] = [:]
        var log: [String: [RecordedRequest]] = [:]
    }

    /// The bytes per chunk when streaming a body.
    static let chunkSize = 64 * 1024

    private let state = NIOLockedValueBox(State())
    private let serverChannel: any Channel
    private let runTask: Task<Void, Never>

    /// The TCP port the server listens on (127.0.0.1).
    public let port: Int

    private init(serverChannel: any Channel, port: Int, runTask: Task<Void, Never>) {
        self.serverChannel = serverChannel
        self.port = port
        self.runTask = runTask
    }

    /// Starts a server on 127.0.0.1 on an ephemeral port, using `MultiThreadedEventLoopGroup.singleton`.
    public static func start() async throws -> FeedTestServer {
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.tcpOption(.tcp_nodelay), value: 1)
            .bind(host: "127.0.0.1", port: 0) { channel in
                channel.eventLoop.makeCompletedFuture {
                    let sync = channel.pipeline.syncOperations
                    try sync.configureHTTPServerPipeline(withErrorHandling: true)
                    try sync.addHandler(AcceptEncodingNormalizer())
                    try sync.addHandler(
                        HTTPResponseCompressor(responseCompressionPredicate: { head, _ in
                            guard head.headers.contains(name: compressMarker) else { return .doNotCompress }
                            head.headers.remove(name: compressMarker)
                            return .compressIfPossible
                        })
                    )
                    return try NIOAsyncChannel<HTTPServerRequestPart, HTTPServerResponsePart>(
                        wrappingChannelSynchronously: channel
                    )
                }
            }
        guard let port = channel.channel.localAddress?.port else {
            try? await channel.channel.close()
            throw FeedTestServerError.noLocalAddress
        }
        // The server is created after the task starts, so the task reaches it through a box.
        let box = ServerBox()
        let task = Task {
            await withDiscardingTaskGroup { group in
                do {
                    try await channel.executeThenClose { inbound in
                        for try await connection in inbound {
                            group.addTask {
                                guard let server = box.server else {
                                    try? await connection.channel.close()
                                    return
                                }
                                await server.serve(connection)
                            }
                        }
                    }
                } catch {
                    // The listening socket closed (shutdown); the connections are cancelled with the group.
                }
                group.cancelAll()
            }
        }
        let server = FeedTestServer(serverChannel: channel.channel, port: port, runTask: task)
        box.set(server)
        return server
    }

    /// Runs `body` with a started server and shuts it down afterwards, whether `body` throws or not.
    public static func withServer<R>(_ body: (FeedTestServer) async throws -> R) async throws -> R {
        let server = try await start()
        do {
            let result = try await body(server)
            try await server.shutdown()
            return result
        } catch {
            try? await server.shutdown()
            throw error
        }
    }

    /// Closes the listening socket and every connection (stalled ones too), and waits for them all.
    public func shutdown() async throws {
        runTask.cancel()
        try? await serverChannel.close()
        await runTask.value
    }

    /// `http://127.0.0.1:PORT/path` (a missing leading slash is added).
    public func url(_ path: String) -> String {
        "http://127.0.0.1:\(port)" + (path.hasPrefix("/") ? path : "/" + path)
    }

    // MARK: Script

    /// Sets the script of `path` (without query; a missing leading slash is added) and resets its position:
    /// the next request gets `responses[0]`, then `responses[1]`, …, the last repeating forever.
    /// An empty script makes the path answer 404 again, or its handler if it has one (see
    /// ``setHandler(_:_:)``, which a non-empty script overrides). The request log is kept.
    public func setResponses(_ path: String, _ responses: [TestResponse]) {
        let key = Self.normalize(path)
        state.withLockedValue {
            $0.scripts[key] = responses.isEmpty ? nil : responses
            $0.served[key] = 0
        }
    }

    /// Sets a one-response script: every request to `path` gets `response`.
    public func setResponse(_ path: String, _ response: TestResponse) {
        setResponses(path, [response])
    }

    /// Makes `path` (without query; a missing leading slash is added) answer each request with
    /// `handler`'s response, computed from the request (``RecordedRequest/query`` has its parameters).
    ///
    /// Setting a handler clears the path's script, so the handler answers from the next request on.
    /// A script set afterwards with ``setResponses(_:_:)`` takes priority over the handler until it
    /// is cleared with an empty script; then the handler answers again. Handled requests are logged
    /// like scripted ones (``requests(_:)``), before the handler runs. The handler is called outside
    /// the server's lock, on the connection's task, possibly for several connections at once.
    public func setHandler(_ path: String, _ handler: @escaping @Sendable (RecordedRequest) -> TestResponse) {
        let key = Self.normalize(path)
        state.withLockedValue {
            $0.handlers[key] = handler
            $0.scripts[key] = nil
            $0.served[key] = 0
        }
    }

    /// Removes the handler of `path`, if any (its script, if any, is kept).
    public func removeHandler(_ path: String) {
        let key = Self.normalize(path)
        state.withLockedValue { _ = $0.handlers.removeValue(forKey: key) }
    }

    // MARK: Request log

    /// The requests received for `path` (query ignored), oldest first, including 404s.
    public func requests(_ path: String) -> [RecordedRequest] {
        let key = Self.normalize(path)
        return state.withLockedValue { $0.log[key] ?? [] }
    }

    /// How many requests `path` received.
    public func requestCount(_ path: String) -> Int {
        let key = Self.normalize(path)
        return state.withLockedValue { $0.log[key]?.count ?? 0 }
    }

    /// Every request received, oldest first per path, in path order.
    public var allRequests: [RecordedRequest] {
        state.withLockedValue { state in state.log.keys.sorted().flatMap { state.log[$0]! } }
    }

    /// Forgets the request log (scripts and their positions are kept).
    public func clearRequests() {
        state.withLockedValue { $0.log = [:] }
    }

    /// Waits until `path` has received at least `count` requests, or throws
    /// ``FeedTestServerError/timedOut(path:expected:received:)`` after `timeout`.
    /// A request counts as soon as its head and body have arrived (before it is answered).
    public func waitForRequests(_ path: String, count: Int, timeout: Duration = .seconds(10)) async throws {
        let clock = ContinuousClock()
        let deadline = clock.now.advanced(by: timeout)
        while true {
            let received = requestCount(path)
            if received >= count { return }
            if clock.now >= deadline {
                throw FeedTestServerError.timedOut(path: Self.normalize(path), expected: count, received: received)
            }
            try await Task.sleep(for: .milliseconds(5))
        }
    }

    // MARK: Serving

    private static func normalize(_ path: String) -> String {
        var path = path
        if let query = path.firstIndex(where: { $0 == "?" || $0 == "#" }) {
            path = String(path[..<query])
        }
        return path.hasPrefix("/") ? path : "/" + path
    }

    /// Serves one connection until the client closes it, a response ends it, or the server shuts down.
    private func serve(_ connection: NIOAsyncChannel<HTTPServerRequestPart, HTTPServerResponsePart>) async {
        let channel = connection.channel
        do {
            try await connection.executeThenClose { inbound, _ in
                var head: HTTPRequestHead?
                for try await part in inbound {
                    switch part {
                    case .head(let requestHead):
                        head = requestHead
                    case .body:
                        break
                    case .end:
                        guard let requestHead = head else { continue }
                        head = nil
                        let keepOpen = try await respond(to: requestHead, on: channel)
                        if !keepOpen { return }
                    }
                }
            }
        } catch {
            // Client went away, or shutdown: nothing to do, the channel is closed by executeThenClose.
        }
    }

    /// Answers one request; returns whether the connection may serve another one.
    private func respond(to request: HTTPRequestHead, on channel: any Channel) async throws -> Bool {
        let path = Self.normalize(request.uri)
        let (headers, acceptsGzip) = AcceptEncodingNormalizer.restore(request.headers)
        let recorded = RecordedRequest(method: request.method.rawValue, uri: request.uri, path: path, headers: headers)
        let (scripted, handler): (TestResponse?, (@Sendable (RecordedRequest) -> TestResponse)?) =
            state.withLockedValue { state in
                state.log[path, default: []].append(recorded)
                guard let script = state.scripts[path] else { return (nil, state.handlers[path]) }
                let index = state.served[path, default: 0]
                state.served[path] = index + 1
                return (script[min(index, script.count - 1)], nil)
            }
        let response = scripted ?? handler?(recorded) ?? .status(404, body: "no script for \(path)\n")
        let keepAlive = request.isKeepAlive
        let isHead = request.method == .HEAD

        var head = HTTPResponseHead(version: request.version, status: HTTPResponseStatus(statusCode: response.status))
        head.headers.add(name: "Server", value: "FeedTestServer")
        if let value = response.contentType { head.headers.add(name: "Content-Type", value: value) }
        if let value = response.lastModified { head.headers.add(name: "Last-Modified", value: value) }
        if let value = response.etag { head.headers.add(name: "ETag", value: value) }
        if let value = response.cacheControl { head.headers.add(name: "Cache-Control", value: value) }
        if let value = response.retryAfter { head.headers.add(name: "Retry-After", value: value) }
        for (name, value) in response.headers { head.headers.add(name: name, value: value) }
        if !keepAlive { head.headers.replaceOrAdd(name: "Connection", value: "close") }

        if case .stallBeforeHead = response.behavior {
            try await Self.waitUntilClosed(channel)
            return false
        }

        if response.conditional, response.status == 200, Self.notModified(request: headers, response: response) {
            head.status = .notModified
            head.headers.remove(name: "Content-Type")
            try await Self.write(.head(head), on: channel)
            try await Self.write(.end(nil), on: channel)
            return keepAlive
        }

        let source: BodySource
        do {
            source = try BodySource(response.body)
        } catch {
            var failure = HTTPResponseHead(version: request.version, status: .internalServerError)
            let message = ByteBuffer(string: "FeedTestServer: \(error)\n")
            failure.headers.add(name: "Content-Length", value: "\(message.readableBytes)")
            failure.headers.add(name: "Connection", value: "close")
            try await Self.write(.head(failure), on: channel)
            try await Self.write(.body(.byteBuffer(message)), on: channel)
            try await Self.write(.end(nil), on: channel)
            return false
        }
        defer { source.close() }

        let status = head.status.code
        let mayHaveBody = !(100..<200).contains(status) && status != 204 && status != 304
        guard mayHaveBody, !isHead else {
            if mayHaveBody { head.headers.replaceOrAdd(name: "Content-Length", value: "\(source.length)") }
            try await Self.write(.head(head), on: channel)
            try await Self.write(.end(nil), on: channel)
            return keepAlive
        }

        if response.gzip && acceptsGzip {
            head.headers.add(name: compressMarker, value: "1")
            head.headers.replaceOrAdd(name: "Transfer-Encoding", value: "chunked")
        } else {
            head.headers.replaceOrAdd(name: "Content-Length", value: "\(source.length)")
        }
        try await Self.write(.head(head), on: channel)

        var limit = source.length
        var chunkSize = Self.chunkSize
        var delay: Duration?
        switch response.behavior {
        case .truncate(let afterBytes), .stall(let afterBytes):
            limit = min(max(afterBytes, 0), source.length)
        case .slow(let size, let pause):
            chunkSize = max(size, 1)
            delay = pause
        case .normal, .stallBeforeHead:
            break
        }

        var sent = 0
        while sent < limit {
            if let delay { try await Task.sleep(for: delay) }
            let count = min(chunkSize, limit - sent)
            let chunk = try await source.read(offset: sent, count: count, allocator: channel.allocator)
            try await Self.write(.body(.byteBuffer(chunk)), on: channel)
            sent += count
        }

        switch response.behavior {
        case .truncate:
            return false  // executeThenClose closes the connection; all writes so far have completed.
        case .stall:
            try await Self.waitUntilClosed(channel)
            return false
        case .normal, .slow, .stallBeforeHead:
            try await Self.write(.end(nil), on: channel)
            return keepAlive
        }
    }

    /// Whether the request's validators match the response's (RFC 9110: If-None-Match wins).
    private static func notModified(request: HTTPHeaders, response: TestResponse) -> Bool {
        let ifNoneMatch = request[canonicalForm: "If-None-Match"]
        if !ifNoneMatch.isEmpty {
            guard let etag = response.etag else { return false }
            func opaque<S: StringProtocol>(_ tag: S) -> Substring {
                let trimmed = tag.trimmingCharacters(in: .whitespaces)[...]
                return trimmed.hasPrefix("W/") ? trimmed.dropFirst(2) : trimmed
            }
            return ifNoneMatch.contains { $0 == "*" || opaque($0) == opaque(etag) }
        }
        if let since = request.first(name: "If-Modified-Since"), let lastModified = response.lastModified {
            return since.trimmingCharacters(in: .whitespaces) == lastModified
        }
        return false
    }

    /// Writes and flushes one part and waits until it is handed to the socket (this is the backpressure:
    /// at most one chunk is in flight). Cancellation (shutdown) closes the channel, failing the write.
    private static func write(_ part: HTTPServerResponsePart, on channel: any Channel) async throws {
        try await withTaskCancellationHandler {
            try await channel.writeAndFlush(part).get()
        } onCancel: {
            channel.close(promise: nil)
        }
    }

    /// Waits until the connection closes: the client gave up, or the server shuts down.
    private static func waitUntilClosed(_ channel: any Channel) async throws {
        try await withTaskCancellationHandler {
            try await channel.closeFuture.get()
        } onCancel: {
            channel.close(promise: nil)
        }
    }
}

/// The marker header by which the server tells the compressor to compress a response (removed before sending).
private let compressMarker = "x-feedtestserver-compress"

/// Lets the server reach itself from the accept loop, which starts before the server object exists.
private final class ServerBox: Sendable {
    private let value = NIOLockedValueBox<FeedTestServer?>(nil)
    var server: FeedTestServer? { value.withLockedValue { $0 } }
    func set(_ server: FeedTestServer) { value.withLockedValue { $0 = server } }
}

/// Makes `HTTPResponseCompressor` choose gzip whenever the client accepts gzip.
///
/// The compressor prefers deflate when a client lists both with equal weight (AsyncHTTPClient sends
/// `deflate, gzip`). This handler, placed just before the compressor, replaces `Accept-Encoding` with
/// `gzip` (or removes it) and keeps the original values under another name, which ``restore(_:)`` puts back.
private final class AcceptEncodingNormalizer: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = HTTPServerRequestPart

    static let originalName = "x-feedtestserver-original-accept-encoding"

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard case .head(var head) = unwrapInboundIn(data) else {
            context.fireChannelRead(data)
            return
        }
        let values = head.headers["Accept-Encoding"]
        if !values.isEmpty {
            let gzip = Self.acceptsGzip(values)
            head.headers.remove(name: "Accept-Encoding")
            for value in values { head.headers.add(name: Self.originalName, value: value) }
            if gzip { head.headers.add(name: "Accept-Encoding", value: "gzip") }
        }
        context.fireChannelRead(wrapInboundOut(.head(head)))
    }

    /// The headers as the client sent them (Accept-Encoding restored), and whether it accepts gzip.
    static func restore(_ rewritten: HTTPHeaders) -> (HTTPHeaders, acceptsGzip: Bool) {
        let original = rewritten[originalName]
        guard !original.isEmpty else { return (rewritten, false) }
        var headers = rewritten
        let gzip = headers.contains(name: "Accept-Encoding")
        headers.remove(name: originalName)
        headers.remove(name: "Accept-Encoding")
        for value in original { headers.add(name: "Accept-Encoding", value: value) }
        return (headers, gzip)
    }

    /// Whether these `Accept-Encoding` values accept gzip (q > 0 for gzip/x-gzip, or for `*` without them).
    static func acceptsGzip(_ values: [String]) -> Bool {
        var gzip: Double?
        var any: Double?
        for value in values {
            for item in value.split(separator: ",") {
                let parts = item.split(separator: ";").map { $0.trimmingCharacters(in: .whitespaces) }
                guard let coding = parts.first?.lowercased() else { continue }
                var q = 1.0
                for parameter in parts.dropFirst() where parameter.lowercased().hasPrefix("q=") {
                    q = Double(parameter.dropFirst(2)) ?? 0
                }
                if coding == "gzip" || coding == "x-gzip" {
                    gzip = q
                } else if coding == "*" {
                    any = q
                }
            }
        }
        if let gzip { return gzip > 0 }
        return (any ?? 0) > 0
    }
}

/// A body being sent: its length and its bytes, read lazily in chunks.
private final class BodySource {
    private enum Storage {
        case buffer(ByteBuffer)
        case file(descriptor: CInt)
        case generated(ByteBuffer)
    }

    private let storage: Storage
    let length: Int

    init(_ body: TestResponse.Body) throws {
        switch body {
        case .empty:
            storage = .buffer(ByteBuffer())
            length = 0
        case .bytes(let bytes):
            storage = .buffer(ByteBuffer(bytes: bytes))
            length = bytes.count
        case .generated(let byteCount, let fill):
            storage = .generated(ByteBuffer(repeating: fill, count: FeedTestServer.chunkSize))
            length = max(byteCount, 0)
        case .file(let url):
            let descriptor = open(url.path, O_RDONLY | O_CLOEXEC)
            guard descriptor >= 0 else { throw BodySourceError.cannotOpen(url.path, errno) }
            var info = stat()
            guard fstat(descriptor, &info) == 0 else {
                let code = errno
                _ = closeDescriptor(descriptor)
                throw BodySourceError.cannotOpen(url.path, code)
            }
            storage = .file(descriptor: descriptor)
            length = Int(info.st_size)
        }
    }

    /// Releases the file descriptor, if any.
    func close() {
        if case .file(let descriptor) = storage { _ = closeDescriptor(descriptor) }
    }

    /// `count` bytes from `offset` (the caller stays within ``length``).
    func read(offset: Int, count: Int, allocator: ByteBufferAllocator) async throws -> ByteBuffer {
        switch storage {
        case .buffer(let buffer):
            return buffer.getSlice(at: buffer.readerIndex + offset, length: count) ?? ByteBuffer()
        case .generated(let pattern):
            return pattern.getSlice(at: pattern.readerIndex, length: count) ?? ByteBuffer()
        case .file(let descriptor):
            return try await NIOThreadPool.singleton.runIfActive {
                var buffer = allocator.buffer(capacity: count)
                var done = 0
                while done < count {
                    let got = try buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: count - done) { pointer in
                        let result = pread(descriptor, pointer.baseAddress, count - done, off_t(offset + done))
                        if result < 0 {
                            if errno == EINTR { return 0 }
                            throw BodySourceError.readFailed(errno)
                        }
                        if result == 0 { throw BodySourceError.unexpectedEndOfFile }
                        return result
                    }
                    done += got
                }
                return buffer
            }
        }
    }
}

private enum BodySourceError: Error, CustomStringConvertible {
    case cannotOpen(String, CInt)
    case readFailed(CInt)
    case unexpectedEndOfFile

    var description: String {
        switch self {
        case .cannotOpen(let path, let code): return "cannot open \(path): errno \(code)"
        case .readFailed(let code): return "read failed: errno \(code)"
        case .unexpectedEndOfFile: return "the file shrank while being sent"
        }
    }
}

/// `close(2)`, named apart from `BodySource.close()`.
private func closeDescriptor(_ descriptor: CInt) -> CInt {
    #if canImport(Glibc)
        return Glibc.close(descriptor)
    #elseif canImport(Musl)
        return Musl.close(descriptor)
    #else
        return Darwin.close(descriptor)
    #endif
}
