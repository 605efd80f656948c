import Foundation
import Synchronization

/// A task executor with threads of its own: for long CPU-bound test work (the model checkers,
/// ``shared``), and for the test's servers (``servers``).
///
/// Swift's global executor has one thread per core, shared by every test running at once: on a
/// 2-core machine two model checkers computing for seconds between awaits leave none for the
/// tests that wait on a socket or a child process with a deadline, which then fail for no fault of
/// the code they test. Work run with this executor as its preference
/// (`withTaskExecutorPreference`, or ``runOnOwnThread(_:)``) takes its turn with them on the
/// operating system's scheduler instead.
///
/// The servers a test stands up in its own process (``FeedTestServer``, ``ForwardingProxy``, the
/// catalog's HTTP server) play machines of their own, which a test's CPU-bound neighbours cannot
/// starve: they run on ``servers``. Measured on the 2-core machine with the whole suite running,
/// a task on the global executor waited up to 13 s to start, and a catalog server starved that long
/// had its connection closed as idle under a client's request.
public final class OwnThreadExecutor: TaskExecutor, @unchecked Sendable {
    /// One thread for every caller: the checkers that use it then run one job at a time between
    /// them, as one more thread beside the global executor's.
    public static let shared = OwnThreadExecutor(name: "quake.test.own-thread")
    /// Two threads for the servers tests stand up in their own process. Their work is short (they
    /// answer sockets), so two serve every test running at once.
    public static let servers = OwnThreadExecutor(name: "quake.test.servers", threads: 2)

    private let condition = NSCondition()
    /// Guarded by `condition`.
    private var jobs: [UnownedJob] = []

    /// Starts `threads` threads named `name`, which take the jobs one at a time, in order.
    public init(name: String, threads: Int = 1) {
        for index in 0..<max(1, threads) {
            let thread = Thread { [unowned self] in self.runLoop() }
            thread.name = threads > 1 ? "\(name)-\(index)" : name
            thread.start()
        }
    }

    public func enqueue(_ job: consuming ExecutorJob) {
        let unowned = UnownedJob(job)
        condition.lock()
        jobs.append(unowned)
        condition.signal()
        condition.unlock()
    }

    private func runLoop() {
        while true {
            condition.lock()
            while jobs.isEmpty { condition.wait() }
            let job = jobs.removeFirst()
            condition.unlock()
            job.runSynchronously(on: asUnownedTaskExecutor())
        }
    }
}

/// Runs `body` with ``OwnThreadExecutor/shared`` as its task executor preference (see there why).
public func runOnOwnThread<T: Sendable>(_ body: @Sendable () async throws -> T) async throws -> T {
    try await withTaskExecutorPreference(OwnThreadExecutor.shared) {
        try await body()
    }
}
