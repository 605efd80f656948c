import NIOCore
import NIOHTTP1
import QuakeHTTPQuery

/// One HTTP request as the router sees it: method, target and headers (a GET has no body).
public struct HTTPRequest: Sendable {
    public var method: HTTPMethod
    /// The request target as sent (`/feeds/all_day.geojson?minmagnitude=4`).
    public var uri: String
    public var headers: HTTPHeaders

    public init(method: HTTPMethod, uri: String, headers: HTTPHeaders = HTTPHeaders()) {
        self.method = method
        self.uri = uri
        self.headers = headers
    }

    /// The path, percent-decoded, without the query.
    public var path: String {
        let raw = uri.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false).first.map(String.init) ?? ""
        return QueryString.percentDecoded(raw, plusIsSpace: false) ?? raw
    }

    /// The raw query string (after `?`), empty without one.
    public var rawQuery: String {
        let parts = uri.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)
        return parts.count == 2 ? String(parts[1]) : ""
    }

    /// The query's `name=value` pairs in order, names and values percent-decoded (`+` is a
    /// space); nil when an escape is malformed.
    public var queryItems: [(name: String, value: String)]? { QueryString.items(rawQuery) }

    /// The URL the client asked for: `http://` and its `Host` header (else `localhost`), then the target.
    public var absoluteURL: String {
        "http://" + (headers.first(name: "Host") ?? "localhost") + uri
    }
}

/// Where a handler writes its answer: the head once, then the body in pieces, then the end.
/// The server's writer waits while the client is not reading (back pressure), drops the body of
/// an answer to `HEAD`, and closes the connection when a handler throws after the head.
public protocol HTTPResponseWriter: Sendable {
    func writeHead(_ status: HTTPResponseStatus, _ headers: HTTPHeaders) async throws
    func writeBody(_ bytes: ByteBuffer) async throws
    func end() async throws
    /// A whole answer at once (head, body, end): a writer may send it in one piece.
    func writeResponse(_ status: HTTPResponseStatus, _ headers: HTTPHeaders, body: ByteBuffer) async throws
}

extension HTTPResponseWriter {
    public func writeResponse(_ status: HTTPResponseStatus, _ headers: HTTPHeaders, body: ByteBuffer) async throws {
        try await writeHead(status, headers)
        if body.readableBytes > 0 { try await writeBody(body) }
        try await end()
    }

    /// A whole answer with a small body (Content-Length set).
    public func respond(_ status: HTTPResponseStatus, headers: HTTPHeaders = HTTPHeaders(), body: String) async throws {
        var headers = headers
        let bytes = ByteBuffer(string: body)
        if !headers.contains(name: "Content-Type") {
            headers.add(name: "Content-Type", value: "text/plain; charset=utf-8")
        }
        headers.replaceOrAdd(name: "Content-Length", value: "\(bytes.readableBytes)")
        try await writeResponse(status, headers, body: bytes)
    }

    /// An answer without a body (304, 204).
    public func respondEmpty(_ status: HTTPResponseStatus, headers: HTTPHeaders = HTTPHeaders()) async throws {
        var headers = headers
        if status != .notModified && status != .noContent { headers.replaceOrAdd(name: "Content-Length", value: "0") }
        try await writeResponse(status, headers, body: ByteBuffer())
    }
}

/// A handler of one path (or family of paths): answers through the writer.
public typealias HTTPHandler = @Sendable (HTTPRequest, any HTTPResponseWriter) async throws -> Void
