import Foundation
import QuakeClient
import QuakeCtl
import QuakeProtocol
import QuakeTestSupport
import Testing
import Varlink

/// `quakectl --host` and `quakectl bridge`: the same protocol through `ssh HOST quakectl bridge`,
/// here with a fake ssh that runs the remote command on this machine as sshd would (the real
/// quaked and quakectl processes, the real bridge), and in `RealSSHTests` through a real sshd.
extension ClientEndToEnd {
    @Suite struct RemoteTests {
        /// Runs `quakectl` with the fake ssh, the built quakectl as the remote one.
        static func remote(
            _ arguments: [String], _ ssh: FakeSSH, environment: [String: String] = [:]
        ) async throws -> (status: Int32, stdout: String, stderr: String) {
            try await quakectl(arguments, environment: ssh.environment.merging(environment) { $1 })
        }

        @Test func everyCommandGivesTheSameAnswerThroughTheBridge() async throws {
            try await withQuaked { daemon in
                let ssh = try FakeSSH(in: daemon.directory)
                let socket = daemon.socketPath
                let id = try daemon.withStore { try $0.allQuakes() }.map(\.id).sorted()[0]
                // Read-only commands: the remote answer is the local one, byte for byte.
                for command in [
                    ["status", "--json"], ["list", "--json", "--limit", "5"], ["show", id, "--json"],
                    ["history", "--json", "--limit", "2"], ["export", "--format", "geojson"],
                    ["list", "--absolute", "--min-mag", "2"],
                ] {
                    let local = try await quakectl(command + ["--socket", socket])
                    let remote = try await Self.remote(command + ["--host", "quake.example", "--socket", socket], ssh)
                    #expect(remote.status == 0, "\(command): \(remote.stderr)")
                    #expect(!remote.stdout.isEmpty)
                    if command[0] == "status" {
                        // The subscriber and timing fields may move between two calls.
                        let a = try JSONSerialization.jsonObject(with: Data(local.stdout.utf8)) as? [String: Any]
                        let b = try JSONSerialization.jsonObject(with: Data(remote.stdout.utf8)) as? [String: Any]
                        #expect(a?["storeId"] as? String == b?["storeId"] as? String)
                        #expect(b?["quakeCount"] as? Int == 146)
                    } else {
                        // An export says when it was made.
                        let generated = /"generated":[0-9]+/
                        #expect(
                            remote.stdout.replacing(generated, with: "") == local.stdout.replacing(generated, with: ""),
                            "\(command)")
                    }
                }

                // What ssh was asked to run: no terminal, no prompts (stdin is not a terminal),
                // `--` before the host, the remote socket quoted for the remote shell.
                let arguments = try ssh.lastArguments()
                #expect(Array(arguments.prefix(6)) == ["-T", "-x", "-a", "-o", "BatchMode=yes", "--"])
                #expect(arguments[6] == "quake.example")
                #expect(arguments[7] == "exec \(BuiltProducts.path("quakectl")) bridge --socket '\(socket)'")
                #expect(arguments.count == 8)

                // Commands that change things; the global option before the command, too.
                let refresh = try await Self.remote(["--host", "quake.example", "--socket", socket, "refresh"], ssh)
                #expect(refresh.status == 0, "\(refresh.stderr)")
                #expect(refresh.stdout.contains("no changes"))
                let deleted = try await Self.remote(["delete", id, "--host", "quake.example", "--socket", socket], ssh)
                #expect(deleted.status == 0, "\(deleted.stderr)")
                #expect(try daemon.withStore { try $0.allQuakes() }.count == 145)
                // An error reply comes through as itself.
                let missing = try await Self.remote(["show", id, "--host", "quake.example", "--socket", socket], ssh)
                #expect(missing.status == 65)
                #expect(missing.stderr.contains("no earthquake with id \(id) is stored"))
                let reload = try await Self.remote(["reload", "--host", "quake.example", "--socket", socket], ssh)
                #expect(reload.status == 0, "\(reload.stderr)")
                // Every ssh child was reaped: none is left running.
                #expect(try ssh.runningChildren().isEmpty)
            }
        }

        @Test func watchKeepsItsCacheHereAndSeesLaterChangesAndOutages() async throws {
            try await withQuaked { daemon in
                let ssh = try FakeSSH(in: daemon.directory)
                let cache = daemon.directory.appendingPathComponent("local-cache/watch.sqlite").path
                let watch = try startQuakectl(
                    [
                        "watch", "--json", "--heartbeat", "1", "--name", "far-away", "--host", "quake.example",
                        "--socket", daemon.socketPath, "--cache", cache,
                    ], environment: ssh.environment)
                defer { watch.signal(SIGKILL) }
                // The cache is here, filled through the bridge.
                try await WatchTests.expectCaughtUp(watch, daemon, cache: cache)
                // Two connections (subscription and requests), each its own ssh.
                #expect(try ssh.runningChildren().count == 2)
                let status = try await quakectl(["status", "--json", "--socket", daemon.socketPath])
                #expect(status.stdout.contains("\"far-away\""), "the named client is known to quaked")

                // A change made after it started is printed.
                let id = try daemon.withStore { try $0.allQuakes() }[0].id
                #expect(try await quakectl(["delete", id, "--socket", daemon.socketPath]).status == 0)
                try await WatchTests.expectCaughtUp(watch, daemon, cache: cache)
                try await waitUntil(timeout: .seconds(30)) {
                    try WatchOutput(watch.stdout).changes.contains { $0.quakeId == id && $0.kind == "delete" }
                }

                // The remote quaked goes away: watch says so and keeps retrying through ssh...
                try await daemon.stop()
                try await waitUntil(timeout: .seconds(30)) { watch.stderr.contains("Retrying; the cache is kept.") }
                #expect(watch.stderr.contains("quaked on quake.example"), "\(watch.stderr)")
                #expect(watch.isRunning)
                // ...and catches up once it is back.
                try await daemon.start()
                try await WatchTests.expectCaughtUp(watch, daemon, cache: cache)
                #expect(watch.stderr.contains("reconnected to quaked"))

                // A stop signal ends the watch (the change in hand finished) and its ssh children.
                let children = try ssh.runningChildren()
                #expect(children.count == 2)
                watch.signal(SIGTERM)
                #expect(try await watch.wait(timeout: .seconds(30)) == 0)
                try await waitUntil(timeout: .seconds(10)) { try ssh.runningChildren().isEmpty }
            }
        }

        @Test func theBridgeAnswersCallsSentBeforeItsInputEnds() async throws {
            try await withQuaked { daemon in
                // Two calls and the end of input at once (as `printf ... | socat` does): the
                // bridge shuts down only the socket's sending side, so both replies still come,
                // byte for byte as quaked sent them, NUL-terminated; then quaked closes and the
                // bridge exits 0.
                let script = """
                    printf '{"method":"io.quaked.GetStatus"}\\0{"method":"io.quaked.Get","parameters":{"id":"nope"}}\\0' \\
                        | '\(BuiltProducts.path("quakectl"))' bridge --socket '\(daemon.socketPath)' | od -An -c
                    """
                let result = try await ChildProcess.run("/bin/bash", ["-o", "pipefail", "-c", script], timeout: .seconds(60))
                #expect(result.status == 0, "\(result.stderr)")
                let text = result.stdout.replacingOccurrences(of: " ", with: "").replacingOccurrences(of: "\n", with: "")
                #expect(text.contains("\"storeId\""))
                #expect(text.contains("io.quaked.NoSuchQuake"))
                #expect(text.hasSuffix("}\\0"), "the last reply ends with its NUL")
                #expect(text.components(separatedBy: "\\0").count == 3, "two replies")
            }
        }

        @Test func aMissingRemoteSocketIsAClearError() async throws {
            try await withTemporaryDirectory { dir in
                let ssh = try FakeSSH(in: dir)
                // Quoted for the remote shell: it arrives as it was given.
                let socket = dir.appendingPathComponent("nobody's $HOME; here.sock").path
                let result = try await Self.remote(["status", "--host", "admin@quake.example", "--socket", socket], ssh)
                #expect(result.status == 69)
                // The remote bridge's own message, passed through ssh's stderr...
                #expect(result.stderr.contains("quakectl: bridge on "), "\(result.stderr)")
                #expect(result.stderr.contains("cannot reach quaked at \(socket) (no such socket)"))
                // ...then quakectl's.
                #expect(result.stderr.contains("quaked on admin@quake.example is unreachable"))
                #expect(try ssh.lastArguments().contains("admin@quake.example"))
                #expect(try ssh.runningChildren().isEmpty)
            }
        }

        @Test func badHostsAndAMissingSSHAreRefused() async throws {
            try await withTemporaryDirectory { dir in
                let ssh = try FakeSSH(in: dir)
                // Option injection through the host never reaches ssh.
                for host in ["-oProxyCommand=touch /tmp/pwned", "", "two words"] {
                    let result = try await Self.remote(["status", "--host=\(host)"], ssh)
                    #expect(result.status == 64, "\(host): \(result.stderr)")
                    #expect(result.stderr.contains("--host"), "\(result.stderr)")
                }
                #expect(throws: (any Error).self) { try ssh.lastArguments() }

                let missing = try await quakectl(
                    ["status", "--host", "quake.example"], environment: ["QUAKECTL_SSH": dir.path + "/no-ssh -v"])
                #expect(missing.status == 69)
                #expect(missing.stderr.contains("cannot run \(dir.path)/no-ssh (not found)"), "\(missing.stderr)")

                // No quakectl on the remote host (the remote shell's 127).
                let noRemote = try await Self.remote(
                    ["status", "--host", "quake.example"], ssh, environment: ["QUAKECTL_REMOTE": "/nonexistent/quakectl"])
                #expect(noRemote.status == 69)
                #expect(noRemote.stderr.contains("quake.example has no `/nonexistent/quakectl`"), "\(noRemote.stderr)")

                // ssh failing on its own (255) is ssh's failure, not quaked's.
                let refused = dir.appendingPathComponent("refused-ssh").path
                try "#!/bin/sh\necho 'ssh: connect to host quake.example port 22: Connection refused' >&2\nexit 255\n"
                    .write(toFile: refused, atomically: true, encoding: .utf8)
                chmod(refused, 0o755)
                let failing = try await quakectl(
                    ["status", "--host", "quake.example"], environment: ["QUAKECTL_SSH": refused])
                #expect(failing.status == 69)
                #expect(failing.stderr.contains("port 22: Connection refused"), "ssh's message is passed through")
                #expect(failing.stderr.contains("ssh to quake.example failed"), "\(failing.stderr)")
            }
        }

        @Test func aPeerThatGoesAwayMidStreamEndsTheCallWithAClearError() async throws {
            try await withQuaked { daemon in
                let ssh = try FakeSSH(in: daemon.directory)
                let route = try SSHRoute(
                    destination: "quake.example", remoteSocket: daemon.socketPath, environment: ssh.environment,
                    interactive: false)
                let error = try await withTimeout(.seconds(60)) { () -> (any Error)? in
                    do {
                        try await QuakedConnection.with(.ssh(route)) { connection in
                            var events = try await connection.subscribe(client: nil, heartbeatSeconds: 60)
                                .makeAsyncIterator()
                            #expect(try await events.next()?.event == .subscribed)
                            // quaked dies under the stream: no reply, no heartbeat, no clean end
                            // of the call.
                            daemon.kill()
                            while try await events.next() != nil {}
                        }
                        return nil
                    } catch {
                        return error
                    }
                }
                // The bridge ended (status 0: quaked closed the socket), then ssh, and the stream
                // says so instead of waiting for ever.
                #expect(error as? QuakedRemoteError == QuakedRemoteError(kind: .closed, route: route))
                #expect(try ssh.runningChildren().isEmpty)
                let message = QuakectlError.from(error!).message
                #expect(message.contains("quaked on quake.example closed the connection before answering"))
            }
        }
    }
}

/// A stand-in for ssh: records its arguments and pid, drops its options and the host, and runs
/// the remote command here with `sh -c`, as sshd runs it with the user's shell. The remote
/// quakectl is the built one (`QUAKECTL_REMOTE`), with `exec` so that the bridge is the process
/// quakectl started.
struct FakeSSH {
    let directory: URL
    var script: String { directory.appendingPathComponent("fake-ssh").path }
    var argumentsFile: String { directory.appendingPathComponent("fake-ssh.args").path }
    var pidsFile: String { directory.appendingPathComponent("fake-ssh.pids").path }

    init(in directory: URL) throws {
        self.directory = directory
        try """
        #!/bin/sh
        printf '%s\\n' "$@" > '\(argumentsFile)'
        echo $$ >> '\(pidsFile)'
        while [ $# -gt 0 ]; do
            case "$1" in
                --) shift; break ;;
                *) shift ;;
            esac
        done
        shift  # the host
        exec sh -c "$*"
        """.write(toFile: script, atomically: true, encoding: .utf8)
        chmod(script, 0o755)
    }

    var environment: [String: String] {
        ["QUAKECTL_SSH": script, "QUAKECTL_REMOTE": "exec " + BuiltProducts.path("quakectl")]
    }

    /// The arguments of the last run.
    func lastArguments() throws -> [String] {
        try String(contentsOfFile: argumentsFile, encoding: .utf8).split(separator: "\n", omittingEmptySubsequences: false)
            .dropLast().map(String.init)
    }

    /// The pids of the runs still alive (not zombies either: a zombie is an unreaped child).
    func runningChildren() throws -> [Int32] {
        guard FileManager.default.fileExists(atPath: pidsFile) else { return [] }
        return try String(contentsOfFile: pidsFile, encoding: .utf8).split(separator: "\n").compactMap { Int32($0) }
            .filter(isRunning)
    }
}

/// Whether the process `pid` exists and has not exited (a zombie, exited but not reaped, has).
func isRunning(_ pid: Int32) -> Bool {
    guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8) else { return false }
    // The state follows the command name in parentheses: "pid (comm) S ...".
    guard let close = stat.lastIndex(of: ")") else { return false }
    return !stat[stat.index(after: close)...].trimmingCharacters(in: .whitespaces).hasPrefix("Z")
}

/// Runs `body`, failing when it takes longer than `timeout` (a hang is a failure, not a stuck suite).
func withTimeout<T: Sendable>(_ timeout: Duration, _ body: @escaping @Sendable () async throws -> T) async throws -> T {
    try await withThrowingTaskGroup(of: T?.self) { group in
        group.addTask { try await body() }
        group.addTask {
            try await Task.sleep(for: timeout)
            return nil
        }
        defer { group.cancelAll() }
        guard let first = try await group.next(), let value = first else {
            throw TestFailure("timed out after \(timeout)")
        }
        return value
    }
}
