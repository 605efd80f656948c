import ArgumentParser
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A finished child process and what it cost: wall time and peak resident memory of that process
/// alone (wait4's rusage, not the whole process tree).
///
/// Linux counts in a child's peak RSS the memory of the process it was spawned from (exec keeps the
/// old address space's high-water mark in ru_maxrss), so `run` from a process that holds much is
/// off: ``MeasuredProcess/runIsolated(_:)`` spawns through a small launcher instead.
struct ChildRun {
    var status: Int32
    var wall: Duration
    var maxRSSBytes: Int
    /// User and system CPU time of that process alone.
    var cpuSeconds: Double = 0
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
        let cpu =
            Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec)
            + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6
        return ChildRun(
            status: exited, wall: wall, maxRSSBytes: Int(usage.ru_maxrss) * 1024, cpuSeconds: cpu, stdout: stdout)
    }
}

extension MeasuredProcess {
    /// Runs `argv` as ``run(_:)`` does, from a fresh, small quake-bench process (`measure-child`), so
    /// that the child's peak RSS is its own even when this process holds hundreds of MB. The wall
    /// time is the launcher's, without its own start-up.
    static func runIsolated(_ argv: [String]) throws -> ChildRun {
        let me = CommandLine.arguments[0].hasPrefix("/") ? CommandLine.arguments[0] : "/proc/self/exe"
        let selfPath = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? me
        let launcher = try run([selfPath, "measure-child", "--"] + argv)
        guard launcher.status == 0,
            let report = try? JSONDecoder().decode(MeasureChild.Report.self, from: Data(launcher.stdout.utf8))
        else {
            throw ValidationError("measure-child failed (exit \(launcher.status)) for \(argv.joined(separator: " "))")
        }
        return ChildRun(
            status: report.status, wall: .nanoseconds(Int64((report.seconds * 1e9).rounded())),
            maxRSSBytes: report.maxRSSBytes, cpuSeconds: report.cpuSeconds, stdout: report.stdout)
    }
}

/// The launcher of ``MeasuredProcess/runIsolated(_:)``: runs COMMAND and prints one JSON object with
/// its exit status, wall time, peak RSS, CPU time and standard output.
struct MeasureChild: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "measure-child", abstract: "Run COMMAND and print what it cost as one JSON object.",
        shouldDisplay: false)

    struct Report: Codable {
        var status: Int32
        var seconds: Double
        var maxRSSBytes: Int
        var cpuSeconds: Double
        var stdout: String
    }

    @Argument(parsing: .captureForPassthrough) var command: [String]

    func run() async throws {
        let argv = command.first == "--" ? Array(command.dropFirst()) : command
        guard !argv.isEmpty else { throw ValidationError("no command given") }
        let child = try MeasuredProcess.run(argv)
        let report = Report(
            status: child.status, seconds: child.wall.inSeconds, maxRSSBytes: child.maxRSSBytes,
            cpuSeconds: child.cpuSeconds, stdout: child.stdout)
        print(String(decoding: try JSONEncoder().encode(report), as: UTF8.self))
    }
}

extension Duration {
    /// The duration in seconds, for figures.
    var inSeconds: Double {
        Double(components.seconds) + Double(components.attoseconds) / 1e18
    }
}
