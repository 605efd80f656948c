import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import Subprocess
import Varlink

/// Why a connection through `ssh HOST quakectl bridge` failed, read from how the ssh child ended
/// (ssh exits with the remote command's status, or 255 for its own failures). ssh's and the
/// remote bridge's messages went to quakectl's stderr already; this says which side failed.
public struct QuakedRemoteError: Error, Sendable, Hashable, CustomStringConvertible {
    public enum Kind: Sendable, Hashable {
        /// ssh could not be started (not installed, `QUAKECTL_SSH` names no program).
        case sshNotRunnable(String)
        /// ssh itself failed (status 255): no connection, authentication, host key.
        case sshFailed
        /// The remote bridge cannot reach its quaked (status 69).
        case remoteUnreachable
        /// The remote bridge may not connect to quaked's socket (status 77).
        case remotePermissionDenied
        /// The remote shell found no quakectl (status 126 or 127).
        case remoteCommandNotFound
        /// The remote command failed otherwise.
        case remoteFailed(status: Int32)
        /// The bridge ended cleanly (status 0) before answering: quaked closed the connection.
        case closed
        /// ssh was killed by a signal.
        case sshKilled(signal: Int32)
    }

    public var kind: Kind
    public var route: SSHRoute

    public init(kind: Kind, route: SSHRoute) {
        self.kind = kind
        self.route = route
    }

    /// Retrying the same command cannot help (the watch loop gives up on these).
    public var isPermanent: Bool {
        switch kind {
        case .sshNotRunnable, .remotePermissionDenied, .remoteCommandNotFound: true
        case .sshFailed, .remoteUnreachable, .remoteFailed, .closed, .sshKilled: false
        }
    }

    public var description: String {
        let host = route.destination
        return switch kind {
        case .sshNotRunnable(let reason): "cannot run \(route.program) (\(reason))"
        case .sshFailed: "ssh to \(host) failed (ssh's message above says why)"
        case .remoteUnreachable: "quaked on \(host) is unreachable (the bridge's message above says why)"
        case .remotePermissionDenied: "permission denied on \(host) (the bridge's message above says why)"
        case .remoteCommandNotFound: "\(host) has no `\(route.remoteCommand)` to run the bridge with"
        case .remoteFailed(let status): "`\(route.remoteCommandLine)` on \(host) failed with status \(status)"
        case .closed: "quaked on \(host) closed the connection before answering"
        case .sshKilled(let signal): "ssh to \(host) was killed by signal \(signal)"
        }
    }

    /// The failure a connection-level error stands for, given how ssh ended.
    static func from(_ status: TerminationStatus, route: SSHRoute) -> QuakedRemoteError {
        let kind: Kind
        switch status {
        case .exited(0): kind = .closed
        case .exited(255): kind = .sshFailed
        case .exited(69): kind = .remoteUnreachable
        case .exited(77): kind = .remotePermissionDenied
        case .exited(126), .exited(127): kind = .remoteCommandNotFound
        case .exited(let code): kind = .remoteFailed(status: code)
        case .signaled(let signal): kind = .sshKilled(signal: signal)
        }
        return QuakedRemoteError(kind: kind, route: route)
    }
}

extension SSHRoute {
    /// Runs ssh, makes a connection over its stdin and stdout, runs `body` with it, closes it and
    /// waits for ssh to end: on its own once the remote bridge ends (it does when quaked closes the
    /// connection after the stdin side is closed), else SIGTERM after a grace period and SIGKILL.
    /// ssh's stderr is quakectl's (unless ``quiet``). A connection that ends early throws
    /// ``QuakedRemoteError`` (what ssh's exit status says); error replies and the body's own
    /// errors are thrown as they are.
    func withConnection<T: Sendable>(_ body: (QuakedConnection) async throws -> T) async throws -> T {
        // [read, write]. The child's ends become its stdin and stdout and are closed here after
        // the spawn; the parent's ends go to NIO, which closes them with the channel. Close-on-exec,
        // so that no other child (the second connection of a watch) holds an end open (Subprocess
        // also closes every other descriptor in the child).
        var toChild: [CInt] = [-1, -1]
        var fromChild: [CInt] = [-1, -1]
        guard pipe(&toChild) == 0 else {
            throw QuakedRemoteError(kind: .sshNotRunnable(String(cString: strerror(errno))), route: self)
        }
        guard pipe(&fromChild) == 0 else {
            let reason = String(cString: strerror(errno))
            close(toChild[0])
            close(toChild[1])
            throw QuakedRemoteError(kind: .sshNotRunnable(reason), route: self)
        }
        for fd in toChild + fromChild { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        let (parentRead, parentWrite) = (fromChild[0], toChild[1])

        var errorOutput = STDERR_FILENO
        if quiet {
            let devNull = open("/dev/null", O_WRONLY | O_CLOEXEC)
            if devNull >= 0 { errorOutput = devNull }
        }
        let closeErrorOutput = errorOutput != STDERR_FILENO

        var platformOptions = PlatformOptions()
        // When the body is cancelled: a grace period, then SIGKILL.
        platformOptions.teardownSequence = [.gracefulShutDown(allowedDurationToNextStep: .seconds(2))]
        let executable: Executable = program.contains("/") ? .path(.init(program)) : .name(program)
        let result: ExecutionResult<Result<T, any Error>, FileDescriptorOutput, FileDescriptorOutput>
        // Whether NIO has taken our ends of the pipes (then only it closes them).
        let spawned = NIOLockedValueBox(false)
        do {
            result = try await Subprocess.run(
                executable, arguments: Arguments(arguments), platformOptions: platformOptions,
                input: .fileDescriptor(.init(rawValue: toChild[0]), closeAfterSpawningProcess: true),
                output: .fileDescriptor(.init(rawValue: fromChild[1]), closeAfterSpawningProcess: true),
                error: .fileDescriptor(.init(rawValue: errorOutput), closeAfterSpawningProcess: closeErrorOutput)
            ) { execution -> Result<T, any Error> in
                spawned.withLockedValue { $0 = true }
                let child = SSHChild(pid: execution.processIdentifier.value)
                // Before the teardown below reaps it (the pid may then be reused).
                defer { child.ended() }
                let client: VarlinkClient
                do {
                    client = try await VarlinkClient.connect { initializer in
                        try await NIOPipeBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                            .channelInitializer(initializer)
                            .takingOwnershipOfDescriptors(input: parentRead, output: parentWrite).get()
                    }
                } catch {
                    // NIO may or may not have closed the descriptors: leave them (a leak, never a
                    // double close), and end ssh, which has no one to talk to.
                    await execution.teardown(using: [.gracefulShutDown(allowedDurationToNextStep: .seconds(2))])
                    return .failure(error)
                }
                let outcome: Result<T, any Error>
                do {
                    outcome = .success(
                        try await body(QuakedConnection(client: client, endpoint: .ssh(self), sshChild: child)))
                } catch {
                    outcome = .failure(error)
                }
                // Closing ssh's stdin ends the remote bridge's input; quaked then closes the
                // connection, the bridge exits, and so does ssh, with its exit status. A `more`
                // call left half-way (an abandoned stream) would keep quaked sending, so that ssh
                // gets SIGTERM at once.
                let idle = client.isIdle
                await client.close()
                await execution.teardown(
                    using: idle
                        ? [
                            .send(signal: Signal(rawValue: 0), allowedDurationToNextStep: .seconds(5)),
                            .gracefulShutDown(allowedDurationToNextStep: .seconds(2)),
                        ]
                        : [.gracefulShutDown(allowedDurationToNextStep: .seconds(2))])
                return outcome
            }
        } catch let error as SubprocessError where !spawned.withLockedValue({ $0 }) {
            // ssh never ran: the child's ends are closed (closeAfterSpawningProcess), ours not.
            close(parentRead)
            close(parentWrite)
            throw QuakedRemoteError(kind: .sshNotRunnable(Self.reason(error)), route: self)
        }
        switch result.closureResult {
        case .success(let value):
            return value
        case .failure(let error) where Self.isConnectionFailure(error):
            throw QuakedRemoteError.from(result.terminationStatus, route: self)
        case .failure(let error):
            throw error
        }
    }

    /// Errors that mean the pipe to ssh ended, as opposed to an answer (error replies) or the
    /// caller's own failure.
    static func isConnectionFailure(_ error: any Error) -> Bool {
        switch error {
        case let error as VarlinkConnectionError: error == .closed
        case is IOError, is ChannelError: true
        default: false
        }
    }

    static func reason(_ error: SubprocessError) -> String {
        if error.code == .executableNotFound { return "not found" }
        return "\(error)"
    }
}

/// The ssh process a connection runs over, owned by that connection (``QuakedConnection/sshChild``):
/// whoever holds the connection can end it (``QuakedConnection/stop()``), or pass it a signal
/// (quakectl's one-shot commands pass on a stop signal sent to quakectl alone, which would
/// otherwise leave ssh waiting for a remote command that only stops when quaked next writes).
/// Once ssh has ended and been reaped, a signal goes nowhere (its pid may be another process's).
public final class SSHChild: Sendable {
    private let pid: NIOLockedValueBox<pid_t?>

    init(pid: pid_t) {
        self.pid = NIOLockedValueBox(pid)
    }

    /// Sends `signal` to ssh if it has not ended.
    public func signal(_ signal: Int32) {
        pid.withLockedValue { pid in
            if let pid { kill(pid, signal) }
        }
    }

    /// ssh is about to be reaped: no signal is sent after this.
    func ended() {
        pid.withLockedValue { $0 = nil }
    }
}
