import QuakeFeed
import QuakeVarlink

/// The parameters and replies of the io.quaked interface as quakectl reads them.
///
/// `io.quaked.varlink` is the source of truth; these types follow its names field by field. A
/// stored quake is the feed model (`FeedFeature`), whose Codable form is the interface's `Quake`.
/// Times are milliseconds since the Unix epoch.
public enum QuakedAPI {
    public typealias Quake = FeedFeature

    /// Error names of io.quaked.
    public enum Errors {
        public static let tokenExpired = "io.quaked.TokenExpired"
        public static let tokenAhead = "io.quaked.TokenAhead"
        public static let storeMismatch = "io.quaked.StoreMismatch"
        public static let noSuchQuake = "io.quaked.NoSuchQuake"
        public static let noSuchFeed = "io.quaked.NoSuchFeed"
        public static let reloadFailed = "io.quaked.ReloadFailed"
        public static let messageTooLarge = "io.quaked.MessageTooLarge"
        public static let messageTimeout = "io.quaked.MessageTimeout"
        public static let tooManyConnections = "io.quaked.TooManyConnections"
    }

    public struct Empty: Codable, Sendable {
        public init() {}
    }

    // MARK: GetStatus

    public struct Status: Codable, Sendable {
        public var version: String
        public var storeId: String
        public var headToken: Int64
        public var oldestToken: Int64
        public var quakeCount: Int
        public var databaseBytes: Int
        public var lastChange: Int64?
        public var feeds: [FeedStatus]
        /// Optional here only so that a daemon that does not send it yet still decodes.
        public var subscribers: Int?
        public var clients: [ClientStatus]?
    }

    public struct FeedStatus: Codable, Sendable {
        public var name: String
        public var url: String
        public var lastAttempt: Int64?
        public var lastSuccess: Int64?
        public var lastResult: String?
        public var httpStatus: Int?
        public var durationMs: Int?
        public var lastError: String?
        public var consecutiveFailures: Int
        public var nextPull: Int64?
        public var lastImport: ImportCounts?
    }

    public struct ImportCounts: Codable, Sendable {
        public var inserted: Int
        public var updated: Int
        public var unchanged: Int
        public var stale: Int
        public var superseded: Int
        public var skipped: Int
        public var bytes: Int
        public var durationMs: Int
        public var token: Int64?
    }

    public struct ClientStatus: Codable, Sendable {
        public var name: String
        public var token: Int64
        public var lag: Int64
        public var lastSeen: Int64
    }

    // MARK: Refresh

    public struct RefreshParameters: Codable, Sendable {
        public var feed: String?
    }

    public struct RefreshReply: Codable, Sendable {
        public var results: [RefreshResult]
        public var headToken: Int64
    }

    public struct RefreshResult: Codable, Sendable {
        public var feed: String
        /// imported, not-modified or failed
        public var result: String
        public var counts: ImportCounts?
        public var error: String?
    }

    // MARK: Subscribe and history

    public struct SubscribeParameters: Codable, Sendable {
        public var client: String?
        public var heartbeatSeconds: Int?
    }

    public struct SubscribeEvent: Codable, Sendable {
        /// subscribed, changed or heartbeat
        public var event: String
        public var storeId: String
        public var headToken: Int64
        public var author: String?
    }

    public struct FetchHistoryParameters: Codable, Sendable {
        public var storeId: String?
        public var after: Int64
        public var limit: Int?
        public var maxChanges: Int?
        public var client: String?
    }

    public struct HistoryPage: Codable, Sendable {
        public var storeId: String
        public var headToken: Int64
        public var oldestToken: Int64
        public var transactions: [Transaction]
        public var hasMore: Bool
        public var nextAfter: Int64
    }

    public struct Transaction: Codable, Sendable, Hashable {
        public var token: Int64
        /// import, delete or retention
        public var author: String
        public var timestamp: Int64
        public var source: String?
        public var inserted: Int
        public var updated: Int
        public var deleted: Int
        public var changes: [Change]
    }

    public struct Change: Codable, Sendable, Hashable {
        public var quakeId: String
        /// insert, update or delete
        public var kind: String
        public var fields: [FieldChange]?
        public var tombstone: Tombstone?
        /// superseded, expired or deleted-by-user
        public var reason: String?
        public var supersededBy: String?
        public var quake: Quake?
    }

    public struct FieldChange: Codable, Sendable, Hashable {
        public var field: String
        public var old: JSONValue?
        public var new: JSONValue?
    }

    public struct Tombstone: Codable, Sendable, Hashable {
        public var id: String
        public var code: String?
        public var mag: Double?
        public var place: String?
        public var time: Int64
    }

    public struct AcknowledgeParameters: Codable, Sendable {
        public var client: String
        public var token: Int64
    }

    // MARK: Snapshot, Query, Get, Delete

    public struct SnapshotParameters: Codable, Sendable {
        public var pageSize: Int?
    }

    public struct SnapshotPage: Codable, Sendable {
        public var storeId: String
        public var token: Int64
        public var quakes: [Quake]
    }

    public struct Near: Codable, Sendable, Hashable {
        public var lat: Double
        public var lon: Double
        public var radiusKm: Double
    }

    public struct QueryParameters: Codable, Sendable {
        public var minMagnitude: Double?
        public var since: Int64?
        public var type: String?
        public var near: Near?
        public var limit: Int?
        /// time (newest first) or magnitude (largest first)
        public var order: String?
    }

    public struct QueryReply: Codable, Sendable {
        public var quakes: [Quake]
        public var total: Int
        public var headToken: Int64
    }

    public struct GetParameters: Codable, Sendable {
        public var id: String
    }

    public struct GetReply: Codable, Sendable {
        public var quake: Quake
    }

    public struct DeleteParameters: Codable, Sendable {
        public var ids: [String]
    }

    public struct DeleteReply: Codable, Sendable {
        public var token: Int64?
        public var deleted: [String]
        public var notFound: [String]
    }
}
