import Foundation

/// A real PostgreSQL server for the sync tests and benchmark: Debian's binaries
/// (`/usr/lib/postgresql/VERSION/bin`, or `$QUAKED_PG_BIN`), a fresh cluster in a temporary
/// directory, listening on 127.0.0.1 at a free port and on a private socket directory, with
/// PostGIS created in its database when installed.
///
/// initdb and postgres refuse to run as root: as root, they run as the `postgres` user (through
/// `setpriv`, which execs, so the child is the postmaster itself and ``kill()`` is a real crash).
///
/// Authentication: local connections and `postgres` over TCP are trusted; the role ``sinkRole``
/// logs in over TCP with ``sinkPassword`` (scram-sha-256), for the tests of passwords and refused
/// logins.
public final class PostgresTestServer: @unchecked Sendable {
    public let directory: URL
    public let port: Int
    public let database = "quaked_test"
    public static let sinkRole = "sinker"
    public static let sinkPassword = "s3cret:with\\odd chars"
    public let binaries: String
    public private(set) var hasPostGIS = false
    private var postmaster: ChildProcess?
    private let asRoot = geteuid() == 0
    private let fsync: Bool
    private var tls = false

    public var dataDirectory: String { directory.appendingPathComponent("data").path }
    public var socketDirectory: String { directory.appendingPathComponent("socket").path }

    /// A URL for the trusted superuser over TCP.
    public var url: String { "postgresql://postgres@127.0.0.1:\(port)/\(database)?sslmode=disable" }

    public struct Failure: Error, CustomStringConvertible {
        public var description: String
    }

    /// The newest installed server version's binaries.
    public static func findBinaries() throws -> String {
        if let bin = ProcessInfo.processInfo.environment["QUAKED_PG_BIN"] { return bin }
        let root = "/usr/lib/postgresql"
        let versions = (try? FileManager.default.contentsOfDirectory(atPath: root)) ?? []
        guard let newest = versions.compactMap(Int.init).max(),
            FileManager.default.isExecutableFile(atPath: "\(root)/\(newest)/bin/postgres")
        else {
            throw Failure(
                description:
                    "no PostgreSQL server in \(root)/*/bin: run scripts/install-deps (Debian's postgresql and postgresql-15-postgis-3), or set QUAKED_PG_BIN")
        }
        return "\(root)/\(newest)/bin"
    }

    /// Creates the cluster and starts the server. `fsync`: off makes tests faster and still
    /// survives a kill of the server (the OS keeps what it wrote); the benchmark keeps it on.
    public static func start(fsync: Bool = false) async throws -> PostgresTestServer {
        let server = try PostgresTestServer(fsync: fsync)
        try await server.initialize()
        return server
    }

    private init(fsync: Bool) throws {
        binaries = try Self.findBinaries()
        directory = try makeTemporaryDirectory(prefix: "quaked-pg")
        port = Int(try freeLocalPort())
        self.fsync = fsync
    }

    deinit {
        postmaster?.signal(SIGKILL)
        try? FileManager.default.removeItem(at: directory)
    }

    private func initialize() async throws {
        try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: directory.path)
        try FileManager.default.createDirectory(atPath: socketDirectory, withIntermediateDirectories: true)
        if asRoot {
            guard let entry = getpwnam("postgres") else {
                throw Failure(description: "running as root, and there is no postgres user to run the server as")
            }
            chown(directory.path, entry.pointee.pw_uid, entry.pointee.pw_gid)
            chown(socketDirectory, entry.pointee.pw_uid, entry.pointee.pw_gid)
        }
        let initdb = try await ChildProcess.run(
            launcher, launcherArguments + ["\(binaries)/initdb", "-D", dataDirectory, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-sync"],
            timeout: .seconds(120))
        guard initdb.status == 0 else { throw Failure(description: "initdb failed: \(initdb.stderr)") }
        let hba = """
            local all all trust
            host all \(Self.sinkRole) 127.0.0.1/32 scram-sha-256
            host all all 127.0.0.1/32 trust
            """
        try hba.write(toFile: "\(dataDirectory)/pg_hba.conf", atomically: false, encoding: .utf8)
        try await startServer()
        _ = try psql("CREATE DATABASE \(database)", database: "postgres")
        _ = try psql(
            "CREATE ROLE \(Self.sinkRole) LOGIN PASSWORD '\(Self.sinkPassword.replacingOccurrences(of: "'", with: "''"))'",
            database: "postgres")
        _ = try psql("GRANT ALL ON SCHEMA public TO \(Self.sinkRole)")
        if (try? psql("CREATE EXTENSION postgis")) != nil { hasPostGIS = true }
    }

    private var launcher: String { asRoot ? "/usr/bin/setpriv" : "\(binaries)/postgres" }
    private var launcherArguments: [String] {
        asRoot ? ["--reuid=postgres", "--regid=postgres", "--init-groups", "--"] : []
    }

    private func startServer() async throws {
        let arguments = [
            "-D", dataDirectory, "-k", socketDirectory, "-p", String(port), "-c", "listen_addresses=127.0.0.1",
            "-c", "fsync=\(fsync ? "on" : "off")", "-c", "log_min_messages=warning", "-c", "max_connections=50",
        ] + (tls ? ["-c", "ssl=on", "-c", "ssl_cert_file=server.crt", "-c", "ssl_key_file=server.key"] : [])
        let deadline = ContinuousClock.now + .seconds(30)
        while true {
            let child =
                asRoot
                ? try ChildProcess(launcher, launcherArguments + ["\(binaries)/postgres"] + arguments)
                : try ChildProcess("\(binaries)/postgres", arguments)
            // Ready when it takes a connection; after a crash, the old backends may still hold
            // the shared memory for a moment, and the postmaster exits: start it again.
            while child.isRunning, ContinuousClock.now < deadline {
                let ready = try await ChildProcess.run(
                    "\(binaries)/pg_isready", ["-q", "-h", socketDirectory, "-p", String(port)], timeout: .seconds(10))
                if ready.status == 0 {
                    postmaster = child
                    return
                }
                try await Task.sleep(for: .milliseconds(50))
            }
            if ContinuousClock.now >= deadline {
                child.signal(SIGKILL)
                throw Failure(description: "PostgreSQL did not start within 30 s: \(child.stderr)")
            }
            try await Task.sleep(for: .milliseconds(200))
        }
    }

    /// The certificate clients verify the server with (after ``enableTLS()``): self-signed, for
    /// the name `localhost`.
    public var certificatePath: String { directory.appendingPathComponent("server.crt").path }

    /// Restarts the server with TLS on (a self-signed certificate for `localhost` made by openssl).
    public func enableTLS() async throws {
        let key = "\(dataDirectory)/server.key"
        let made = try await ChildProcess.run(
            "/usr/bin/openssl",
            [
                "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=localhost",
                "-addext", "subjectAltName=DNS:localhost", "-keyout", key, "-out", certificatePath,
            ])
        guard made.status == 0 else { throw Failure(description: "openssl failed: \(made.stderr)") }
        try FileManager.default.copyItem(atPath: certificatePath, toPath: "\(dataDirectory)/server.crt")
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: key)
        if asRoot, let entry = getpwnam("postgres") {
            for file in [key, "\(dataDirectory)/server.crt"] { chown(file, entry.pointee.pw_uid, entry.pointee.pw_gid) }
        }
        tls = true
        try await restart()
    }

    /// kill -9 of the postmaster: a crash; its backends exit when they notice.
    public func kill() async throws {
        postmaster?.signal(SIGKILL)
        _ = try await postmaster?.wait(timeout: .seconds(10))
        postmaster = nil
    }

    /// SIGSTOP (``pause()``) or SIGCONT (``resume()``) to the postmaster and every backend (its
    /// children, found in /proc): a server that neither answers nor closes its connections.
    public func pause() throws { try signalAll(SIGSTOP) }
    public func resume() throws { try signalAll(SIGCONT) }

    private func signalAll(_ signal: Int32) throws {
        guard let postmaster, postmaster.isRunning else { throw Failure(description: "PostgreSQL is not running") }
        var pids = [postmaster.pid]
        for entry in (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? [] {
            guard let pid = Int32(entry),
                let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
                let line = status.split(separator: "\n").first(where: { $0.hasPrefix("PPid:") }),
                Int32(line.dropFirst("PPid:".count).trimmingCharacters(in: .whitespaces)) == postmaster.pid
            else { continue }
            pids.append(pid)
        }
        // The postmaster first when stopping (it forks no new backend), last when continuing.
        for pid in signal == SIGCONT ? pids.reversed() : pids { Foundation.kill(pid, signal) }
    }

    /// Starts the server again on the same data (crash recovery after ``kill()``).
    public func restart() async throws {
        if postmaster != nil { try await stop() }
        try await startServer()
    }

    /// A fast shutdown (the server's SIGINT).
    public func stop() async throws {
        postmaster?.signal(SIGINT)
        _ = try await postmaster?.wait(timeout: .seconds(30))
        postmaster = nil
    }

    public var isRunning: Bool { postmaster?.isRunning ?? false }

    /// Runs SQL with psql as the superuser over the socket; returns psql's unaligned output.
    @discardableResult
    public func psql(_ sql: String, database: String? = nil) throws -> String {
        try psql(["-c", sql], database: database)
    }

    /// Runs a file of SQL (and psql's commands) with psql.
    @discardableResult
    public func psql(file: String, database: String? = nil) throws -> String {
        try psql(["-f", file], database: database)
    }

    private func psql(_ input: [String], database: String?) throws -> String {
        let sql = input.joined(separator: " ")
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "\(binaries)/psql")
        process.arguments = [
            "-X", "-q", "-At", "-v", "ON_ERROR_STOP=1", "-h", socketDirectory, "-p", String(port), "-U", "postgres",
            "-d", database ?? self.database,
        ] + input
        let output = Pipe()
        let errors = Pipe()
        process.standardOutput = output
        process.standardError = errors
        try process.run()
        let out = output.fileHandleForReading.readDataToEndOfFile()
        let err = errors.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw Failure(description: "psql failed on \(sql.debugDescription): \(String(decoding: err, as: UTF8.self))")
        }
        return String(decoding: out, as: UTF8.self).trimmingCharacters(in: .newlines)
    }
}

/// A TCP port on 127.0.0.1 that nothing listens on right now (bound to port 0, then released).
public func freeLocalPort() throws -> UInt16 {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { throw PostgresTestServer.Failure(description: "socket: \(String(cString: strerror(errno)))") }
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    address.sin_port = 0
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
            bind(fd, pointer, length) == 0 && getsockname(fd, pointer, &length) == 0
        }
    }
    guard bound else { throw PostgresTestServer.Failure(description: "bind: \(String(cString: strerror(errno)))") }
    return UInt16(bigEndian: address.sin_port)
}
