import Foundation
import QuakeFeed

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

extension SummaryFeed {
    /// The parameters a feed takes, besides which are ignored (as the USGS's static files ignore a
    /// query string).
    public static let parameters = ["minmagnitude", "latitude", "longitude", "maxradiuskm"]

    /// What the feed holds at `now` (ms), narrowed by a query's ``parameters`` (the items as
    /// ``QueryString/items(_:)`` reads them: nil for a malformed escape); throws
    /// ``ParameterError``.
    public func selection(_ items: [(name: String, value: String)]?, now: Int64) throws -> QuakeSelection {
        guard let items else { throw ParameterError("the query string has a malformed %-escape") }
        var values: [String: String] = [:]
        for (name, value) in items where Self.parameters.contains(name.lowercased()) {
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
        var filter = QuakeFilter(since: now - period.seconds * 1000)
        filter.minSignificance = level.minSignificance
        filter.minMagnitude = level.minMagnitude
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
}
