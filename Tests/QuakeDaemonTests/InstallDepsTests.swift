import Foundation
import QuakeTestSupport
import Testing

/// scripts/install-deps refuses a Swift older than Package.swift's tools version before it
/// installs anything, with a message that says what is needed.
@Suite("install-deps: the Swift version")
struct InstallDepsTests {
    static let script = Fixtures.packageRoot.appendingPathComponent("scripts/install-deps").path

    /// Runs install-deps with PATH holding only `bin` (a fake swift, or none) and the system's.
    func run(fakeSwift output: String?) async throws -> (status: Int32, stderr: String) {
        try await withTemporaryDirectory { dir in
            if let output {
                // Written through a close-on-exec descriptor: a child another test spawns
                // meanwhile must not inherit it, or exec finds the file busy (ETXTBSY).
                let fd = open(dir.appendingPathComponent("swift").path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o755)
                try #require(fd >= 0)
                let script = Array("#!/bin/sh\necho '\(output)'\n".utf8)
                #expect(write(fd, script, script.count) == script.count)
                close(fd)
            }
            let run = try await ChildProcess.run(
                "/bin/bash", [Self.script], environment: ["PATH": "\(dir.path):/usr/bin:/bin"])
            return (run.status, run.stderr)
        }
    }

    @Test("a Swift older than 6.1 is refused, naming both versions", arguments: [
        "Swift version 6.0.3 (swift-6.0.3-RELEASE)", "Swift version 5.10.1 (swift-5.10.1-RELEASE)",
    ])
    func oldSwift(version: String) async throws {
        let run = try await run(fakeSwift: version)
        #expect(run.status == 1)
        #expect(run.stderr.contains("needs Swift 6.1 or later"), "\(run.stderr)")
        #expect(run.stderr.contains("this is Swift \(version.split(separator: " ")[2].split(separator: ".").prefix(2).joined(separator: "."))"))
    }

    @Test("no swift at all is refused with where to get it")
    func noSwift() async throws {
        let run = try await run(fakeSwift: nil)
        #expect(run.status == 1)
        #expect(run.stderr.contains("no swift on PATH"), "\(run.stderr)")
        #expect(run.stderr.contains("swift.org"))
    }

    @Test("a version it cannot read is refused, not taken as new enough")
    func unreadableVersion() async throws {
        let run = try await run(fakeSwift: "something else entirely")
        #expect(run.status == 1)
        #expect(run.stderr.contains("could not read the version"), "\(run.stderr)")
    }
}
