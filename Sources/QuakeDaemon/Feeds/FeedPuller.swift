import AsyncHTTPClient
import Foundation
import Logging
import NIOCore
import NIOHTTP1
import QuakeStore

/// Pulls one feed document and streams it into the store: from an HTTP server with a conditional
/// GET, or from a local file.
///
/// The HTTP body goes straight from the socket into the importer, chunk by chunk; it is never
/// buffered whole. A response that is not 200/304, a body that does not parse, a body over the
/// size limit or a timeout fail the pull and leave the store untouched.
public struct FeedPuller: Sendable {
    /// Limits for one pull.
    public struct Limits: Sendable, Hashable {
        /// Time to establish a connection.
        public var connectTimeout: Duration = .seconds(10)
        /// Time for the whole pull, headers and body.
        public var totalTimeout: Duration = .seconds(120)
        /// The largest document accepted, decompressed. USGS's all_month is about 15 MB.
        public var maxBytes: Int = 256 * 1024 * 1024
        public init() {}
    }

    /// What the server said last time, for a conditional request.
    public struct Validators: Sendable, Hashable, Codable {
        public var lastModified: String?
        public var etag: String?
        public init(lastModified: String? = nil, etag: String? = nil) {
            self.lastModified = lastModified
            self.etag = etag
        }
    }

    /// A successful pull.
    public struct Outcome: Sendable {
        /// The HTTP status (200 or 304), or nil for files.
        public var httpStatus: Int?
        /// The import's report; nil when the server said 304 Not Modified.
        public var report: ImportReport?
        /// Validators to send next time.
        public var validators: Validators
        /// The earliest the server wants to be asked again (Cache-Control max-age / Expires).
        public var freshUntil: Date?
    }

    let client: HTTPClient
    public var limits: Limits
    public var userAgent: String

    public init(client: HTTPClient, limits: Limits = .init(), userAgent: String) {
        self.client = client
        self.limits = limits
        self.userAgent = userAgent
    }

    /// The HTTP client configuration pulls need: gzip decoding and the connect timeout.
    public static func clientConfiguration(limits: Limits) -> HTTPClient.Configuration {
        var configuration = HTTPClient.Configuration(
            redirectConfiguration: .follow(max: 5, allowCycles: false),
            timeout: .init(connect: .milliseconds(Int64(limits.connectTimeout / .milliseconds(1)))),
            decompression: .enabled(limit: .none))  // the importer enforces maxBytes on decoded bytes
        configuration.httpVersion = .automatic
        return configuration
    }

    /// Pulls `feed` into `store`. Throws ``PullError`` (or ``ImportError`` for a body that fails to
    /// import). The whole pull, body included, is bounded by ``Limits/totalTimeout``: a server that
    /// stalls mid-body is abandoned and the import rolls back.
    public func pull(_ feed: FeedSource, into store: QuakeStore, validators: Validators = .init(), now: Date = Date())
        async throws -> Outcome
    {
        let timeout = limits.totalTimeout
        do {
            return try await withTimeout(timeout) {
                try await self.pullUnbounded(feed, into: store, validators: validators, now: now)
            }
        } catch is TimedOut {
            throw PullError(
                kind: .transport,
                message:
                    "pulling \(feed.url.absoluteString) failed: it took longer than the total timeout of \(timeout)")
        }
    }

    private func pullUnbounded(_ feed: FeedSource, into store: QuakeStore, validators: Validators, now: Date)
        async throws -> Outcome
    {
        if feed.url.isFileURL {
            let report = try await store.importFile(
                feed.url, source: feed.url.absoluteString, maxBytes: limits.maxBytes)
            return Outcome(httpStatus: nil, report: report, validators: .init(), freshUntil: nil)
        }
        var request = HTTPClientRequest(url: feed.url.absoluteString)
        request.headers.add(name: "User-Agent", value: userAgent)
        request.headers.add(name: "Accept", value: "application/geo+json, application/json")
        request.headers.add(name: "Accept-Encoding", value: "gzip")
        if let lastModified = validators.lastModified {
            request.headers.add(name: "If-Modified-Since", value: lastModified)
        }
        if let etag = validators.etag {
            request.headers.add(name: "If-None-Match", value: etag)
        }
        let deadline = NIODeadline.now() + .nanoseconds(Int64(limits.totalTimeout / .nanoseconds(1)))
        let response: HTTPClientResponse
        do {
            response = try await client.execute(request, deadline: deadline)
        } catch {
            throw PullError(transport: error, url: feed.url)
        }
        let freshUntil = Self.freshUntil(response.headers, now: now)
        let newValidators = Validators(
            lastModified: response.headers.first(name: "Last-Modified") ?? validators.lastModified,
            etag: response.headers.first(name: "ETag") ?? validators.etag)
        switch response.status.code {
        case 200:
            break
        case 304:
            return Outcome(httpStatus: 304, report: nil, validators: newValidators, freshUntil: freshUntil)
        default:
            throw PullError(
                kind: .httpStatus,
                message: "the server answered \(response.status.code) \(response.status.reasonPhrase)",
                httpStatus: Int(response.status.code),
                retryAfter: Self.retryAfter(response.headers, now: now))
        }
        if let length = response.headers.first(name: "Content-Length").flatMap(Int.init),
            response.headers.first(name: "Content-Encoding") == nil, length > limits.maxBytes
        {
            throw PullError(
                kind: .tooLarge, message: "the feed is \(length) bytes, over the maximum of \(limits.maxBytes)",
                httpStatus: 200)
        }
        let body = response.body
        let report: ImportReport
        do {
            report = try await store.importFeed(source: feed.url.absoluteString, maxBytes: limits.maxBytes) { sink in
                for try await buffer in body {
                    try await sink.send(Array(buffer.readableBytesView))
                }
            }
        } catch let error as ImportError where error.kind == .source {
            throw PullError(transport: error, url: feed.url, httpStatus: 200)
        }
        return Outcome(httpStatus: 200, report: report, validators: newValidators, freshUntil: freshUntil)
    }

    /// `Cache-Control: max-age` wins over `Expires`, as in RFC 9111.
    static func freshUntil(_ headers: HTTPHeaders, now: Date) -> Date? {
        for value in headers[canonicalForm: "Cache-Control"] {
            let directive = value.trimmingCharacters(in: .whitespaces).lowercased()
            if directive.hasPrefix("max-age="), let seconds = Int(directive.dropFirst("max-age=".count)), seconds >= 0 {
                return now.addingTimeInterval(TimeInterval(seconds))
            }
        }
        return headers.first(name: "Expires").flatMap(HTTPDate.parse)
    }

    /// `Retry-After` as seconds or an HTTP date.
    static func retryAfter(_ headers: HTTPHeaders, now: Date) -> Date? {
        guard let value = headers.first(name: "Retry-After")?.trimmingCharacters(in: .whitespaces) else { return nil }
        if let seconds = Int(value), seconds >= 0 { return now.addingTimeInterval(TimeInterval(seconds)) }
        return HTTPDate.parse(value)
    }
}

/// HTTP dates (RFC 9110 IMF-fixdate, e.g. `Sun, 06 Nov 1994 08:49:37 GMT`).
enum HTTPDate {
    static func parse(_ text: String) -> Date? {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss zzz"
        return formatter.date(from: text)
    }
}

/// Why a pull failed. The store is untouched.
public struct PullError: Error, Sendable, CustomStringConvertible {
    public enum Kind: String, Sendable, Codable {
        /// DNS, connection refused, TLS, timeout, connection lost.
        case transport
        /// A status other than 200 or 304.
        case httpStatus = "http-status"
        /// Content-Length over the maximum feed size.
        case tooLarge = "too-large"
    }

    public var kind: Kind
    public var message: String
    public var httpStatus: Int?
    /// When the server asked us to come back (429/503 `Retry-After`).
    public var retryAfter: Date?

    public init(kind: Kind, message: String, httpStatus: Int? = nil, retryAfter: Date? = nil) {
        self.kind = kind
        self.message = message
        self.httpStatus = httpStatus
        self.retryAfter = retryAfter
    }

    init(transport error: any Error, url: URL, httpStatus: Int? = nil) {
        let reason: String
        if let error = error as? HTTPClientError {
            switch error {
            case .deadlineExceeded: reason = "the pull took longer than the total timeout"
            case .readTimeout: reason = "the server stopped sending (read timeout)"
            case .connectTimeout: reason = "connecting took longer than the connect timeout"
            case .remoteConnectionClosed: reason = "the server closed the connection early"
            default: reason = "\(error)"
            }
        } else if let error = error as? ImportError {
            reason = error.message
        } else {
            reason = "\(error)"
        }
        self.init(kind: .transport, message: "pulling \(url.absoluteString) failed: \(reason)", httpStatus: httpStatus)
    }

    public var description: String { message + "; the store is unchanged" }
}
