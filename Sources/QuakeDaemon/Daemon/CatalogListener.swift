import CSystemd
import Glibc
import Logging
import NIOHTTP1
import QuakeHTTP
import QuakeStore
import ServiceLifecycle

/// The merged catalog served over HTTP (`http-listen`, or the socket systemd passes with
/// `FileDescriptorName=http`): QuakeHTTP's ``CatalogHTTPServer`` over the daemon's store, run as
/// a service. docs/http.md says what it serves.
///
/// Its failure is logged and never stops the daemon: run it with `.ignore` termination
/// behaviours, as the metrics listener.
struct CatalogListener: Service {
    /// The `FileDescriptorName=` of the socket systemd passes for the catalog.
    static let fileDescriptorName = "http"

    let server: CatalogHTTPServer
    let logger: Logger

    /// Serves `socket` from `store`; with `metrics`, `/metrics` too (the metrics listener's
    /// answer: QuakedMetrics' content type and text, GET and HEAD only).
    init(socket: CatalogHTTPServer.Socket, store: QuakeStore, metrics: (@Sendable () async -> String)?, logger: Logger) {
        var routes: [String: HTTPHandler] = [:]
        if let metrics { routes["/metrics"] = Self.metricsHandler(metrics) }
        server = CatalogHTTPServer(socket: socket, router: CatalogRouter(store: store, routes: routes), logger: logger)
        self.logger = logger
    }

    func run() async throws {
        do {
            try await cancelWhenGracefulShutdown {
                try await server.run()
            }
        } catch is CancellationError {
            // Graceful shutdown.
        } catch {
            // The daemon goes on without it (and so the service's end must not stop the group).
            logger.error(
                "the HTTP listener (http-listen) failed; the daemon goes on without it",
                metadata: ["error": "\(error)"])
        }
    }

    static func metricsHandler(_ render: @escaping @Sendable () async -> String) -> HTTPHandler {
        { request, writer in
            guard request.method == .GET || request.method == .HEAD else {
                var headers = HTTPHeaders()
                headers.add(name: "Allow", value: "GET, HEAD")
                return try await writer.respond(
                    .methodNotAllowed, headers: headers, body: "method not allowed: use GET or HEAD\n")
            }
            var headers = HTTPHeaders()
            headers.add(name: "Content-Type", value: QuakedMetrics.contentType)
            try await writer.respond(.ok, headers: headers, body: await render())
        }
    }
}

/// The daemon's HTTP listening sockets, opened before it says it is ready: the metrics
/// listener's and the catalog's, or one socket serving both.
///
/// With the catalog on (`http-listen`, or a socket passed as `http`) and `metrics-listen` unset
/// or the same address (and no socket passed as `metrics`), one server answers the catalog and
/// `/metrics`; otherwise each has its own listener.
struct HTTPListeners: Sendable {
    /// The metrics listener's own socket; nil when off or served by the catalog's server.
    var metrics: MetricsListener.Socket?
    var catalog: CatalogHTTPServer.Socket?
    /// Whether the catalog's server answers `/metrics` as well.
    var catalogServesMetrics: Bool

    /// Where `/metrics` is served, as the start-up log says it; nil when nowhere over HTTP.
    var metricsURL: String? {
        if let metrics { return "http://\(metrics.localAddress)/metrics" }
        if catalogServesMetrics, let catalog { return "http://\(catalog.localAddress)/metrics" }
        return nil
    }

    /// Opens what `configuration` and the sockets systemd passed ask for. Throws
    /// ``MetricsListener/StartupError`` (quaked exits 78) when a socket cannot be opened; then
    /// nothing stays open.
    static func open(configuration: DaemonConfiguration, metricsSocket: CInt?, catalogSocket: CInt?) async throws
        -> HTTPListeners
    {
        let catalogOn = configuration.httpListen != nil || catalogSocket != nil
        let shared =
            catalogOn && metricsSocket == nil
            && (configuration.metricsListen == nil || configuration.metricsListen == configuration.httpListen)
        let metrics =
            shared ? nil : try await MetricsListener.open(address: configuration.metricsListen, activated: metricsSocket)
        do {
            let catalog = try await openCatalog(address: configuration.httpListen, activated: catalogSocket)
            return HTTPListeners(metrics: metrics, catalog: catalog, catalogServesMetrics: shared)
        } catch {
            await metrics?.close()
            throw error
        }
    }

    private static func openCatalog(address: MetricsAddress?, activated: CInt?) async throws -> CatalogHTTPServer.Socket? {
        do {
            if let fd = activated {
                guard sd_is_socket(fd, AF_UNSPEC, CInt(SOCK_STREAM.rawValue), 1) > 0 else {
                    throw MetricsListener.StartupError(
                        description:
                            "the socket systemd passed as \(CatalogListener.fileDescriptorName) (fd \(fd)) is not a listening stream socket"
                    )
                }
                return try await CatalogHTTPServer.open(descriptor: fd)
            }
            guard let address else { return nil }
            return try await CatalogHTTPServer.open(host: address.host, port: address.port)
        } catch let error as CatalogHTTPServer.StartupError {
            // quaked exits 78 on the metrics listener's error: the same for this one.
            throw MetricsListener.StartupError(description: error.description)
        }
    }
}
