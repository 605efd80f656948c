import Dispatch
import Foundation
import QuakeClient

/// A one-shot command's connection through ssh (`--host`): while it is open, a stop signal
/// (SIGINT, SIGTERM, SIGHUP) sent to quakectl is passed on to the connection's ssh child, then
/// quakectl dies of it as it would have. Ctrl-C reaches ssh anyway (same process group); a `kill`
/// of quakectl alone would otherwise leave ssh waiting for a remote command that only stops when
/// quaked next writes.
///
/// The program's, not the client library's: a signal's handler is the process's. `watch`, `sync`
/// and `map` handle the stop signals themselves and stop their connections (``WatchStop``), so
/// they do not use this.
enum SSHSignalForwarding {
    private static let signals = [SIGINT, SIGTERM, SIGHUP]

    /// Runs `body` with the stop signals passed on to `connection`'s ssh child (a socket
    /// connection has none: `body` just runs). Signals ignored when it starts (`nohup`, a shell's
    /// background job) stay ignored; the others get their default action back when it ends.
    static func during<T>(_ connection: QuakedConnection, _ body: () async throws -> T) async throws -> T {
        guard let child = connection.sshChild else { return try await body() }
        var installed: [(signal: Int32, source: any DispatchSourceSignal)] = []
        for signal in signals where !isIgnored(signal) {
            // Dispatch's signal sources need the signal ignored for the default action.
            Glibc.signal(signal, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: signal, queue: .global())
            source.setEventHandler { forward(signal, to: child) }
            source.resume()
            installed.append((signal, source))
        }
        defer {
            for (signal, source) in installed {
                source.cancel()
                Glibc.signal(signal, SIG_DFL)
            }
        }
        return try await body()
    }

    /// Whether `signal` is ignored.
    private static func isIgnored(_ signal: Int32) -> Bool {
        var current = sigaction()
        guard sigaction(signal, nil, &current) == 0 else { return false }
        return unsafeBitCast(current.__sigaction_handler.sa_handler, to: Int.self) == 1  // SIG_IGN
    }

    /// Passes `signal` on to ssh, then dies of it, as without this handler.
    private static func forward(_ signal: Int32, to child: SSHChild) {
        child.signal(signal)
        Glibc.signal(signal, SIG_DFL)
        var set = sigset_t()
        sigemptyset(&set)
        sigaddset(&set, signal)
        pthread_sigmask(SIG_UNBLOCK, &set, nil)
        raise(signal)
        exit(128 + signal)
    }
}
