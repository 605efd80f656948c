import GRDB
import GRDBSQLite
import NIOConcurrencyHelpers

/// Checkpoints the store's WAL beside the writes, never inside one.
///
/// SQLite's own autocheckpoint runs in the commit that takes the WAL past 1,000 pages: that
/// COMMIT returns only once the WAL has been copied into the database file and synced (some
/// 10 ms at quaked's 16 KiB pages), so the write, and the announcement of its commit
/// (``CommitSignal``, then every subscriber's `changed`), waited for it. One commit in every
/// few dozen was that late: the fan-out's p99 at 1,000 subscribers was the checkpoint's, not
/// the fan-out's.
///
/// The writer connection has no autocheckpoint. Its WAL hook, told the WAL's size after each
/// commit, asks for a passive checkpoint when the WAL has passed the same 1,000 pages; the
/// checkpoint runs on a connection of its own, on its own queue, while writes go on (a passive
/// checkpoint takes no lock a writer or reader waits for). The WAL is bounded as before: the
/// threshold plus what is written while a checkpoint runs, restarted from its start by the
/// first write after a checkpoint that copied all of it. Writes back to back (a backfill) can
/// leave no moment between them for that: past four times the threshold, the commit
/// checkpoints itself, as SQLite's autocheckpoint would have, and the next write restarts the
/// WAL. If a checkpoint beside the writes is still running then, the commit first waits for it
/// (SQLite lets one checkpoint run at a time: without the wait, that commit's would fail busy
/// and the WAL would grow on with every commit until the other finished). As with the
/// autocheckpoint, a reader holding an old snapshot keeps the frames it reads from being
/// copied, and the next commit asks again.
///
/// A checkpoint that fails (a full disk) is counted and tried again at the next commit past
/// the threshold; nothing is lost (the frames stay in the WAL, which readers see), and SQLite's
/// error log names the failure (``QuakeStore/sqliteConfigured``).
final class WALCheckpointer: Sendable {
    /// The WAL size, in pages, past which a commit asks for a checkpoint: SQLite's default.
    static let defaultThreshold: Int32 = 1000
    let threshold: Int32

    init(threshold: Int32 = WALCheckpointer.defaultThreshold) {
        self.threshold = threshold
    }

    struct Counts: Sendable, Equatable {
        /// Checkpoints asked for by a commit.
        var requested = 0
        /// Checkpoints run beside the writes.
        var checkpoints = 0
        /// Checkpoints run in a commit, when those beside the writes fell behind.
        var inCommit = 0
        var failures = 0
        var lastError: String?
        /// The most pages the WAL has held after a commit, and the most one commit added.
        var largestWAL: Int32 = 0
        var largestCommit: Int32 = 0
    }

    private struct State {
        var connection: DatabaseQueue?
        var running = false
        var counts = Counts()
        var walPages: Int32 = 0
        /// Tests: runs on the checkpoint's queue before each checkpoint.
        var beforeCheckpoint: (@Sendable () -> Void)?
    }
    private let state = NIOLockedValueBox(State())
    /// True while no checkpoint beside the writes is queued or running: what a commit that must
    /// checkpoint itself waits for.
    private let idle = ConditionLock(value: true)
    /// How long such a commit waits, at most, before it tries anyway.
    static let backstopPatience = 60.0

    /// What it has done so far.
    var counts: Counts { state.withLockedValue { $0.counts } }

    /// Whether a checkpoint beside the writes is queued or running.
    var isCheckpointing: Bool { state.withLockedValue { $0.running } }

    /// Tests: `body` runs on the checkpoint's queue before each checkpoint (a test holds it there).
    func beforeEachCheckpoint(_ body: (@Sendable () -> Void)?) {
        state.withLockedValue { $0.beforeCheckpoint = body }
    }

    /// Closes its connection, once a checkpoint in progress has finished; commits ask for none
    /// after this.
    func close() throws {
        let connection = state.withLockedValue { state -> DatabaseQueue? in
            defer { state.connection = nil }
            return state.connection
        }
        try connection?.close()
    }

    /// Opens its connection to the database at `path`, once the store has opened it: at the
    /// store's opening rather than at its first checkpoint, so that what it costs (a connection,
    /// a small page cache) is there from the start, not a step in the memory of a daemon that
    /// has been running for a while.
    func open(path: String) throws {
        var configuration = Configuration()
        configuration.label = "quakes.checkpoint"
        configuration.prepareDatabase { db in
            // It only checkpoints: a small page cache, and no autocheckpoint of its own.
            try db.execute(sql: "PRAGMA cache_size = -256")
            try db.execute(sql: "PRAGMA wal_autocheckpoint = 0")
        }
        let connection = try DatabaseQueue(path: path, configuration: configuration)
        state.withLockedValue { $0.connection = connection }
    }

    /// Installs the WAL hook on the writer connection `db`.
    func install(on db: Database) {
        // Replaces the autocheckpoint, itself a WAL hook (sqlite3_wal_autocheckpoint).
        sqlite3_wal_hook(
            db.sqliteConnection,
            { context, connection, _, pages in
                guard let context else { return SQLITE_OK }
                let checkpointer = Unmanaged<WALCheckpointer>.fromOpaque(context).takeUnretainedValue()
                if checkpointer.committed(walPages: pages) {
                    // The backstop: checkpoints beside the writes have not kept up with them.
                    // One still running would make this one fail busy: it is waited for first.
                    if checkpointer.idle.lock(whenValue: true, timeoutSeconds: WALCheckpointer.backstopPatience) {
                        checkpointer.idle.unlock()
                    }
                    let status = sqlite3_wal_checkpoint(connection, nil)
                    checkpointer.state.withLockedValue { state in
                        if status == SQLITE_OK { state.counts.inCommit += 1 }
                    }
                }
                return SQLITE_OK
            }, Unmanaged.passUnretained(self).toOpaque())
    }

    /// Called in each commit, with the WAL's size after it: past the threshold, queues one
    /// checkpoint unless one is queued or running. True when the commit must checkpoint itself:
    /// the WAL has passed four times the threshold (it then queues none: it does the work).
    private func committed(walPages pages: Int32) -> Bool {
        let backstop = pages >= 4 * threshold
        let connection = state.withLockedValue { state -> DatabaseQueue? in
            // A WAL smaller than before was restarted by this commit: all its pages are this one's.
            let added = pages > state.walPages ? pages - state.walPages : pages
            state.walPages = pages
            state.counts.largestWAL = max(state.counts.largestWAL, pages)
            state.counts.largestCommit = max(state.counts.largestCommit, added)
            guard pages >= threshold, !backstop, !state.running, let connection = state.connection else { return nil }
            state.running = true
            state.counts.requested += 1
            idle.lock()
            idle.unlock(withValue: false)
            return connection
        }
        connection?.asyncWriteWithoutTransaction { db in
            self.state.withLockedValue { $0.beforeCheckpoint }?()
            let outcome = Result { try db.checkpoint(.passive) }
            self.state.withLockedValue { state in
                state.running = false
                switch outcome {
                case .success: state.counts.checkpoints += 1
                case .failure(let error as DatabaseError) where error.resultCode == .SQLITE_BUSY:
                    break  // the backstop's, in a commit, was running
                case .failure(let error):
                    state.counts.failures += 1
                    state.counts.lastError = "\(error)"
                }
                self.idle.lock()
                self.idle.unlock(withValue: true)
            }
        }
        return backstop
    }
}
