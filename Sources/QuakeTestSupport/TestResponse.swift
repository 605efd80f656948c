import Foundation

/// One scripted reply of a ``FeedTestServer``.
///
/// A response has a status, headers, a body source and a behaviour (how the body is delivered, or
/// how the server misbehaves while delivering it). Build one with the memberwise initialiser or a
/// convenience constructor such as ``feed(_:lastModified:etag:)``, ``status(_:body:)`` or
/// ``tooManyRequests(retryAfter:)``, then adjust it with ``truncated(afterBytes:)``,
/// ``stalled(afterBytes:)``, ``slow(chunkSize:delay:)`` or ``with(_:)``.
public struct TestResponse: Sendable {
    /// Where the body bytes come from. Every source is streamed in chunks; none is loaded whole.
    public enum Body: Sendable {
        /// No body (`Content-Length: 0`).
        case empty
        /// These bytes.
        case bytes([UInt8])
        /// A file read from disk in chunks while sending (suitable for files of hundreds of MB).
        case file(URL)
        /// `byteCount` copies of `fill` (a space by default), produced lazily in chunks.
        case generated(byteCount: Int, fill: UInt8 = UInt8(ascii: " "))
    }

    /// How the response is delivered.
    public enum Behavior: Sendable {
        /// The whole response, then the connection stays open for keep-alive.
        case normal
        /// Announces the full `Content-Length`, sends only the first `afterBytes` body bytes, then closes
        /// the connection. (With gzip the body is chunked, and the chunked stream is cut off instead.)
        case truncate(afterBytes: Int)
        /// Sends the head and the first `afterBytes` body bytes, then nothing more; the connection stays
        /// open until the client closes it or the server shuts down.
        case stall(afterBytes: Int)
        /// Accepts the request and never sends even the response head; the connection stays open until
        /// the client closes it or the server shuts down.
        case stallBeforeHead
        /// Sends the head at once, then the body in `chunkSize`-byte pieces, sleeping `delay` before each.
        case slow(chunkSize: Int, delay: Duration)
    }

    /// The `Last-Modified` value used by ``feed(_:lastModified:etag:)`` unless told otherwise.
    public static let defaultLastModified = "Sat, 22 Nov 2025 02:57:00 GMT"

    /// The HTTP status code (default 200).
    public var status: Int
    /// Extra response headers, sent as given (after the headers derived from the other properties).
    public var headers: [(name: String, value: String)]
    /// The body source.
    public var body: Body
    /// `Content-Type`, if any.
    public var contentType: String?
    /// `Last-Modified` validator; a request whose `If-Modified-Since` equals it gets a 304 (see ``conditional``).
    public var lastModified: String?
    /// `ETag` validator (give it quoted, e.g. `"\"v1\""`); a request whose `If-None-Match` matches it gets a 304.
    public var etag: String?
    /// `Cache-Control`, if any.
    public var cacheControl: String?
    /// `Retry-After`, if any (e.g. `"2"` or an HTTP date).
    public var retryAfter: String?
    /// How the body is delivered.
    public var behavior: Behavior
    /// Whether the body is gzip-compressed when the request accepts gzip (default `true`).
    /// A compressed body is sent with `Content-Encoding: gzip` and chunked transfer encoding.
    public var gzip: Bool
    /// Whether a 200 response with validators answers matching conditional requests with 304
    /// (default `true`). `If-None-Match` takes precedence over `If-Modified-Since` (RFC 9110).
    public var conditional: Bool

    /// Creates a response; every parameter has a default, so `TestResponse()` is an empty 200.
    public init(
        status: Int = 200,
        headers: [(name: String, value: String)] = [],
        body: Body = .empty,
        contentType: String? = nil,
        lastModified: String? = nil,
        etag: String? = nil,
        cacheControl: String? = nil,
        retryAfter: String? = nil,
        behavior: Behavior = .normal,
        gzip: Bool = true,
        conditional: Bool = true
    ) {
        self.status = status
        self.headers = headers
        self.body = body
        self.contentType = contentType
        self.lastModified = lastModified
        self.etag = etag
        self.cacheControl = cacheControl
        self.retryAfter = retryAfter
        self.behavior = behavior
        self.gzip = gzip
        self.conditional = conditional
    }

    // MARK: Convenience constructors

    /// A feed file like USGS serves it: 200, `application/json`, a fixed `Last-Modified`,
    /// `Cache-Control: public, max-age=60`, optionally an `ETag`.
    public static func feed(
        _ file: URL,
        lastModified: String? = TestResponse.defaultLastModified,
        etag: String? = nil
    ) -> TestResponse {
        TestResponse(
            body: .file(file),
            contentType: "application/json",
            lastModified: lastModified,
            etag: etag,
            cacheControl: "public, max-age=60"
        )
    }

    /// A bare status with an optional small text body, e.g. `.status(500)`.
    public static func status(_ code: Int, body: String? = nil) -> TestResponse {
        TestResponse(
            status: code,
            body: body.map { .bytes(Array($0.utf8)) } ?? .empty,
            contentType: body == nil ? nil : "text/plain"
        )
    }

    /// 429 Too Many Requests with a `Retry-After`.
    public static func tooManyRequests(retryAfter: String = "2") -> TestResponse {
        TestResponse(status: 429, retryAfter: retryAfter)
    }

    /// 503 Service Unavailable, optionally with a `Retry-After`.
    public static func serviceUnavailable(retryAfter: String? = nil) -> TestResponse {
        TestResponse(status: 503, retryAfter: retryAfter)
    }

    /// 200 with these bytes as the body.
    public static func bytes(_ bytes: [UInt8], contentType: String? = "application/json") -> TestResponse {
        TestResponse(body: .bytes(bytes), contentType: contentType)
    }

    /// 200 with this string (UTF-8) as the body.
    public static func text(_ text: String, contentType: String? = "application/json") -> TestResponse {
        .bytes(Array(text.utf8), contentType: contentType)
    }

    /// 200 with a lazily generated body of `byteCount` copies of `fill` (for size-limit tests).
    public static func generated(byteCount: Int, fill: UInt8 = UInt8(ascii: " ")) -> TestResponse {
        TestResponse(body: .generated(byteCount: byteCount, fill: fill), contentType: "application/json")
    }

    // MARK: Modifiers

    /// A copy with another behaviour.
    public func with(_ behavior: Behavior) -> TestResponse {
        var copy = self
        copy.behavior = behavior
        return copy
    }

    /// A copy that announces the full length, sends `afterBytes` body bytes, then closes the connection.
    public func truncated(afterBytes: Int) -> TestResponse { with(.truncate(afterBytes: afterBytes)) }

    /// A copy that sends `afterBytes` body bytes and then nothing more, keeping the connection open.
    public func stalled(afterBytes: Int) -> TestResponse { with(.stall(afterBytes: afterBytes)) }

    /// A copy that drip-feeds its body in `chunkSize` pieces with `delay` before each.
    public func slow(chunkSize: Int, delay: Duration) -> TestResponse {
        with(.slow(chunkSize: chunkSize, delay: delay))
    }

    /// A copy with one more header.
    public func withHeader(_ name: String, _ value: String) -> TestResponse {
        var copy = self
        copy.headers.append((name: name, value: value))
        return copy
    }

    /// A copy that never compresses its body.
    public func uncompressed() -> TestResponse {
        var copy = self
        copy.gzip = false
        return copy
    }
}
