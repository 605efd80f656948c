import Foundation

/// The package's built executables (`quaked`, `quakectl`), found next to the test bundle.
public enum BuiltProducts {
    /// The directory SwiftPM put the test binary in, which also holds the package's executables.
    public static var directory: URL {
        let candidates = [
            Bundle.main.bundleURL,
            URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent(),
            Fixtures.packageRoot.appendingPathComponent(".build/debug"),
        ]
        for candidate in candidates {
            var dir = candidate
            if dir.pathExtension == "xctest" { dir.deleteLastPathComponent() }
            if FileManager.default.isExecutableFile(atPath: dir.appendingPathComponent("quaked").path) { return dir }
        }
        return Fixtures.packageRoot.appendingPathComponent(".build/debug")
    }

    public static func path(_ name: String) -> String {
        directory.appendingPathComponent(name).path
    }
}

/// A real child process with captured output, for end-to-end tests.
///
/// Started with posix_spawn(3) and read by a thread per pipe, not with Foundation's Process and
/// Pipe: under the suite's load, swift-corelibs-foundation's Process and FileHandle closed a
/// pipe's descriptor twice (swiftlang/swift#57827). The second close hit whatever the number had
/// been reused for, an SQLite file of another test ("disk I/O error"), or a readability handler
/// read a closed pipe and the runner died on EBADF. Here each descriptor has one owner, which
/// closes it once: the parent's write ends right after the spawn, each read end by its reader
/// at end of file. The child gets stdin, stdout and stderr, and no other descriptor.
public final class ChildProcess: @unchecked Sendable {
    public let pid: Int32
    private let output: OutputReader
    private let errors: OutputReader
    private let lock = NSLock()
    /// The wait status once the child is reaped; until then its pid stays reserved for it (a
    /// zombie keeps it), so that a signal never reaches a process that reused the number.
    private var waitStatus: Int32?

    /// The proxy variables quaked reads: a child gets only those the test gives it, so that a
    /// proxy set for the machine never carries the tests' loopback traffic.
    public static let proxyVariables: Set<String> = [
        "http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY", "no_proxy", "NO_PROXY",
    ]

    /// Starts `executable` (a path) with `arguments`; `environment` entries are added to the
    /// test's own (less its proxy variables, ``proxyVariables``). Standard input is /dev/null;
    /// the child runs in a process group of its own, with the default action for every signal
    /// and none blocked.
    public init(_ executable: String, _ arguments: [String], environment: [String: String] = [:]) throws {
        let variables = ProcessInfo.processInfo.environment.filter { !Self.proxyVariables.contains($0.key) }
            .merging(environment) { $1 }
        let stdoutPipe = try Self.makePipe()
        let stderrPipe: (read: Int32, write: Int32)
        do { stderrPipe = try Self.makePipe() } catch {
            close(stdoutPipe.read)
            close(stdoutPipe.write)
            throw error
        }
        var spawned: pid_t = 0
        let status = Self.spawn(
            executable, arguments: [executable] + arguments,
            environment: variables.map { "\($0.key)=\($0.value)" },
            stdout: stdoutPipe.write, stderr: stderrPipe.write, pid: &spawned)
        // The child has its copies; the parent's write ends go now, so that the readers see end
        // of file when the child (and whatever it passed them on to) is done.
        close(stdoutPipe.write)
        close(stderrPipe.write)
        guard status == 0 else {
            close(stdoutPipe.read)
            close(stderrPipe.read)
            throw ChildProcessError.spawnFailed(executable: executable, errno: status)
        }
        pid = spawned
        output = OutputReader(descriptor: stdoutPipe.read)
        errors = OutputReader(descriptor: stderrPipe.read)
    }

    /// A test that fails before it stops its child must not leave the process running.
    deinit {
        if poll() == nil {
            kill(pid, SIGKILL)
            var status: Int32 = 0
            while waitpid(pid, &status, 0) == -1 && errno == EINTR {}
        }
    }

    public var stdout: String { output.text }
    public var stderr: String { errors.text }
    public var isRunning: Bool { poll() == nil }
    /// Whether both pipes are closed: the readers saw end of file (for tests of this type).
    public var pipesClosed: Bool { output.finished && errors.finished }

    /// Sends `signal` to the child, unless it was already reaped.
    public func signal(_ signal: Int32) {
        lock.withLock {
            if waitStatus == nil { _ = kill(pid, signal) }
        }
    }

    /// Waits for the process to exit; returns its exit status (128 + signal when killed).
    /// Throws when it is still running after `timeout`, after killing it. Output the child
    /// passed on to a process that outlives it is read for up to 2 seconds more.
    @discardableResult
    public func wait(timeout: Duration = .seconds(60)) async throws -> Int32 {
        let deadline = ContinuousClock.now + timeout
        var status = poll()
        while status == nil {
            if ContinuousClock.now > deadline {
                signal(SIGKILL)
                throw ChildProcessError.timedOut(stderr: stderr)
            }
            try await Task.sleep(for: .milliseconds(20))
            status = poll()
        }
        let drained = ContinuousClock.now + .seconds(2)
        while !pipesClosed && ContinuousClock.now < drained {
            try await Task.sleep(for: .milliseconds(10))
        }
        return Self.exitCode(status!)
    }

    /// Runs to completion and returns (status, stdout, stderr).
    public static func run(
        _ executable: String, _ arguments: [String], environment: [String: String] = [:],
        timeout: Duration = .seconds(60)
    ) async throws -> (status: Int32, stdout: String, stderr: String) {
        let child = try ChildProcess(executable, arguments, environment: environment)
        let status = try await child.wait(timeout: timeout)
        return (status, child.stdout, child.stderr)
    }

    /// The wait status if the child has exited (reaping it), or nil.
    private func poll() -> Int32? {
        lock.withLock {
            if let waitStatus { return waitStatus }
            var status: Int32 = 0
            let reaped = waitpid(pid, &status, WNOHANG)
            if reaped == pid {
                waitStatus = status
            } else if reaped == -1 && errno == ECHILD {
                // Reaped by someone else: gone, with its status unknown.
                waitStatus = 0xff << 8
            }
            return waitStatus
        }
    }

    /// The exit code of a wait status: the code, or 128 + the signal that ended it.
    static func exitCode(_ status: Int32) -> Int32 {
        let signal = status & 0x7f
        return signal == 0 ? (status >> 8) & 0xff : 128 + signal
    }

    static func makePipe() throws -> (read: Int32, write: Int32) {
        var ends: [Int32] = [-1, -1]
        guard systemPipe2(&ends, O_CLOEXEC) == 0 else { throw ChildProcessError.spawnFailed(executable: "pipe2", errno: errno) }
        return (ends[0], ends[1])
    }

    /// posix_spawn(3) with stdin from /dev/null and the given stdout and stderr; returns 0 or an
    /// errno (glibc reports a failed exec this way too).
    static func spawn(
        _ path: String, arguments: [String], environment: [String], stdout: Int32, stderr: Int32,
        pid: inout pid_t
    ) -> Int32 {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_adddup2(&actions, stdout, 1)
        posix_spawn_file_actions_adddup2(&actions, stderr, 2)
        // Nothing else of the test runner's: a descriptor another test has open at this moment
        // without close-on-exec (Foundation's atomic writes make their temporary file with
        // mkstemp) would otherwise stay open in the child for its whole life, and a script
        // written through it could not be executed (ETXTBSY).
        _ = systemAddCloseFrom(&actions, 3)
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var defaults = sigset_t()
        sigemptyset(&defaults)
        for signal in [SIGHUP, SIGINT, SIGQUIT, SIGPIPE, SIGALRM, SIGTERM, SIGUSR1, SIGUSR2, SIGCHLD, SIGWINCH] {
            sigaddset(&defaults, signal)
        }
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        var none = sigset_t()
        sigemptyset(&none)
        posix_spawnattr_setsigmask(&attributes, &none)
        posix_spawnattr_setpgroup(&attributes, 0)
        posix_spawnattr_setflags(
            &attributes, Int16(POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETPGROUP))
        let argv = arguments.map { strdup($0) } + [nil]
        let envp = environment.map { strdup($0) } + [nil]
        defer {
            argv.forEach { free($0) }
            envp.forEach { free($0) }
        }
        return posix_spawn(&pid, path, &actions, &attributes, argv, envp)
    }
}

/// Reads one pipe to its end on a thread of its own, keeping what it read, and closes it.
final class OutputReader: @unchecked Sendable {
    private let lock = NSLock()
    private var data = Data()
    private var done = false

    init(descriptor: Int32) {
        Thread.detachNewThread { [self] in
            var buffer = [UInt8](repeating: 0, count: 65_536)
            while true {
                let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
                if count > 0 {
                    lock.withLock { data.append(contentsOf: buffer[0..<count]) }
                } else if count < 0 && errno == EINTR {
                    continue
                } else {
                    break
                }
            }
            close(descriptor)
            lock.withLock { done = true }
        }
    }

    var text: String { lock.withLock { String(decoding: data, as: UTF8.self) } }
    var finished: Bool { lock.withLock { done } }
}

public enum ChildProcessError: Error, CustomStringConvertible {
    case timedOut(stderr: String)
    case spawnFailed(executable: String, errno: Int32)
    public var description: String {
        switch self {
        case .timedOut(let stderr): "the child process did not exit in time; stderr:\n\(stderr)"
        case .spawnFailed(let executable, let code): "could not start \(executable): \(String(cString: strerror(code)))"
        }
    }
}

/// glibc's pipe2(2), which the Glibc module does not export (it is a GNU extension): a pipe made
/// close-on-exec atomically, so that a child another thread spawns meanwhile never inherits it.
@_silgen_name("pipe2")
private func systemPipe2(_ descriptors: UnsafeMutablePointer<Int32>, _ flags: Int32) -> Int32

/// glibc's posix_spawn_file_actions_addclosefrom_np (2.34 and later; Debian 12 has 2.36), also
/// not exported by the Glibc module.
@_silgen_name("posix_spawn_file_actions_addclosefrom_np")
private func systemAddCloseFrom(_ actions: UnsafeMutablePointer<posix_spawn_file_actions_t>, _ from: Int32) -> Int32
