import Foundation

/// A task executor with a thread of its own, for long CPU-bound test work (the model checkers, and
/// the tests marked `.ownThread`).
///
/// Swift's global executor has one thread per core, shared by every test running at once: on a
/// 2-core machine two tests computing for seconds between awaits leave none for the tests that
/// wait on a socket, a commit or a child process with a deadline, which then fail for no fault of
/// the code they test (a probe during a full `swift test` on 2 cores found the global executor
/// running nothing else for 7 to 28 seconds at a time). Work run with an executor of its own as
/// its preference (``runOnOwnThread(_:)``) takes its turn with the others on the operating
/// system's scheduler instead.
///
/// Each ``runOnOwnThread(_:)`` makes one and finishes it when its body returns: computing tests
/// then run side by side, each on its thread, and none waits for another.
public final class OwnThreadExecutor: TaskExecutor, @unchecked Sendable {
    private let condition = NSCondition()
    /// Guarded by `condition`.
    private var jobs: [UnownedJob] = []
    /// Guarded by `condition`: set by ``finish()``.
    private var finished = false

    public init(name: String) {
        let thread = Thread { self.runLoop() }
        thread.name = name
        thread.start()
    }

    public func enqueue(_ job: consuming ExecutorJob) {
        condition.lock()
        if finished {
            condition.unlock()
            // A task that outlived the work this executor was made for (an unstructured task that
            // inherited its preference): the global executor runs it.
            globalConcurrentExecutor.enqueue(job)
            return
        }
        jobs.append(UnownedJob(job))
        condition.signal()
        condition.unlock()
    }

    /// Runs the jobs already enqueued, then ends the thread; later jobs go to the global executor.
    public func finish() {
        condition.lock()
        finished = true
        condition.signal()
        condition.unlock()
    }

    private func runLoop() {
        while true {
            condition.lock()
            while jobs.isEmpty && !finished { condition.wait() }
            if jobs.isEmpty {
                condition.unlock()
                return
            }
            let batch = jobs
            jobs.removeAll(keepingCapacity: true)
            condition.unlock()
            for job in batch {
                job.runSynchronously(on: asUnownedTaskExecutor())
            }
        }
    }
}

/// Runs `body` with an ``OwnThreadExecutor`` of its own as its task executor preference (see there
/// why); child tasks of `body` inherit it.
public func runOnOwnThread<T: Sendable>(_ body: @Sendable () async throws -> T) async throws -> T {
    let executor = OwnThreadExecutor(name: "quake.test.own-thread")
    defer { executor.finish() }
    return try await withTaskExecutorPreference(executor) {
        try await body()
    }
}
