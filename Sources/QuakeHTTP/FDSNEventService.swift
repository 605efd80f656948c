import Foundation
import NIOHTTP1
import QuakeFeed
import QuakeHTTPQuery
import QuakeModel
import QuakeSources
import QuakeStore

/// An FDSN event service (fdsnws-event 1) over the store, at ``basePath``: `query`, `count`,
/// `version`, `application.wadl`, `catalogs` and `contributors` (see docs/http.md).
struct FDSNEventService: Sendable {
    static let basePath = "/fdsnws/event/1/"
    /// The version `version` answers and error documents name: the FDSN web service
    /// specification's event service, 1.2.
    static let serviceVersion = "1.2.0"
    /// The catalog name `catalogs` lists and the text format's `Catalog` column carries.
    static let catalog = "quaked"

    let store: QuakeStore
    let clock: @Sendable () -> Date
    /// The authority of QuakeML resource identifiers (`smi:AUTHORITY/event/ID`).
    let authority: String

    func respond(method: Substring, _ request: HTTPRequest, _ writer: any HTTPResponseWriter) async throws {
        guard request.method == .GET || request.method == .HEAD else {
            var headers = HTTPHeaders()
            headers.add(name: "Allow", value: "GET, HEAD")
            return try await writer.respond(.methodNotAllowed, headers: headers, body: "method not allowed: use GET or HEAD\n")
        }
        switch method {
        case "query":
            try await query(request, writer)
        case "count":
            try await count(request, writer)
        case "version":
            try await writer.respond(.ok, body: Self.serviceVersion + "\n")
        case "application.wadl":
            var headers = HTTPHeaders()
            headers.add(name: "Content-Type", value: "application/xml")
            try await writer.respond(.ok, headers: headers, body: FDSNWADL.document(base: Self.base(of: request)))
        case "catalogs":
            var headers = HTTPHeaders()
            headers.add(name: "Content-Type", value: "application/xml")
            try await writer.respond(
                .ok, headers: headers,
                body: "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Catalogs>\n  <Catalog>\(Self.catalog)</Catalog>\n</Catalogs>\n")
        case "contributors":
            var headers = HTTPHeaders()
            headers.add(name: "Content-Type", value: "application/xml")
            try await writer.respond(.ok, headers: headers, body: try await contributors())
        case "":
            try await writer.respond(
                .ok,
                body:
                    "quaked's FDSN event service (fdsnws-event \(Self.serviceVersion)): query, count, version, application.wadl, catalogs, contributors\n"
            )
        default:
            try await writer.respond(
                .notFound,
                body: error(404, "No method \(method): this service answers query, count, version, application.wadl, catalogs and contributors.", request))
        }
    }

    /// `http://HOST/fdsnws/event/1/`.
    static func base(of request: HTTPRequest) -> String {
        "http://" + (request.headers.first(name: "Host") ?? "localhost") + basePath
    }

    /// The FDSN error document (the specification's section "Error reporting").
    func error(_ code: Int, _ explanation: String, _ request: HTTPRequest) -> String {
        let phrase = HTTPResponseStatus(statusCode: code).reasonPhrase
        return """
            Error \(code): \(phrase)

            \(explanation)

            Usage details are available from \(Self.base(of: request))application.wadl

            Request:
            \(request.absoluteURL)

            Request Submitted:
            \(QuakeTime.iso8601(QuakeTime.milliseconds(clock())))

            Service version:
            \(Self.serviceVersion)

            """
    }

    private func badRequest(_ message: String, _ request: HTTPRequest, _ writer: any HTTPResponseWriter) async throws {
        try await writer.respond(.badRequest, body: error(400, message, request))
    }

    private func noData(_ query: FDSNQuery, _ request: HTTPRequest, _ writer: any HTTPResponseWriter) async throws {
        if query.noData == 404 {
            try await writer.respond(.notFound, body: error(404, "No events match the request.", request))
        } else {
            try await writer.respondEmpty(.noContent)
        }
    }

    func count(_ request: HTTPRequest, _ writer: any HTTPResponseWriter) async throws {
        let query: FDSNQuery
        do {
            query = try FDSNQuery(request.queryItems)
        } catch let error as ParameterError {
            return try await badRequest(error.message, request, writer)
        }
        let counted = try await store.count(query.selection)
        try await writer.respond(.ok, body: "\(counted.count)\n")
    }

    func query(_ request: HTTPRequest, _ writer: any HTTPResponseWriter) async throws {
        let query: FDSNQuery
        do {
            query = try FDSNQuery(request.queryItems)
        } catch let error as ParameterError {
            return try await badRequest(error.message, request, writer)
        }
        var body = ChunkedBody(writer: writer)
        let quakeML = QuakeMLWriter(authority: authority)
        let text = FDSNTextWriter(layout: .fourteen, catalog: Self.catalog)
        var geoJSON = SummaryGeoJSON(
            generated: QuakeTime.milliseconds(clock()), url: request.absoluteURL, title: "quaked FDSN event query")
        var empty = false
        try await store.streamSelection(query.selection) { counted in
            guard counted.count > 0 else {
                empty = true
                return false
            }
            var headers = HTTPHeaders()
            switch query.format {
            case .xml: headers.add(name: "Content-Type", value: "application/xml")
            case .text: headers.add(name: "Content-Type", value: "text/plain; charset=utf-8")
            case .geojson: headers.add(name: "Content-Type", value: "application/json")
            }
            headers.add(name: "Vary", value: "Accept-Encoding")
            headers.add(name: "Access-Control-Allow-Origin", value: "*")
            try await writer.writeHead(.ok, headers)
            if request.method == .HEAD { return false }
            switch query.format {
            case .xml: quakeML.appendHeader(to: &body.buffer)
            case .text: text.appendHeader(to: &body.buffer)
            case .geojson: geoJSON.appendHeader(count: counted.count, to: &body.buffer)
            }
            return true
        } each: { quake in
            switch query.format {
            case .xml: quakeML.append(FDSNQuery.report(quake), to: &body.buffer)
            case .text: text.append(FDSNQuery.report(quake), to: &body.buffer)
            case .geojson: geoJSON.append(quake, to: &body.buffer)
            }
            try await body.flushIfFull()
        } end: {
            switch query.format {
            case .xml: quakeML.appendFooter(to: &body.buffer)
            case .text: break
            case .geojson: geoJSON.appendFooter(to: &body.buffer)
            }
            try await body.flush()
        }
        if empty { return try await noData(query, request, writer) }
        try await writer.end()
    }

    /// The agencies of the stored events (their `sources` entries), for `contributors`.
    private func contributors() async throws -> String {
        let names = try await store.agencies()
        var out: [UInt8] = []
        out.append(contentsOf: "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Contributors>\n".utf8)
        for name in names {
            out.append(contentsOf: "  <Contributor>".utf8)
            FDSNWADL.appendEscaped(name, to: &out)
            out.append(contentsOf: "</Contributor>\n".utf8)
        }
        out.append(contentsOf: "</Contributors>\n".utf8)
        return String(decoding: out, as: UTF8.self)
    }
}
