import Foundation
import NIOCore
import NIOHTTP1
import QuakeHTTPQuery
import QuakeStore

/// Answers HTTP requests from the store, read-only: the USGS summary feeds under `/feeds/` and
/// an FDSN event service under `/fdsnws/event/1/` (docs/http.md), and any extra routes given
/// (the daemon's `/metrics`).
///
/// Every answer that lists quakes is streamed from one read transaction of the store, a batch of
/// quakes at a time, in pieces of about 32 KB: memory stays flat however large the answer, and a
/// client that reads slowly holds the reading back.
public struct CatalogRouter: Sendable {
    public let store: QuakeStore
    /// Handlers of exact paths, asked before the catalog's own (e.g. `/metrics`).
    public var routes: [String: HTTPHandler]
    let feeds: SummaryFeedHandler
    let events: FDSNEventService

    /// A router over `store`; `clock` is the time the feeds' windows end at (tests set it), and
    /// `authority` names QuakeML's resource identifiers (`smi:AUTHORITY/event/ID`).
    public init(
        store: QuakeStore, routes: [String: HTTPHandler] = [:], authority: String = "local.quaked",
        clock: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.store = store
        self.routes = routes
        self.feeds = SummaryFeedHandler(store: store, clock: clock)
        self.events = FDSNEventService(store: store, clock: clock, authority: authority)
    }

    /// Answers `request` through `writer`. Throws only when writing fails or the store fails
    /// after the head was written (the server then closes the connection, so the client sees a
    /// cut answer, never a short one that looks whole); a store failure before the head is a 500.
    public func respond(to request: HTTPRequest, writer: any HTTPResponseWriter) async throws {
        let tracked = TrackingWriter(writer)
        do {
            try await route(request, tracked)
        } catch {
            if await tracked.headWritten { throw error }
            try await writer.respond(.internalServerError, body: "Error 500: Internal Server Error\n\n\(error)\n")
        }
    }

    private func route(_ request: HTTPRequest, _ writer: any HTTPResponseWriter) async throws {
        let path = request.path
        if let handler = routes[path] {
            return try await handler(request, writer)
        }
        if let feed = SummaryFeed(path: path) {
            return try await feeds.respond(feed, request, writer)
        }
        if path.hasPrefix(FDSNEventService.basePath) {
            return try await events.respond(method: path.dropFirst(FDSNEventService.basePath.count), request, writer)
        }
        if path == "/fdsnws/event/1" {
            var headers = HTTPHeaders()
            headers.add(name: "Location", value: FDSNEventService.basePath)
            return try await writer.respond(.movedPermanently, headers: headers, body: "see \(FDSNEventService.basePath)\n")
        }
        try await writer.respond(
            .notFound,
            body: "not found: quaked serves /feeds/{all,significant,4.5,2.5,1.0}_{hour,day,week,month}.geojson and /fdsnws/event/1/\n")
    }
}

/// Remembers whether the head went out.
private actor HeadState {
    var written = false
    func mark() { written = true }
}

private struct TrackingWriter: HTTPResponseWriter {
    let base: any HTTPResponseWriter
    let state = HeadState()

    init(_ base: any HTTPResponseWriter) { self.base = base }

    var headWritten: Bool { get async { await state.written } }

    func writeHead(_ status: HTTPResponseStatus, _ headers: HTTPHeaders) async throws {
        await state.mark()
        try await base.writeHead(status, headers)
    }

    func writeBody(_ bytes: ByteBuffer) async throws { try await base.writeBody(bytes) }

    func writeResponse(_ status: HTTPResponseStatus, _ headers: HTTPHeaders, body: ByteBuffer) async throws {
        await state.mark()
        try await base.writeResponse(status, headers, body: body)
    }
    func end() async throws { try await base.end() }
}
