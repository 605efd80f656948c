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
public final class ChildProcess: @unchecked Sendable {
    public let process = Process()
    private let stdoutPipe = Pipe()
    private let stderrPipe = Pipe()
    private let lock = NSLock()
    private var stdoutData = Data()
    private var stderrData = Data()

    /// The proxy variables quaked reads: a child gets only those the test gives it, so that a
    /// proxy set for the machine never carries the tests' loopback traffic.
    public static let proxyVariables: Set<String> = [
        "http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY", "no_proxy", "NO_PROXY",
    ]

    /// Starts `executable` with `arguments`; `environment` entries are added to the test's own
    /// (less its proxy variables, ``proxyVariables``).
    public init(_ executable: String, _ arguments: [String], environment: [String: String] = [:]) throws {
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.environment = ProcessInfo.processInfo.environment.filter { !Self.proxyVariables.contains($0.key) }
            .merging(environment) { $1 }
        process.standardOutput = stdoutPipe
        process.standardError = stderrPipe
        process.standardInput = FileHandle.nullDevice
        stdoutPipe.fileHandleForReading.readabilityHandler = { [weak self] handle in
            let data = handle.availableData
            guard let self, !data.isEmpty else { return }
            self.lock.withLock { self.stdoutData.append(data) }
        }
        stderrPipe.fileHandleForReading.readabilityHandler = { [weak self] handle in
            let data = handle.availableData
            guard let self, !data.isEmpty else { return }
            self.lock.withLock { self.stderrData.append(data) }
        }
        try process.run()
    }

    /// A test that fails before it stops its child must not leave the process running.
    deinit {
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        release()
    }

    /// Breaks the reference cycles Foundation leaves behind: a readability handler's dispatch
    /// source and the pipe it reads hold each other until the handler is removed, and a Process
    /// holds itself through its run-loop source until `waitUntilExit()` returns (swift-corelibs-
    /// foundation clears the source there and nowhere else; `isRunning` turning false does not).
    /// Without this, every child leaked its Process, both pipes and their four file descriptors
    /// (LeakSanitizer's finding; about 1,500 descriptors over the whole suite).
    private func release() {
        stdoutPipe.fileHandleForReading.readabilityHandler = nil
        stderrPipe.fileHandleForReading.readabilityHandler = nil
        // Returns at once for an exited child (reaped, or never started); after the SIGKILL
        // above, as soon as the kernel has reaped it.
        if process.processIdentifier != 0 { process.waitUntilExit() }
    }

    public var pid: Int32 { process.processIdentifier }
    public var stdout: String { lock.withLock { String(decoding: stdoutData, as: UTF8.self) } }
    public var stderr: String { lock.withLock { String(decoding: stderrData, as: UTF8.self) } }
    public var isRunning: Bool { process.isRunning }

    public func signal(_ signal: Int32) {
        kill(process.processIdentifier, signal)
    }

    /// Waits for the process to exit; returns its exit status (128 + signal when killed).
    /// Throws when it is still running after `timeout`, after killing it.
    @discardableResult
    public func wait(timeout: Duration = .seconds(60)) async throws -> Int32 {
        let deadline = ContinuousClock.now + timeout
        while process.isRunning {
            if ContinuousClock.now > deadline {
                kill(process.processIdentifier, SIGKILL)
                throw ChildProcessError.timedOut(stderr: stderr)
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        // Let the readability handlers drain what is left in the pipes, then stop them and read
        // the rest ourselves.
        try await Task.sleep(for: .milliseconds(50))
        release()
        let rest = stdoutPipe.fileHandleForReading.readDataToEndOfFile()
        let restErr = stderrPipe.fileHandleForReading.readDataToEndOfFile()
        lock.withLock {
            stdoutData.append(rest)
            stderrData.append(restErr)
        }
        return process.terminationReason == .uncaughtSignal
            ? 128 + process.terminationStatus : process.terminationStatus
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
}

public enum ChildProcessError: Error, CustomStringConvertible {
    case timedOut(stderr: String)
    public var description: String {
        switch self {
        case .timedOut(let stderr): "the child process did not exit in time; stderr:\n\(stderr)"
        }
    }
}
