import NIOCore
import NIOHTTP1

/// One request as the ``FeedTestServer`` received it.
public struct RecordedRequest: Sendable {
    /// The method, e.g. `"GET"`.
    public let method: String
    /// The request target as sent, e.g. `"/feed.geojson?x=1"`.
    public let uri: String
    /// The path part of ``uri`` (no query), e.g. `"/feed.geojson"`.
    public let path: String
    /// The request headers as the client sent them.
    public let headers: HTTPHeaders
    /// When the request's head arrived, as the event loop that read it saw it (for measuring the
    /// gaps between pulls: see ``ArrivalStamper``).
    public var receivedAt: ContinuousClock.Instant = .now

    /// The first value of a header (case-insensitive name), or `nil`.
    public func header(_ name: String) -> String? { headers.first(name: name) }

    /// The query parameters of ``uri``, percent-decoded (`+` decodes to a space, as in HTML forms;
    /// malformed escapes are kept as they are). A name without `=` has the value `""`; when a name
    /// comes more than once, the last value wins. Empty when the uri has no query.
    public var query: [String: String] { Self.parseQuery(uri) }

    /// The decoded parameters of the query part of `uri` (see ``query``).
    static func parseQuery(_ uri: String) -> [String: String] {
        var target = Substring(uri)
        if let fragment = target.firstIndex(of: "#") { target = target[..<fragment] }
        guard let mark = target.firstIndex(of: "?") else { return [:] }
        var result: [String: String] = [:]
        for pair in target[target.index(after: mark)...].split(separator: "&", omittingEmptySubsequences: true) {
            let name: Substring
            let value: Substring
            if let equals = pair.firstIndex(of: "=") {
                name = pair[..<equals]
                value = pair[pair.index(after: equals)...]
            } else {
                name = pair
                value = ""
            }
            result[percentDecode(name)] = percentDecode(value)
        }
        return result
    }

    /// `text` with `%XX` escapes decoded and `+` as a space (invalid UTF-8 is replaced, not rejected).
    static func percentDecode(_ text: Substring) -> String {
        func hex(_ byte: UInt8) -> UInt8? {
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
            default: nil
            }
        }
        let bytes = Array(text.utf8)
        var decoded: [UInt8] = []
        decoded.reserveCapacity(bytes.count)
        var index = 0
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "%"), index + 2 < bytes.count, let high = hex(bytes[index + 1]),
                let low = hex(bytes[index + 2])
            {
                decoded.append(high << 4 | low)
                index += 3
                continue
            }
            decoded.append(byte == UInt8(ascii: "+") ? UInt8(ascii: " ") : byte)
            index += 1
        }
        return String(decoding: decoded, as: UTF8.self)
    }
}

/// Stamps each request head with the moment it arrived, on the event loop that read it: the
/// serving task may run later (on a loaded machine), and the gaps between a client's requests
/// (its backoff, Retry-After) are measured from the stamps. ``restore(_:)`` takes it back out.
final class ArrivalStamper: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = HTTPServerRequestPart

    static let headerName = "x-feedtestserver-received-ns"
    /// The instant the stamps count from.
    private static let origin = ContinuousClock.now

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard case .head(var head) = unwrapInboundIn(data) else {
            context.fireChannelRead(data)
            return
        }
        let (seconds, attoseconds) = (ContinuousClock.now - Self.origin).components
        let nanoseconds = seconds * 1_000_000_000 + attoseconds / 1_000_000_000
        head.headers.replaceOrAdd(name: Self.headerName, value: "\(nanoseconds)")
        context.fireChannelRead(wrapInboundOut(.head(head)))
    }

    /// The headers without the stamp, and the instant it names (now, when there is none).
    static func restore(_ stamped: HTTPHeaders) -> (HTTPHeaders, receivedAt: ContinuousClock.Instant) {
        guard let value = stamped.first(name: headerName), let nanoseconds = Int64(value) else {
            return (stamped, .now)
        }
        var headers = stamped
        headers.remove(name: headerName)
        return (headers, origin + .nanoseconds(nanoseconds))
    }
}
