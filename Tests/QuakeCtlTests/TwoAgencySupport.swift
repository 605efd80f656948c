import Foundation
import QuakeClient
import QuakeProtocol
import QuakeStore
import QuakeTestSupport
import Testing

/// Two agencies, EMSC and INGV, each an ``FDSNTestService`` on one local HTTP server, and a real
/// quaked (the built binary, its socket and SQLite store in a temp directory) following both as
/// `fdsn` sources, in the order `emsc` then `ingv` (so EMSC's report is preferred once both
/// report a quake, both being reviewed). The services start empty; a test adds a report with
/// ``report(_:)`` and imports it with ``refresh(_:)`` (`quakectl refresh --source`), so the
/// sources' own interval (an hour) never runs during a test.
final class TwoAgencies: @unchecked Sendable {
    enum Agency: String, CaseIterable, Sendable, CustomTestStringConvertible {
        case emsc, ingv
        var other: Agency { self == .emsc ? .ingv : .emsc }
        var testDescription: String { rawValue.uppercased() + " first" }
    }

    /// One quake as the two agencies report it: INGV 5 s of origin time after EMSC and 0.18°
    /// (20 km) north of it, EMSC at M 4.6 and INGV at M 4.4. Within association's 16 s and 100 km.
    struct Quake: Sendable {
        var time: Int64
        var emscID = "20261127_0000321"
        var ingvID = "44125001"
        var emscMag = 4.6
        var ingvMag = 4.4

        init(time: Int64 = Int64(Date().timeIntervalSince1970) * 1000 - 3_600_000) { self.time = time }

        func id(_ agency: Agency) -> String { agency == .emsc ? emscID : ingvID }
        func mag(_ agency: Agency) -> Double { agency == .emsc ? emscMag : ingvMag }
    }

    let directory: URL
    let services: [Agency: FDSNTestService]
    let quake: Quake
    private(set) var process: ChildProcess?
    var socketPath: String { directory.appendingPathComponent("q.sock").path }
    var stateDirectory: URL { directory.appendingPathComponent("state") }
    var configURL: URL { directory.appendingPathComponent("quaked.conf") }

    private init(directory: URL, services: [Agency: FDSNTestService], quake: Quake) {
        self.directory = directory
        self.services = services
        self.quake = quake
    }

    /// Runs `body` with a started quaked on two empty services, stopping it afterwards.
    static func with<T>(quake: Quake = Quake(), _ body: (TwoAgencies) async throws -> T) async throws -> T {
        try await FeedTestServer.withServer { server in
            let services = Dictionary(
                uniqueKeysWithValues: Agency.allCases.map {
                    ($0, FDSNTestService(on: server, basePath: "/\($0.rawValue)/fdsnws/event/1/"))
                })
            return try await withTemporaryDirectory { dir in
                let agencies = TwoAgencies(directory: dir, services: services, quake: quake)
                // EMSC in QuakeML, INGV in FDSN text, as the real services are usually read.
                try """
                feed = none
                retry-initial-delay = 50ms
                retry-max-delay = 300ms
                source = emsc fdsn \(services[.emsc]!.baseURL) format=xml interval=1h
                source = ingv fdsn \(services[.ingv]!.baseURL) format=text interval=1h

                """.write(to: agencies.configURL, atomically: true, encoding: .utf8)
                try await agencies.start()
                do {
                    let result = try await body(agencies)
                    try await agencies.stop()
                    return result
                } catch {
                    _ = try? await agencies.stop()
                    throw error
                }
            }
        }
    }

    /// Starts quaked and waits until both sources have run once (on empty services: nothing).
    func start() async throws {
        let process = try ChildProcess(
            BuiltProducts.path("quaked"),
            [
                "--state-directory", stateDirectory.path, "--socket", socketPath, "--config", configURL.path,
                "--log-level", "debug",
            ])
        self.process = process
        try await waitUntil(timeout: .seconds(30)) {
            guard process.isRunning else { throw TestFailure("quaked exited early:\n\(process.stderr)") }
            return UnixSocketClient.canConnect(socketPath)
        }
        try await waitUntil(timeout: .seconds(30)) {
            try self.withStore { try $0.sourceStates().filter { $0.lastSuccess != nil }.count == 2 }
        }
    }

    func stop() async throws {
        guard let process else { return }
        process.signal(SIGTERM)
        let status = try await process.wait(timeout: .seconds(15))
        self.process = nil
        if status != 0 { throw TestFailure("quaked exited \(status):\n\(process.stderr)") }
    }

    /// The agency publishes its report of ``quake``, updated now (after the source's last run).
    func publish(_ agency: Agency) throws {
        let latitude = agency == .emsc ? 42.50 : 42.68
        let time = agency == .emsc ? quake.time : quake.time + 5000
        try services[agency]!.add(
            feature: """
                {"type":"Feature","properties":{"mag":\(quake.mag(agency)),"place":"CENTRAL ITALY","time":\(time),\
                "updated":\(Int64(Date().timeIntervalSince1970 * 1000)),"status":"reviewed","net":"\(agency.rawValue)",\
                "code":"\(quake.id(agency))","ids":",\(quake.id(agency)),","type":"earthquake","magType":"ml"},\
                "geometry":{"type":"Point","coordinates":[13.25,\(latitude),10]},"id":"\(quake.id(agency))"}
                """)
    }

    /// `quakectl refresh --source AGENCY`: the source runs now, and this returns after its import.
    func refresh(_ agency: Agency) async throws {
        let result = try await quakectl(["refresh", "--socket", socketPath, "--source", agency.rawValue])
        guard result.status == 0 else { throw TestFailure("refresh --source \(agency.rawValue): \(result.stderr)") }
    }

    /// The agency publishes its report and quaked imports it.
    func report(_ agency: Agency) async throws {
        try publish(agency)
        try await refresh(agency)
    }

    func withStore<T>(_ body: (QuakeStore) throws -> T) throws -> T {
        let store = try QuakeStore(directory: stateDirectory)
        defer { try? store.close() }
        return try body(store)
    }

    /// The kinds of the store's history changes of `id`, in order (`insert`, `update`, ...).
    func historyKinds(of id: String) throws -> [String] {
        try withStore { store in
            var kinds: [String] = []
            var after: Int64 = 0
            while true {
                let page = try store.history(after: after, limit: 1000)
                for transaction in page.transactions {
                    kinds += transaction.changes.filter { $0.quakeId == id }.map(\.kind.rawValue)
                }
                after = page.nextAfter
                if !page.hasMore { return kinds }
            }
        }
    }

    // MARK: watch --exec

    /// A real `quakectl watch --exec HOOK` on this daemon with its cache at `cache`.
    func watch(cache: String, hook: Hook, _ extra: [String] = []) throws -> ChildProcess {
        try startQuakectl(
            ["watch", "--json", "--heartbeat", "1", "--socket", socketPath, "--cache", cache, "--exec", hook.path]
                + extra)
    }

    /// Waits until the watch's cache is at the store's head: every change up to it was delivered
    /// (`--exec`'s runs included: a change is committed to the cache after its run exits 0).
    func waitForCacheAtHead(_ watch: ChildProcess, cache path: String) async throws {
        let (storeId, head) = try withStore { ($0.storeID, Int(try $0.head())) }
        try await waitUntil(timeout: .seconds(30)) {
            guard watch.isRunning else { throw TestFailure("watch exited: \(watch.stderr)") }
            guard FileManager.default.fileExists(atPath: path) else { return false }
            let cache = try QuakeCache(path: path)
            defer { try? cache.close() }
            let position = try cache.position()
            return position?.storeId == storeId && position?.token == head
        }
    }

    /// The cache's rows, by `quakectl list --cache --json` (quaked not asked), and the plain
    /// listing's lines, whose agencies column names every agency.
    static func cached(_ path: String) async throws -> (quakes: [IOQuaked.Quake], lines: [String]) {
        let json = try await quakectl(["list", "--cache", "--cache-path", path, "--json"])
        guard json.status == 0 else { throw TestFailure("list --cache --json: \(json.stderr)") }
        let reply = try JSONDecoder().decode(IOQuaked.Query.Reply.self, from: Data(json.stdout.utf8))
        let plain = try await quakectl(["list", "--cache", "--cache-path", path])
        guard plain.status == 0 else { throw TestFailure("list --cache: \(plain.stderr)") }
        return (reply.quakes, plain.stdout.split(separator: "\n").map(String.init))
    }

    /// Stops a watch with SIGTERM (it finishes the change in hand) and checks it exited 0.
    static func terminate(_ watch: ChildProcess) async throws {
        watch.signal(SIGTERM)
        let status = try await watch.wait(timeout: .seconds(15))
        if status != 0 { throw TestFailure("watch exited \(status):\n\(watch.stderr)") }
    }
}

/// `--exec`'s command: a shell script appending one line per run to a log, the change's kind,
/// quake id, agency, agencies, magnitude and token from the variables `--exec` sets.
struct Hook: Sendable {
    struct Run: Sendable, Equatable, CustomStringConvertible {
        var kind: String
        var id: String
        var agency: String
        var agencies: String
        var mag: String
        var token: String
        var description: String { "\(kind) \(id) \(agency) [\(agencies)] M\(mag) @\(token)" }
    }

    let path: String
    let log: URL

    init(in dir: URL) throws {
        log = dir.appendingPathComponent("alerts.log")
        let url = dir.appendingPathComponent("alert.sh")
        try """
        #!/bin/sh
        cat > /dev/null
        printf '%s|%s|%s|%s|%s|%s\\n' "$QUAKE_KIND" "$QUAKE_ID" "$QUAKE_AGENCY" "$QUAKE_AGENCIES" "$QUAKE_MAG" "$QUAKED_TOKEN" >> '\(log.path)'
        """.write(to: url, atomically: true, encoding: .utf8)
        chmod(url.path, 0o755)
        path = url.path
    }

    /// Every run so far, in order.
    var runs: [Run] {
        ((try? String(contentsOf: log, encoding: .utf8)) ?? "").split(separator: "\n").map { line in
            let f = line.split(separator: "|", omittingEmptySubsequences: false).map(String.init)
            return Run(
                kind: f[0], id: f.count > 1 ? f[1] : "", agency: f.count > 2 ? f[2] : "",
                agencies: f.count > 3 ? f[3] : "", mag: f.count > 4 ? f[4] : "", token: f.count > 5 ? f[5] : "")
        }
    }
}
