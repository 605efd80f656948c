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
        let frame = ByteBuffer(string: #"{"parameters":{"head":1}}"# + "\0")
        let writing = Task(executorPreference: executor) {
            // From here on the executor keeps the jobs it is given, as a pool whose threads are all
            // busy would: the task's resumption after the write among them.
            executor.hold()
            try await watch.write(frame)
        }
        // The client reads the whole frame: the socket took it.
        let received = try Self.read(fds[1], count: frame.readableBytes, within: .seconds(10))
        #expect(received == Array(frame.readableBytesView))
        let deadline = ContinuousClock.now + .seconds(5)
        while watch.isBusy, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(10)) }
        #expect(executor.heldJobs >= 1, "the writing task resumed: the test did not hold it")
        #expect(!watch.isBusy, "the write still counts as waiting after the socket took its bytes")
        #expect(!watch.isStalled(before: .now + .seconds(3600)))
        executor.release()
        try await writing.value
        #expect(!watch.isBusy)
        try await channel.close()
    }

    /// `count` bytes from `fd`, or a failure after `within`.
    static func read(_ fd: Int32, count: Int, within limit: Duration) throws -> [UInt8] {
        let deadline = ContinuousClock.now + limit
        var bytes: [UInt8] = []
        while bytes.count < count {
            var pending = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard ContinuousClock.now < deadline, poll(&pending, 1, 100) >= 0 else {
                throw ReadFailed(received: bytes.count)
            }
            guard pending.revents != 0 else { continue }
            var chunk = [UInt8](repeating: 0, count: count - bytes.count)
            let n = Glibc.read(fd, &chunk, chunk.count)
            guard n > 0 else { throw ReadFailed(received: bytes.count) }
            bytes += chunk.prefix(n)
        }
        return bytes
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
            condition.unlock()
            job.runSynchronously(on: asUnownedTaskExecutor())
        }
    }
}
