import Foundation
import Glibc

/// Where the daemon's logs go.
public enum LogDestination: Sendable, Equatable {
    /// Structured records to journald (``JournalLogHandler``).
    case journal
    /// Plain lines on standard error (``StderrLogHandler``).
    case stderr

    /// `.journal` only when stderr really is connected to journald: systemd sets
    /// `JOURNAL_STREAM=DEV:INODE` (decimal) for the stream it gives the service, and it must match
    /// `fstat(2)` of fd 2. A mere `JOURNAL_STREAM` is not enough: it is inherited by children
    /// whose stderr was redirected, and `sd_journal_sendv` silently drops records without journald.
    public static func detect(environment: [String: String] = ProcessInfo.processInfo.environment) -> LogDestination {
        guard let stream = environment["JOURNAL_STREAM"] else { return .stderr }
        let parts = stream.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count == 2, let device = UInt64(parts[0]), let inode = UInt64(parts[1]) else { return .stderr }
        var info = stat()
        guard fstat(2, &info) == 0 else { return .stderr }
        return UInt64(info.st_dev) == device && UInt64(info.st_ino) == inode ? .journal : .stderr
    }
}
