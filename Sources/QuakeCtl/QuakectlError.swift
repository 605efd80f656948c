import ArgumentParser
import Foundation
import QuakeVarlink

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
        case let error as VarlinkCallError:
            return from(error)
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

    /// A Varlink error reply as a sentence.
    public static func from(_ error: VarlinkCallError) -> QuakectlError {
        let p = error.parameters
        func string(_ key: String) -> String {
            p[key].flatMap { if case .string(let s) = $0 { s } else { nil } } ?? "?"
        }
        func int(_ key: String) -> String {
            p[key].flatMap { if case .number(let n) = $0 { String(Int64(n)) } else { nil } } ?? "?"
        }
        switch error.name {
        case QuakedAPI.Errors.noSuchQuake:
            return QuakectlError(
                dataError, "no earthquake with id \(string("id")) is stored; `quakectl list` shows the stored ids.")
        case QuakedAPI.Errors.noSuchFeed:
            return QuakectlError(
                usage, "quaked has no feed named \(string("feed")); `quakectl status` lists the configured feeds.")
        case QuakedAPI.Errors.reloadFailed:
            return QuakectlError(
                failure,
                "quaked rejected the configuration: \(string("reason")); the running configuration stays in force.")
        case QuakedAPI.Errors.tokenExpired:
            return QuakectlError(
                dataError,
                "history after token \(int("after")) has been purged; the oldest token still served is \(int("oldestToken"))."
            )
        case QuakedAPI.Errors.tokenAhead:
            return QuakectlError(
                dataError,
                "token \(int("after")) is newer than the store's head \(int("headToken")); it comes from another copy of the store."
            )
        case QuakedAPI.Errors.storeMismatch:
            return QuakectlError(
                dataError, "the token belongs to another store (quaked now serves store \(string("storeId"))).")
        case QuakedAPI.Errors.tooManyConnections:
            return QuakectlError(
                unavailable, "quaked is serving its maximum of \(int("limit")) connections; try again shortly.")
        case QuakedAPI.Errors.messageTooLarge:
            return QuakectlError(
                usage, "the request is larger than quaked accepts (\(int("limit")) bytes); pass fewer ids at once.")
        case VarlinkErrorName.permissionDenied:
            return QuakectlError(
                permissionDenied,
                "permission denied: this needs root, quaked's own user, or membership of quaked's admin group (quake-admin by default)."
            )
        case VarlinkErrorName.invalidParameter:
            return QuakectlError(dataError, "quaked rejected the parameter \(string("parameter")) of the request.")
        case VarlinkErrorName.methodNotFound, VarlinkErrorName.methodNotImplemented:
            return QuakectlError(
                failure, "this quaked does not implement \(string("method")); update quaked to the version of quakectl."
            )
        default:
            return QuakectlError(failure, "quaked answered with an error: \(error).")
        }
    }
}
