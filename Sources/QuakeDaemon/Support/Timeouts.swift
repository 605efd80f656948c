import Foundation

/// Runs `operation`, throwing ``TimedOut`` (and cancelling it) if it takes longer than `timeout`.
func withTimeout<T: Sendable>(_ timeout: Duration, _ operation: @escaping @Sendable () async throws -> T)
    async throws -> T
{
    try await withThrowingTaskGroup(of: T?.self) { group in
        group.addTask { try await operation() }
        group.addTask {
            try await Task.sleep(for: timeout)
            return nil
        }
        defer { group.cancelAll() }
        guard let result = try await group.next() ?? nil else { throw TimedOut() }
        return result
    }
}

/// ``withTimeout(_:_:)`` ran out of time.
struct TimedOut: Error {}

extension Duration {
    /// The duration in seconds, for `Date` arithmetic and log fields.
    var timeInterval: TimeInterval {
        Double(components.seconds) + Double(components.attoseconds) / 1e18
    }
}

/// UTC times as text, for the log and for FDSN queries.
enum UTCTime {
    /// `2025-01-02T03:04:05.678` (no zone designator) for `seconds` since the epoch and
    /// `milliseconds` (0...999) past them.
    static func text(seconds: inout time_t, milliseconds: Int) -> String {
        var parts = tm()
        gmtime_r(&seconds, &parts)
        func pad(_ value: Int32, _ width: Int) -> String {
            let digits = String(value)
            return String(repeating: "0", count: max(0, width - digits.count)) + digits
        }
        return "\(pad(parts.tm_year + 1900, 4))-\(pad(parts.tm_mon + 1, 2))-\(pad(parts.tm_mday, 2))"
            + "T\(pad(parts.tm_hour, 2)):\(pad(parts.tm_min, 2)):\(pad(parts.tm_sec, 2)).\(pad(Int32(milliseconds), 3))"
    }
}
