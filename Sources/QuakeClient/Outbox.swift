import Foundation
import GRDB
import NIOConcurrencyHelpers
import QuakeProtocol
import Varlink
import QuakeModel

/// One change waiting in the cache's outbox for `watch --exec` to run its command on it
/// (`--batch`, `--quiet-hours`).
///
/// A change is queued in the SQLite transaction that applies it to the cache, and leaves the
/// outbox only after the command that got it exited 0. So a change applied to the cache is
/// either delivered or still queued, across any stop or crash of quakectl; a crash between a
/// successful run and its removal runs it again (at least once).
public struct OutboxEntry: Sendable, Hashable {
    /// Its place in the queue (0 before it is queued).
    public var seq: Int64 = 0
    public var storeId: String
    public var token: Int
    /// When it was queued, by the watch's clock (ms since the epoch): a batch window opens then.
    public var queuedAt: Int64
    /// Queued during quiet hours below the override magnitude: it waits for the digest.
    public var held: Bool
    /// The quake's magnitude as the change leaves it (what the quiet-hours override compares).
    public var mag: Double?
    /// The change as `watch --json` prints it: one JSON object, no newline.
    public var line: String
    /// The command's environment when the change is delivered on its own (`QUAKE_*`).
    public var environment: [String: String]

    public init(
        seq: Int64 = 0, storeId: String, token: Int, queuedAt: Int64, held: Bool, mag: Double?, line: String,
        environment: [String: String]
    ) {
        self.seq = seq
        self.storeId = storeId
        self.token = token
        self.queuedAt = queuedAt
        self.held = held
        self.mag = mag
        self.line = line
        self.environment = environment
    }
}

extension QuakeCache {
    static func enqueue(_ db: Database, _ entries: [OutboxEntry]) throws {
        guard !entries.isEmpty else { return }
        let insert = try db.cachedStatement(
            sql: """
                INSERT INTO outbox (storeId, token, queuedAt, held, mag, line, environment)
                VALUES (?, ?, ?, ?, ?, ?, ?)
                """)
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        for entry in entries {
            let environment = String(decoding: try encoder.encode(entry.environment), as: UTF8.self)
            try insert.execute(arguments: [
                entry.storeId, entry.token, entry.queuedAt, entry.held, entry.mag, entry.line, environment,
            ])
        }
    }

    /// The queued changes, oldest first.
    public func outbox() throws -> [OutboxEntry] {
        let decoder = JSONDecoder()
        return try writer.read { db in
            try Row.fetchAll(
                db, sql: "SELECT seq, storeId, token, queuedAt, held, mag, line, environment FROM outbox ORDER BY seq"
            ).map { row in
                let environment: String = row["environment"]
                return OutboxEntry(
                    seq: row["seq"], storeId: row["storeId"], token: row["token"], queuedAt: row["queuedAt"],
                    held: row["held"], mag: row["mag"], line: row["line"],
                    environment: try decoder.decode([String: String].self, from: Data(environment.utf8)))
            }
        }
    }

    public func outboxCount() throws -> Int {
        try writer.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM outbox") ?? 0 }
    }

    /// Removes delivered changes (their command exited 0), in one transaction.
    public func removeFromOutbox(_ entries: [OutboxEntry]) throws {
        try writer.write { db in
            let delete = try db.cachedStatement(sql: "DELETE FROM outbox WHERE seq = ?")
            for entry in entries { try delete.execute(arguments: [entry.seq]) }
        }
    }

    /// The delivery position: the token of the cache's store through which every change queued
    /// for the command has been delivered. It stays before the oldest change still queued, so it
    /// never passes an undelivered batch or digest; with nothing queued it is the cache's token.
    /// Nil for a cache never filled.
    public func deliveryPosition() throws -> Int? {
        try writer.read { db in
            try Row.fetchOne(
                db,
                sql: """
                    SELECT token, (SELECT min(token) FROM outbox WHERE outbox.storeId = position.storeId) AS pending
                    FROM position
                    """
            ).map { row in
                let token: Int = row["token"]
                let pending: Int? = row["pending"]
                return pending.map { min(token, $0 - 1) } ?? token
            }
        }
    }
}

/// `--quiet-hours 22:00-07:00`: a daily span of local time (it wraps past midnight when the end
/// comes first). The start minute is in, the end minute is out.
public struct QuietHours: Sendable, Hashable, CustomStringConvertible {
    /// Minutes after midnight.
    public var start: Int
    public var end: Int

    public init(start: Int, end: Int) {
        self.start = start
        self.end = end
    }

    /// `HH:MM-HH:MM`, 24-hour; nil when malformed or empty (start equal to end).
    public init?(parsing text: String) {
        let parts = text.split(separator: "-", omittingEmptySubsequences: false)
        guard parts.count == 2, let start = Self.minutes(parts[0]), let end = Self.minutes(parts[1]), start != end
        else { return nil }
        self.init(start: start, end: end)
    }

    private static func minutes(_ text: Substring) -> Int? {
        let parts = text.trimmingCharacters(in: .whitespaces).split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count == 2, (1...2).contains(parts[0].count), parts[1].count == 2,
            parts.allSatisfy({ $0.allSatisfy(\.isASCII) }),
            let hour = Int(parts[0]), let minute = Int(parts[1]), (0..<24).contains(hour), (0..<60).contains(minute)
        else { return nil }
        return hour * 60 + minute
    }

    public var description: String {
        func text(_ minutes: Int) -> String {
            String(format: "%02d:%02d", minutes / 60, minutes % 60)
        }
        return "\(text(start))-\(text(end))"
    }

    private static func calendar(_ zone: TimeZone) -> Calendar {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = zone
        return calendar
    }

    /// Whether the instant (ms since the epoch) falls in quiet hours, by the clock of `zone`.
    public func contains(_ milliseconds: Int64, in zone: TimeZone) -> Bool {
        let date = Date(timeIntervalSince1970: Double(Self.floorSeconds(milliseconds)))
        let parts = Self.calendar(zone).dateComponents([.hour, .minute], from: date)
        let minute = (parts.hour ?? 0) * 60 + (parts.minute ?? 0)
        return start < end ? (start..<end).contains(minute) : (minute >= start || minute < end)
    }

    /// The first instant after `milliseconds` at which quiet hours end (the end time, in `zone`).
    public func end(after milliseconds: Int64, in zone: TimeZone) -> Int64 {
        let date = Date(timeIntervalSince1970: Double(Self.floorSeconds(milliseconds)))
        let next = Self.calendar(zone).nextDate(
            after: date, matching: DateComponents(hour: end / 60, minute: end % 60, second: 0),
            matchingPolicy: .nextTime)
        // Always found for an hour and minute; a day later is the safe answer otherwise.
        return next.map { QuakeTime.milliseconds($0) } ?? milliseconds + 86_400_000
    }

    private static func floorSeconds(_ milliseconds: Int64) -> Int64 {
        milliseconds >= 0 ? milliseconds / 1000 : (milliseconds - 999) / 1000
    }
}

/// When `watch --exec` runs its command on queued changes: `--batch`, `--quiet-hours`,
/// `--quiet-min-mag`, in the zone of `--tz`.
public struct OutboxPlan: Sendable, Hashable {
    /// `--batch`: a window opens when a change is queued with none ready before it; when it has
    /// lasted this long, every ready change runs the command once, as one JSON array.
    public var batchMilliseconds: Int64?
    public var quietHours: QuietHours?
    /// `--quiet-min-mag`: quakes at or above it are not held in quiet hours.
    public var quietMinMagnitude: Double?
    public var timeZone: TimeZone

    public init(
        batchMilliseconds: Int64? = nil, quietHours: QuietHours? = nil, quietMinMagnitude: Double? = nil,
        timeZone: TimeZone = .current
    ) {
        self.batchMilliseconds = batchMilliseconds
        self.quietHours = quietHours
        self.quietMinMagnitude = quietMinMagnitude
        self.timeZone = timeZone
    }

    /// How a run gets its changes: alone (one JSON object on stdin, `QUAKE_*` set), or a batch
    /// or the digest at the end of quiet hours (a JSON array).
    public enum Kind: String, Sendable {
        case change, batch, digest
    }

    public struct Delivery: Sendable, Hashable {
        public var kind: Kind
        public var entries: [OutboxEntry]

        public init(kind: Kind, entries: [OutboxEntry]) {
            self.kind = kind
            self.entries = entries
        }
    }

    public enum Decision: Sendable, Hashable {
        /// Run the command on these now.
        case deliver(Delivery)
        /// Nothing is due; look again at this instant (nil: only when something is queued).
        case wait(until: Int64?)
    }

    /// Whether a change queued at `now` waits for the quiet-hours digest: in quiet hours, unless
    /// its magnitude reaches `--quiet-min-mag`.
    public func holds(magnitude: Double?, at now: Int64) -> Bool {
        guard let quietHours, quietHours.contains(now, in: timeZone) else { return false }
        if let minimum = quietMinMagnitude, let magnitude, magnitude >= minimum { return false }
        return true
    }

    /// What to run at `now`, given the queue (oldest first):
    /// - outside quiet hours, with changes held: the digest, every queued change at once;
    /// - else, of the changes not held: with `--batch`, all of them once the oldest has waited
    ///   the window; without, the oldest alone.
    public func decide(_ pending: [OutboxEntry], now: Int64) -> Decision {
        guard !pending.isEmpty else { return .wait(until: nil) }
        let held = pending.contains(where: \.held)
        let quietNow = quietHours?.contains(now, in: timeZone) ?? false
        if held, !quietNow { return .deliver(Delivery(kind: .digest, entries: pending)) }
        let quietEnd = held ? quietHours?.end(after: now, in: timeZone) : nil
        let ready = pending.filter { !$0.held }
        guard let oldest = ready.first else { return .wait(until: quietEnd) }
        guard let batch = batchMilliseconds else { return .deliver(Delivery(kind: .change, entries: [oldest])) }
        let due = oldest.queuedAt + batch
        if now >= due { return .deliver(Delivery(kind: .batch, entries: ready)) }
        return .wait(until: quietEnd.map { min($0, due) } ?? due)
    }
}

/// The watch's wall clock for batches and quiet hours. `QUAKECTL_CLOCK_FILE` (for tests) names a
/// file holding the time in milliseconds since the epoch, read each time.
public struct DeliveryClock: Sendable {
    private let file: String?
    private let last: NIOLockedValueBox<Int64>

    public static var system: DeliveryClock { DeliveryClock(file: nil, last: 0) }

    private init(file: String?, last: Int64) {
        self.file = file
        self.last = NIOLockedValueBox(last)
    }

    /// The system clock, or the file `QUAKECTL_CLOCK_FILE` names (which must hold a time).
    public static func fromEnvironment(_ environment: [String: String] = ProcessInfo.processInfo.environment)
        throws -> DeliveryClock
    {
        guard let path = environment["QUAKECTL_CLOCK_FILE"], !path.isEmpty else { return .system }
        guard let now = read(path) else {
            throw ClockError(
                description: "QUAKECTL_CLOCK_FILE=\(path): cannot read a time in milliseconds since the epoch from it")
        }
        return DeliveryClock(file: path, last: now)
    }

    public struct ClockError: Error, CustomStringConvertible {
        public var description: String
    }

    private static func read(_ path: String) -> Int64? {
        guard let data = FileManager.default.contents(atPath: path) else { return nil }
        return Int64(String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines))
    }

    /// Now, in milliseconds since the epoch. A file clock that cannot be read keeps its last time.
    public func now() -> Int64 {
        guard let file else { return QuakeTime.now() }
        if let now = Self.read(file) {
            last.withLockedValue { $0 = now }
            return now
        }
        return last.withLockedValue { $0 }
    }

    /// How long to wait before looking again, for something due at `until`: never more than a
    /// second (the wall clock may jump), and only a moment for a file clock, which tests move.
    func pause(until: Int64?) -> Duration {
        if file != nil { return .milliseconds(20) }
        guard let until else { return .seconds(1) }
        return .milliseconds(max(1, min(1000, until - now())))
    }
}

/// Runs `watch --exec`'s command on the outbox's changes as the ``OutboxPlan`` says, removing
/// each delivery from the outbox once the command exited 0.
public struct OutboxDispatcher: Sendable {
    public let cache: QuakeCache
    public let plan: OutboxPlan
    public let clock: DeliveryClock

    /// Runs the command on a delivery until it exits 0; throws (CancellationError on a stop) to
    /// leave it queued.
    public typealias Run = @Sendable (OutboxPlan.Delivery) async throws -> Void

    public init(cache: QuakeCache, plan: OutboxPlan, clock: DeliveryClock) {
        self.cache = cache
        self.plan = plan
        self.clock = clock
    }

    /// One decision at the clock's now: runs what is due and removes it from the outbox.
    /// Returns the delivery made, or nil when nothing was due (`wait` says until when).
    public func step(_ run: @escaping Run) async throws -> (delivered: OutboxPlan.Delivery?, wait: Int64?) {
        switch plan.decide(try cache.outbox(), now: clock.now()) {
        case .wait(let until):
            return (nil, until)
        case .deliver(let delivery):
            let cache = cache
            // Unstructured on purpose: cancelling the watch does not reach into a run, which
            // finishes (or is stopped by a stop request, leaving the delivery queued).
            let task = Task {
                try await run(delivery)
                try cache.removeFromOutbox(delivery.entries)
            }
            try await task.value
            return (delivery, nil)
        }
    }

    /// Delivers until `stopped` says so or the task is cancelled; a stop during a run's retries
    /// leaves that delivery queued for the next run of the watch. With `untilEmpty`, returns once
    /// nothing is queued (what an earlier `--batch` or `--quiet-hours` run left).
    public func run(wakeup: Wakeup, untilEmpty: Bool = false, stopped: @Sendable () -> Bool, _ run: @escaping Run)
        async throws
    {
        while !stopped(), !Task.isCancelled {
            let result: (delivered: OutboxPlan.Delivery?, wait: Int64?)
            do {
                result = try await step(run)
            } catch is CancellationError {
                return
            }
            if result.delivered != nil { continue }
            if untilEmpty, try cache.outboxCount() == 0 { return }
            await wakeup.wait(upTo: clock.pause(until: result.wait))
        }
    }
}
