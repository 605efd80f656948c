import CSQLiteConfig
import Foundation
import GRDB
import QuakeAssociation
import QuakeFeed

/// The SQLite store: quakes, their persistent history, and the store's identity.
///
/// One file, `<state-directory>/quakes.sqlite`, in WAL mode so readers (including `sqlite3` opened
/// read-only by a user) never block the importer and never see half a write. Every write that
/// changes anything is one SQLite transaction and one history transaction with a new token.
public struct QuakeStore: Sendable {
    /// The file name inside the state directory.
    public static let fileName = "quakes.sqlite"

    /// The database file.
    public let path: String
    /// A random UUID made when the file was created. Tokens mean something only with it.
    public let storeID: String
    let pool: DatabasePool
    /// Signalled when a write through this store has committed a history transaction, so that
    /// whoever waits for commits hears of it at once; shared by every copy of this value.
    let commitSignal = CommitSignal()
    /// What the source imports share in memory (their last configuration); shared by every copy
    /// of this value.
    let sourceImportSettings = SourceImportSettings()
    /// Checkpoints the WAL after commits rather than in them; shared by every copy of this value.
    let checkpointer: WALCheckpointer

    /// Opens (creating and migrating as needed) `quakes.sqlite` in `directory`, creating the
    /// directory with mode 0750 when it is missing.
    public init(directory: URL) throws {
        try FileManager.default.createDirectory(
            at: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o750])
        try self.init(path: directory.appendingPathComponent(Self.fileName).path)
    }

    /// Opens (creating and migrating as needed) the store at `path`.
    public init(path: String) throws {
        try self.init(path: path, walCheckpointPages: WALCheckpointer.defaultThreshold)
    }

    /// The database's page size in bytes: big rows (~700 bytes) and ~100,000 of them per import
    /// want fewer, larger pages.
    static let pageSize = 16384

    /// ``init(path:)`` with the WAL checkpointed past `walCheckpointPages` pages (tests).
    init(path: String, walCheckpointPages: Int32) throws {
        _ = Self.sqliteConfigured
        let checkpointer = WALCheckpointer(threshold: walCheckpointPages)
        let commitSignal = self.commitSignal
        var configuration = Configuration()
        configuration.label = "quakes"
        configuration.busyMode = .timeout(10)
        configuration.prepareDatabase { db in
            // The writer's WAL is checkpointed beside its commits, not in them (WALCheckpointer).
            if !db.configuration.readonly {
                checkpointer.install(on: db)
                // Commits that took a history token are announced (HistoryRecorder arms it).
                db.add(transactionObserver: CommitAnnouncer(signal: commitSignal), extent: .databaseLifetime)
                // The WAL file shrinks back after a big write. SQLite reuses the file rather than
                // cut it, so one large import (a backfill, a first pull of a month) would leave it
                // at its largest for good; with a limit, the first commit after the WAL restarts
                // cuts the file to the checkpoint threshold's size (or to that commit's, if larger).
                try db.execute(sql: "PRAGMA journal_size_limit = \(Int(checkpointer.threshold) * Self.pageSize)")
            }
            // WAL + NORMAL is safe against a crash of the process (a kill -9 mid-import loses
            // only the uncommitted transaction); a power cut may lose the last commits, which
            // the next pull brings back.
            // Before the file has content (WAL mode is set after this).
            try db.execute(sql: "PRAGMA page_size = \(Self.pageSize)")
            try db.execute(sql: "PRAGMA synchronous = NORMAL")
            // 12 MB: keeps peak memory bounded (under 64 MB RSS importing 1,000,000 features)
            // while more of the time and magnitude indexes, written in random order, stay cached.
            try db.execute(sql: "PRAGMA cache_size = -12000")
        }
        let pool = try DatabasePool(path: path, configuration: configuration)
        try StoreSchema.migrator.migrate(pool)
        try checkpointer.open(path: path)
        self.pool = pool
        self.path = path
        self.checkpointer = checkpointer
        self.storeID = try pool.read { db in
            try String.fetchOne(db, sql: "SELECT storeId FROM storeInfo")!
        }
    }

    /// SQLite's process-wide settings, made once before the process opens its first connection:
    /// multi-thread mode (GRDB never uses a connection from two threads at once, so the
    /// serialized mode's mutex, taken on every SQLite call, dozens per imported feature, protects
    /// nothing) and no memory statistics (a global mutex on every allocation; nothing reads them).
    /// If the process used SQLite before, the settings stay as they were; only speed differs.
    ///
    /// SQLite's error log goes to standard error (the journal, under systemd) for the codes that
    /// say the file system or the file failed: a bare "disk I/O error" names neither the call
    /// nor errno, and the log line does ("os_unix.c:...: (12) mmap(...-shm) - ...").
    static let sqliteConfigured: Int32 = {
        let status = quaked_sqlite_configure()
        Database.logError = { code, message in
            switch code.primaryResultCode {
            case .SQLITE_IOERR, .SQLITE_CANTOPEN, .SQLITE_CORRUPT, .SQLITE_NOTADB, .SQLITE_FULL, .SQLITE_PROTOCOL:
                FileHandle.standardError.write(Data("SQLite error log: \(code.rawValue): \(message)\n".utf8))
            default:
                break
            }
        }
        return status
    }()

    /// Closes the database. Later calls fail.
    public func close() throws {
        try checkpointer.close()
        try pool.close()
    }

    // MARK: Import

    /// Imports one feed document as one write transaction.
    ///
    /// `produce` writes the document's bytes, in chunks of any size, to the sink it is given, and
    /// returns at the end of the document. The document is parsed as it arrives; it is never held
    /// whole in memory. Any failure (bad bytes, a short document, an error thrown by `produce`,
    /// cancellation, more than `maxBytes`) rolls everything back and throws ``ImportError``.
    ///
    /// Features whose event `time` is before `expiringBefore` (event retention) are left out,
    /// counted as skipped for the reason `expired`, whether stored or not: the import neither
    /// brings back a quake the retention pass deleted nor changes one it is about to delete.
    /// `feed`'s validators are written in the same transaction (see ``feedState(url:)``): they
    /// are stored exactly when the body they describe is.
    public func importFeed(
        source: String, maxBytes: Int? = nil, now: Date = Date(), expiringBefore: Date? = nil,
        feed: ImportedFeed? = nil, association: AssociationConfiguration? = nil,
        produce: @escaping @Sendable (FeedSink) async throws -> Void
    ) async throws -> ImportReport {
        try await importDocument(
            source: source, author: .import, maxBytes: maxBytes, now: now, expiringBefore: expiringBefore,
            association: association, produce: produce
        ) { db, _ in
            if let feed { try Self.recordSuccess(db, url: feed.url, validators: feed.validators, now: now) }
        }
    }

    /// ``importFeed(source:maxBytes:now:expiringBefore:feed:produce:)`` with the transaction's
    /// `author`, and `finish`, run in the import's own SQLite transaction after the document was
    /// applied (bookkeeping that must commit exactly when the import does).
    ///
    /// In association mode (see QuakeStore+UsgsSource.swift) the document is imported into the
    /// `usgs` source's reports and its changes associated with the other sources' reports under
    /// `association` (nil: the configuration this store value's last source import ran under, or
    /// the default); the report's history counts are the published rows'.
    func importDocument(
        source: String, author: HistoryAuthor, maxBytes: Int?, now: Date, expiringBefore: Date?,
        association: AssociationConfiguration? = nil,
        produce: @escaping @Sendable (FeedSink) async throws -> Void,
        finish: @escaping @Sendable (Database, ImportReport) throws -> Void
    ) async throws -> ImportReport {
        let expireBefore = expiringBefore.map { Self.milliseconds($0) } ?? .min
        let started = ContinuousClock.now
        let pipe = ChunkPipe()
        let storeID = storeID
        let commitSignal = commitSignal
        let settings = sourceImportSettings
        var report = try await withThrowingTaskGroup(of: ImportReport?.self) { group in
            group.addTask {
                // Parses the document as it arrives (QuakeFeed), for the import to apply.
                await pipe.produce(maxBytes: maxBytes, produce)
                return nil
            }
            group.addTask {
                defer { pipe.closeConsumer() }
                do {
                    let report = try await pool.write { db -> ImportReport in
                        let associated = try Self.isAssociationMode(db)
                        var feedImport = try FeedImport(
                            db: db, report: ImportReport(store: storeID, source: source), now: now,
                            expireBefore: expireBefore, author: author, commitSignal: commitSignal,
                            tables: associated ? .usgsReports : .quakes)
                        var report = try feedImport.run(pipe: pipe)
                        if associated, let collected = feedImport.recorder.collected {
                            report = try db.associateUsgsChanges(
                                collected, report: report, author: author, now: now,
                                expireBefore: expiringBefore.map { Self.milliseconds($0) },
                                association: association ?? settings.configuration
                                    ?? AssociationConfiguration(),
                                settings: settings, commitSignal: commitSignal)
                        }
                        try finish(db, report)
                        return report
                    }
                    return report
                } catch is CancellationError {
                    throw ImportError(kind: .cancelled, message: "the import was cancelled")
                } catch let error as DatabaseError where error.resultCode == .SQLITE_INTERRUPT {
                    throw ImportError(kind: .cancelled, message: "the import was cancelled")
                } catch let error as DatabaseError {
                    throw ImportError(
                        kind: .storage, message: "SQLite refused the write: \(error.message ?? "\(error)")")
                }
            }
            var report: ImportReport?
            for try await result in group {
                if let result { report = result }
            }
            return report!
        }
        report.durationMs = Int((ContinuousClock.now - started) / .milliseconds(1))
        return report
    }

    /// Imports a feed file (for `file://` feeds and tests).
    public func importFile(_ url: URL, source: String? = nil, maxBytes: Int? = nil, expiringBefore: Date? = nil)
        async throws -> ImportReport
    {
        try await importFeed(source: source ?? url.absoluteString, maxBytes: maxBytes, expiringBefore: expiringBefore) {
            sink in
            try await sink.sendFile(at: url)
        }
    }

    // MARK: Reading

    /// The newest token this store has written (0 before the first write). Survives purges.
    public func head() throws -> HistoryToken {
        try pool.read { db in try Self.head(db) }
    }

    static func head(_ db: Database) throws -> HistoryToken {
        try HistoryToken.fetchOne(db, sql: "SELECT seq FROM sqlite_sequence WHERE name = 'historyTransactions'") ?? 0
    }

    /// The oldest token history can still be served after: history after any token from this one
    /// to the head is complete.
    public func oldestToken() throws -> HistoryToken {
        try pool.read { db in try Self.purgedThrough(db) }
    }

    static func purgedThrough(_ db: Database) throws -> HistoryToken {
        try HistoryToken.fetchOne(db, sql: "SELECT purgedThrough FROM storeInfo") ?? 0
    }

    /// The number of stored quakes.
    public func count() throws -> Int {
        try pool.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM quakes") ?? 0 }
    }

    /// One quake by id.
    public func quake(id: String) throws -> FeedFeature? {
        try pool.read { db in
            try Row.fetchOne(db, sql: "SELECT \(QuakeColumns.list) FROM quakes WHERE id = ?", arguments: [id])
                .map { QuakeColumns.feature(from: $0) }
        }
    }

    /// Every stored quake, newest first (tests and small stores; paged reads come with the protocol).
    public func allQuakes() throws -> [FeedFeature] {
        try pool.read { db in
            try Row.fetchAll(db, sql: "SELECT \(QuakeColumns.list) FROM quakes ORDER BY time DESC, id")
                .map { QuakeColumns.feature(from: $0) }
        }
    }
}

extension FeedSink {
    /// Reads a file in 128 KiB chunks and sends them (`file://` feeds,
    /// ``QuakeStore/importFile(_:source:maxBytes:expiringBefore:)``).
    public func sendFile(at url: URL, chunkSize: Int = 128 * 1024) async throws {
        let path = url.path
        var fd: Int32
        repeat { fd = open(path, O_RDONLY | O_CLOEXEC) } while fd < 0 && errno == EINTR
        guard fd >= 0 else { throw FileFeedError(path: path, opening: true, code: errno) }
        defer { close(fd) }
        while true {
            try Task.checkCancellation()
            // A new buffer per chunk: the batch keeps it (its undecoded features point into it).
            var failure: Int32 = 0
            let chunk = [UInt8](unsafeUninitializedCapacity: chunkSize) { buffer, initialized in
                let count = read(fd, buffer.baseAddress, chunkSize)
                initialized = max(count, 0)
                if count < 0 { failure = errno }
            }
            if failure == EINTR { continue }
            if failure != 0 { throw FileFeedError(path: path, opening: false, code: failure) }
            if chunk.isEmpty { return }
            try await send(chunk)
        }
    }
}

/// A `file://` feed that cannot be opened or read: the path, the system's reason and what to
/// check, in place of Foundation's error domain and user-info dump.
public struct FileFeedError: Error, CustomStringConvertible {
    public let path: String
    /// Whether opening failed (else a read did).
    public let opening: Bool
    public let code: Int32

    public var description: String {
        let reason = String(cString: strerror(code))
        let remedy =
            switch code {
            case ENOENT, ENOTDIR: "check the path in the feed's file:// URL"
            case EACCES, EPERM:
                "check that quaked's user may read it (under systemd, that the path is not hidden from the service)"
            case EISDIR: "a file:// feed names a file, not a directory"
            default: "check the file and the disk it is on"
            }
        return "cannot \(opening ? "open" : "read") \(path): \(reason) (\(remedy))"
    }
}
