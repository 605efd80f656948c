import Foundation
import NIOCore
import NIOPosix
import Testing

@testable import Varlink

/// The server's write timeout measures the socket, not the scheduler: a reply's write stops
/// counting as waiting once the socket took its bytes, even while the task that awaits it cannot
/// resume (every thread of the cooperative pool busy), so the sweeper never disconnects a client
/// that reads for the server's own slowness.
@Suite("Varlink server: the write watch")
struct WriteWatchTests {
    @Test("a write stops counting as waiting once the socket took its bytes, while the writing task cannot yet resume")
    func endsWhenTheSocketTookTheBytes() async throws {
        var fds: [Int32] = [-1, -1]
        try #require(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &fds) == 0)
        defer { close(fds[1]) }
        let channel = try await NIOPipeBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .takingOwnershipOfDescriptor(inputOutput: fds[0]).get()
        let watch = VarlinkServer.WriteWatch(channel: channel)
        let executor = HoldingExecutor()
        // Far more than a socket's buffers: the write cannot complete before the client reads,
        // so the writing task is suspended, awaiting it, by the time the client does.
        let frame = ByteBuffer(repeating: UInt8(ascii: "x"), count: 8 << 20)
        let writing = Task(executorPreference: executor) {
            // From here on the executor keeps the jobs it is given, as a pool whose threads are all
            // busy would: the task's resumption after the write among them.
            executor.hold()
            try await watch.write(frame)
        }
        // The write has begun and the task has given its thread back: it awaits the write.
        try await Self.waitUntil("the writing task never suspended") { watch.isBusy && executor.isIdle }
        // The client reads the whole frame: the socket took it.
        let received = try Self.read(fds[1], count: frame.readableBytes, within: .seconds(60))
        #expect(received == frame.readableBytes)
        // The write's completion resumes the task: a job the executor holds.
        try await Self.waitUntil("the writing task's resumption never came") { executor.heldJobs >= 1 }
        #expect(!watch.isBusy, "the write still counts as waiting after the socket took its bytes")
        #expect(!watch.isStalled(before: .now + .seconds(3600)))
        executor.release()
        try await writing.value
        #expect(!watch.isBusy)
        try await channel.close()
    }

    /// Waits until `condition` holds, or fails with `failure` after a minute.
    static func waitUntil(_ failure: String, _ condition: () -> Bool) async throws {
        let deadline = ContinuousClock.now + .seconds(60)
        while !condition() {
            guard ContinuousClock.now < deadline else { throw WaitFailed(what: failure) }
            try await Task.sleep(for: .milliseconds(5))
        }
    }

    struct WaitFailed: Error { var what: String }

    /// Reads `count` bytes from `fd` and returns how many it read, or fails after `within`.
    static func read(_ fd: Int32, count: Int, within limit: Duration) throws -> Int {
        let deadline = ContinuousClock.now + limit
        var received = 0
        var chunk = [UInt8](repeating: 0, count: 1 << 16)
        while received < count {
            var pending = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard ContinuousClock.now < deadline, poll(&pending, 1, 100) >= 0 else {
                throw ReadFailed(received: received)
            }
            guard pending.revents != 0 else { continue }
            let n = Glibc.read(fd, &chunk, min(chunk.count, count - received))
            guard n > 0 else { throw ReadFailed(received: received) }
            received += n
        }
        return received
    }

    struct ReadFailed: Error { var received: Int }
}

/// A task executor with a thread of its own that, once held, keeps the jobs it is given until
/// released.
final class HoldingExecutor: TaskExecutor, @unchecked Sendable {
    private let condition = NSCondition()
    /// Guarded by `condition`.
    private var jobs: [UnownedJob] = []
    private var held = false
    private var running = false

    init() {
        let thread = Thread { [self] in self.runLoop() }
        thread.name = "varlink.test.holding"
        thread.start()
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let unowned = UnownedJob(job)
        condition.lock()
        jobs.append(unowned)
        condition.signal()
        condition.unlock()
    }

    func hold() {
        condition.lock()
        held = true
        condition.unlock()
    }

    func release() {
        condition.lock()
        held = false
        condition.signal()
        condition.unlock()
    }

    /// Whether it has no job to run and runs none.
    var isIdle: Bool {
        condition.lock()
        defer { condition.unlock() }
        return jobs.isEmpty && !running
    }

    /// The jobs waiting while held.
    var heldJobs: Int {
        condition.lock()
        defer { condition.unlock() }
        return held ? jobs.count : 0
    }

    private func runLoop() {
        while true {
            condition.lock()
            while jobs.isEmpty || held { condition.wait() }
            let job = jobs.removeFirst()
            running = true
            condition.unlock()
            job.runSynchronously(on: asUnownedTaskExecutor())
            condition.lock()
            running = false
            condition.unlock()
        }
    }
}
