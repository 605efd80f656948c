import Foundation
import GRDB

/// A durable client name and the last token it acknowledged.
public struct ClientRecord: Sendable, Hashable, Codable {
    public var name: String
    public var token: HistoryToken
    /// Milliseconds since the Unix epoch.
    public var lastSeen: Int64
    /// What the client last reported it could not do, until it next acknowledges without one.
    public var lastError: String?
    public var lastErrorAt: Int64?
}

extension QuakeStore {
    /// Records that the client `name` has applied everything up to `token`. Tokens only move
    /// forward; an older acknowledgement just refreshes `lastSeen`. With `error`, the client
    /// reports what it could not do after `token` (kept until it acknowledges without one).
    public func acknowledge(client name: String, token: HistoryToken, error: String? = nil, now: Date = Date())
        async throws
    {
        let seen = Self.milliseconds(now)
        try await pool.write { db in
            try db.execute(
                sql: """
                    INSERT INTO clients (name, token, lastSeen, lastError, lastErrorAt) VALUES (?1, ?2, ?3, ?4, CASE WHEN ?4 IS NULL THEN NULL ELSE ?3 END)
                    ON CONFLICT (name) DO UPDATE SET token = max(token, excluded.token), lastSeen = excluded.lastSeen,
                        lastError = excluded.lastError, lastErrorAt = excluded.lastErrorAt
                    """,
                arguments: [name, max(0, token), seen, error])
        }
    }

    /// Every named client, by name.
    public func clients() throws -> [ClientRecord] {
        try pool.read { db in
            try Row.fetchAll(db, sql: "SELECT name, token, lastSeen, lastError, lastErrorAt FROM clients ORDER BY name")
                .map { ClientRecord(name: $0[0], token: $0[1], lastSeen: $0[2], lastError: $0[3], lastErrorAt: $0[4]) }
        }
    }

    /// The oldest token a client seen since `since` still needs, if any.
    public func oldestClientToken(seenSince since: Date) throws -> HistoryToken? {
        try pool.read { db in
            try HistoryToken.fetchOne(
                db, sql: "SELECT min(token) FROM clients WHERE lastSeen >= ?", arguments: [Self.milliseconds(since)])
        }
    }
}

extension QuakeStore {
    /// Registers a named client on sight: a new name starts at `token`; a known one only
    /// refreshes `lastSeen` (its acknowledged token is what it said last).
    public func touch(client name: String, token: HistoryToken, now: Date = Date()) async throws {
        let seen = Self.milliseconds(now)
        try await pool.write { db in
            try db.execute(
                sql: """
                    INSERT INTO clients (name, token, lastSeen) VALUES (?, ?, ?)
                    ON CONFLICT (name) DO UPDATE SET lastSeen = excluded.lastSeen
                    """,
                arguments: [name, max(0, token), seen])
        }
    }
}
