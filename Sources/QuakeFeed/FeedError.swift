/// Why a feed document was rejected. Thrown by `FeedParser.consume` and `FeedParser.finish`.
public struct FeedError: Error, Sendable, CustomStringConvertible, Equatable {
    public enum Kind: String, Sendable {
        /// The bytes are not RFC 8259 JSON (syntax, escapes, numbers, trailing data).
        case invalidJSON = "invalid-json"
        /// A byte sequence is not valid UTF-8.
        case invalidUTF8 = "invalid-utf8"
        /// The input ended before the document was complete.
        case truncated
        /// Valid JSON, but not a GeoJSON `FeatureCollection` (root, `type` or `features`).
        case wrongType = "wrong-type"
        /// A feature or token exceeds `maxFeatureBytes`, or nesting exceeds `maxDepth`.
        case tooLarge = "too-large"
    }

    public var kind: Kind
    /// What was wrong, for people.
    public var message: String
    /// Absolute offset in the document of the offending byte (the document's length for `.truncated`).
    public var byteOffset: Int
    /// The index in `features` of the element being parsed when the error occurred, if any.
    public var featureIndex: Int?

    public init(_ kind: Kind, _ message: String, at byteOffset: Int, featureIndex: Int? = nil) {
        self.kind = kind
        self.message = message
        self.byteOffset = byteOffset
        self.featureIndex = featureIndex
    }

    public var description: String {
        let what: String
        switch kind {
        case .invalidJSON: what = "invalid JSON"
        case .invalidUTF8: what = "invalid UTF-8"
        case .truncated: what = "truncated document"
        case .wrongType: what = "not a GeoJSON FeatureCollection"
        case .tooLarge: what = "too large"
        }
        let feature = featureIndex.map { " (feature \($0))" } ?? ""
        return "\(what) at byte \(byteOffset)\(feature): \(message)"
    }
}
