import Foundation
import NIOHTTP1
import QuakeFeed
import QuakeModel
import QuakeStore

/// One of the USGS's 20 summary feeds, `/feeds/{all,significant,4.5,2.5,1.0}_{hour,day,week,month}.geojson`,
/// as a selection of the store.
public struct SummaryFeed: Sendable, Hashable {
    public enum Level: String, Sendable, Hashable, CaseIterable {
        case all, significant
        case m45 = "4.5"
        case m25 = "2.5"
        case m10 = "1.0"

        /// The least magnitude the feed holds (nil: any, a quake without a magnitude too).
        public var minMagnitude: Double? {
            switch self {
            case .all, .significant: nil
            case .m45: 4.5
            case .m25: 2.5
            case .m10: 1.0
            }
        }

        /// The USGS's significant feeds: `sig` of 600 or more.
        public var minSignificance: Int64? { self == .significant ? SummaryFeed.significantThreshold : nil }

        var titleWords: String {
            switch self {
            case .all: "All Earthquakes"
            case .significant: "Significant Earthquakes"
            case .m45, .m25, .m10: "Magnitude \(rawValue)+ Earthquakes"
            }
        }
    }

    public enum Period: String, Sendable, Hashable, CaseIterable {
        case hour, day, week, month

        /// How far back the feed reaches (a month is 30 days, as the USGS's).
        public var seconds: Int64 {
            switch self {
            case .hour: 3600
            case .day: 86_400
            case .week: 7 * 86_400
            case .month: 30 * 86_400
            }
        }
    }

    /// The USGS's definition of a significant quake: `sig` at least 600.
    public static let significantThreshold: Int64 = 600

    public var level: Level
    public var period: Period

    public init(level: Level, period: Period) {
        self.level = level
        self.period = period
    }

    /// The feed a path names (`/feeds/4.5_week.geojson`), or nil.
    public init?(path: String) {
        guard path.hasPrefix("/feeds/"), path.hasSuffix(".geojson") else { return nil }
        let name = path.dropFirst("/feeds/".count).dropLast(".geojson".count)
        guard let underscore = name.lastIndex(of: "_"),
            let level = Level(rawValue: String(name[..<underscore])),
            let period = Period(rawValue: String(name[name.index(after: underscore)...]))
        else { return nil }
        self.init(level: level, period: period)
    }

    public var name: String { "\(level.rawValue)_\(period.rawValue)" }
    public var path: String { "/feeds/\(name).geojson" }

    /// The USGS's title of the feed (`USGS Magnitude 4.5+ Earthquakes, Past Week`), said to be quaked's.
    public var title: String { "quaked \(level.titleWords), Past \(period.rawValue.capitalized)" }

    /// Every feed, in the USGS's order.
    public static let all: [SummaryFeed] = Level.allCases.flatMap { level in
        Period.allCases.map { SummaryFeed(level: level, period: $0) }
    }
}

/// Serves the summary feeds (see docs/http.md).
struct SummaryFeedHandler: Sendable {
    let store: QuakeStore
    let clock: @Sendable () -> Date

    /// The parameters a feed takes, besides which are ignored (as the USGS's static files ignore a
    /// query string).
    static let parameters = ["minmagnitude", "latitude", "longitude", "maxradiuskm"]

    func respond(_ feed: SummaryFeed, _ request: HTTPRequest, _ writer: any HTTPResponseWriter) async throws {
        guard request.method == .GET || request.method == .HEAD else {
            var headers = HTTPHeaders()
            headers.add(name: "Allow", value: "GET, HEAD")
            return try await writer.respond(.methodNotAllowed, headers: headers, body: "method not allowed: use GET or HEAD\n")
        }
        let now = QuakeTime.milliseconds(clock())
        let selection: QuakeSelection
        do {
            selection = try Self.selection(feed, request, now: now)
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

    static func selection(_ feed: SummaryFeed, _ request: HTTPRequest, now: Int64) throws -> QuakeSelection {
        guard let items = request.queryItems else { throw ParameterError("the query string has a malformed %-escape") }
        var values: [String: String] = [:]
        for (name, value) in items where parameters.contains(name.lowercased()) {
            guard values.updateValue(value, forKey: name.lowercased()) == nil else {
                throw ParameterError("\(name) is given twice")
            }
        }
        func number(_ name: String, _ range: ClosedRange<Double>, _ what: String) throws -> Double? {
            guard let text = values[name] else { return nil }
            guard let value = Double(text), value.isFinite, range.contains(value) else {
                throw ParameterError("\(name)=\(text) is not \(what)")
            }
            return value
        }
        var filter = QuakeFilter(since: now - feed.period.seconds * 1000)
        filter.minSignificance = feed.level.minSignificance
        filter.minMagnitude = feed.level.minMagnitude
        if let minimum = try number("minmagnitude", -10...12, "a magnitude (a number from -10 to 12)") {
            filter.minMagnitude = max(filter.minMagnitude ?? -.infinity, minimum)
        }
        let lat = try number("latitude", -90...90, "a latitude (a number from -90 to 90)")
        let lon = try number("longitude", -180...180, "a longitude (a number from -180 to 180)")
        let radius = try number("maxradiuskm", 0...20_001.6, "a distance in km (a number from 0 to 20001.6)")
        switch (lat, lon, radius) {
        case (nil, nil, nil): break
        case (let lat?, let lon?, let radius?): filter.region = .circle(lat: lat, lon: lon, radiusKm: radius)
        default:
            throw ParameterError("latitude, longitude and maxradiuskm go together: give all three, or none")
        }
        return QuakeSelection(filter: filter, order: .timeDescending)
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

/// A parameter the request cannot be answered with.
struct ParameterError: Error {
    var message: String
    init(_ message: String) { self.message = message }
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
