import Foundation
import GRDB
import QuakeModel

/// What a server said about the body it sent, for a conditional request next time.
public struct FeedValidators: Sendable, Hashable, Codable {
    public var lastModified: String?
    public var etag: String?

    public init(lastModified: String? = nil, etag: String? = nil) {
        self.lastModified = lastModified
        self.etag = etag
    }

    public var isEmpty: Bool { lastModified == nil && etag == nil }
}

/// The feed a document was pulled from and the validators of its body: written by
/// ``QuakeStore/importFeed(source:maxBytes:now:expiringBefore:feed:produce:)`` in the import's
/// own transaction.
public struct ImportedFeed: Sendable, Hashable {
    /// The feed's URL, the key of its state.
    public var url: String
    public var validators: FeedValidators

    public init(url: String, validators: FeedValidators) {
        self.url = url
        self.validators = validators
    }
}

/// What the store keeps of one feed's pulls across restarts (table `feedState`).
public struct FeedState: Sendable, Hashable {
    /// The validators of the body last imported (or confirmed by a 304).
    public var validators = FeedValidators()
    /// Failed pulls in a row; 0 after a success.
    public var consecutiveFailures = 0
    /// No scheduled pull before this: the backoff after a failure, or the server's `Retry-After`.
    /// Nil after a success.
    public var nextAttempt: Date?

    public init(validators: FeedValidators = FeedValidators(), consecutiveFailures: Int = 0, nextAttempt: Date? = nil) {
        self.validators = validators
        self.consecutiveFailures = consecutiveFailures
        self.nextAttempt = nextAttempt
    }
}

extension QuakeStore {
    /// The state kept for the feed at `url`, or nil when none was written.
    public func feedState(url: String) throws -> FeedState? {
        try pool.read { db in
            guard
                let row = try Row.fetchOne(
                    db,
                    sql: "SELECT etag, lastModified, consecutiveFailures, nextAttempt FROM feedState WHERE url = ?",
                    arguments: [url])
            else { return nil }
            let nextAttempt: Int64? = row["nextAttempt"]
            return FeedState(
                validators: FeedValidators(lastModified: row["lastModified"], etag: row["etag"]),
                consecutiveFailures: row["consecutiveFailures"],
                nextAttempt: nextAttempt.map { QuakeTime.date($0) })
        }
    }

    /// A pull answered 304 Not Modified: keeps `validators` (the 304's, or the ones sent) and
    /// clears the backoff.
    public func recordNotModified(url: String, validators: FeedValidators, now: Date = Date()) async throws {
        try await pool.write { db in
            try Self.recordSuccess(db, url: url, validators: validators, now: now)
        }
    }

    /// A pull failed: the failures in a row and the earliest next attempt. The validators stay.
    public func recordPullFailure(url: String, consecutiveFailures: Int, nextAttempt: Date?, now: Date = Date())
        async throws
    {
        try await pool.write { db in
            try db.execute(
                sql: """
                    INSERT INTO feedState (url, consecutiveFailures, nextAttempt, updatedAt) VALUES (?, ?, ?, ?)
                    ON CONFLICT (url) DO UPDATE SET consecutiveFailures = excluded.consecutiveFailures,
                        nextAttempt = excluded.nextAttempt, updatedAt = excluded.updatedAt
                    """,
                arguments: [
                    url, max(consecutiveFailures, 0), nextAttempt.map { Self.milliseconds($0) }, Self.milliseconds(now),
                ])
        }
    }

    /// Writes a successful pull's validators and clears the backoff, inside the caller's transaction.
    static func recordSuccess(_ db: Database, url: String, validators: FeedValidators, now: Date) throws {
        try db.execute(
            sql: """
                INSERT INTO feedState (url, etag, lastModified, consecutiveFailures, nextAttempt, updatedAt)
                VALUES (?, ?, ?, 0, NULL, ?)
                ON CONFLICT (url) DO UPDATE SET etag = excluded.etag, lastModified = excluded.lastModified,
                    consecutiveFailures = 0, nextAttempt = NULL, updatedAt = excluded.updatedAt
                -- a pull that changes nothing writes nothing (no WAL frame every interval)
                WHERE etag IS NOT excluded.etag OR lastModified IS NOT excluded.lastModified
                    OR consecutiveFailures <> 0 OR nextAttempt IS NOT NULL
                """,
            arguments: [url, validators.etag, validators.lastModified, milliseconds(now)])
    }
}
