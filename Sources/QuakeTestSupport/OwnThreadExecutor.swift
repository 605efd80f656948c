import Foundation
import Synchronization

/// A task executor with a thread of its own, for long CPU-bound test work (the model checkers).
///
/// Swift's global executor has one thread per core, shared by every test running at once: on a
/// 2-core machine two model checkers computing for seconds between awaits leave none for the
/// tests that wait on a socket or a child process with a deadline, which then fail for no fault of
/// the code they test. Work run with this executor as its preference
/// (`withTaskExecutorPreference`, or ``runOnOwnThread(_:)``) takes its turn with them on the
/// operating system's scheduler instead.
public final class OwnThreadExecutor: TaskExecutor, @unchecked Sendable {
    /// One thread for every caller: the checkers that use it then run one job at a time between
    /// them, as one more thread beside the global executor's.
    public static let shared = OwnThreadExecutor(name: "quake.test.own-thread")

    private let condition = NSCondition()
    /// Guarded by `condition`.
    private var jobs: [UnownedJob] = []

    public init(name: String) {
        let thread = Thread { [unowned self] in self.runLoop() }
        thread.name = name
        thread.start()
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
            let batch = jobs
            jobs.removeAll(keepingCapacity: true)
            condition.unlock()
            for job in batch {
                job.runSynchronously(on: asUnownedTaskExecutor())
            }
        }
    }
}

/// Runs `body` with ``OwnThreadExecutor/shared`` as its task executor preference (see there why).
public func runOnOwnThread<T: Sendable>(_ body: @Sendable () async throws -> T) async throws -> T {
    try await withTaskExecutorPreference(OwnThreadExecutor.shared) {
        try await body()
    }
}
