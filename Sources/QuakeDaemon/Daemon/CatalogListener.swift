import Logging
import NIOHTTP1
import QuakeHTTP
import QuakeStore
import ServiceLifecycle

/// The merged catalog served over HTTP (`http-listen`, or the socket systemd passes with
/// `FileDescriptorName=http`): QuakeHTTP's ``HTTPServer`` with a ``CatalogRouter`` over the daemon's store, run as
/// a service. docs/http.md says what it serves.
///
/// Its failure is logged and never stops the daemon: run it with `.ignore` termination
/// behaviours, as the metrics listener.
struct CatalogListener: Service {
    /// The `FileDescriptorName=` of the socket systemd passes for the catalog.
    static let fileDescriptorName = "http"

    let server: HTTPServer
    let logger: Logger

    /// Serves `socket` from `store`; with `metrics`, `/metrics` too (the metrics listener's
    /// answer: QuakedMetrics' content type and text, GET and HEAD only).
    init(socket: HTTPServer.Socket, store: QuakeStore, metrics: (@Sendable () async -> String)?, logger: Logger) {
        var routes: [String: HTTPHandler] = [:]
        if let metrics { routes[MetricsListener.path] = MetricsListener.handler(metrics) }
        server = HTTPServer(socket: socket, router: CatalogRouter(store: store, routes: routes), logger: logger)
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
    var catalog: HTTPServer.Socket?
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

    private static func openCatalog(address: MetricsAddress?, activated: CInt?) async throws -> HTTPServer.Socket? {
        do {
            if let fd = activated {
                return try await MetricsListener.openActivated(
                    fd, name: CatalogListener.fileDescriptorName, serving: "the catalog")
            }
            guard let address else { return nil }
            return try await HTTPServer.open(host: address.host, port: address.port, setting: "http-listen")
        } catch let error as HTTPServer.StartupError {
            // quaked exits 78 on the metrics listener's error: the same for this one.
            throw MetricsListener.StartupError(description: error.description)
        }
    }
}
