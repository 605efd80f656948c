import Foundation
import NIOHTTP1
import QuakeFeed
import QuakeHTTPQuery
import QuakeModel
import QuakeStore

/// Serves the summary feeds (see docs/http.md).
struct SummaryFeedHandler: Sendable {
    let store: QuakeStore
    let clock: @Sendable () -> Date

    func respond(_ feed: SummaryFeed, _ request: HTTPRequest, _ writer: any HTTPResponseWriter) async throws {
        guard request.method == .GET || request.method == .HEAD else {
            var headers = HTTPHeaders()
            headers.add(name: "Allow", value: "GET, HEAD")
            return try await writer.respond(.methodNotAllowed, headers: headers, body: "method not allowed: use GET or HEAD\n")
        }
        let now = QuakeTime.milliseconds(clock())
        let selection: QuakeSelection
        do {
            selection = try feed.selection(request.queryItems, now: now)
        } catch let error as ParameterError {
            return try await writer.respond(.badRequest, body: "Error 400: Bad Request\n\n\(error.message)\n")
        }
        // The state of the store the answer would be: unchanged since the client's copy → 304.
        let probe = try await store.count(selection)
        let tag = Self.entityTag(probe, request)
        if Self.matches(request.headers, tag) {
            return try await writer.respondEmpty(.notModified, headers: Self.commonHeaders(etag: tag))
        }
        var document = SummaryGeoJSON(generated: now, url: request.absoluteURL, title: feed.title)
        var body = ChunkedBody(writer: writer)
        try await store.streamSelection(selection) { counted in
            var headers = Self.commonHeaders(etag: Self.entityTag(counted, request))
            headers.add(name: "Content-Type", value: "application/json")
            try await writer.writeHead(.ok, headers)
            if request.method == .HEAD { return false }
            document.appendHeader(count: counted.count, to: &body.buffer)
            return true
        } each: { quake in
            document.append(quake, to: &body.buffer)
            try await body.flushIfFull()
        } end: {
            document.appendFooter(to: &body.buffer)
            try await body.flush()
        }
        try await writer.end()
    }

    static func commonHeaders(etag: String) -> HTTPHeaders {
        var headers = HTTPHeaders()
        headers.add(name: "ETag", value: etag)
        headers.add(name: "Vary", value: "Accept-Encoding")
        headers.add(name: "Cache-Control", value: "no-cache")
        headers.add(name: "Access-Control-Allow-Origin", value: "*")
        return headers
    }

    /// A weak entity tag of the answer: the store's id, its head token, the request's path and
    /// query, and how many quakes match (the window slides with the clock: with the head unchanged,
    /// the answer changes only by quakes leaving it, which the count tells).
    static func entityTag(_ counted: QuakeSelectionCount, _ request: HTTPRequest) -> String {
        var hash = FNV1a()
        hash.add(counted.storeID)
        hash.add("\n")
        hash.add(request.uri)
        return "W/\"\(counted.token)-\(counted.count)-\(hash.hex)\""
    }

    /// Whether `If-None-Match` names `tag` (weak comparison) or is `*`.
    static func matches(_ headers: HTTPHeaders, _ tag: String) -> Bool {
        let opaque = { (t: Substring) -> Substring in t.hasPrefix("W/") ? t.dropFirst(2) : t }
        let mine = opaque(Substring(tag))
        for value in headers[canonicalForm: "If-None-Match"] {
            let candidate = value.trimmingCharacters(in: .whitespaces)
            if candidate == "*" || opaque(Substring(candidate)) == mine { return true }
        }
        return false
    }
}

/// FNV-1a, 64 bits: a stable hash for entity tags (Swift's Hasher is seeded per process).
struct FNV1a {
    private(set) var value: UInt64 = 0xcbf2_9ce4_8422_2325

    mutating func add(_ text: String) {
        for byte in text.utf8 {
            value ^= UInt64(byte)
            value &*= 0x100_0000_01b3
        }
    }

    var hex: String {
        let digits = String(value, radix: 16)
        return String(repeating: "0", count: 16 - digits.count) + digits
    }
}
