import QuakeProtocol

/// What a watch needs to resume from a cache: the store its rows come from, the token they are
/// as of, and the filter they were selected with.
public struct WatchPosition: Sendable, Hashable {
    public var storeId: String
    public var token: Int
    /// The filter's identity (``QuakeProtocol/IOQuaked/Filter/key``), nil for every quake.
    public var filter: String?

    public init(storeId: String, token: Int, filter: String?) {
        self.storeId = storeId
        self.token = token
        self.filter = filter
    }
}

/// Where a ``Watcher`` keeps its copy of the store: the rows and the position they are as of.
///
/// The Watcher owns the exactly-once logic (when to reset, which transactions follow, delivery
/// before commit); a cache only has to keep each step atomic:
/// - ``apply(_:storeId:)`` changes the rows and moves the position in one transaction,
///   and changes nothing when the position is not one the transaction follows;
/// - a reset (``beginReset()``, ``stage(_:)`` pages, ``finishReset(storeId:token:filter:)``)
///   replaces every row and sets the position at once, so that until it finishes the old rows
///   stay whole (and readers never see a half-filled cache);
/// - the position never runs ahead of the rows.
///
/// ``QuakeCache`` (SQLite, `quakectl watch`) and the PostgreSQL sink (`quakectl sync`) are the two.
public protocol WatchCache: Sendable {
    /// The store and token the rows are as of; nil for a cache never filled.
    func position() async throws -> WatchPosition?
    /// The rows, as they are now, of the updates and leaves in `transaction` that carry no quake;
    /// nil when the cache is not at a position this transaction follows (see ``QuakeCache/prepare(_:storeId:)``).
    func prepare(_ transaction: IOQuaked.Transaction, storeId: String) async throws -> [String: IOQuaked.Quake]?
    /// Applies one transaction and moves the position to its token, atomically; false, changing
    /// nothing, when the cache is not at a position it follows.
    @discardableResult
    func apply(_ transaction: IOQuaked.Transaction, storeId: String) async throws -> Bool
    /// Moves the position on past transactions a filter left out (nothing in them to apply).
    func advance(storeId: String, to token: Int) async throws
    /// Starts replacing the rows by a snapshot.
    func beginReset() async throws
    /// Adds one snapshot page.
    func stage(_ quakes: [IOQuaked.Quake]) async throws
    /// Replaces the rows by the staged snapshot and sets the position, at once; returns the count.
    @discardableResult
    func finishReset(storeId: String, token: Int, filter: String?) async throws -> Int
    /// A reset that will not finish (the snapshot failed): the rows stay as they were.
    func abandonReset() async
    /// The `count` newest quakes, oldest of them first.
    func newest(_ count: Int) async throws -> [IOQuaked.Quake]
}

/// A cache that cannot be used right now (a database that went away, refused a login or holds a
/// table of the wrong shape), or at all (``isPermanent``: a setting only its owner can change).
/// The Watcher reports it once (``WatchEvent/cacheUnavailable(reason:)``) and retries with
/// backoff; a permanent one ends the watch.
public protocol WatchCacheError: Error, CustomStringConvertible {
    var isPermanent: Bool { get }
}

extension QuakeCache: WatchCache {
    public func abandonReset() async {
        // The staging table is emptied by the next beginReset; the rows were never touched.
    }
}
