import AsyncHTTPClient
import Foundation
import Logging
import NIOCore
import NIOHTTP1
import QuakeFeed
import QuakeHTTP
import QuakeHTTPQuery
import QuakeModel
import QuakeSources
import QuakeStore
import QuakeTestSupport
import Testing

/// A real store filled from real USGS feeds, served by a real HTTPServer on 127.0.0.1,
/// asked over real HTTP (AsyncHTTPClient).
struct Catalog {
    let store: QuakeStore
    /// `http://127.0.0.1:PORT`.
    let base: String
    let client: HTTPClient

    /// The main fixture: a week of every quake the USGS published (2,219 features), and the
    /// feed's own `generated` time, which the server's clock is set to.
    static let week = "tylerhill122__leaflet-usgs__all_week.geojson"
    static let weekGenerated: Int64 = 1_656_273_399_000
    static var weekNow: Date { QuakeTime.date(weekGenerated) }

    /// Fills a store in a new directory with `fixtures` (through the store's own import), serves
    /// it with `clock` at `now`, and runs `body` with an HTTP client.
    static func with(
        fixtures: [String] = [week], now: Date = weekNow, routes: [String: HTTPHandler] = [:],
        _ body: (Catalog) async throws -> Void
    ) async throws {
        try await withTemporaryDirectory { directory in
            let store = try QuakeStore(directory: directory)
            for fixture in fixtures { _ = try await store.importFile(Fixtures.usgs(fixture)) }
            let socket = try await HTTPServer.open(host: "127.0.0.1", port: 0)
            let server = HTTPServer(
                socket: socket, router: CatalogRouter(store: store, routes: routes, clock: { now }),
                logger: Logger(label: "quaked.http.test"))
            try await withThrowingTaskGroup(of: Void.self) { group in
                // As the daemon's would, the server answers on threads no test can starve.
                group.addTask(executorPreference: OwnThreadExecutor.servers) { try await server.run() }
                do {
                    try await withHTTPClient(readTimeout: .seconds(60)) { client in
                        try await body(Catalog(store: store, base: "http://\(socket.localAddress)", client: client))
                    }
                } catch {
                    group.cancelAll()
                    throw error
                }
                group.cancelAll()
            }
            try store.close()
        }
    }

    struct Reply {
        let status: Int
        let headers: HTTPHeaders
        let body: [UInt8]
        /// How many pieces the body arrived in.
        let chunks: Int

        var text: String { String(decoding: body, as: UTF8.self) }
        func header(_ name: String) -> String? { headers.first(name: name) }
    }

    func get(_ target: String, headers: [(String, String)] = [], method: HTTPMethod = .GET) async throws -> Reply {
        try await Self.get(client, base + target, headers: headers, method: method)
    }

    static func get(
        _ client: HTTPClient, _ url: String, headers: [(String, String)] = [], method: HTTPMethod = .GET
    ) async throws -> Reply {
        var request = HTTPClientRequest(url: url)
        request.method = method
        for (name, value) in headers { request.headers.add(name: name, value: value) }
        let response = try await client.execute(request, timeout: .seconds(120))
        var body: [UInt8] = []
        var chunks = 0
        for try await chunk in response.body {
            chunks += 1
            body.append(contentsOf: chunk.readableBytesView)
        }
        return Reply(status: Int(response.status.code), headers: response.headers, body: body, chunks: chunks)
    }
}

/// A fixture's features as Foundation's JSONSerialization reads them: the expectations, made
/// without quaked's parser.
struct FixtureFeed {
    struct Feature {
        let id: String
        let properties: [String: Any]
        let coordinates: [Double]
        var time: Int64 { (properties["time"] as? NSNumber)?.int64Value ?? 0 }
        var mag: Double? { (properties["mag"] as? NSNumber)?.doubleValue }
        var sig: Int64? { (properties["sig"] as? NSNumber)?.int64Value }
        var lon: Double { coordinates[0] }
        var lat: Double { coordinates[1] }
    }

    let features: [Feature]

    init(_ name: String) throws {
        let data = try Data(contentsOf: Fixtures.usgs(name))
        let root = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        let list = try #require(root["features"] as? [[String: Any]])
        features = list.map { feature in
            Feature(
                id: feature["id"] as? String ?? "", properties: feature["properties"] as? [String: Any] ?? [:],
                coordinates: ((feature["geometry"] as? [String: Any])?["coordinates"] as? [NSNumber] ?? []).map(\.doubleValue))
        }
    }

    /// The ids in a summary feed's window ending at `now`, newest first (then by id).
    func feed(_ feed: SummaryFeed, now: Int64) -> [String] {
        features.filter { f in
            guard f.time >= now - feed.period.seconds * 1000 else { return false }
            switch feed.level {
            case .all: return true
            case .significant: return (f.sig ?? -1) >= 600
            case .m45: return (f.mag ?? -.infinity) >= 4.5
            case .m25: return (f.mag ?? -.infinity) >= 2.5
            case .m10: return (f.mag ?? -.infinity) >= 1.0
            }
        }.sorted { ($0.time, $1.id) > ($1.time, $0.id) }.map(\.id)
    }

    /// Haversine on the 6,371 km sphere.
    static func distanceKm(_ lat1: Double, _ lon1: Double, _ lat2: Double, _ lon2: Double) -> Double {
        let r = Double.pi / 180
        let a = pow(sin((lat2 - lat1) * r / 2), 2) + cos(lat1 * r) * cos(lat2 * r) * pow(sin((lon2 - lon1) * r / 2), 2)
        return 2 * 6371 * asin(min(1, sqrt(a)))
    }
}

/// What quaked's own feed parser reads from a GeoJSON answer.
struct ParsedFeed {
    var metadata: FeedMetadata
    var features: [FeedFeature]
    var skipped: Int

    init(_ bytes: [UInt8]) throws {
        var parser = FeedParser()
        var features: [FeedFeature] = []
        var skipped = 0
        try bytes.withUnsafeBytes { buffer in
            try parser.consume(buffer) { item in
                switch item {
                case .feature(let feature, _): features.append(feature)
                case .skipped: skipped += 1
                }
            }
        }
        try parser.finish()
        self.metadata = parser.metadata
        self.features = features
        self.skipped = skipped
    }

    var ids: [String] { features.map(\.id) }
}

/// The reports of a QuakeML answer, as QuakeSources' reader reads them.
func quakeMLReports(_ bytes: [UInt8]) throws -> [SourceReport] {
    let reader = QuakeMLReader(source: "test")
    var reports: [SourceReport] = []
    try reader.consume(bytes) { if case .report(let r) = $0 { reports.append(r) } }
    try reader.finish { if case .report(let r) = $0 { reports.append(r) } }
    #expect(reader.skippedCount == 0, "\(reader.problems)")
    return reports
}

/// The reports of an FDSN text answer, as QuakeSources' reader reads them.
func textReports(_ bytes: [UInt8]) throws -> [SourceReport] {
    var reader = FDSNTextReader(source: "test")
    var reports: [SourceReport] = []
    try reader.consume(bytes) { if case .report(let r) = $0 { reports.append(r) } }
    try reader.finish { if case .report(let r) = $0 { reports.append(r) } }
    #expect(reader.skippedCount == 0, "\(reader.problems)")
    return reports
}

/// `xmllint` (Debian's libxml2-utils, which scripts/install-deps installs) on `bytes`, with
/// `arguments` before the file; its exit status and messages.
func xmllint(_ bytes: [UInt8], _ arguments: [String]) async throws -> (status: Int32, stderr: String) {
    let path = (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin").split(separator: ":")
        .map { "\($0)/xmllint" }.first { FileManager.default.isExecutableFile(atPath: $0) }
    guard let path else {
        Issue.record("xmllint is not installed: run scripts/install-deps (Debian's libxml2-utils)")
        return (-1, "no xmllint")
    }
    let file = FileManager.default.temporaryDirectory.appendingPathComponent("quakehttp-\(UUID().uuidString).xml")
    try Data(bytes).write(to: file)
    defer { try? FileManager.default.removeItem(at: file) }
    let result = try await ChildProcess.run(path, arguments + [file.path])
    return (result.status, result.stderr)
}

/// The QuakeML 1.2 schema in Tests/QuakeMLSchema.
let quakeMLSchema = Fixtures.packageRoot.appendingPathComponent("Tests/QuakeMLSchema/QuakeML-1.2.xsd").path
