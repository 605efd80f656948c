import QuakeClient
import QuakeProtocol
import ArgumentParser
import Foundation
import Varlink

/// A failure quakectl reports in one sentence on stderr, with a `sysexits(3)` exit code.
public struct QuakectlError: Error, Sendable, CustomStringConvertible {
    /// 1 other failure, 64 usage, 65 bad data, 69 daemon unreachable, 77 permission denied.
    public var exitCode: Int32
    public var message: String

    public init(_ exitCode: Int32, _ message: String) {
        self.exitCode = exitCode
        self.message = message
    }

    public var description: String { message }

    public static let failure: Int32 = 1
    public static let usage: Int32 = 64
    public static let dataError: Int32 = 65
    public static let unavailable: Int32 = 69
    public static let permissionDenied: Int32 = 77

    static func unreachable(_ path: String, _ reason: String) -> QuakectlError {
        QuakectlError(
            unavailable,
            "cannot reach quaked at \(path) (\(reason)); start it with `systemctl start quaked` or `quaked --socket \(path)`, or point --socket or QUAKED_SOCKET at its socket."
        )
    }

    /// Maps any error a command let through to what the user sees.
    public static func from(_ error: any Error, socket: String? = nil) -> QuakectlError {
        switch error {
        case let error as QuakectlError:
            return error
        case let error as QuakedConnectionError:
            switch error.kind {
            case .permissionDenied:
                return QuakectlError(
                    permissionDenied,
                    "permission denied opening \(error.path); ask an administrator to add you to quaked's socket group (quake by default)."
                )
            case .unreachable:
                return unreachable(error.path, error.reason)
            }
        case let error as QuakedRemoteError:
            return from(error)
        case let error as SSHRoute.InvalidDestination:
            return QuakectlError(usage, "\(error).")
        case let error as QuakeCache.CacheError:
            return QuakectlError(
                failure, "\(error); run `quakectl watch` to build one, or pass --cache with its path.")
        case let error as IOQuaked.Failure:
            return from(error)
        case let error as OrgVarlinkService.Failure:
            return from(error)
        case let error as VarlinkCallError:
            return QuakectlError(failure, "quaked answered with an error: \(error).")
        case let error as WatchStalled:
            return QuakectlError(
                unavailable,
                "\(error.stall); reconnecting (if this repeats, check `systemctl status quaked` and, for sync, the database).")
        case let error as VarlinkConnectionError:
            switch error {
            case .closed:
                return QuakectlError(
                    unavailable,
                    "quaked closed the connection before answering (did it stop?); check `systemctl status quaked` and try again."
                )
            case .invalidReply(let detail):
                return QuakectlError(
                    failure, "quaked sent a reply quakectl cannot read (\(detail)); are both the same version?")
            case .busy:
                return QuakectlError(failure, "internal error: \(error)")
            }
        default:
            return QuakectlError(failure, "\(error)")
        }
    }

    /// A failed connection through `ssh HOST quakectl bridge` as a sentence. ssh's own message, or
    /// the remote bridge's, came through stderr just before it.
    public static func from(_ error: QuakedRemoteError) -> QuakectlError {
        let host = error.route.destination
        switch error.kind {
        case .sshNotRunnable:
            return QuakectlError(
                unavailable, "\(error); install OpenSSH's client (ssh), or point QUAKECTL_SSH at an ssh command.")
        case .sshFailed:
            return QuakectlError(unavailable, "\(error); check that `ssh \(host)` works.")
        case .remoteUnreachable:
            return QuakectlError(unavailable, "\(error); start quaked there, or pass --socket with its socket on \(host).")
        case .remotePermissionDenied:
            return QuakectlError(
                permissionDenied, "\(error); the remote user must be in quaked's socket group there (quake by default).")
        case .remoteCommandNotFound:
            return QuakectlError(
                unavailable, "\(error); install quakectl there, or set QUAKECTL_REMOTE to its path on \(host).")
        case .remoteFailed:
            return QuakectlError(failure, "\(error); its message is above.")
        case .closed:
            return QuakectlError(unavailable, "\(error) (did it stop?); check `systemctl status quaked` on \(host).")
        case .sshKilled:
            return QuakectlError(unavailable, "\(error).")
        }
    }

    /// An io.quaked error as a sentence.
    public static func from(_ error: IOQuaked.Failure) -> QuakectlError {
        switch error {
        case .noSuchQuake(let e):
            return QuakectlError(
                dataError, "no earthquake with id \(e.id) is stored; `quakectl list` shows the stored ids.")
        case .noSuchFeed(let e):
            return QuakectlError(
                usage, "quaked has no feed named \(e.feed); `quakectl status` lists the configured feeds.")
        case .noSuchSource(let e):
            return QuakectlError(
                usage, "quaked has no source named \(e.source); `quakectl status` lists the configured sources.")
        case .noSuchBackfill(let e):
            return QuakectlError(
                dataError, "quaked has no backfill job \(e.id); `quakectl backfill --status` lists the jobs.")
        case .reloadFailed(let e):
            return QuakectlError(
                failure, "quaked rejected the configuration: \(e.reason); the running configuration stays in force.")
        case .tokenExpired(let e):
            return QuakectlError(
                dataError,
                "history after token \(e.after) has been purged; the oldest token still served is \(e.oldestToken).")
        case .tokenAhead(let e):
            return QuakectlError(
                dataError,
                "token \(e.after) is newer than the store's head \(e.headToken); it comes from another copy of the store.")
        case .storeMismatch(let e):
            return QuakectlError(dataError, "the token belongs to another store (quaked now serves store \(e.storeId)).")
        case .tooManyConnections(let e):
            return QuakectlError(
                unavailable, "quaked is serving its maximum of \(e.limit) connections; try again shortly.")
        case .messageTooLarge(let e):
            return QuakectlError(
                usage, "the request is larger than quaked accepts (\(e.limit) bytes); pass fewer ids at once.")
        case .messageTimeout(let e):
            return QuakectlError(failure, "quaked gave up waiting for the request after \(e.seconds) s.")
        }
    }

    /// An org.varlink.service error as a sentence.
    public static func from(_ error: OrgVarlinkService.Failure) -> QuakectlError {
        switch error {
        case .permissionDenied:
            return QuakectlError(
                permissionDenied,
                "permission denied: this needs root, quaked's own user, or membership of quaked's admin group (quake-admin by default)."
            )
        case .invalidParameter(let e):
            return QuakectlError(dataError, "quaked rejected the parameter \(e.parameter) of the request.")
        case .methodNotFound(let e):
            return QuakectlError(
                failure, "this quaked does not implement \(e.method); update quaked to the version of quakectl.")
        case .methodNotImplemented(let e):
            return QuakectlError(
                failure, "this quaked does not implement \(e.method); update quaked to the version of quakectl.")
        case .interfaceNotFound(let e):
            return QuakectlError(failure, "this quaked does not serve the interface \(e.interface).")
        case .expectedMore:
            return QuakectlError(failure, "internal error: a streaming call was made without more.")
        }
    }
}
