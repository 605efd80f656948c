import Foundation
import GRDB

/// One announcement of ``QuakeStore/commits(after:pollInterval:)``: the store's head moved.
public struct StoreCommit: Sendable, Hashable {
    /// The newest committed token when the store was looked at. Commits in between are not
    /// announced one by one: read them with ``QuakeStore/history(after:limit:maxChanges:)``.
    public var token: HistoryToken
    /// Who wrote the transaction `token`, or `nil` when it has no history row any more (history
    /// was purged through it, or it was a write whose changes cancelled out, which still uses up
    /// its token).
    public var author: HistoryAuthor?
    /// When this process committed it (the moment the commit was signalled), for measuring how
    /// long announcing it takes; nil for a commit noticed on the file (another process's). A
    /// measurement, not part of the commit: equality and hashing leave it out.
    public var committedAt: ContinuousClock.Instant?

    public init(token: HistoryToken, author: HistoryAuthor?, committedAt: ContinuousClock.Instant? = nil) {
        self.token = token
        self.author = author
        self.committedAt = committedAt
    }

    public static func == (lhs: StoreCommit, rhs: StoreCommit) -> Bool {
        lhs.token == rhs.token && lhs.author == rhs.author
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(token)
        hasher.combine(author)
    }
}

extension QuakeStore {
    /// The store's commits as they happen, so a reader (a watching client, a cache) can wait for
    /// new history instead of asking for it on a timer.
    ///
    /// Each element is the head as read after a change: it is committed, and it is greater than
    /// every token the iterator yielded before. Several commits between two looks at the store
    /// give one element, the newest; its `author` is that of the newest transaction.
    ///
    /// Where it starts:
    /// - `after` is `nil`: the first call to `next()` reads the head and yields nothing for it;
    ///   elements are heads greater than that one. A commit that is visible by then (even one
    ///   made after `commits()` was called) is part of that starting head and not announced.
    /// - `after` is a token: elements are heads greater than it, so the first `next()` returns at
    ///   once when the head is already past it. A reader that has applied history through `after`
    ///   misses nothing between reading it and subscribing.
    ///
    /// How commits are noticed:
    /// - Writes through this store (any copy of this `QuakeStore` value) wake the iterator as
    ///   soon as their transaction has committed, whatever `pollInterval` is. The writer reads
    ///   the head and its author right after its commit and the wake-up carries them, so such a
    ///   commit is announced without reading the store again.
    /// - Writes by another process, or by another `QuakeStore` opened on the same file, are
    ///   noticed by looking at the database file and its WAL (`stat`: size, modification time,
    ///   inode) every `pollInterval`; the head is read only when they changed, or changed less
    ///   than 2 seconds before the last look (a modification time is only as fine as the file
    ///   system's clock, so a file that changed that recently could change again unnoticed).
    ///
    /// Iteration ends, returning `nil`, when the iterating task is cancelled: at once when it is
    /// waiting, otherwise after the read under way. It throws when reading the store fails (for
    /// example after ``close()``).
    public func commits(after token: HistoryToken? = nil, pollInterval: Duration = .milliseconds(250))
        -> StoreCommits
    {
        StoreCommits(store: self, after: token, pollInterval: max(pollInterval, .milliseconds(1)))
    }

    /// The head and the author of its transaction, in one read.
    func newestCommit() async throws -> StoreCommit {
        try await pool.read { db in try Self.newestCommit(db) }
    }

    static func newestCommit(_ db: Database) throws -> StoreCommit {
        let head = try Self.head(db)
        let author = try String.fetchOne(
            db.cachedStatement(sql: "SELECT author FROM historyTransactions WHERE token = ?"), arguments: [head])
        return StoreCommit(token: head, author: author.flatMap(HistoryAuthor.init(rawValue:)))
    }

    /// The head, read by the writer right after its commit for the commit signal to carry; nil if
    /// the read fails (the signal then only wakes, and the woken read the store themselves).
    static func committed(_ db: Database) -> StoreCommit? {
        try? newestCommit(db)
    }
}

/// The commits of a store; see ``QuakeStore/commits(after:pollInterval:)``.
///
/// Each iterator keeps its own position: two iterators see the same commits independently.
public struct StoreCommits: AsyncSequence, Sendable {
    public typealias Element = StoreCommit
    public typealias Failure = any Error

    let store: QuakeStore
    let after: HistoryToken?
    let pollInterval: Duration

    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(store: store, last: after, pollInterval: pollInterval)
    }

    public struct AsyncIterator: AsyncIteratorProtocol {
        public typealias Element = StoreCommit
        public typealias Failure = any Error

        /// How long after a file's last change its stamp is not trusted (see `StoreFiles`).
        static let settleTime: TimeInterval = 2

        private let store: QuakeStore
        private let pollInterval: Duration
        /// The last token yielded, or where to start; `nil` until the first `next()` reads the head.
        private var last: HistoryToken?
        /// The signal's generation and the files as they were just before the last read of the
        /// head: a commit after that read changes at least one of them.
        private var generation: UInt64 = 0
        private var files: StoreFiles?
        /// The files had changed very recently at the last read: read again at the next look.
        private var unsettled = false
        /// How many times the head was read (tests check that looks at an idle store are cheap).
        private(set) var headReads = 0

        init(store: QuakeStore, last: HistoryToken?, pollInterval: Duration) {
            self.store = store
            self.last = last
            self.pollInterval = pollInterval
        }

        public mutating func next() async throws -> StoreCommit? {
            try await next(isolation: nil)
        }

        public mutating func next(isolation actor: isolated (any Actor)? = #isolation) async throws -> StoreCommit? {
            let signal = store.commitSignal
            while !Task.isCancelled {
                // The very first look reads the head at once; later ones wait for a commit of
                // this process or the next poll.
                if files != nil {
                    await signal.wait(past: generation, until: .now + pollInterval)
                    if Task.isCancelled { break }
                }
                let (generationNow, signalledAt, carried) = signal.lastSignal
                // A commit of this process, carried by its signal: announced without reading
                // the store. The files' stamp is left as it was before the commit, so the next
                // look reads the head once and finds any other process's commit since.
                if files != nil, generationNow != generation, let last, let carried, carried.token > last {
                    generation = generationNow
                    self.last = carried.token
                    return carried
                }
                let filesNow = StoreFiles(path: store.path)
                let signalled = files != nil && generationNow != generation
                let changed = files == nil || unsettled || generationNow != generation || filesNow != files
                generation = generationNow
                files = filesNow
                guard changed else { continue }
                unsettled = filesNow.changed(within: Self.settleTime, of: Date())
                var newest: StoreCommit
                headReads += 1
                do {
                    newest = try await store.newestCommit()
                } catch {
                    // GRDB ends a read of a cancelled task with CancellationError.
                    if Task.isCancelled { break }
                    throw error
                }
                guard let previous = last else {
                    last = newest.token
                    continue
                }
                if newest.token > previous {
                    last = newest.token
                    if signalled { newest.committedAt = signalledAt }
                    return newest
                }
            }
            return nil
        }
    }
}

/// What `stat` says about a database file and its WAL. A commit by any connection writes the WAL
/// (or, with another journal mode, the database file), which changes its size or modification
/// time, so an unchanged stamp means no commit, and costs no database read, with one exception:
/// modification times have the file system's clock granularity (and the WAL keeps its size once
/// SQLite starts overwriting it from the start), so a change right after the stamp was taken may
/// leave it as it was; and a look may fall between a writer's WAL write and the moment its commit
/// becomes visible to readers. So a stamp with a file changed within the last seconds is not
/// trusted: the next look reads the head even if the stamp is the same.
struct StoreFiles: Equatable {
    struct File: Equatable {
        var device: UInt64
        var inode: UInt64
        var size: Int64
        var modifiedSeconds: Int
        var modifiedNanoseconds: Int

        init?(path: String) {
            var info = stat()
            guard stat(path, &info) == 0 else { return nil }
            device = UInt64(info.st_dev)
            inode = UInt64(info.st_ino)
            size = Int64(info.st_size)
            #if canImport(Darwin)
                modifiedSeconds = Int(info.st_mtimespec.tv_sec)
                modifiedNanoseconds = Int(info.st_mtimespec.tv_nsec)
            #else
                modifiedSeconds = Int(info.st_mtim.tv_sec)
                modifiedNanoseconds = Int(info.st_mtim.tv_nsec)
            #endif
        }

        var modified: TimeInterval {
            TimeInterval(modifiedSeconds) + TimeInterval(modifiedNanoseconds) / 1e9
        }
    }

    /// `nil` for a missing file.
    var database: File?
    var wal: File?

    init(path: String) {
        database = File(path: path)
        wal = File(path: path + "-wal")
    }

    /// Whether a file was modified less than `interval` before `now` (or after it).
    func changed(within interval: TimeInterval, of now: Date) -> Bool {
        let limit = now.timeIntervalSince1970 - interval
        return [database, wal].contains { file in file.map { $0.modified > limit } ?? false }
    }
}
