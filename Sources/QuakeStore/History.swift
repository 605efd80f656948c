import QuakeFeed

/// A position in a store's history: the token of the last transaction a reader has seen.
///
/// Tokens strictly increase, never repeat and never go back, even across purges and restarts.
/// A token means something only together with its store's ``QuakeStore/storeID``. `0` is the
/// position before the first transaction.
public typealias HistoryToken = Int64

/// How a change affected one quake. History stores inserts, updates and deletes; a filtered
/// reader (``QuakeFilter``) is also sent `enter`, an update that brought a stored quake into the
/// filter, and `leave`, one that took it out.
public enum ChangeKind: String, Sendable, Codable, Hashable {
    case insert
    case update
    case delete
    case enter
    case leave
}

/// Why a quake was deleted.
public enum DeleteReason: String, Sendable, Codable, Hashable {
    /// The feed now lists the event under another preferred id (`supersededBy`).
    case superseded
    /// The event is older than the configured event retention.
    case expired
    /// Someone deleted it (`quakectl delete`).
    case deletedByUser = "deleted-by-user"
    /// The catalog (FDSN event service) says the event was deleted upstream: a feature whose
    /// `status` is `deleted`, as `includedeleted=true` returns it.
    case deletedUpstream = "deleted-upstream"
}

/// Who made a history transaction.
public enum HistoryAuthor: String, Sendable, Codable, Hashable, CaseIterable {
    /// A feed pull (or `quaked --once`).
    case `import`
    case delete
    case retention
    /// One window of a backfill job from an FDSN event service.
    case backfill
    /// One window of an incremental catalog sync (`catalog = URL`).
    case catalog
}

/// One changed quake within a history transaction.
public struct HistoryChange: Sendable, Hashable, Codable {
    public var quakeId: String
    public var kind: ChangeKind
    /// For updates, enters and leaves: the fields that changed, with old and new values.
    public var fields: [FieldChange]?
    /// For deletes: what is kept of the removed quake; for leaves, of the quake that left.
    public var tombstone: Tombstone?
    /// For deletes: why.
    public var reason: DeleteReason?
    /// For deletes with reason ``DeleteReason/superseded``: the id the event now has.
    public var supersededBy: String?
    /// For inserts and updates: the quake as it is stored now, or `nil` when a later transaction
    /// removed it.
    public var quake: FeedFeature?
}

/// One write that changed the store: an import, a delete or a retention pass.
public struct HistoryTransaction: Sendable, Hashable, Codable {
    public var token: HistoryToken
    public var author: HistoryAuthor
    /// Milliseconds since the Unix epoch.
    public var timestamp: Int64
    /// The feed URL for imports.
    public var source: String?
    public var inserted: Int
    public var updated: Int
    public var deleted: Int
    /// Filtered reads only: the enters and leaves sent.
    public var entered = 0
    public var left = 0
    public var changes: [HistoryChange]
}

/// A page of history after a token.
public struct HistoryPage: Sendable, Hashable, Codable {
    public var storeID: String
    /// Transactions after the requested token, oldest first.
    public var transactions: [HistoryTransaction]
    /// The newest token when the page was read.
    public var head: HistoryToken
    /// Whether transactions after the last one in this page exist.
    public var hasMore: Bool
    /// The token to ask after for the next page.
    public var nextAfter: HistoryToken
}

/// Why history after a token cannot be served.
public enum HistoryError: Error, Sendable, Hashable, CustomStringConvertible {
    /// History after this token has been purged. The reader must start over from a snapshot.
    case tokenExpired(after: HistoryToken, oldest: HistoryToken, head: HistoryToken)
    /// The token is newer than anything this store has written: it belongs to another store or
    /// to this store before it was restored from an older copy. The reader must start over.
    case tokenAhead(after: HistoryToken, head: HistoryToken)

    public var description: String {
        switch self {
        case .tokenExpired(let after, let oldest, let head):
            "history after token \(after) has been purged (oldest token still served: \(oldest), head: \(head)); start over from a snapshot"
        case .tokenAhead(let after, let head):
            "token \(after) is newer than this store's head \(head); it belongs to another store or an older copy of this one: start over from a snapshot"
        }
    }
}
