import Foundation

/// A feed to pull: one of the 20 USGS summary feeds by short name, or any `https`, `http` or
/// `file` URL serving the same GeoJSON format.
public struct FeedSource: Sendable, Hashable, CustomStringConvertible {
    /// The short name (`all_month`) for USGS summary feeds, else the URL as given.
    public var name: String
    public var url: URL

    /// The USGS summary feed URL pattern; `{name}` is e.g. `all_month`.
    public static let usgsSummaryBase = "https://earthquake.usgs.gov/earthquakes/feed/v1.0/summary/"
    public static let magnitudes = ["significant", "4.5", "2.5", "1.0", "all"]
    public static let windows = ["hour", "day", "week", "month"]
    /// Every USGS summary feed name, e.g. `significant_hour` ... `all_month`.
    public static let summaryNames: [String] = magnitudes.flatMap { m in windows.map { "\(m)_\($0)" } }
    /// The default feed: every earthquake of the past 30 days.
    public static let defaultFeed = try! FeedSource(parsing: "all_month")

    /// Parses a short name or a URL. Throws ``FeedSourceError`` with a sentence saying what is accepted.
    public init(parsing text: String) throws {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        if Self.summaryNames.contains(trimmed) {
            self.name = trimmed
            self.url = URL(string: Self.usgsSummaryBase + trimmed + ".geojson")!
            return
        }
        guard let url = URL(string: trimmed), let scheme = url.scheme?.lowercased() else {
            throw FeedSourceError(text: text)
        }
        switch scheme {
        case "https", "http":
            guard let host = url.host, !host.isEmpty else { throw FeedSourceError(text: text) }
        case "file":
            guard !url.path.isEmpty else { throw FeedSourceError(text: text) }
        default:
            throw FeedSourceError(text: text)
        }
        self.name = trimmed
        self.url = url
    }

    public var description: String { name }
}

/// A feed that is neither a USGS summary feed name nor an http(s)/file URL.
public struct FeedSourceError: Error, Sendable, CustomStringConvertible {
    public var text: String
    public var description: String {
        "'\(text)' is not a feed: use a USGS summary feed name such as all_month, 4.5_week or significant_day "
            + "(magnitude significant, 4.5, 2.5, 1.0 or all; window hour, day, week or month), "
            + "or an https://, http:// or file:// URL"
    }
}
