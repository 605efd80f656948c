import QuakeFeed

/// What one feed import did.
public struct ImportReport: Sendable, Hashable, Codable {
    /// The store's identity; `token` belongs to it.
    public var store: String
    /// Where the feed came from (its URL).
    public var source: String
    /// The history token of the import's transaction, or `nil` when nothing changed.
    public var token: HistoryToken?
    /// Elements of `features` read.
    public var features: Int = 0
    /// New quakes.
    public var inserted: Int = 0
    /// Stored quakes overwritten by a newer version.
    public var updated: Int = 0
    /// Features identical to what is stored: no write, no history.
    public var unchanged: Int = 0
    /// Features older (by `updated`) than what is stored: ignored.
    public var stale: Int = 0
    /// Stored quakes removed because a feature now lists them under another preferred id.
    public var superseded: Int = 0
    /// Stored quakes removed because a feature says the event was deleted upstream (its
    /// `status` is `deleted`, as an FDSN query with `includedeleted=true` returns it).
    public var deleted: Int = 0
    /// Features that were not imported, counted by reason: the feed parser's (`missing-id`,
    /// `missing-time`, ...) and `expired` (event time older than event retention; ``expired``).
    public var skipped: [String: Int] = [:]
    /// Bytes of the document read.
    public var bytes: Int = 0
    /// Wall time of the import.
    public var durationMs: Int = 0
    /// Of `unchanged`, the features recognised by their bytes' hash alone (see `feedHash`).
    /// Internal bookkeeping: not part of the report's JSON.
    var unchangedByHash = 0

    private enum CodingKeys: String, CodingKey {
        case store, source, token, features, inserted, updated, unchanged, stale, superseded, deleted, skipped, bytes
        case durationMs
    }

    public init(store: String, source: String) {
        self.store = store
        self.source = source
    }

    /// All skipped features, whatever the reason.
    public var skippedTotal: Int { skipped.values.reduce(0, +) }

    /// The reason, in ``skipped``, of features left out because their event time is older than
    /// event retention.
    public static let expiredReason = "expired"

    /// The reason, in ``skipped``, of features left out as deleted upstream: a deletion of an
    /// event the store does not hold, or a version no newer than a remembered deletion.
    public static let deletedReason = "deleted"

    /// Of ``skippedTotal``, the features left out as older than event retention.
    public var expired: Int { skipped[Self.expiredReason] ?? 0 }

    /// Whether the import changed the store.
    public var changedAnything: Bool { token != nil }
}
