import Foundation
import NIOCore
import NIOHTTP1

/// Makes `HTTPResponseCompressor` choose gzip whenever the client accepts gzip.
///
/// The compressor prefers deflate when a client lists both with equal weight (AsyncHTTPClient sends
/// `deflate, gzip`). This handler, placed just before the compressor, replaces `Accept-Encoding` with
/// `gzip` (or removes it) and keeps the original values under another name, which ``restore(_:)`` puts back.
final class AcceptEncodingNormalizer: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = HTTPServerRequestPart

    static let originalName = "x-feedtestserver-original-accept-encoding"

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard case .head(var head) = unwrapInboundIn(data) else {
            context.fireChannelRead(data)
            return
        }
        let values = head.headers["Accept-Encoding"]
        if !values.isEmpty {
            let gzip = Self.acceptsGzip(values)
            head.headers.remove(name: "Accept-Encoding")
            for value in values { head.headers.add(name: Self.originalName, value: value) }
            if gzip { head.headers.add(name: "Accept-Encoding", value: "gzip") }
        }
        context.fireChannelRead(wrapInboundOut(.head(head)))
    }

    /// The headers as the client sent them (Accept-Encoding restored), and whether it accepts gzip.
    static func restore(_ rewritten: HTTPHeaders) -> (HTTPHeaders, acceptsGzip: Bool) {
        let original = rewritten[originalName]
        guard !original.isEmpty else { return (rewritten, false) }
        var headers = rewritten
        let gzip = headers.contains(name: "Accept-Encoding")
        headers.remove(name: originalName)
        headers.remove(name: "Accept-Encoding")
        for value in original { headers.add(name: "Accept-Encoding", value: value) }
        return (headers, gzip)
    }

    /// Whether these `Accept-Encoding` values accept gzip (q > 0 for gzip/x-gzip, or for `*` without them).
    static func acceptsGzip(_ values: [String]) -> Bool {
        var gzip: Double?
        var any: Double?
        for value in values {
            for item in value.split(separator: ",") {
                let parts = item.split(separator: ";").map { $0.trimmingCharacters(in: .whitespaces) }
                guard let coding = parts.first?.lowercased() else { continue }
                var q = 1.0
                for parameter in parts.dropFirst() where parameter.lowercased().hasPrefix("q=") {
                    q = Double(parameter.dropFirst(2)) ?? 0
                }
                if coding == "gzip" || coding == "x-gzip" {
                    gzip = q
                } else if coding == "*" {
                    any = q
                }
            }
        }
        if let gzip { return gzip > 0 }
        return (any ?? 0) > 0
    }
}
