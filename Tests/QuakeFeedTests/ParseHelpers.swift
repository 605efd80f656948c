import QuakeFeed
import Testing

/// The outcome of parsing a whole document: the items produced and the error, if any.
struct ParseResult: Equatable {
    var items: [FeedItem] = []
    var error: FeedError?
    var metadata = FeedMetadata()

    var features: [FeedFeature] {
        items.compactMap { if case .feature(let f, _) = $0 { f } else { nil } }
    }
}

/// Feeds `bytes` to a fresh parser in chunks of `chunkSize` (nil: all at once), then finishes.
func parse(_ bytes: [UInt8], chunkSize: Int? = nil, limits: FeedParser.Limits = .init()) -> ParseResult {
    var parser = FeedParser(limits: limits)
    var result = ParseResult()
    let size = max(1, chunkSize ?? bytes.count)
    do {
        var offset = 0
        while offset < bytes.count {
            let end = min(bytes.count, offset + size)
            try parser.consume(Array(bytes[offset..<end])) { result.items.append($0) }
            offset = end
        }
        try parser.finish()
    } catch let error as FeedError {
        result.error = error
    } catch {
        Issue.record("unexpected error type: \(error)")
    }
    result.metadata = parser.metadata
    return result
}

func parse(_ text: String, chunkSize: Int? = nil, limits: FeedParser.Limits = .init()) -> ParseResult {
    parse(Array(text.utf8), chunkSize: chunkSize, limits: limits)
}

/// A minimal valid document around the given `features` array elements (comma-separated JSON).
func document(features: String) -> String {
    #"{"type":"FeatureCollection","metadata":{"count":1},"features":["# + features + #"],"bbox":[1,2,3,4]}"#
}

/// A feature with the given properties (JSON object members) and geometry (JSON value).
func feature(
    id: String = #""ci1""#, properties: String = #""time":1700000000000"#,
    geometry: String = #"{"type":"Point","coordinates":[-117.5,35.25,8.1]}"#
) -> String {
    #"{"type":"Feature","properties":{"# + properties + #"},"geometry":"# + geometry + #","id":"# + id + "}"
}
