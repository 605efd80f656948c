import QuakeTestSupport
import Testing

/// Runs a test, or each test of a suite, on a thread of its own (``runOnOwnThread(_:)``) instead of
/// Swift's global executor: for tests that compute for seconds without an `await` (randomized
/// schedules, round trips of many generated documents, scans of the sources).
///
/// Every test of the package runs in one process, in parallel, on the global executor's one thread
/// per core. On a 2-core machine two such tests hold both threads and every other test waits (see
/// ``OwnThreadExecutor``). Under this trait the computing test takes its turn with the others on
/// the operating system's scheduler instead. Child tasks of the test inherit the preference.
public struct OwnThreadTrait: TestTrait, SuiteTrait, TestScoping {
    public var isRecursive: Bool { true }

    public func provideScope(
        for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void
    ) async throws {
        try await runOnOwnThread { try await function() }
    }
}

extension Trait where Self == OwnThreadTrait {
    /// See ``OwnThreadTrait``.
    public static var ownThread: Self { Self() }
}
