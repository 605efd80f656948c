import Foundation
import NIOCore
import NIOHTTP1
import NIOHTTPCompression
import NIOPosix

/// An `http://` request through an HTTP proxy the way curl sends it: to the proxy, with the target
/// in absolute form (`GET http://host:port/path HTTP/1.1`) and `Proxy-Authorization`.
///
/// AsyncHTTPClient only tunnels through a proxy (`CONNECT host:80`), which proxies commonly allow
/// to port 443 alone (squid's default configuration does), so plain-HTTP feeds come this way.
/// One connection per request (`Connection: close`); the body is decompressed (gzip, deflate)
/// and streamed, never held whole.
enum ProxyForwarding {
    /// A response whose body is read while ``execute(_:headers:via:connectTimeout:handle:)`` runs.
    struct Response: Sendable {
        var head: HTTPResponseHead
        var body: BodyReader
    }

    /// Sends a GET for `url` to `proxy` and runs `handle` with the response. The connection closes
    /// when `handle` returns, or when the task is cancelled.
    static func execute<T: Sendable>(
        _ url: URL, headers: HTTPHeaders, via proxy: ProxyServer, connectTimeout: Duration,
        handle: (Response) async throws -> T
    ) async throws -> T {
        let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .connectTimeout(.milliseconds(Int64(connectTimeout / .milliseconds(1))))
            .connect(host: proxy.host, port: proxy.port) { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHTTPClientHandlers()
                    // The importer bounds the decompressed size (max-feed-size).
                    try channel.pipeline.syncOperations.addHandler(NIOHTTPResponseDecompressor(limit: .none))
                    return try NIOAsyncChannel<HTTPClientResponsePart, HTTPClientRequestPart>(
                        wrappingChannelSynchronously: channel)
                }
            }
        let connection = channel.channel
        return try await withTaskCancellationHandler {
            try await channel.executeThenClose { inbound, outbound in
                var head = HTTPRequestHead(version: .http1_1, method: .GET, uri: absoluteForm(url))
                head.headers = headers
                head.headers.replaceOrAdd(name: "Host", value: hostHeader(url))
                if let authorization = proxy.clientProxy.authorization {
                    head.headers.replaceOrAdd(name: "Proxy-Authorization", value: authorization.headerValue)
                }
                head.headers.replaceOrAdd(name: "Connection", value: "close")
                // A proxy may answer (a 407) and close before it has read all of the request:
                // then its answer, not the failed write, is what happened.
                var writeFailure: (any Error)?
                do {
                    try await outbound.write(contentsOf: [.head(head), .end(nil)])
                } catch {
                    writeFailure = error
                }
                let body = BodyReader(inbound.makeAsyncIterator())
                let responseHead: HTTPResponseHead
                do {
                    responseHead = try await body.head()
                } catch {
                    throw writeFailure ?? error
                }
                return try await handle(Response(head: responseHead, body: body))
            }
        } onCancel: {
            connection.close(promise: nil)
        }
    }

    /// `http://host:port/path?query`, without user info or fragment.
    static func absoluteForm(_ url: URL) -> String {
        var components = URLComponents(url: url, resolvingAgainstBaseURL: true) ?? URLComponents()
        components.user = nil
        components.password = nil
        components.fragment = nil
        if components.path.isEmpty { components.path = "/" }
        return components.string ?? url.absoluteString
    }

    static func hostHeader(_ url: URL) -> String {
        let host = url.host ?? ""
        let shown = host.contains(":") && !host.hasPrefix("[") ? "[\(host)]" : host
        return url.port.map { "\(shown):\($0)" } ?? shown
    }

    /// The response as it arrives. Used by one task at a time: the head by the one that sent the
    /// request, the body then by the import's producer, while the first waits for the import.
    final class BodyReader: @unchecked Sendable {
        private var iterator: NIOAsyncChannelInboundStream<HTTPClientResponsePart>.AsyncIterator

        init(_ iterator: NIOAsyncChannelInboundStream<HTTPClientResponsePart>.AsyncIterator) {
            self.iterator = iterator
        }

        /// The final response head (informational 1xx heads are skipped).
        func head() async throws -> HTTPResponseHead {
            while let part = try await iterator.next() {
                guard case .head(let head) = part else { continue }
                if (100..<200).contains(head.status.code) && head.status != .switchingProtocols {
                    // Its end follows; the real head comes after.
                    continue
                }
                return head
            }
            throw ProxyForwardingError(message: "the proxy closed the connection without answering")
        }

        /// Passes each chunk of the body to `send`, up to its end.
        func stream(_ send: (ByteBuffer) async throws -> Void) async throws {
            while let part = try await iterator.next() {
                switch part {
                case .head: continue
                case .body(let buffer): try await send(buffer)
                case .end: return
                }
            }
            throw ProxyForwardingError(message: "the connection closed before the end of the body")
        }
    }
}

/// A forwarded request that went wrong at the HTTP level.
struct ProxyForwardingError: Error, CustomStringConvertible {
    var message: String
    var description: String { message }
}
