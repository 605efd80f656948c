import CSystemd
import Glibc
import Logging
import NIOHTTP1
import QuakeHTTP
import ServiceLifecycle

/// The optional HTTP listener that serves the metrics on `/metrics` for Prometheus to scrape:
/// on `metrics-listen`, or on the socket systemd passes with `FileDescriptorName=metrics`
/// (quaked-metrics.socket).
///
/// The server is QuakeHTTP's ``HTTPServer``, the catalog's (parsing, keep-alive, at most 32
/// connections at once, idle ones closed after 30 s, gzip when asked for). Only `GET` and `HEAD`
/// of `/metrics` (any query string) are served; another path is 404, another method on
/// `/metrics` 405. Its failure is logged and never stops the daemon: run it with `.ignore`
/// termination behaviours.
public struct MetricsListener: Service {
    /// The `FileDescriptorName=` of the socket systemd passes for the metrics.
    public static let fileDescriptorName = "metrics"
    /// The path the metrics are served on, here and on the catalog's listener.
    public static let path = "/metrics"

    /// Why the listener (or the catalog's, http-listen) could not start: quaked exits 78
    /// (EX_CONFIG), as for a bad setting.
    public struct StartupError: Error, CustomStringConvertible {
        public var description: String
    }

    public typealias Socket = HTTPServer.Socket

    private let server: HTTPServer
    private let logger: Logger

    /// Serves `socket`; `render` makes the text of each scrape.
    public init(socket: Socket, render: @escaping @Sendable () async -> String, logger: Logger) {
        let metrics = Self.handler(render)
        server = HTTPServer(
            socket: socket,
            handler: { request, writer in
                guard request.path == Self.path else {
                    return try await writer.respond(
                        .notFound, body: "not found: quaked serves its metrics on \(Self.path)\n")
                }
                try await metrics(request, writer)
            }, logger: logger)
        self.logger = logger
    }

    /// Opens the listening socket: the one systemd passed, if any, else one on `address`; nil
    /// when there is neither (metrics over HTTP are off). Throws ``StartupError`` when it cannot.
    public static func open(address: MetricsAddress?, activated: CInt?) async throws -> Socket? {
        do {
            if let fd = activated {
                return try await openActivated(fd, name: fileDescriptorName, serving: "the metrics")
            }
            guard let address else { return nil }
            return try await HTTPServer.open(host: address.host, port: address.port, setting: "metrics-listen")
        } catch let error as HTTPServer.StartupError {
            throw StartupError(description: error.description)
        }
    }

    /// Serves the socket systemd passed as `name`, after checking it is a listening stream socket.
    static func openActivated(_ fd: CInt, name: String, serving: String) async throws -> Socket {
        guard sd_is_socket(fd, AF_UNSPEC, CInt(SOCK_STREAM.rawValue), 1) > 0 else {
            throw StartupError(
                description: "the socket systemd passed as \(name) (fd \(fd)) is not a listening stream socket")
        }
        return try await HTTPServer.open(descriptor: fd, serving: serving)
    }

    /// The answer to a request for `/metrics`: `render`'s text in Prometheus' content type, to
    /// GET and HEAD only.
    static func handler(_ render: @escaping @Sendable () async -> String) -> HTTPHandler {
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

    public func run() async throws {
        do {
            try await cancelWhenGracefulShutdown {
                try await server.run()
            }
        } catch is CancellationError {
            // Graceful shutdown.
        } catch {
            // The daemon goes on without it (and so the service's end must not stop the group).
            logger.error(
                "the metrics listener failed; quakectl metrics still works", metadata: ["error": "\(error)"])
        }
    }
}
