import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix

/// One request as the ``ForwardingProxy`` received it.
public struct ProxiedRequest: Sendable {
    /// `CONNECT`, `GET`, ...
    public let method: String
    /// The request target as sent: `127.0.0.1:8080` for CONNECT, `http://127.0.0.1:8080/feed`
    /// (absolute form) for a forwarded request.
    public let target: String
    public let headers: HTTPHeaders

    /// The first value of a header (case-insensitive name), or `nil`.
    public func header(_ name: String) -> String? { headers.first(name: name) }
}

/// A real HTTP proxy on 127.0.0.1 (ephemeral port) for tests, on NIO: it tunnels `CONNECT`
/// requests, forwards absolute-form requests (`GET http://host:port/path`) in origin form with
/// `Connection: close`, and records every request it receives, `Proxy-Authorization` included,
/// which it never passes on.
///
/// With `requiredAuthorization` set, a request whose `Proxy-Authorization` is not exactly that
/// gets `407 Proxy Authentication Required`. Always call ``shutdown()``.
///
/// ``startTCP(to:port:listenPort:)`` makes a plain TCP relay instead (every connection tunnelled
/// to one upstream, no HTTP), for a PostgreSQL client; ``blackHole()`` makes it stop forwarding
/// in both directions (and stop connecting upstream), the connections staying open, as a network
/// that drops everything; ``resume()`` forwards again what was held.
public final class ForwardingProxy: Sendable {
    private let log = NIOLockedValueBox<[ProxiedRequest]>([])
    private let serverChannel: any Channel
    private let runTask: NIOLockedValueBox<Task<Void, Never>?>
    private let requiredAuthorization: String?
    /// A plain TCP relay's upstream.
    private let upstream: (host: String, port: Int)?
    private let forwarding = NIOLockedValueBox(true)
    /// The TCP port the proxy listens on (127.0.0.1).
    public let port: Int

    private init(serverChannel: any Channel, port: Int, requiredAuthorization: String?, upstream: (host: String, port: Int)? = nil) {
        self.serverChannel = serverChannel
        self.port = port
        self.requiredAuthorization = requiredAuthorization
        self.upstream = upstream
        self.runTask = NIOLockedValueBox(nil)
    }

    /// Stops forwarding: bytes are held (not passed on, not acknowledged beyond the socket
    /// buffers), closes are not passed on, new connections are accepted but not connected upstream.
    public func blackHole() { forwarding.withLockedValue { $0 = false } }

    /// Forwards again, starting with what was held.
    public func resume() { forwarding.withLockedValue { $0 = true } }

    /// Waits while the relay is black-holed.
    private func gate() async {
        while !forwarding.withLockedValue({ $0 }) && !Task.isCancelled {
            try? await Task.sleep(for: .milliseconds(20))
        }
    }

    /// `http://127.0.0.1:PORT`, or with user info: `http://user:password@127.0.0.1:PORT`.
    public func url(user: String? = nil, password: String? = nil) -> String {
        let userinfo = user.map { $0 + (password.map { ":" + $0 } ?? "") + "@" } ?? ""
        return "http://\(userinfo)127.0.0.1:\(port)"
    }

    /// Every request received, oldest first.
    public var requests: [ProxiedRequest] { log.withLockedValue { $0 } }

    /// Starts a plain TCP relay on 127.0.0.1 (`listenPort`, or an ephemeral port) to `host`:`port`.
    public static func startTCP(to host: String, port: Int, listenPort: Int = 0) async throws -> ForwardingProxy {
        try await start(requiredAuthorization: nil, upstream: (host, port), listenPort: listenPort)
    }

    /// Starts a proxy on an ephemeral port of 127.0.0.1.
    public static func start(requiredAuthorization: String? = nil) async throws -> ForwardingProxy {
        try await start(requiredAuthorization: requiredAuthorization, upstream: nil, listenPort: 0)
    }

    private static func start(requiredAuthorization: String?, upstream: (host: String, port: Int)?, listenPort: Int)
        async throws -> ForwardingProxy
    {
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .bind(host: "127.0.0.1", port: listenPort) { channel in
                channel.eventLoop.makeCompletedFuture {
                    try NIOAsyncChannel<ByteBuffer, ByteBuffer>(wrappingChannelSynchronously: channel)
                }
            }
        guard let port = channel.channel.localAddress?.port else {
            try? await channel.channel.close()
            throw FeedTestServerError.noLocalAddress
        }
        let proxy = ForwardingProxy(
            serverChannel: channel.channel, port: port, requiredAuthorization: requiredAuthorization, upstream: upstream)
        // On its own threads, as a machine of its own would be (see OwnThreadExecutor.servers).
        let task = Task(executorPreference: OwnThreadExecutor.servers) {
            await withDiscardingTaskGroup { group in
                do {
                    try await channel.executeThenClose { inbound in
                        for try await connection in inbound {
                            group.addTask {
                                if let upstream { await proxy.relay(connection, to: upstream) } else { await proxy.serve(connection) }
                            }
                        }
                    }
                } catch {
                    // The listening socket closed (shutdown).
                }
                group.cancelAll()
            }
        }
        proxy.runTask.withLockedValue { $0 = task }
        return proxy
    }

    /// Runs `body` with a started proxy and shuts it down afterwards.
    public static func withProxy<R>(
        requiredAuthorization: String? = nil, _ body: (ForwardingProxy) async throws -> R
    ) async throws -> R {
        let proxy = try await start(requiredAuthorization: requiredAuthorization)
        do {
            let result = try await body(proxy)
            try await proxy.shutdown()
            return result
        } catch {
            try? await proxy.shutdown()
            throw error
        }
    }

    /// Closes the listening socket and every connection, and waits for them.
    public func shutdown() async throws {
        let task = runTask.withLockedValue { $0 }
        task?.cancel()
        try? await serverChannel.close()
        await task?.value
    }

    // MARK: Serving

    private struct Head {
        var method: String
        var target: String
        var version: String
        var headers: HTTPHeaders
    }

    /// A plain TCP relay's connection: tunnelled to the upstream, through ``gate()``.
    private func relay(_ connection: NIOAsyncChannel<ByteBuffer, ByteBuffer>, to target: (host: String, port: Int)) async {
        let client = connection.channel
        try? await connection.executeThenClose { inbound, _ in
            await gate()
            let upstream = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                .connect(host: target.host, port: target.port) { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try NIOAsyncChannel<ByteBuffer, ByteBuffer>(wrappingChannelSynchronously: channel)
                    }
                }
            try await upstream.executeThenClose { upstreamInbound, _ in
                let server = upstream.channel
                await withTaskGroup(of: Void.self) { group in
                    group.addTask {
                        do {
                            for try await chunk in upstreamInbound {
                                await self.gate()
                                try await client.writeAndFlush(chunk).get()
                            }
                        } catch {}
                        await self.gate()
                        try? await client.close()
                    }
                    do {
                        for try await chunk in inbound {
                            await gate()
                            try await server.writeAndFlush(chunk).get()
                        }
                    } catch {}
                    await gate()
                    try? await server.close()
                    await group.waitForAll()
                }
            }
        }
    }

    private func serve(_ connection: NIOAsyncChannel<ByteBuffer, ByteBuffer>) async {
        let client = connection.channel
        try? await connection.executeThenClose { inbound, _ in
            var iterator = inbound.makeAsyncIterator()
            var buffer = ByteBuffer()
            var head: Head?
            while head == nil {
                guard var chunk = try await iterator.next() else { return }
                buffer.writeBuffer(&chunk)
                head = Self.parseHead(&buffer)
                if head == nil && buffer.readableBytes > 64 * 1024 { return }
            }
            guard let head else { return }
            log.withLockedValue {
                $0.append(ProxiedRequest(method: head.method, target: head.target, headers: head.headers))
            }
            if let requiredAuthorization, head.headers.first(name: "Proxy-Authorization") != requiredAuthorization {
                try await Self.answer(
                    client, "407 Proxy Authentication Required", extra: "Proxy-Authenticate: Basic realm=\"test\"\r\n")
                return
            }
            let upstreamHost: String
            let upstreamPort: Int
            var opening = ByteBuffer()
            if head.method == "CONNECT" {
                guard let colon = head.target.lastIndex(of: ":"), let port = Int(head.target[head.target.index(after: colon)...])
                else {
                    try await Self.answer(client, "400 Bad Request")
                    return
                }
                upstreamHost = String(head.target[..<colon]).trimmingCharacters(in: CharacterSet(charactersIn: "[]"))
                upstreamPort = port
            } else {
                guard let url = URL(string: head.target), url.scheme == "http", let host = url.host else {
                    try await Self.answer(client, "400 Bad Request")
                    return
                }
                upstreamHost = host
                upstreamPort = url.port ?? 80
                var path = url.path.isEmpty ? "/" : url.path
                if let query = url.query { path += "?" + query }
                var text = "\(head.method) \(path) \(head.version)\r\n"
                for (name, value) in head.headers {
                    let lowered = name.lowercased()
                    if ["proxy-authorization", "proxy-connection", "connection", "keep-alive"].contains(lowered) {
                        continue
                    }
                    text += "\(name): \(value)\r\n"
                }
                text += "Connection: close\r\n\r\n"
                opening.writeString(text)
            }
            let upstream: NIOAsyncChannel<ByteBuffer, ByteBuffer>
            do {
                upstream = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                    .connect(host: upstreamHost, port: upstreamPort) { channel in
                        channel.eventLoop.makeCompletedFuture {
                            try NIOAsyncChannel<ByteBuffer, ByteBuffer>(wrappingChannelSynchronously: channel)
                        }
                    }
            } catch {
                try await Self.answer(client, "502 Bad Gateway")
                return
            }
            try await upstream.executeThenClose { upstreamInbound, _ in
                let server = upstream.channel
                if head.method == "CONNECT" {
                    try await client.writeAndFlush(ByteBuffer(string: "HTTP/1.1 200 Connection Established\r\n\r\n")).get()
                }
                opening.writeBuffer(&buffer)  // bytes the client sent after the head
                if opening.readableBytes > 0 { try await server.writeAndFlush(opening).get() }
                await withTaskGroup(of: Void.self) { group in
                    // Server to client; when the server closes, so does the client's connection.
                    group.addTask {
                        do {
                            for try await chunk in upstreamInbound { try await client.writeAndFlush(chunk).get() }
                        } catch {}
                        try? await client.close()
                    }
                    // Client to server, here: the iterator stays with this task.
                    do {
                        while let chunk = try await iterator.next() { try await server.writeAndFlush(chunk).get() }
                    } catch {}
                    try? await server.close()
                    await group.waitForAll()
                }
            }
        }
    }

    private static func answer(_ channel: any Channel, _ status: String, extra: String = "") async throws {
        try await channel.writeAndFlush(
            ByteBuffer(string: "HTTP/1.1 \(status)\r\n\(extra)Content-Length: 0\r\nConnection: close\r\n\r\n")
        ).get()
    }

    /// Takes a complete request head off the front of `buffer`, if it holds one.
    private static func parseHead(_ buffer: inout ByteBuffer) -> Head? {
        let bytes = buffer.readableBytesView
        guard let end = bytes.firstRange(of: Array("\r\n\r\n".utf8)) else { return nil }
        let length = bytes.distance(from: bytes.startIndex, to: end.upperBound)
        guard let text = buffer.readString(length: length) else { return nil }
        var lines = text.components(separatedBy: "\r\n").filter { !$0.isEmpty }
        guard !lines.isEmpty else { return nil }
        let requestLine = lines.removeFirst().split(separator: " ", omittingEmptySubsequences: true)
        guard requestLine.count == 3 else { return nil }
        var headers = HTTPHeaders()
        for line in lines {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers.add(
                name: String(line[..<colon]),
                value: line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces))
        }
        return Head(
            method: String(requestLine[0]), target: String(requestLine[1]), version: String(requestLine[2]),
            headers: headers)
    }
}
