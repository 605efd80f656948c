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
