import NIOCore
import NIOHTTP1

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
        return Self.percentDecoded(raw, plusIsSpace: false) ?? raw
    }

    /// The raw query string (after `?`), empty without one.
    public var rawQuery: String {
        let parts = uri.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)
        return parts.count == 2 ? String(parts[1]) : ""
    }

    /// The query's `name=value` pairs in order, names and values percent-decoded (`+` is a
    /// space); nil when an escape is malformed.
    public var queryItems: [(name: String, value: String)]? {
        var items: [(String, String)] = []
        for pair in rawQuery.split(separator: "&", omittingEmptySubsequences: true) {
            let halves = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard let name = Self.percentDecoded(String(halves[0]), plusIsSpace: true),
                let value = Self.percentDecoded(halves.count == 2 ? String(halves[1]) : "", plusIsSpace: true)
            else { return nil }
            items.append((name, value))
        }
        return items
    }

    /// The URL the client asked for: `http://` and its `Host` header (else `localhost`), then the target.
    public var absoluteURL: String {
        "http://" + (headers.first(name: "Host") ?? "localhost") + uri
    }

    static func percentDecoded(_ text: String, plusIsSpace: Bool) -> String? {
        guard text.utf8.contains(where: { $0 == UInt8(ascii: "%") || (plusIsSpace && $0 == UInt8(ascii: "+")) }) else {
            return text
        }
        var bytes: [UInt8] = []
        var iterator = Array(text.utf8).makeIterator()
        func hex(_ c: UInt8?) -> UInt8? {
            switch c {
            case let c? where c >= 0x30 && c <= 0x39: c - 0x30
            case let c? where c >= 0x41 && c <= 0x46: c - 0x41 + 10
            case let c? where c >= 0x61 && c <= 0x66: c - 0x61 + 10
            default: nil
            }
        }
        while let c = iterator.next() {
            if c == UInt8(ascii: "%") {
                guard let high = hex(iterator.next()), let low = hex(iterator.next()) else { return nil }
                bytes.append(high << 4 | low)
            } else if plusIsSpace && c == UInt8(ascii: "+") {
                bytes.append(0x20)
            } else {
                bytes.append(c)
            }
        }
        return String(validating: bytes, as: UTF8.self)
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
