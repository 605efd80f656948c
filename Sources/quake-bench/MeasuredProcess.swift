import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A finished child process and what it cost: wall time and peak resident memory of that process
/// alone (wait4's rusage, not the whole process tree).
struct ChildRun {
    var status: Int32
    var wall: Duration
    var maxRSSBytes: Int
    var stdout: String
}

enum MeasuredProcess {
    /// Runs `argv` to completion with stdout captured and stderr inherited.
    static func run(_ argv: [String]) throws -> ChildRun {
        let output = FileManager.default.temporaryDirectory.appendingPathComponent("quake-bench-\(getpid()).out")
        defer { try? FileManager.default.removeItem(at: output) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 1, output.path, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        var cArgs = argv.map { strdup($0) } + [nil]
        defer { cArgs.forEach { free($0) } }
        var pid: pid_t = 0
        let started = ContinuousClock.now
        let rc = posix_spawnp(&pid, argv[0], &actions, nil, &cArgs, environ)
        guard rc == 0 else { throw POSIXError(POSIXErrorCode(rawValue: rc) ?? .EIO) }
        var status: Int32 = 0
        var usage = rusage()
        while wait4(pid, &status, 0, &usage) < 0 {
            guard errno == EINTR else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        }
        let wall = ContinuousClock.now - started
        let exited = (status & 0x7f) == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
        let stdout = (try? String(contentsOf: output, encoding: .utf8)) ?? ""
        return ChildRun(status: exited, wall: wall, maxRSSBytes: Int(usage.ru_maxrss) * 1024, stdout: stdout)
    }
}

extension Duration {
    /// The duration in seconds, for figures.
    var inSeconds: Double {
        Double(components.seconds) + Double(components.attoseconds) / 1e18
    }
}
