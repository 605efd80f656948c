import AsyncHTTPClient
import Foundation

/// How pulls reach their servers: AsyncHTTPClient directly, AsyncHTTPClient tunnelling through
/// the `https` proxy (`CONNECT`), or ``ProxyForwarding`` for `http` URLs through the `http` proxy
/// (absolute form, as curl does). AsyncHTTPClient sets a proxy per client and knows no
/// `no_proxy`, so the way is chosen per request (``route(for:)``).
public final class FeedHTTPClients: Sendable {
    /// How one request goes.
    public enum Route: Sendable {
        /// Straight to the server.
        case direct(HTTPClient)
        /// Through a `CONNECT` tunnel of the proxy (https).
        case tunnel(HTTPClient, ProxyServer)
        /// To the proxy, in absolute form (http).
        case forward(ProxyServer)

        /// The proxy of the route, if any.
        public var proxy: ProxyServer? {
            switch self {
            case .direct: nil
            case .tunnel(_, let proxy), .forward(let proxy): proxy
            }
        }
    }

    public let proxies: ProxySettings
    private let direct: HTTPClient
    private let tunnelling: HTTPClient?

    /// Makes the clients with `configuration` (``FeedPuller/clientConfiguration(limits:)``).
    public init(configuration: HTTPClient.Configuration, proxies: ProxySettings = ProxySettings()) {
        self.proxies = proxies
        direct = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
        tunnelling = proxies.https.map { server in
            var proxied = configuration
            proxied.proxy = server.clientProxy
            return HTTPClient(eventLoopGroupProvider: .singleton, configuration: proxied)
        }
    }

    /// How a request to `url` goes.
    public func route(for url: URL) -> Route {
        guard let server = proxies.proxy(for: url) else { return .direct(direct) }
        if url.scheme?.lowercased() == "https", let tunnelling { return .tunnel(tunnelling, server) }
        return .forward(server)
    }

    /// Shuts every client down.
    public func shutdown() async throws {
        var failure: (any Error)?
        for client in [direct] + (tunnelling.map { [$0] } ?? []) {
            do { try await client.shutdown() } catch { failure = failure ?? error }
        }
        if let failure { throw failure }
    }
}
