import QuakeFeed

/// Why an import failed. Whatever the reason, the store is exactly as it was before the import:
/// no rows and no history were written.
public struct ImportError: Error, Sendable, CustomStringConvertible {
    public enum Kind: String, Sendable, Codable {
        /// The bytes are not a valid USGS GeoJSON feed (bad JSON, bad UTF-8, truncated, wrong shape).
        case invalidFeed = "invalid-feed"
        /// The document is larger than the configured maximum.
        case tooLarge = "too-large"
        /// Reading the source failed (I/O, network).
        case source
        /// The import was cancelled.
        case cancelled
        /// SQLite refused the write (disk full, read-only file, corruption).
        case storage
    }

    public var kind: Kind
    /// What went wrong and, where it helps, what to do.
    public var message: String
    /// How far into the document the import got, in bytes.
    public var byteOffset: Int?
    /// The element of `features` being read, if any.
    public var featureIndex: Int?
    /// For ``Kind/invalidFeed`` and a too-large token: the parser's error.
    public var feedError: FeedError?

    public init(kind: Kind, message: String, byteOffset: Int? = nil, featureIndex: Int? = nil) {
        self.kind = kind
        self.message = message
        self.byteOffset = byteOffset
        self.featureIndex = featureIndex
    }

    init(_ error: FeedError) {
        self.init(
            kind: error.kind == .tooLarge ? .tooLarge : .invalidFeed, message: error.description,
            byteOffset: error.byteOffset, featureIndex: error.featureIndex)
        self.feedError = error
    }

    init(_ error: FeedSink.TooLarge) {
        self.init(
            kind: .tooLarge, message: "the feed is larger than the maximum of \(error.maxBytes) bytes",
            byteOffset: error.maxBytes, featureIndex: error.featureIndex)
    }

    public var description: String {
        var where_: [String] = []
        if kind != .invalidFeed {  // a FeedError's own description already says where
            if let byteOffset { where_.append("at byte \(byteOffset)") }
            if let featureIndex { where_.append("feature \(featureIndex)") }
        }
        let location = where_.isEmpty ? "" : " (\(where_.joined(separator: ", ")))"
        return "\(message)\(location); the store is unchanged"
    }
}
