import Foundation
import Logging
import QuakeStore
import ServiceLifecycle
import NIOConcurrencyHelpers

/// Pulls every configured feed on its schedule, one loop per feed, and serves on-demand refreshes.
///
/// Each feed has exactly one loop, so a feed is never pulled twice at once; a refresh asked for
/// while a pull is running waits for that pull and gets its result. A failing feed backs off
/// exponentially (honouring `Retry-After`) and never stops the daemon. On graceful shutdown the
/// loops are cancelled: an in-flight import rolls back.
public final class FeedScheduler: Service, Sendable {
    /// What the scheduler is configured with; replaced whole on reload.
    public struct Plan: Sendable, Equatable {
        public var feeds: [FeedSource]
        var policy: RetryPolicy

        public init(_ configuration: DaemonConfiguration) {
            feeds = configuration.feeds
            policy = RetryPolicy(
                interval: configuration.interval, initialDelay: configuration.retryInitialDelay,
                maxDelay: configuration.retryMaxDelay)
        }
    }

    /// Called after every pull, from the feed's loop.
    public typealias PullObserver = @Sendable (FeedStatus, PullResult) async -> Void

    private struct FeedRuntime {
        var status: FeedStatus
        var validators = FeedPuller.Validators()
        var waiters: [CheckedContinuation<PullResult, Never>] = []
        let wakeup = Wakeup()
    }

    private struct State {
        var plan: Plan
        var feeds: [String: FeedRuntime] = [:]
        var stopped = false
    }

    private let store: QuakeStore
    private let puller: NIOLockedValueBox<FeedPuller>
    private let logger: Logger
    private let observer: PullObserver
    private let state: NIOLockedValueBox<State>
    private let replanned = Wakeup()

    public init(store: QuakeStore, puller: FeedPuller, plan: Plan, logger: Logger, observer: @escaping PullObserver) {
        self.store = store
        self.puller = NIOLockedValueBox(puller)
        self.logger = logger
        self.observer = observer
        self.state = NIOLockedValueBox(State(plan: plan))
        state.withLockedValue { state in
            for feed in plan.feeds { state.feeds[feed.name] = FeedRuntime(status: FeedStatus(feed: feed)) }
        }
    }

    /// Replaces the feeds and timings (SIGHUP). Feeds that stay keep their status and validators.
    public func apply(_ plan: Plan, limits: FeedPuller.Limits) {
        puller.withLockedValue { $0.limits = limits }
        state.withLockedValue { state in
            state.plan = plan
            var feeds: [String: FeedRuntime] = [:]
            for feed in plan.feeds {
                feeds[feed.name] = state.feeds[feed.name] ?? FeedRuntime(status: FeedStatus(feed: feed))
            }
            // Refreshes waiting on a feed that is gone get an answer rather than hang.
            for (name, runtime) in state.feeds where feeds[name] == nil {
                runtime.waiters.forEach { $0.resume(returning: .failed("the feed was removed by a reload")) }
            }
            state.feeds = feeds
        }
        replanned.signal()
    }

    /// The status of every feed, in configured order.
    public func statuses() -> [FeedStatus] {
        state.withLockedValue { state in state.plan.feeds.compactMap { state.feeds[$0.name]?.status } }
    }

    /// Pulls now and waits for the result: one feed by name or URL, or all feeds. A pull already
    /// running is joined rather than repeated.
    public func refresh(feed name: String? = nil) async throws -> [(FeedStatus, PullResult)] {
        let targets = state.withLockedValue { state in
            state.plan.feeds.filter { name == nil || $0.name == name || $0.url.absoluteString == name }
        }
        guard !targets.isEmpty else { throw UnknownFeed(name: name ?? "") }
        return await withTaskGroup(of: (Int, FeedStatus, PullResult).self) { group in
            for (index, feed) in targets.enumerated() {
                group.addTask {
                    let result = await self.waitForPull(of: feed)
                    let status = self.state.withLockedValue { $0.feeds[feed.name]?.status } ?? FeedStatus(feed: feed)
                    return (index, status, result)
                }
            }
            var results: [(Int, FeedStatus, PullResult)] = []
            for await result in group { results.append(result) }
            return results.sorted { $0.0 < $1.0 }.map { ($0.1, $0.2) }
        }
    }

    private func waitForPull(of feed: FeedSource) async -> PullResult {
        await withCheckedContinuation { continuation in
            let accepted = state.withLockedValue { state -> Bool in
                guard !state.stopped, state.feeds[feed.name] != nil else { return false }
                state.feeds[feed.name]!.waiters.append(continuation)
                state.feeds[feed.name]!.wakeup.signal()
                return true
            }
            if !accepted {
                continuation.resume(returning: .failed("quaked is shutting down"))
            }
        }
    }

    public func run() async throws {
        await cancelWhenGracefulShutdown {
            await self.runPlans()
        }
        // Nobody waits forever on a daemon that is stopping.
        let waiters = state.withLockedValue { state -> [CheckedContinuation<PullResult, Never>] in
            state.stopped = true
            defer { for name in state.feeds.keys { state.feeds[name]!.waiters = [] } }
            return state.feeds.values.flatMap(\.waiters)
        }
        waiters.forEach { $0.resume(returning: .failed("quaked is shutting down")) }
    }

    /// Runs one loop per feed of the current plan; starts over when the plan changes.
    private func runPlans() async {
        while !Task.isCancelled {
            let feeds = state.withLockedValue { $0.plan.feeds }
            await withTaskGroup(of: Void.self) { group in
                for feed in feeds {
                    group.addTask { await self.runFeed(feed) }
                }
                group.addTask { await self.replanned.wait() }
                await group.next()  // the plan changed, or cancellation
                group.cancelAll()
            }
        }
    }

    private func runFeed(_ feed: FeedSource) async {
        var due = ContinuousClock.now  // pull at start
        while !Task.isCancelled {
            guard let wakeup = state.withLockedValue({ $0.feeds[feed.name]?.wakeup }) else { return }
            if ContinuousClock.now < due {
                await wakeup.wait(until: due)
                if Task.isCancelled { return }
            }
            let delay = await pullOnce(feed)
            due = ContinuousClock.now + delay
            state.withLockedValue { state in
                state.feeds[feed.name]?.status.nextPull = Date().addingTimeInterval(delay.timeInterval)
            }
        }
    }

    /// One pull: records the status, answers waiting refreshes, returns the delay to the next pull.
    private func pullOnce(_ feed: FeedSource) async -> Duration {
        let (validators, policy) = state.withLockedValue { state in
            state.feeds[feed.name]?.status.lastAttempt = Date()
            return (state.feeds[feed.name]?.validators ?? .init(), state.plan.policy)
        }
        let started = ContinuousClock.now
        let puller = self.puller.withLockedValue { $0 }
        var logger = self.logger
        logger[metadataKey: "feed.name"] = "\(feed.name)"
        let result: PullResult
        var delay: Duration
        var newValidators = validators
        var failureReason: String?
        var retryAfter: Duration?
        do {
            logger.debug("pulling", metadata: ["feed.url": "\(feed.url.absoluteString)"])
            let outcome = try await puller.pull(feed, into: store, validators: validators)
            newValidators = outcome.validators
            result = outcome.report.map { .imported($0, httpStatus: outcome.httpStatus) } ?? .notModified
            let freshFor = outcome.freshUntil.map { Duration.milliseconds(Int64($0.timeIntervalSinceNow * 1000)) }
            delay = policy.delayAfterSuccess(freshFor: freshFor)
        } catch {
            if Task.isCancelled {
                result = .failed("cancelled: quaked is stopping")
            } else {
                result = .failed("\(error)")
            }
            failureReason = "\(error)"
            if let error = error as? PullError, let date = error.retryAfter {
                retryAfter = .milliseconds(Int64(max(0, date.timeIntervalSinceNow) * 1000))
            }
            delay = .zero
        }
        let elapsed = ContinuousClock.now - started
        let (status, waiters, failures, previousFailures) = state.withLockedValue { state in
            guard var runtime = state.feeds[feed.name] else {
                return (FeedStatus(feed: feed), [CheckedContinuation<PullResult, Never>](), 0, 0)
            }
            let previousFailures = runtime.status.consecutiveFailures
            runtime.status.durationMs = Int(elapsed / .milliseconds(1))
            switch result {
            case .imported(let report, let httpStatus):
                runtime.status.lastResult = .imported
                runtime.status.lastReport = report
                runtime.status.httpStatus = httpStatus
            case .notModified:
                runtime.status.lastResult = .notModified
                runtime.status.httpStatus = 304
            case .failed:
                runtime.status.lastResult = .failed
            }
            if result.isSuccess {
                runtime.status.lastSuccess = Date()
                runtime.status.lastError = nil
                runtime.status.consecutiveFailures = 0
                runtime.validators = newValidators
            } else {
                runtime.status.lastError = failureReason
                runtime.status.consecutiveFailures += 1
                runtime.status.httpStatus = nil
            }
            let waiters = runtime.waiters
            runtime.waiters = []
            // Refreshes that asked during this pull joined it: their wake-up is spent. (Callers
            // append and signal under this same lock, so none can slip in between.)
            runtime.wakeup.reset()
            let failures = runtime.status.consecutiveFailures
            state.feeds[feed.name] = runtime
            return (runtime.status, waiters, failures, previousFailures)
        }
        if !result.isSuccess {
            delay = policy.delayAfterFailure(failures, retryAfter: retryAfter)
            // Logged once when a feed starts failing; repeats go to debug until it recovers.
            let level: Logger.Level = failures == 1 ? .warning : .debug
            logger.log(
                level: level, "pull failed",
                metadata: [
                    "error": "\(failureReason ?? "")", "feed.failures": "\(failures)",
                    "retry.in": "\(delay.timeInterval)s",
                ])
        } else if case .imported(let report, _) = result {
            if let token = report.token {
                logger.info(
                    "imported",
                    metadata: [
                        "history.token": "\(token)", "import.inserted": "\(report.inserted)",
                        "import.updated": "\(report.updated)", "import.superseded": "\(report.superseded)",
                        "import.duration_ms": "\(report.durationMs)",
                    ])
            } else {
                logger.debug("no changes", metadata: ["import.unchanged": "\(report.unchanged)"])
            }
        }
        if result.isSuccess, previousFailures > 0 {
            logger.notice("pulls work again", metadata: ["feed.failures": "\(previousFailures)"])
        }
        waiters.forEach { $0.resume(returning: result) }
        await observer(status, result)
        return delay
    }

}

/// A refresh named a feed that is not configured.
public struct UnknownFeed: Error, Sendable, CustomStringConvertible {
    public var name: String
    public var description: String { "no configured feed is named '\(name)'" }
}
