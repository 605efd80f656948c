import Foundation
import QuakeTestSupport
import Testing

/// The test support's child processes: the end-to-end tests start a few hundred of them.
@Suite("Test support: child processes")
struct ChildProcessTests {
    @Test("a child that exited leaves neither its Process nor its pipes behind")
    func releasesProcessAndPipes() async throws {
        // swift-corelibs-foundation keeps a Process alive through its run-loop source until
        // waitUntilExit(), and a pipe with a readability handler alive through the handler's
        // dispatch source; ChildProcess used to leak both, and the pipes' file descriptors.
        weak var process: Process?
        weak var output: Pipe?
        weak var errors: Pipe?
        do {
            let child = try ChildProcess("/bin/sh", ["-c", "echo out; echo err >&2"])
            process = child.process
            output = child.process.standardOutput as? Pipe
            errors = child.process.standardError as? Pipe
            #expect(try await child.wait() == 0)
            #expect(child.stdout == "out\n")
            #expect(child.stderr == "err\n")
        }
        // A cancelled dispatch source lets go of its handler asynchronously.
        try await waitUntil(timeout: .seconds(5)) { process == nil && output == nil && errors == nil }
    }
}
