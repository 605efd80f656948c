import Foundation
import NIOCore
import NIOHTTP1
import QuakeFeed
import QuakeModel
import QuakeSources
import QuakeStore

#if canImport(Glibc)
    import Glibc
#endif

/// An FDSN event service (fdsnws-event) that answers in the USGS GeoJSON format: the USGS's own
/// at `https://earthquake.usgs.gov/fdsnws/event/1/`, or any that speaks its dialect. Backfill jobs
/// and the incremental catalog sync query it.
public struct CatalogService: Sendable, Hashable, CustomStringConvertible {
    /// The USGS's service, the default catalog.
    public static let usgs = try! CatalogService(parsing: "https://earthquake.usgs.gov/fdsnws/event/1/")

    /// The base URL, ending in `/`: `query` and `count` are appended.
    public let base: URL

    /// Parses a base URL: `http` or `https` with a host. A URL naming the `query` or `count`
    /// endpoint itself is taken for its base; a missing trailing `/` is added. Throws
    /// ``CatalogURLError`` saying what is accepted.
    public init(parsing text: String) throws {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        guard !trimmed.contains(where: \.isWhitespace), var components = URLComponents(string: trimmed), let scheme = components.scheme?.lowercased(),
            scheme == "http" || scheme == "https", let host = components.host, !host.isEmpty,
            components.query == nil, components.fragment == nil
        else { throw CatalogURLError(text: text) }
        var path = components.path
        for endpoint in ["query", "count"] where path.hasSuffix("/" + endpoint) {
            path.removeLast(endpoint.count)
        }
        if !path.hasSuffix("/") { path += "/" }
        components.path = path
        guard let url = components.url else { throw CatalogURLError(text: text) }
        base = url
    }

    public var description: String { base.absoluteString }

    /// The `query` URL for `query`'s parameters.
    public func queryURL(_ query: CatalogQuery) -> URL {
        url("query", query.parameters)
    }

    /// The `count` URL for `query`'s parameters (GeoJSON: `{"count":N,"maxAllowed":L}`).
    public func countURL(_ query: CatalogQuery) -> URL {
        url("count", query.parameters)
    }

    /// The `query` URL with these parameters, in their order (a source's incremental query).
    func queryURL(parameters: [(String, String)]) -> URL {
        url("query", parameters)
    }

    private func url(_ endpoint: String, _ parameters: [(String, String)]) -> URL {
        var components = URLComponents(url: base.appendingPathComponent(endpoint), resolvingAgainstBaseURL: false)!
        components.queryItems = parameters.map { URLQueryItem(name: $0.0, value: $0.1) }
        return components.url!
    }
}

/// A catalog URL that is not an http(s) URL with a host.
public struct CatalogURLError: Error, Sendable, CustomStringConvertible {
    public var text: String
    public var description: String {
        "'\(text)' is not an FDSN event service URL: use an http:// or https:// base URL such as "
            + "https://earthquake.usgs.gov/fdsnws/event/1/ (no query string)"
    }
}

/// The parameters of one FDSN event query (one window).
public struct CatalogQuery: Sendable, Hashable {
    /// Event times from `start` (inclusive) to `end` (exclusive), ms since the epoch. FDSN's
    /// `endtime` is inclusive, so it is sent as `end - 1` ms: windows that share an edge never
    /// both hold an event.
    public var start: Int64
    public var end: Int64
    public var minMagnitude: Double?
    public var region: CatalogRegion?
    /// `updatedafter` (inclusive), ms since the epoch.
    public var updatedAfter: Int64?
    /// `includedeleted=true`: deleted events come too, with status `deleted`.
    public var includeDeleted = false

    public init(
        start: Int64, end: Int64, minMagnitude: Double? = nil, region: CatalogRegion? = nil,
        updatedAfter: Int64? = nil, includeDeleted: Bool = false
    ) {
        self.start = start
        self.end = end
        self.minMagnitude = minMagnitude
        self.region = region
        self.updatedAfter = updatedAfter
        self.includeDeleted = includeDeleted
    }

    /// The query's parameters, in a fixed order.
    var parameters: [(String, String)] {
        var p: [(String, String)] = [
            ("format", "geojson"), ("orderby", "time-asc"),
            ("starttime", Self.fdsnTime(start)), ("endtime", Self.fdsnTime(end - 1)),
        ]
        if let updatedAfter { p.append(("updatedafter", Self.fdsnTime(updatedAfter))) }
        p += Self.filterParameters(minMagnitude: minMagnitude, region: region)
        if includeDeleted { p.append(("includedeleted", "true")) }
        return p
    }

    /// `minmagnitude`, and the circle (`latitude`, `longitude`, `maxradiuskm`) or the box.
    static func filterParameters(minMagnitude: Double?, region: CatalogRegion?) -> [(String, String)] {
        var p: [(String, String)] = []
        if let minMagnitude { p.append(("minmagnitude", Self.number(minMagnitude))) }
        switch region {
        case .near(let lat, let lon, let radiusKm):
            p += [("latitude", Self.number(lat)), ("longitude", Self.number(lon)), ("maxradiuskm", Self.number(radiusKm))]
        case .box(let minLat, let maxLat, let minLon, var maxLon):
            // FDSN longitudes run to 360 for a box across the antimeridian (170 to 190).
            if minLon > maxLon { maxLon += 360 }
            p += [
                ("minlatitude", Self.number(minLat)), ("maxlatitude", Self.number(maxLat)),
                ("minlongitude", Self.number(minLon)), ("maxlongitude", Self.number(maxLon)),
            ]
        case nil:
            break
        }
        return p
    }

    static func number(_ value: Double) -> String {
        value == value.rounded() && abs(value) < 1e15 ? String(Int64(value)) : "\(value)"
    }

    /// `2024-01-02T03:04:05.678` (UTC, no zone designator, as FDSN writes times).
    static func fdsnTime(_ milliseconds: Int64) -> String {
        QuakeTime.utcText(milliseconds)
    }
}

/// Why a request to the catalog failed, as the pager decides what to do about it.
enum CatalogFailure: Error, Sendable, CustomStringConvertible {
    /// 400 "N matching events exceeds search limit of L": split the window.
    case overLimit(matching: Int?, limit: Int?)
    /// Worth retrying: 429, 5xx, a transport failure, a truncated or invalid body, a timeout.
    case transient(String, retryAfter: Date?)
    /// Not worth retrying: the service refused the query (another 4xx), or is no FDSN service.
    case permanent(String)

    var description: String {
        switch self {
        case .overLimit(let matching, let limit):
            "the catalog refused the window: \(matching.map(String.init) ?? "too many") matching events exceed its search limit\(limit.map { " of \($0)" } ?? "")"
        case .transient(let message, _), .permanent(let message): message
        }
    }

    /// Reads the limit message the USGS service sends: "20001 matching events exceeds search
    /// limit of 20000".
    static func overLimit(body: String) -> CatalogFailure? {
        guard body.range(of: "exceeds search limit", options: .caseInsensitive) != nil else { return nil }
        func number(before marker: String) -> Int? {
            guard let range = body.range(of: marker) else { return nil }
            let digits = body[..<range.lowerBound].reversed().drop(while: { $0 == " " }).prefix(while: \.isNumber)
            return Int(String(digits.reversed()))
        }
        func number(after marker: String) -> Int? {
            guard let range = body.range(of: marker, options: .caseInsensitive) else { return nil }
            return Int(String(body[range.upperBound...].drop(while: { $0 == " " }).prefix(while: \.isNumber)))
        }
        return .overLimit(matching: number(before: " matching"), limit: number(after: "search limit of"))
    }
}

extension FeedPuller {
    /// GETs `url` and, for a 200, streams its body into `importBody`, bounded by the total
    /// timeout. Any other status throws ``CatalogFailure`` (the body's first line included; a
    /// 400 over the search limit as ``CatalogFailure/overLimit(matching:limit:)``).
    func fetchCatalog(
        _ url: URL,
        importBody: @escaping @Sendable (@escaping @Sendable (FeedSink) async throws -> Void) async throws -> ImportReport
    ) async throws -> ImportReport {
        try await boundedCatalogRequest(url) { response in
            guard response.status.code == 200 else { throw await Self.failure(response, url: url) }
            do {
                return try await importBody(response.streamBody)
            } catch let error as ImportError {
                switch error.kind {
                case .cancelled: throw CancellationError()
                case .source, .invalidFeed, .storage:
                    throw CatalogFailure.transient("\(url.absoluteString): \(error.message)", retryAfter: nil)
                case .tooLarge:
                    throw CatalogFailure.permanent("\(url.absoluteString): \(error.message)")
                }
            }
        }
    }

    /// GETs a `count` URL: the number of matching events and the service's search limit, or nil
    /// when the service has no `count` (404, or an answer that is not a count).
    func fetchCount(_ url: URL) async throws -> (count: Int, maxAllowed: Int?)? {
        try await boundedCatalogRequest(url) { response in
            if response.status.code == 404 || response.status.code == 501 { return nil }
            guard response.status.code == 200 else { throw await Self.failure(response, url: url) }
            let body = try await Self.collect(response, limit: 64 * 1024)
            struct Count: Decodable {
                var count: Int
                var maxAllowed: Int?
            }
            if let decoded = try? JSONDecoder().decode(Count.self, from: Data(body.utf8)), decoded.count >= 0 {
                return (decoded.count, decoded.maxAllowed)
            }
            if let plain = Int(body.trimmingCharacters(in: .whitespacesAndNewlines)), plain >= 0 { return (plain, nil) }
            return nil
        }
    }

    /// GETs a window of an fdsn source's backfill (`url` asks in the source's format, with
    /// `nodata=204`) and reads the answer with the source's reader, as its runs do
    /// (``SourceSync/readBody(_:url:source:maxBytes:proxy:)``): 204 is a window without events,
    /// 413 (FDSN's "would return too much") a window to split in half.
    /// Throws ``CatalogFailure`` as ``fetchCatalog(_:importBody:)`` does: a body the reader
    /// rejects is worth retrying, one over `max-feed-size` is not.
    func fetchSourceWindow(_ url: URL, source: SourceConfiguration) async throws -> SourceSync.Answer {
        let maxBytes = limits.maxBytes
        return try await boundedCatalogRequest(url, accept: SourceSync.accept(source.format)) { response in
            let code = response.status.code
            if code == 204 { return SourceSync.Answer(httpStatus: 204) }
            // FDSN's answer to a query that would return too much: a smaller window.
            if code == 413 { throw CatalogFailure.overLimit(matching: nil, limit: nil) }
            guard code == 200 else { throw await Self.failure(response, url: url) }
            do {
                return try await SourceSync.readBody(response, url: url, source: source, maxBytes: maxBytes, proxy: nil)
            } catch let error as SourceError {
                throw CatalogFailure.transient("\(url.absoluteString): \(error)", retryAfter: nil)
            } catch let error as QuakedError where error.kind == .tooLarge {
                throw CatalogFailure.permanent(
                    "\(url.absoluteString): \(error.message) (a window of the source's backfill over max-feed-size)")
            }
        }
    }

    private func boundedCatalogRequest<T: Sendable>(
        _ url: URL, accept: String = "application/geo+json, application/json, text/plain",
        _ take: @escaping @Sendable (FeedResponse) async throws -> T
    ) async throws -> T {
        var headers = HTTPHeaders()
        headers.add(name: "User-Agent", value: userAgent)
        headers.add(name: "Accept", value: accept)
        headers.add(name: "Accept-Encoding", value: "gzip")
        let timeout = limits.totalTimeout
        let requestHeaders = headers
        do {
            return try await withTimeout(timeout) {
                let deadline = NIODeadline.now() + .nanoseconds(Int64(timeout / .nanoseconds(1)))
                do {
                    return try await self.exchange(url, headers: requestHeaders, deadline: deadline) { response, _ in
                        try await take(response)
                    }
                } catch let error as QuakedError {
                    throw CatalogFailure.transient(error.message, retryAfter: error.retryAfter)
                }
            }
        } catch is TimedOut {
            throw CatalogFailure.transient(
                "\(url.absoluteString): no complete answer within the total timeout of \(timeout)", retryAfter: nil)
        }
    }

    /// A non-200 answer as a ``CatalogFailure``.
    private static func failure(_ response: FeedResponse, url: URL) async -> CatalogFailure {
        let code = Int(response.status.code)
        let body = (try? await collect(response, limit: 4096)) ?? ""
        if code == 400, let overLimit = CatalogFailure.overLimit(body: body) { return overLimit }
        let firstLine =
            body.split(whereSeparator: \.isNewline).map { $0.trimmingCharacters(in: .whitespaces) }
            .first { !$0.isEmpty && !$0.hasPrefix("<") } ?? ""
        let message =
            "\(url.absoluteString): the catalog answered \(code) \(response.status.reasonPhrase)"
            + (firstLine.isEmpty ? "" : ": \(firstLine.prefix(300))")
        switch code {
        case 429, 500...599, 408:
            return .transient(message, retryAfter: retryAfter(response.headers, now: Date()))
        case 404:
            return .permanent(message + " (is this an FDSN event service? the URL should end in /fdsnws/event/1/)")
        default:
            return .permanent(message)
        }
    }

    /// Up to `limit` bytes of the body, as text.
    private static func collect(_ response: FeedResponse, limit: Int) async throws -> String {
        let collected = BodyCollector(limit: limit)
        try? await response.chunks { collected.add($0) }
        return collected.text
    }
}

/// Keeps the first bytes of a body.
private final class BodyCollector: @unchecked Sendable {
    private var bytes: [UInt8] = []
    private let limit: Int
    private let lock = NSLock()
    init(limit: Int) { self.limit = limit }
    func add(_ chunk: [UInt8]) {
        lock.withLock { if bytes.count < limit { bytes += chunk.prefix(limit - bytes.count) } }
    }
    var text: String { lock.withLock { String(decoding: bytes, as: UTF8.self) } }
}
