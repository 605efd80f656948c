import Foundation
import QuakeDaemon
import QuakeProtocol
import QuakeTestSupport
import Testing

/// The socket's directory, with real quaked processes: quaked's own default directory
/// (`/tmp/quaked-<uid>`, `$XDG_RUNTIME_DIR/quaked`) is created 0700 and refused (exit 78, naming
/// `socket`) when another user owns it, others may write to it, or it is a symbolic link or no
/// directory; a directory the configuration names may be a link or sticky, but not open to others.
@Suite("socket directory")
struct SocketDirectoryTests {
    // MARK: - quaked's own default directory, as a user without an account

    static let setpriv = "/usr/bin/setpriv"
    /// The default directory of a plain user: root's is /run/quaked, shared with the machine.
    static let canSwitchUser = getuid() == 0 && FileManager.default.isExecutableFile(atPath: setpriv)

    /// A uid with no account and no `/tmp/quaked-<uid>`: that default directory is this test's.
    static func freshUID() -> uid_t {
        while true {
            let uid = uid_t.random(in: 200_000..<2_000_000)
            var info = stat()
            if lstat("/tmp/quaked-\(uid)", &info) != 0 { return uid }
        }
    }

    /// The built quaked and quakectl where any user may run them: the build directory may sit
    /// where only root can go (a clone in /root). Hard links (copies across file systems), made
    /// once per test process.
    static let reachableTools: URL = {
        let directory = URL(fileURLWithPath: "/tmp/quaked-test-tools-\(getpid())")
        try? FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        chmod(directory.path, 0o755)
        for tool in ["quaked", "quakectl"] {
            let target = directory.appendingPathComponent(tool).path
            unlink(target)
            if link(BuiltProducts.path(tool), target) != 0 {
                try? FileManager.default.copyItem(atPath: BuiltProducts.path(tool), toPath: target)
            }
            chmod(target, 0o755)
        }
        return directory
    }()

    /// `tool` (quaked or quakectl) as `uid`, with `environment` only (no XDG_RUNTIME_DIR unless
    /// given).
    static func asUser(_ uid: uid_t, _ tool: String, _ arguments: [String], environment: [String: String] = [:])
        -> [String]
    {
        ["--reuid=\(uid)", "--regid=\(uid)", "--clear-groups", "/usr/bin/env", "-i", "PATH=/usr/bin:/bin", "HOME=/"]
            + environment.map { "\($0.key)=\($0.value)" } + [reachableTools.appendingPathComponent(tool).path] + arguments
    }

    static func daemonArguments(_ work: URL) -> [String] {
        [
            "--config", "/dev/null", "--state-directory", work.appendingPathComponent("state").path,
            "--feed", "file:///nonexistent/feed.geojson", "--interval", "1h",
        ]
    }

    /// A work directory the user `uid` owns (for the state directory).
    static func withWorkDirectory(for uid: uid_t, _ body: (URL) async throws -> Void) async throws {
        try await withTemporaryDirectory { work in
            #expect(chown(work.path, uid, uid) == 0)
            try await body(work)
        }
    }

    /// Starts quaked as `uid` and waits until `socket` answers; fails with its stderr if it exits.
    static func startDaemon(as uid: uid_t, work: URL, socket: String, environment: [String: String] = [:])
        async throws -> ChildProcess
    {
        let daemon = try ChildProcess(
            setpriv, asUser(uid, "quaked", daemonArguments(work), environment: environment))
        try await waitUntil(timeout: .seconds(30)) {
            guard daemon.isRunning else { throw DaemonHarness.HarnessError(stderr: daemon.stderr) }
            return UnixSocketClient.canConnect(socket)
        }
        return daemon
    }

    @Test(
        "a missing default directory is created 0700, reused, and quakectl finds the socket in it",
        .enabled(if: canSwitchUser), arguments: [false, true])
    func createdPrivate(withXDGRuntimeDirectory: Bool) async throws {
        let uid = Self.freshUID()
        try await Self.withWorkDirectory(for: uid) { work in
            var environment: [String: String] = [:]
            var directory = "/tmp/quaked-\(uid)"
            if withXDGRuntimeDirectory {
                let runtime = work.appendingPathComponent("xdg")
                #expect(mkdir(runtime.path, 0o700) == 0 && chown(runtime.path, uid, uid) == 0)
                environment["XDG_RUNTIME_DIR"] = runtime.path
                directory = runtime.appendingPathComponent("quaked").path
            }
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let socket = directory + "/quaked.sock"
            for start in 1...2 {  // created, then reused
                let daemon = try await Self.startDaemon(as: uid, work: work, socket: socket, environment: environment)
                var info = stat()
                #expect(lstat(directory, &info) == 0)
                #expect(info.st_mode & S_IFMT == S_IFDIR)
                #expect(
                    info.st_mode & 0o7777 == 0o700, "start \(start): mode \(String(info.st_mode & 0o7777, radix: 8))")
                #expect(info.st_uid == uid)
                // quakectl, as the same user in the same environment, finds the socket by default.
                let status = try await ChildProcess.run(
                    Self.setpriv, Self.asUser(uid, "quakectl", ["status", "--json"], environment: environment))
                #expect(status.status == 0, "\(status.stderr)")
                #expect(status.stdout.contains("\"version\""))
                daemon.signal(SIGTERM)
                #expect(try await daemon.wait(timeout: .seconds(15)) == 0, "\(daemon.stderr)")
            }
        }
    }

    enum Squatter: String, CaseIterable, Sendable {
        case ownedByNobody, worldWritable, groupWritable, symbolicLink, regularFile
    }

    @Test(
        "an unsafe default directory: exit 78, naming socket and the reason, and nothing made",
        .enabled(if: canSwitchUser), arguments: Squatter.allCases)
    func refusedPrivate(_ squatter: Squatter) async throws {
        let uid = Self.freshUID()
        let directory = "/tmp/quaked-\(uid)"
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try await Self.withWorkDirectory(for: uid) { work in
            let reason: String
            switch squatter {
            case .ownedByNobody:
                #expect(mkdir(directory, 0o700) == 0 && chown(directory, 65534, 65534) == 0)
                reason = "is owned by nobody (uid 65534), not by quaked's user uid \(uid)"
            case .worldWritable, .groupWritable:
                let mode: mode_t = squatter == .worldWritable ? 0o777 : 0o770
                #expect(mkdir(directory, 0o700) == 0 && chown(directory, uid, uid) == 0 && chmod(directory, mode) == 0)
                reason = "is writable by its group or by others (mode 0\(String(mode, radix: 8)))"
            case .symbolicLink:
                // To a directory that would pass: the link itself is refused.
                let target = work.appendingPathComponent("elsewhere").path
                #expect(mkdir(target, 0o700) == 0 && chown(target, uid, uid) == 0)
                #expect(symlink(target, directory) == 0)
                reason = "is a symbolic link"
            case .regularFile:
                #expect(FileManager.default.createFile(atPath: directory, contents: Data("x".utf8)))
                #expect(chown(directory, uid, uid) == 0)
                reason = "is not a directory"
            }
            var before = stat()
            #expect(lstat(directory, &before) == 0)
            let result = try await ChildProcess.run(
                Self.setpriv, Self.asUser(uid, "quaked", Self.daemonArguments(work)), timeout: .seconds(30))
            #expect(result.status == 78, "\(result.stderr)")
            #expect(
                result.stderr.contains(
                    "invalid configuration: socket (default): the socket directory \(directory) \(reason)"),
                "\(result.stderr)")
            // Refused before anything was made, and what was there is left alone.
            #expect(!FileManager.default.fileExists(atPath: work.appendingPathComponent("state").path))
            var after = stat()
            #expect(lstat(directory, &after) == 0)
            #expect(after.st_mode == before.st_mode && after.st_uid == before.st_uid)
        }
    }

    @Test("--check-config creates no socket directory", .enabled(if: canSwitchUser))
    func checkConfigCreatesNothing() async throws {
        let uid = Self.freshUID()
        defer { try? FileManager.default.removeItem(atPath: "/tmp/quaked-\(uid)") }
        try await Self.withWorkDirectory(for: uid) { work in
            let result = try await ChildProcess.run(
                Self.setpriv, Self.asUser(uid, "quaked", ["--check-config"] + Self.daemonArguments(work)))
            #expect(result.status == 0, "\(result.stderr)")
            #expect(result.stdout.contains("socket = /tmp/quaked-\(uid)/quaked.sock"))
            #expect(result.stdout.contains("# default (no $XDG_RUNTIME_DIR)"))
            var info = stat()
            #expect(lstat("/tmp/quaked-\(uid)", &info) != 0)
        }
    }

    // MARK: - A directory the configuration names, as the test's own user

    /// `directory` as quaked names it: the directory part of the socket path, normalized
    /// (`/tmp//x` is `/tmp/x`).
    static func shown(_ directory: URL) -> String {
        (directory.appendingPathComponent("q.sock").path as NSString).deletingLastPathComponent
    }

    /// Runs quaked with `--socket path` (or `environment`); returns its exit status, or nil when it
    /// started and answered (then it has been stopped).
    static func runDaemon(socket: String, work: URL, arguments: [String]? = nil, environment: [String: String] = [:])
        async throws -> (status: Int32?, stderr: String)
    {
        let daemon = try ChildProcess(
            BuiltProducts.path("quaked"), (arguments ?? ["--socket", socket]) + daemonArguments(work),
            environment: environment)
        var answered = false
        try await waitUntil(timeout: .seconds(30)) {
            answered = UnixSocketClient.canConnect(socket)
            return answered || !daemon.isRunning
        }
        if answered {
            daemon.signal(SIGTERM)
            #expect(try await daemon.wait(timeout: .seconds(15)) == 0)
            return (nil, daemon.stderr)
        }
        return (try await daemon.wait(), daemon.stderr)
    }

    @Test("a named directory open to others is refused unless sticky")
    func namedDirectoryPermissions() async throws {
        try await withTemporaryDirectory { work in
            let open = work.appendingPathComponent("open")
            #expect(mkdir(open.path, 0o700) == 0 && chmod(open.path, 0o777) == 0)
            let refused = try await Self.runDaemon(socket: open.appendingPathComponent("q.sock").path, work: work)
            #expect(refused.status == 78, "\(refused.stderr)")
            #expect(
                refused.stderr.contains(
                    "socket (--socket): the socket directory \(Self.shown(open)) is writable by its group or by others and not sticky (mode 0777)"
                ), "\(refused.stderr)")

            // The same from the environment names the variable.
            let fromEnvironment = try await Self.runDaemon(
                socket: open.appendingPathComponent("q.sock").path, work: work, arguments: [],
                environment: ["QUAKED_SOCKET": open.appendingPathComponent("q.sock").path])
            #expect(fromEnvironment.status == 78)
            #expect(fromEnvironment.stderr.contains("socket (QUAKED_SOCKET)"), "\(fromEnvironment.stderr)")

            // Sticky, like /tmp: others may not remove or rename the socket.
            let sticky = work.appendingPathComponent("sticky")
            #expect(mkdir(sticky.path, 0o700) == 0 && chmod(sticky.path, 0o1777) == 0)
            let started = try await Self.runDaemon(socket: sticky.appendingPathComponent("q.sock").path, work: work)
            #expect(started.status == nil, "\(started.stderr)")
        }
    }

    @Test("a named directory may be a symbolic link, and a missing one is made 0755 with its parents")
    func namedDirectoryLinkAndCreation() async throws {
        try await withTemporaryDirectory { work in
            let real = work.appendingPathComponent("real")
            #expect(mkdir(real.path, 0o755) == 0)
            let link = work.appendingPathComponent("link")
            #expect(symlink(real.path, link.path) == 0)
            let viaLink = try await Self.runDaemon(socket: link.appendingPathComponent("q.sock").path, work: work)
            #expect(viaLink.status == nil, "\(viaLink.stderr)")

            let deeper = work.appendingPathComponent("new/deeper")
            let created = try await Self.runDaemon(socket: deeper.appendingPathComponent("q.sock").path, work: work)
            #expect(created.status == nil, "\(created.stderr)")
            var info = stat()
            #expect(stat(deeper.path, &info) == 0)
            #expect(info.st_mode & 0o7777 == 0o755)

            // A file where the directory should be.
            let file = work.appendingPathComponent("file")
            #expect(FileManager.default.createFile(atPath: file.path, contents: Data()))
            let notDirectory = try await Self.runDaemon(socket: file.appendingPathComponent("q.sock").path, work: work)
            #expect(notDirectory.status == 78)
            #expect(
                notDirectory.stderr.contains("the socket directory \(Self.shown(file)) is not a directory"),
                "\(notDirectory.stderr)")
        }
    }

    @Test("$RUNTIME_DIRECTORY as systemd makes it (0755, the service's user) is used; open to others it is refused")
    func runtimeDirectory() async throws {
        try await withTemporaryDirectory { work in
            let runtime = work.appendingPathComponent("runtime")
            #expect(mkdir(runtime.path, 0o755) == 0 && chmod(runtime.path, 0o755) == 0)
            let socket = runtime.appendingPathComponent("quaked.sock").path
            let started = try await Self.runDaemon(
                socket: socket, work: work, arguments: [], environment: ["RUNTIME_DIRECTORY": runtime.path])
            #expect(started.status == nil, "\(started.stderr)")
            #expect(chmod(runtime.path, 0o777) == 0)
            let refused = try await Self.runDaemon(
                socket: socket, work: work, arguments: [], environment: ["RUNTIME_DIRECTORY": runtime.path])
            #expect(refused.status == 78)
            #expect(
                refused.stderr.contains("socket (default): the socket directory \(Self.shown(runtime)) is writable"),
                "\(refused.stderr)")
        }
    }

    @Test("a named directory another user owns is refused", .enabled(if: getuid() == 0))
    func namedDirectoryOtherOwner() async throws {
        try await withTemporaryDirectory { work in
            let theirs = work.appendingPathComponent("theirs")
            #expect(mkdir(theirs.path, 0o755) == 0 && chown(theirs.path, 65534, 65534) == 0)
            let refused = try await Self.runDaemon(socket: theirs.appendingPathComponent("q.sock").path, work: work)
            #expect(refused.status == 78)
            #expect(
                refused.stderr.contains(
                    "socket (--socket): the socket directory \(Self.shown(theirs)) is owned by nobody (uid 65534), not by root, quaked's user"
                ),
                "\(refused.stderr)")
        }
    }

    // MARK: - Which rule applies

    @Test("the rule follows who chose the directory")
    func ruleSelection() throws {
        func rule(
            _ environment: [String: String], isRoot: Bool, flags: [(DaemonConfiguration.Key, String, String)] = []
        )
            throws -> ControlSocket.Directory
        {
            let loader = ConfigurationLoader(
                flags: flags.map { (key: $0.0, value: $0.1, flag: $0.2) }, configFile: "/dev/null",
                environment: environment, defaults: DefaultPaths(environment: environment, isRoot: isRoot, home: "/h"))
            return ControlSocket.Directory(try loader.resolve())
        }
        #expect(try rule([:], isRoot: false) == .init(rule: .own(mode: 0o700), source: "default"))
        #expect(
            try rule(["XDG_RUNTIME_DIR": "/run/user/7"], isRoot: false)
                == .init(rule: .own(mode: 0o700), source: "default"))
        #expect(try rule([:], isRoot: true) == .init(rule: .own(mode: 0o755), source: "default"))
        #expect(try rule(["RUNTIME_DIRECTORY": "/run/quaked"], isRoot: false) == .init(rule: .given, source: "default"))
        #expect(
            try rule([:], isRoot: false, flags: [(.socket, "/tmp/q.sock", "--socket")])
                == .init(rule: .given, source: "--socket"))
    }
}
