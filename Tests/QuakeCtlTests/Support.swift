import QuakeClient
import QuakeProtocol
import Varlink
import Foundation
import QuakeFeed
import QuakeCtl
import QuakeStore
import QuakeTestSupport

/// A real `quaked` in a temp directory (state and socket there), started and stopped by a test.
final class Quaked: @unchecked Sendable {
    let directory: URL
    let feeds: [URL]
    let extraArguments: [String]
    private(set) var process: ChildProcess?
    var socketPath: String { directory.appendingPathComponent("q.sock").path }
    var stateDirectory: URL { directory.appendingPathComponent("state") }

    /// Starts quaked on `feeds` (pulled once at start, then hourly) and waits for its socket and
    /// its first pull.
    init(in directory: URL, feeds: [URL], _ extraArguments: [String] = []) async throws {
        self.directory = directory
        self.feeds = feeds
        self.extraArguments = extraArguments
        try await start()
    }

    func start() async throws {
        let process = try ChildProcess(
            BuiltProducts.path("quaked"),
            ["--state-directory", stateDirectory.path, "--socket", socketPath, "--interval", "1h", "--log-level", "debug"]
                + feeds.flatMap { ["--feed", $0.absoluteString] } + extraArguments)
        self.process = process
        try await waitUntil(timeout: .seconds(30)) {
            guard process.isRunning else { throw TestFailure("quaked exited early:\n\(process.stderr)") }
            return UnixSocketClient.canConnect(socketPath)
        }
        // The first pull has finished when every feed has a last result.
        try await waitUntil(timeout: .seconds(30)) {
            let status = try UnixSocketClient(path: self.socketPath).call(IOQuaked.GetStatus.self, .init())
            return !status.feeds.isEmpty && status.feeds.allSatisfy { $0.lastResult != nil }
        }
    }

    @discardableResult
    func stop() async throws -> Int32 {
        guard let process else { return 0 }
        process.signal(SIGTERM)
        let status = try await process.wait(timeout: .seconds(15))
        self.process = nil
        return status
    }

    /// Kills the daemon with SIGKILL: no clean shutdown (``stop()`` still reaps it).
    func kill() {
        process?.signal(SIGKILL)
    }

    /// Runs `quaked --once` on this state directory (with the daemon stopped or running).
    func importOnce(_ feed: URL) async throws -> String {
        let result = try await ChildProcess.run(
            BuiltProducts.path("quaked"),
            [
                "--once", "--state-directory", stateDirectory.path, "--socket", socketPath + ".once", "--feed",
                feed.absoluteString,
            ],
            timeout: .seconds(120))
        guard result.status == 0 else { throw TestFailure("quaked --once failed: \(result.stderr)") }
        return result.stdout
    }

    func withStore<T>(_ body: (QuakeStore) throws -> T) throws -> T {
        let store = try QuakeStore(directory: stateDirectory)
        defer { try? store.close() }
        return try body(store)
    }

    func withStoreAsync<T>(_ body: (QuakeStore) async throws -> T) async throws -> T {
        let store = try QuakeStore(directory: stateDirectory)
        defer { try? store.close() }
        return try await body(store)
    }

    /// Every change in the store's history after `token`, as (token, quake id, kind).
    func historyChanges(after token: Int) throws -> [ChangeKey] {
        try withStore { store in
            var keys: [ChangeKey] = []
            var after = token
            while true {
                let page = try store.history(after: Int64(after), limit: 1000)
                for t in page.transactions {
                    keys += t.changes.map { ChangeKey(token: Int(t.token), quakeId: $0.quakeId, kind: $0.kind.rawValue) }
                }
                after = Int(page.nextAfter)
                if !page.hasMore { return keys }
            }
        }
    }
}

struct ChangeKey: Hashable, Comparable, CustomStringConvertible {
    var token: Int
    var quakeId: String
    var kind: String
    static func < (a: Self, b: Self) -> Bool { (a.token, a.quakeId, a.kind) < (b.token, b.quakeId, b.kind) }
    var description: String { "\(token):\(kind):\(quakeId)" }
}

struct TestFailure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// Runs `quakectl` to completion.
func quakectl(
    _ arguments: [String], environment: [String: String] = [:], timeout: Duration = .seconds(60)
) async throws -> (status: Int32, stdout: String, stderr: String) {
    try await ChildProcess.run(BuiltProducts.path("quakectl"), arguments, environment: environment, timeout: timeout)
}

/// Starts a long-running `quakectl` (watch).
func startQuakectl(_ arguments: [String], environment: [String: String] = [:]) throws -> ChildProcess {
    try ChildProcess(BuiltProducts.path("quakectl"), arguments, environment: environment)
}

/// Starts a stand-in quaked in Python, serving Varlink on a Unix socket in `dir`: `answers` is
/// Python that defines `answer(call)`, which takes each call (its JSON as a dict) and returns its
/// reply as a dict, or None for MethodNotFound; the framing, the socket and a thread per
/// connection are the same for every stand-in (`pythonQuakedServer`). Returns the process (stop
/// it with SIGTERM), once it listens, and the socket's path.
func startPythonQuaked(_ answers: String, named name: String, in dir: URL) async throws -> (
    server: ChildProcess, socket: String
) {
    let script = answers + "\n" + pythonQuakedServer
    let file = dir.appendingPathComponent("\(name).py")
    try script.write(to: file, atomically: true, encoding: .utf8)
    let socket = dir.appendingPathComponent("\(name).sock").path
    let server = try ChildProcess("/usr/bin/env", [PeerTools.python, file.path, socket])
    do {
        try await waitUntil(timeout: .seconds(20)) { server.stdout.contains("ready") }
    } catch {
        server.signal(SIGTERM)
        throw error
    }
    return (server, socket)
}

/// What every stand-in quaked runs after its `answer(call)`: NUL-framed calls in, each answered
/// with `answer`'s reply, on every connection at once (a watch holds two); `ready` once listening.
private let pythonQuakedServer = #"""
    import json as _json, socket as _socket, sys as _sys, threading as _threading
    def _serve(connection):
        buffer = b""
        while True:
            data = connection.recv(65536)
            if not data:
                break
            buffer += data
            while b"\0" in buffer:
                message, buffer = buffer.split(b"\0", 1)
                call = _json.loads(message)
                reply = answer(call)
                if reply is None:
                    reply = {"error": "org.varlink.service.MethodNotFound",
                             "parameters": {"method": call.get("method")}}
                connection.sendall(_json.dumps(reply).encode() + b"\0")
        connection.close()
    _server = _socket.socket(_socket.AF_UNIX)
    _server.bind(_sys.argv[1])
    _server.listen(8)
    print("ready", flush=True)
    while True:
        _connection, _ = _server.accept()
        _threading.Thread(target=_serve, args=(_connection,), daemon=True).start()
    """#

/// Polls `condition` every 50 ms until it holds; throws after `timeout`.
func waitUntil(timeout: Duration, _ condition: () throws -> Bool) async throws {
    let deadline = ContinuousClock.now + timeout
    while try !condition() {
        guard ContinuousClock.now < deadline else { throw TestFailure("timed out waiting for a condition") }
        try await Task.sleep(for: .milliseconds(50))
    }
}

/// The JSON lines a `watch --json` printed.
struct WatchOutput {
    struct Line: Decodable {
        var event: String
        var storeId: String?
        var token: Int?
        var change: IOQuaked.Change?
        /// `quake` lines (`--last`).
        var quake: IOQuaked.Quake?
        var quakes: Int?
        var reason: String?
    }

    var lines: [Line]

    init(_ stdout: String) throws {
        lines = try stdout.split(separator: "\n").map {
            try JSONDecoder().decode(Line.self, from: Data($0.utf8))
        }
    }

    var changes: [ChangeKey] {
        lines.compactMap { line in
            line.change.map { ChangeKey(token: line.token ?? 0, quakeId: $0.quakeId, kind: $0.kind.rawValue) }
        }
    }

    var resets: [Line] { lines.filter { $0.event == "reset" } }
}

/// A stored quake as the protocol carries it: FeedFeature's Codable form is the interface's Quake,
/// but for `contributors`, a text of the JSON array the interface carries as it is.
func wire(_ quake: FeedFeature) throws -> IOQuaked.Quake {
    var plain = quake
    plain.contributors = nil
    var wired = try IOQuaked.Quake.decode(json: JSONEncoder().encode(plain))
    if let contributors = quake.contributors {
        wired.contributors = try [IOQuaked.Contributor].decode(json: Array(contributors.utf8))
    }
    return wired
}

enum TestFeeds {
    static let day = Fixtures.usgs("abruzzi__earthquake-viz__all_day.geojson")
    static let week = Fixtures.usgs("abruzzi__earthquake-viz__all_week.geojson")
    static let significant = Fixtures.usgs("NaseemaO__Leaflet-Earthquakes-dashboard__significant_month.geojson")
}

/// Rows by id, for comparing sets of rows regardless of order.
func byID(_ quakes: [IOQuaked.Quake]) -> [String: IOQuaked.Quake] {
    Dictionary(quakes.map { ($0.id, $0) }, uniquingKeysWith: { a, _ in a })
}

/// Runs `body` with a daemon on `feeds` in a fresh temp directory, stopping it afterwards.
func withQuaked<T>(
    feeds: [URL] = [TestFeeds.day], arguments: [String] = [], _ body: (Quaked) async throws -> T
) async throws -> T {
    try await withTemporaryDirectory { dir in
        let daemon = try await Quaked(in: dir, feeds: feeds, arguments)
        do {
            let result = try await body(daemon)
            try await daemon.stop()
            return result
        } catch {
            _ = try? await daemon.stop()
            throw error
        }
    }
}
