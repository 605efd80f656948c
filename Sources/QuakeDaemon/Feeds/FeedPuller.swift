import AsyncHTTPClient
import Foundation
import Logging
import NIOCore
import NIOHTTP1
import QuakeAssociation
import QuakeFeed
import QuakeStore

/// Pulls one feed document and streams it into the store: from an HTTP server with a conditional
/// GET, or from a local file.
///
/// The HTTP body goes straight from the socket into the importer, chunk by chunk; it is never
/// buffered whole. A response that is not 200/304, a body that does not parse, a body over the
/// size limit or a timeout fail the pull and leave the store untouched.
///
/// A successful pull writes the feed's state (``QuakeStore/feedState(url:)``): a 200's validators
/// in the import's own transaction, a 304's on their own. Requests go through the proxy
/// ``ProxySettings`` gives for their URL.
public struct FeedPuller: Sendable {
    /// Limits for one pull. The defaults are the configuration's (connect-timeout, total-timeout,
    /// max-feed-size).
    public struct Limits: Sendable, Hashable {
        /// Time to establish a connection.
        public var connectTimeout: Duration
        /// Time for the whole pull, headers and body.
        public var totalTimeout: Duration
        /// The largest document accepted, decompressed. USGS's all_month is about 15 MB.
        public var maxBytes: Int

        public init(connectTimeout: Duration, totalTimeout: Duration, maxBytes: Int) {
            self.connectTimeout = connectTimeout
            self.totalTimeout = totalTimeout
            self.maxBytes = maxBytes
        }

        /// The default configuration's limits.
        public init() { self = DaemonConfiguration.defaultPullLimits }
    }

    /// What the server said last time, for a conditional request.
    public typealias Validators = FeedValidators

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

    let clients: FeedHTTPClients
    public var limits: Limits
    public var userAgent: String
    /// The association settings of the feed's imports (``DaemonConfiguration/association``): in
    /// association mode a feed import is the source `usgs`, associated with the other sources'
    /// reports under them; a plain-mode store ignores them. nil: the store's associator's.
    public var association: AssociationConfiguration?

    public init(
        clients: FeedHTTPClients, limits: Limits = .init(), userAgent: String,
        association: AssociationConfiguration? = nil
    ) {
        self.clients = clients
        self.limits = limits
        self.userAgent = userAgent
        self.association = association
    }

    /// The HTTP client configuration pulls need: gzip decoding and the connect timeout.
    public static func clientConfiguration(limits: Limits) -> HTTPClient.Configuration {
        var configuration = HTTPClient.Configuration(
            redirectConfiguration: .follow(max: maxRedirects, allowCycles: false),
            timeout: .init(connect: .milliseconds(Int64(limits.connectTimeout / .milliseconds(1)))),
            decompression: .enabled(limit: .none))  // the importer enforces maxBytes on decoded bytes
        configuration.httpVersion = .automatic
        return configuration
    }

    /// Pulls `feed` into `store`. Throws ``QuakedError`` (its message ends in "the store is
    /// unchanged"). The whole pull, body included, is bounded by ``Limits/totalTimeout``: a server
    /// that stalls mid-body is abandoned and the import rolls back. Features older than
    /// `expiringBefore` (event retention) are left out (see ``QuakeStore/importFeed(source:maxBytes:now:expiringBefore:feed:association:produce:)``).
    public func pull(
        _ feed: FeedSource, into store: QuakeStore, validators: Validators = .init(), expiringBefore: Date? = nil,
        now: Date = Date()
    ) async throws -> Outcome {
        let timeout = limits.totalTimeout
        do {
            return try await withTimeout(timeout) {
                try await self.pullUnbounded(
                    feed, into: store, validators: validators, expiringBefore: expiringBefore, now: now)
            }
        } catch let error as TimedOut {
            throw QuakedError(
                kind: .transport,
                message:
                    "pulling \(feed.url.absoluteString) failed: it took longer than the total timeout of \(timeout); the store is unchanged",
                cause: error)
        } catch let error as QuakedError {
            var unchanged = error
            unchanged.message += "; the store is unchanged"
            throw unchanged
        } catch {
            // The importer's errors already say that the store is unchanged.
            throw QuakedError(error)
        }
    }

    private func pullUnbounded(
        _ feed: FeedSource, into store: QuakeStore, validators: Validators, expiringBefore: Date?, now: Date
    ) async throws -> Outcome {
        let url = feed.url.absoluteString
        if feed.url.isFileURL {
            // No validators, but the import clears a failing file's backoff all the same.
            let report = try await store.importFeed(
                source: url, maxBytes: limits.maxBytes, expiringBefore: expiringBefore,
                feed: ImportedFeed(url: url, validators: .init()), association: association
            ) { [file = feed.url] sink in
                try await sink.sendFile(at: file)
            }
            return Outcome(httpStatus: nil, report: report, validators: .init(), freshUntil: nil)
        }
        var headers = HTTPHeaders()
        headers.add(name: "User-Agent", value: userAgent)
        headers.add(name: "Accept", value: "application/geo+json, application/json")
        headers.add(name: "Accept-Encoding", value: "gzip")
        if let lastModified = validators.lastModified {
            headers.add(name: "If-Modified-Since", value: lastModified)
        }
        if let etag = validators.etag {
            headers.add(name: "If-None-Match", value: etag)
        }
        let deadline = NIODeadline.now() + .nanoseconds(Int64(limits.totalTimeout / .nanoseconds(1)))
        return try await exchange(feed.url, headers: headers, deadline: deadline) { response, proxy in
            try await self.take(
                response, from: feed, through: proxy, into: store, validators: validators,
                expiringBefore: expiringBefore, now: now)
        }
    }

    /// Handles the response to a pull: a 200 is imported, a 304 recorded, anything else fails.
    private func take(
        _ response: FeedResponse, from feed: FeedSource, through proxy: ProxyServer?, into store: QuakeStore,
        validators: Validators, expiringBefore: Date?, now: Date
    ) async throws -> Outcome {
        let url = feed.url.absoluteString
        let freshUntil = Self.freshUntil(response.headers, now: now)
        switch response.status.code {
        case 200:
            break
        case 304:
            // A 304 updates the validators it carries (RFC 9111 4.3.4) and keeps the others.
            let newValidators = Validators(
                lastModified: response.headers.first(name: "Last-Modified") ?? validators.lastModified,
                etag: response.headers.first(name: "ETag") ?? validators.etag)
            do {
                try await store.recordNotModified(url: url, validators: newValidators, now: now)
            } catch {
                throw QuakedError(
                    kind: .storage, message: "the server answered 304, but SQLite refused to record it: \(error)",
                    httpStatus: 304, cause: error)
            }
            return Outcome(httpStatus: 304, report: nil, validators: newValidators, freshUntil: freshUntil)
        default:
            var message = "the server answered \(response.status.code) \(response.status.reasonPhrase)"
            if let proxy {
                message =
                    response.status == .proxyAuthenticationRequired
                    ? "the proxy asked for credentials (407 Proxy Authentication Required) (the proxy \(proxy) from \(proxy.variable))"
                    : message + " (through the proxy \(proxy) from \(proxy.variable))"
            }
            throw QuakedError(
                kind: .httpStatus, message: message, httpStatus: Int(response.status.code),
                retryAfter: Self.retryAfter(response.headers, now: now))
        }
        if let length = response.headers.first(name: "Content-Length").flatMap(Int.init),
            response.headers.first(name: "Content-Encoding") == nil, length > limits.maxBytes
        {
            throw QuakedError(
                kind: .tooLarge, message: "the feed is \(length) bytes, over the maximum of \(limits.maxBytes)",
                httpStatus: 200)
        }
        // Exactly the validators of this body: a 200 without them leaves none (the old ones
        // describe a body the store no longer holds as the server's latest).
        let newValidators = Validators(
            lastModified: response.headers.first(name: "Last-Modified"), etag: response.headers.first(name: "ETag"))
        let report: ImportReport
        do {
            report = try await store.importFeed(
                source: url, maxBytes: limits.maxBytes, expiringBefore: expiringBefore,
                feed: ImportedFeed(url: url, validators: newValidators), association: association,
                produce: response.streamBody)
        } catch let error as ImportError where error.kind == .source {
            throw QuakedError(transport: error, url: feed.url, httpStatus: 200, proxy: proxy)
        }
        return Outcome(httpStatus: 200, report: report, validators: newValidators, freshUntil: freshUntil)
    }

    /// A response as ``take(_:from:through:into:validators:expiringBefore:now:)`` reads it,
    /// whichever way it came.
    struct FeedResponse: Sendable {
        var status: HTTPResponseStatus
        var headers: HTTPHeaders
        /// Passes the body's chunks to the closure, in order; called at most once.
        var chunks: @Sendable (@escaping @Sendable ([UInt8]) async throws -> Void) async throws -> Void

        /// Streams the body into the import; called at most once (instead of ``chunks``).
        var streamBody: @Sendable (FeedSink) async throws -> Void {
            { [chunks] sink in try await chunks { try await sink.send($0) } }
        }
    }

    /// An error of `take`, passed through the forwarding path unchanged.
    private struct Taken: Error {
        var error: any Error
    }

    private enum ForwardStep<T: Sendable>: Sendable {
        case redirect(URL)
        case done(T)
    }

    /// Sends the GET the way ``FeedHTTPClients/route(for:)`` says and runs `take` on the response.
    /// AsyncHTTPClient follows redirects itself; through ``ProxyForwarding`` they are followed
    /// here (at most 5), each hop routed again.
    func exchange<T: Sendable>(
        _ url: URL, headers: HTTPHeaders, deadline: NIODeadline,
        _ take: (FeedResponse, ProxyServer?) async throws -> T
    ) async throws -> T {
        var target = url
        for _ in 0...Self.maxRedirects {
            let route = clients.route(for: target)
            switch route {
            case .direct(let client), .tunnel(let client, _):
                var request = HTTPClientRequest(url: target.absoluteString)
                request.headers = headers
                let response: HTTPClientResponse
                do {
                    response = try await client.execute(request, deadline: deadline)
                } catch {
                    throw QuakedError(transport: error, url: url, proxy: route.proxy)
                }
                let body = response.body
                let feedResponse = FeedResponse(status: response.status, headers: response.headers) { consume in
                    for try await buffer in body {
                        try await consume(Array(buffer.readableBytesView))
                    }
                }
                return try await take(feedResponse, route.proxy)
            case .forward(let proxy):
                let step: ForwardStep<T>
                do {
                    step = try await ProxyForwarding.execute(
                        target, headers: headers, via: proxy, connectTimeout: limits.connectTimeout
                    ) { response in
                        let status = response.head.status
                        if [301, 302, 303, 307, 308].contains(status.code),
                            let location = response.head.headers.first(name: "Location"),
                            let next = URL(string: location, relativeTo: target)?.absoluteURL
                        {
                            return .redirect(next)
                        }
                        let body = response.body
                        let feedResponse = FeedResponse(status: status, headers: response.head.headers) { consume in
                            try await body.stream { try await consume(Array($0.readableBytesView)) }
                        }
                        do {
                            return .done(try await take(feedResponse, proxy))
                        } catch {
                            throw Taken(error: error)
                        }
                    }
                } catch let taken as Taken {
                    throw taken.error
                } catch {
                    throw QuakedError(transport: error, url: url, proxy: proxy)
                }
                switch step {
                case .done(let result): return result
                case .redirect(let next): target = next
                }
            }
        }
        throw QuakedError(
            kind: .transport,
            message: "pulling \(url.absoluteString) failed: more than \(Self.maxRedirects) redirects")
    }

    /// Redirects followed, as AsyncHTTPClient is configured to.
    static let maxRedirects = 5

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

extension QuakedError {
    /// A request that got no usable answer (or a body that stopped coming), in words: the HTTP
    /// client's error said plainly, a proxy named (never its password).
    init(transport error: any Error, url: URL, httpStatus: Int? = nil, proxy: ProxyServer? = nil) {
        var reason: String
        if let error = error as? HTTPClientError {
            switch error {
            case .deadlineExceeded: reason = "the pull took longer than the total timeout"
            case .readTimeout: reason = "the server stopped sending (read timeout)"
            case .connectTimeout: reason = "connecting took longer than the connect timeout"
            case .remoteConnectionClosed: reason = "the server closed the connection early"
            case .proxyAuthenticationRequired:
                reason = "the proxy asked for credentials (407 Proxy Authentication Required)"
            case .invalidProxyResponse: reason = "the proxy refused to open a tunnel to the server"
            case .httpProxyHandshakeTimeout: reason = "the proxy did not answer in time"
            default: reason = "\(error)"
            }
        } else if let error = error as? ImportError {
            reason = error.message
        } else {
            reason = "\(error)"
        }
        // Never a proxy's password, whatever a lower layer put in its message.
        if let proxy {
            if let password = proxy.password, !password.isEmpty {
                reason = reason.replacingOccurrences(of: password, with: "***")
            }
            reason += " (through the proxy \(proxy) from \(proxy.variable))"
        }
        self.init(
            kind: .transport, message: "pulling \(url.absoluteString) failed: \(reason)", httpStatus: httpStatus,
            cause: error)
    }
}
