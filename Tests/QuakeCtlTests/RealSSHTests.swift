import Foundation
import QuakeClient
import QuakeCtl
import QuakeProtocol
import QuakeTestSupport
import Subprocess
import Testing

/// `quakectl --host` through a real OpenSSH: an sshd on 127.0.0.1 that the test runs as its own
/// child (`sshd -D`), with a host key and a user key made here, and ssh told exactly which host
/// key to expect. Skipped, with the reason, where sshd, ssh or ssh-keygen is missing
/// (`scripts/install-deps` installs them: openssh-server, openssh-client).
extension ClientEndToEnd {
    @Suite struct RealSSHTests {
        @Test(.enabled(if: RealSSHD.missing == nil, "\(RealSSHD.missing ?? "")"))
        func commandsAndWatchThroughARealSSHServer() async throws {
            try await withQuaked { daemon in
                try await RealSSHD.with(in: daemon.directory.appendingPathComponent("ssh")) { sshd in
                    let host = sshd.destination
                    let socket = daemon.socketPath

                    let status = try await quakectl(
                        ["status", "--json", "--host", host, "--socket", socket], environment: sshd.environment)
                    #expect(status.status == 0, "\(status.stderr)\nsshd:\n\(sshd.log)")
                    let object = try JSONSerialization.jsonObject(with: Data(status.stdout.utf8)) as? [String: Any]
                    #expect(object?["quakeCount"] as? Int == 146)
                    #expect(object?["storeId"] as? String == (try daemon.withStore { $0.storeID }))

                    let local = try await quakectl(["list", "--json", "--limit", "5", "--socket", socket])
                    let remote = try await quakectl(
                        ["list", "--json", "--limit", "5", "--host", host, "--socket", socket], environment: sshd.environment)
                    #expect(remote.status == 0, "\(remote.stderr)")
                    #expect(remote.stdout == local.stdout)

                    // The remote bridge's message comes back through sshd and ssh.
                    let missing = try await quakectl(
                        ["status", "--host", host, "--socket", socket + ".nothing"], environment: sshd.environment)
                    #expect(missing.status == 69)
                    #expect(
                        missing.stderr.contains("cannot reach quaked at \(socket).nothing (no such socket)"),
                        "\(missing.stderr)")
                    #expect(missing.stderr.contains("quaked on \(host) is unreachable"))

                    // A watch through ssh streams: a change made after it started arrives.
                    let cache = daemon.directory.appendingPathComponent("ssh-cache/watch.sqlite").path
                    let watch = try startQuakectl(
                        ["watch", "--json", "--heartbeat", "1", "--host", host, "--socket", socket, "--cache", cache],
                        environment: sshd.environment)
                    defer { watch.signal(SIGKILL) }
                    try await WatchTests.expectCaughtUp(watch, daemon, cache: cache)
                    let id = try daemon.withStore { try $0.allQuakes() }[0].id
                    #expect(try await quakectl(["delete", id, "--socket", socket]).status == 0)
                    try await waitUntil(timeout: .seconds(30)) {
                        try WatchOutput(watch.stdout).changes.contains { $0.quakeId == id && $0.kind == "delete" }
                    }
                    watch.signal(SIGTERM)
                    #expect(try await watch.wait(timeout: .seconds(30)) == 0, "a stop signal ends the watch cleanly")
                }
            }
        }
    }
}

/// An OpenSSH server on 127.0.0.1 and a free port, for this test only: its own host key, the
/// test's user key as the only authorized key, no passwords. sshd runs under swift-subprocess, as
/// quakectl's own ssh does.
struct RealSSHD: Sendable {
    static let sshd = "/usr/sbin/sshd"
    static let ssh = "/usr/bin/ssh"
    static let sshKeygen = "/usr/bin/ssh-keygen"

    /// Why the test cannot run here, or nil.
    static let missing: String? = {
        let absent = [sshd, ssh, sshKeygen].filter { !FileManager.default.isExecutableFile(atPath: $0) }
        guard absent.isEmpty else {
            let reason = "needs \(absent.joined(separator: ", ")) (openssh-server, openssh-client; scripts/install-deps)"
            print("RealSSHTests skipped: \(reason)")
            return reason
        }
        return nil
    }()

    let directory: URL
    let port: UInt16
    let user: String

    var destination: String { "\(user)@127.0.0.1" }
    var log: String { (try? String(contentsOf: directory.appendingPathComponent("sshd.log"), encoding: .utf8)) ?? "" }

    /// Makes the keys and the configuration, runs sshd, runs `body`, and stops sshd.
    static func with<T: Sendable>(in directory: URL, _ body: (RealSSHD) async throws -> T) async throws -> T {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        for key in ["host_key", "user_key"] {
            let made = try await ChildProcess.run(
                sshKeygen, ["-q", "-t", "ed25519", "-N", "", "-C", key, "-f", directory.appendingPathComponent(key).path])
            guard made.status == 0 else { throw TestFailure("ssh-keygen failed: \(made.stderr)") }
        }
        try FileManager.default.copyItem(
            at: directory.appendingPathComponent("user_key.pub"), to: directory.appendingPathComponent("authorized_keys"))
        // sshd insists on its privilege separation directory, even when it never uses it.
        try? FileManager.default.createDirectory(atPath: "/run/sshd", withIntermediateDirectories: true)
        try """
        ListenAddress 127.0.0.1
        HostKey \(directory.path)/host_key
        AuthorizedKeysFile \(directory.path)/authorized_keys
        StrictModes no
        PubkeyAuthentication yes
        PasswordAuthentication no
        KbdInteractiveAuthentication no
        PermitRootLogin prohibit-password
        UsePAM no
        PidFile none
        PrintMotd no
        """.write(to: directory.appendingPathComponent("sshd_config"), atomically: true, encoding: .utf8)
        let hostKey = try String(contentsOf: directory.appendingPathComponent("host_key.pub"), encoding: .utf8)
        let port = try freeLocalPort()
        try "[127.0.0.1]:\(port) \(hostKey)".write(
            to: directory.appendingPathComponent("known_hosts"), atomically: true, encoding: .utf8)
        let server = RealSSHD(directory: directory, port: port, user: String(cString: getpwuid(getuid()).pointee.pw_name))

        let logFD = open(
            directory.appendingPathComponent("sshd.log").path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard logFD >= 0 else { throw TestFailure("cannot create sshd.log: \(errno)") }
        let result = try await Subprocess.run(
            .path("/usr/sbin/sshd"),
            arguments: ["-D", "-e", "-f", directory.appendingPathComponent("sshd_config").path, "-p", "\(port)"],
            input: .none, output: .discarded,
            error: .fileDescriptor(.init(rawValue: logFD), closeAfterSpawningProcess: true)
        ) { execution -> Result<T, any Error> in
            let outcome: Result<T, any Error>
            do {
                try await waitUntil(timeout: .seconds(30)) {
                    guard isRunning(execution.processIdentifier.value) else {
                        throw TestFailure("sshd exited:\n\(server.log)")
                    }
                    return canConnect(port: port)
                }
                outcome = .success(try await body(server))
            } catch {
                outcome = .failure(error)
            }
            await execution.teardown(using: [.gracefulShutDown(allowedDurationToNextStep: .seconds(5))])
            return outcome
        }
        return try result.closureResult.get()
    }

    /// ssh with this server's port, the user key and only its host key as known.
    var environment: [String: String] {
        let dir = directory.path
        return [
            "QUAKECTL_SSH": [
                Self.ssh, "-F", "/dev/null", "-p", "\(port)", "-i", "\(dir)/user_key", "-o", "IdentitiesOnly=yes",
                "-o", "UserKnownHostsFile=\(dir)/known_hosts", "-o", "StrictHostKeyChecking=yes", "-o", "LogLevel=ERROR",
            ].joined(separator: " "),
            // sshd's PATH has no build directory: the remote quakectl by its absolute path.
            "QUAKECTL_REMOTE": BuiltProducts.path("quakectl"),
        ]
    }

    static func canConnect(port: UInt16) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = port.bigEndian
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
            }
        }
    }
}
