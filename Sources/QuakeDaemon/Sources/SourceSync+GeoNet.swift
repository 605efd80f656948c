import Foundation
import NIOCore
import NIOHTTP1
import QuakeStore

/// The `geonet` kind (`source = NAME geonet https://api.geonet.org.nz/quake?MMI=-1`): GeoNet's
/// quake API, asked every `interval` with a conditional GET (`If-None-Match` and
/// `If-Modified-Since` from the last answer imported, as the USGS feeds are pulled). A 304 is a
/// run without changes. A 200 is read by `GeoNetReader` (`quality: deleted` a retraction) and
/// imported whole: the API is a rolling window, not incremental, and the store ignores the
/// copies it already holds (an `updated` not newer). `min-magnitude=` and `region=` filter the
/// reports here, as the API takes neither. The validators are kept in memory: after a restart
/// the first run asks unconditionally.
extension SourceSync {
    /// GETs GeoNet's API with `validators`; returns the answer read whole (304: no items) and the
    /// validators to keep once it is imported. Throws ``QuakedError`` for another status, a
    /// transport failure or timeout, a body over the size limit, or a `SourceError`.
    static func fetchGeoNet(
        _ url: URL, source: SourceConfiguration, validators: FeedPuller.Validators, puller: FeedPuller
    ) async throws -> (Answer, FeedPuller.Validators) {
        var headers = HTTPHeaders()
        headers.add(name: "User-Agent", value: puller.userAgent)
        // GeoNet's API version 2 (the GeoJSON GeoNetReader reads).
        headers.add(name: "Accept", value: "application/vnd.geo+json;version=2, application/geo+json, application/json")
        headers.add(name: "Accept-Encoding", value: "gzip")
        if let lastModified = validators.lastModified {
            headers.add(name: "If-Modified-Since", value: lastModified)
        }
        if let etag = validators.etag {
            headers.add(name: "If-None-Match", value: etag)
        }
        let limits = puller.limits
        let requestHeaders = headers
        do {
            return try await withTimeout(limits.totalTimeout) {
                let deadline = NIODeadline.now() + .nanoseconds(Int64(limits.totalTimeout / .nanoseconds(1)))
                return try await puller.exchange(url, headers: requestHeaders, deadline: deadline) { response, proxy in
                    switch response.status.code {
                    case 304:
                        // A 304 updates the validators it carries (RFC 9111 4.3.4) and keeps the others.
                        return (
                            Answer(httpStatus: 304),
                            FeedPuller.Validators(
                                lastModified: response.headers.first(name: "Last-Modified") ?? validators.lastModified,
                                etag: response.headers.first(name: "ETag") ?? validators.etag)
                        )
                    case 200:
                        if let length = response.headers.first(name: "Content-Length").flatMap(Int.init),
                            response.headers.first(name: "Content-Encoding") == nil, length > limits.maxBytes
                        {
                            throw QuakedError(
                                kind: .tooLarge,
                                message:
                                    "\(url.absoluteString): the answer is \(length) bytes, over max-feed-size (\(limits.maxBytes) bytes)",
                                httpStatus: 200)
                        }
                        let answer = try await readBody(
                            response, url: url, source: source, maxBytes: limits.maxBytes, proxy: proxy)
                        // Exactly the validators of this body.
                        return (
                            answer,
                            FeedPuller.Validators(
                                lastModified: response.headers.first(name: "Last-Modified"),
                                etag: response.headers.first(name: "ETag"))
                        )
                    default:
                        let code = Int(response.status.code)
                        var message =
                            "\(url.absoluteString): GeoNet's quake API answered \(code) \(response.status.reasonPhrase)"
                        if let proxy { message += " (through the proxy \(proxy) from \(proxy.variable))" }
                        if code == 400 || code == 404 {
                            message += " (check the URL: https://api.geonet.org.nz/quake?MMI=-1)"
                        }
                        throw QuakedError(
                            kind: .httpStatus, message: message, httpStatus: code,
                            retryAfter: FeedPuller.retryAfter(response.headers, now: Date()))
                    }
                }
            }
        } catch is TimedOut {
            throw QuakedError(
                kind: .transport,
                message:
                    "asking \(url.absoluteString) failed: no complete answer within the total timeout of \(limits.totalTimeout) (total-timeout)"
            )
        }
    }
}
