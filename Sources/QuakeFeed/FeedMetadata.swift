/// The top-level `metadata` object of a USGS feed. Every field is optional: absent, `null` or
/// of the wrong JSON type all give `nil` (metadata is informative, never a reason to reject a feed).
public struct FeedMetadata: Sendable, Hashable {
    /// When the feed was generated, in milliseconds since the Unix epoch.
    public var generated: Int64?
    public var url: String?
    public var title: String?
    /// The HTTP status the feed service reported (200).
    public var status: Int?
    /// The feed format version, for example "1.10.3".
    public var api: String?
    /// The number of features the service says it sent.
    public var count: Int?

    public init() {}
}
