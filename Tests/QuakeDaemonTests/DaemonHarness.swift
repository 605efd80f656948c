import Foundation
import QuakeStore
import QuakeTestSupport

/// A real `quaked` process in a temp directory, with its socket and state there.
final class DaemonHarness: @unchecked Sendable {
    let directory: URL
    let process: ChildProcess
    var socketPath: String { directory.appendingPathComponent("q.sock").path }
    var stateDirectory: URL { directory.appendingPathComponent("state") }

    /// Starts quaked with `arguments` (plus --state-directory and --socket in `directory`) and waits
    /// until its socket answers.
    init(
        in directory: URL, _ arguments: [String], environment: [String: String] = [:], waitForSocket: Bool = true
    ) async throws {
        self.directory = directory
        process = try ChildProcess(
            BuiltProducts.path("quaked"),
            [
                "--state-directory", directory.appendingPathComponent("state").path, "--socket",
                directory.appendingPathComponent("q.sock").path, "--log-level", "debug",
            ] + arguments,
            environment: environment)
        if waitForSocket {
            let path = directory.appendingPathComponent("q.sock").path
            try await waitUntil(timeout: .seconds(20)) {
                guard self.process.isRunning else { throw HarnessError(stderr: self.process.stderr) }
                return UnixSocketClient.canConnect(path)
            }
        }
    }

    struct HarnessError: Error, CustomStringConvertible {
        var stderr: String
        var description: String { "quaked exited early:\n\(stderr)" }
    }

    /// One hand-written call on a fresh connection, for what the generated types cannot say (a
    /// method the interface does not have); every other call goes through the typed `call` and
    /// `result` (DaemonCalls.swift). The blocking socket read runs on a Dispatch thread, so
    /// in-process servers (the feed server) keep running while the daemon works on the call.
    func call(_ method: String, _ parameters: [String: Any] = [:]) async throws -> [String: Any] {
        let request = String(
            decoding: try JSONSerialization.data(withJSONObject: ["method": method, "parameters": parameters]),
            as: UTF8.self)
        let path = socketPath
        let text = try await onBlockingThread { () throws -> String in
            let client = try UnixSocketClient(path: path)
            try client.send(request)
            guard let reply = try client.receive(timeout: .seconds(60)) else {
                throw HarnessError(stderr: "connection closed")
            }
            return reply
        }
        return try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any] ?? [:]
    }

    /// Stops with SIGTERM and returns the exit status.
    @discardableResult
    func stop() async throws -> Int32 {
        process.signal(SIGTERM)
        return try await process.wait(timeout: .seconds(15))
    }

    /// The store, opened read-side by the test while the daemon may still run.
    func withStore<T>(_ body: (QuakeStore) throws -> T) throws -> T {
        let store = try QuakeStore(directory: stateDirectory)
        defer { try? store.close() }
        return try body(store)
    }
}

extension TestResponse {
    /// A fixture feed without a Cache-Control lifetime, so the daemon pulls on its interval.
    static func uncachedFeed(_ url: URL) -> TestResponse {
        var response = TestResponse.feed(url)
        response.cacheControl = nil
        return response
    }

    /// Always a full answer, never 304: for failures that must reach the importer.
    func unconditional() -> TestResponse {
        var response = self
        response.conditional = false
        return response
    }
}
