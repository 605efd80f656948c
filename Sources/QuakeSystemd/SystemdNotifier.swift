import CSystemd
import Glibc

/// Sends service state notifications to systemd (`sd_notify(3)`).
///
/// Every method is a no-op returning `false` when the process does not run under systemd
/// (`NOTIFY_SOCKET` unset). The environment is never unset, so the notifier can be copied and
/// used from any task; `sd_notify` opens a fresh datagram socket per call and is thread-safe.
public struct SystemdNotifier: Sendable {
    public init() {}

    /// Whether systemd expects notifications (`NOTIFY_SOCKET` is set).
    public var isEnabled: Bool {
        guard let socket = getenv("NOTIFY_SOCKET") else { return false }
        return socket.pointee != 0
    }

    /// How often to send ``watchdog()``: half of `WATCHDOG_USEC`, so one lost or late ping does
    /// not get the service killed. `nil` when the watchdog is off or meant for another process
    /// (`WATCHDOG_PID` differs).
    public var watchdogInterval: Duration? {
        var usec: UInt64 = 0
        guard sd_watchdog_enabled(0, &usec) > 0, usec > 0 else { return nil }
        return .microseconds(Int64(clamping: usec / 2))
    }

    /// Sends raw newline-separated `KEY=VALUE` assignments.
    ///
    /// - Returns: `true` when systemd received the message; `false` when not running under
    ///   systemd or when sending failed (for example the socket went away).
    @discardableResult
    public func send(_ state: String) -> Bool {
        sd_notify(0, state) > 0
    }

    /// `READY=1`: start-up (or a reload) finished.
    @discardableResult
    public func ready() -> Bool { send("READY=1") }

    /// `STATUS=<line>`: a one-line, human-readable status shown by `systemctl status`.
    /// Newlines would start a new assignment, so they become spaces.
    @discardableResult
    public func status(_ line: String) -> Bool {
        let flat = String(line.map { $0.isNewline ? " " : $0 })
        return send("STATUS=\(flat)")
    }

    /// `WATCHDOG=1`: keep-alive ping; send every ``watchdogInterval``.
    @discardableResult
    public func watchdog() -> Bool { send("WATCHDOG=1") }

    /// `RELOADING=1` with `MONOTONIC_USEC` (required by `Type=notify-reload`, harmless before
    /// systemd 253). Send ``ready()`` when the reload is done.
    @discardableResult
    public func reloading() -> Bool {
        send("RELOADING=1\nMONOTONIC_USEC=\(Self.monotonicMicroseconds())")
    }

    /// `STOPPING=1`: shutdown has begun.
    @discardableResult
    public func stopping() -> Bool { send("STOPPING=1") }

    /// `CLOCK_MONOTONIC` in microseconds, the clock systemd uses for `MONOTONIC_USEC`.
    public static func monotonicMicroseconds() -> UInt64 {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return UInt64(now.tv_sec) * 1_000_000 + UInt64(now.tv_nsec) / 1_000
    }
}
