/// Runs `operation`, throwing ``TimedOut`` (and cancelling it) if it takes longer than `timeout`.
/// Shared by the targets of this package (the server's write timeout, the daemon's pulls).
package func withTimeout<T: Sendable>(_ timeout: Duration, _ operation: @escaping @Sendable () async throws -> T)
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
package struct TimedOut: Error {
    package init() {}
}
