import Foundation
import QuakeTestSupport
import Testing

/// The test support's child processes: the end-to-end tests start a few hundred of them, in
/// parallel with tests that hold SQLite files open.
@Suite("Test support: child processes", .timeLimit(.minutes(2)))
struct ChildProcessTests {
    @Test("output is captured, the exit code returned, and both pipes closed after the exit")
    func capturesAndCloses() async throws {
        let child = try ChildProcess("/bin/sh", ["-c", "echo out; echo err >&2; exit 3"])
        #expect(try await child.wait() == 3)
        #expect(child.stdout == "out\n")
        #expect(child.stderr == "err\n")
        #expect(child.pipesClosed)
        #expect(!child.isRunning)
    }

    @Test("a child ended by a signal exits 128 + the signal; a later signal() reaches nobody")
    func signalledExit() async throws {
        let child = try ChildProcess("/bin/sh", ["-c", "kill -TERM $$; sleep 5"])
        #expect(try await child.wait() == 128 + SIGTERM)
        child.signal(SIGKILL)
        #expect(!child.isRunning)
    }

    @Test("SIGTERM has its default action in the child, whatever the test runner does with it")
    func defaultSignals() async throws {
        let child = try ChildProcess("/bin/sleep", ["30"])
        try await Task.sleep(for: .milliseconds(100))
        child.signal(SIGTERM)
        #expect(try await child.wait(timeout: .seconds(10)) == 128 + SIGTERM)
    }

    @Test("a grandchild that keeps the output open does not hold up wait")
    func grandchildKeepsPipe() async throws {
        let child = try ChildProcess("/bin/sh", ["-c", "sleep 30 & echo started"])
        #expect(try await child.wait(timeout: .seconds(10)) == 0)
        #expect(child.stdout == "started\n")
        // The sleep is in the child's process group.
        kill(-child.pid, SIGKILL)
    }

    @Test("an executable that does not exist is an error, not a child")
    func missingExecutable() {
        #expect(throws: ChildProcessError.self) { try ChildProcess("/nonexistent/quaked", []) }
    }

    @Test("many children at once never close or read a descriptor the test holds")
    func descriptorsStayOurs() async throws {
        try await withTemporaryDirectory { dir in
            // Files opened and closed while children start and stop: a descriptor closed twice
            // by the child machinery shows up as one of these closed or pointing elsewhere.
            let paths = (0..<20).map { dir.appendingPathComponent("f\($0)").path }
            var held: [(fd: Int32, inode: UInt)] = []
            for path in paths {
                let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
                try #require(fd >= 0)
                var info = stat()
                fstat(fd, &info)
                held.append((fd, UInt(info.st_ino)))
            }
            defer { held.forEach { close($0.fd) } }
            try await withThrowingTaskGroup(of: Void.self) { group in
                for i in 0..<100 {
                    group.addTask {
                        let run = try await ChildProcess.run("/bin/sh", ["-c", "echo \(i)"])
                        #expect(run.status == 0)
                        #expect(run.stdout == "\(i)\n")
                    }
                }
                try await group.waitForAll()
            }
            for (fd, inode) in held {
                var info = stat()
                #expect(fstat(fd, &info) == 0, "descriptor \(fd) was closed under the test")
                #expect(UInt(info.st_ino) == inode, "descriptor \(fd) now refers to another file")
            }
        }
    }
}

extension ChildProcessTests {
    @Test("a child inherits no descriptor of the test's beyond stdin, stdout and stderr")
    func noInheritedDescriptors() async throws {
        // A descriptor without close-on-exec, as Foundation's atomic writes leave theirs.
        let fd = open("/dev/null", O_RDONLY)
        try #require(fd >= 3)
        defer { close(fd) }
        let run = try await ChildProcess.run("/bin/sh", ["-c", "ls /proc/self/fd"])
        #expect(run.status == 0)
        // ls itself opens one for the listing; sh's and the test's must not be there.
        let listed = Set(run.stdout.split(separator: "\n").compactMap { Int32($0) })
        #expect(!listed.contains(fd), "the child holds descriptor \(fd): \(listed.sorted())")
        #expect(listed.isSuperset(of: [0, 1, 2]))
        #expect(listed.count <= 4, "\(listed.sorted())")
    }
}
