import Foundation
import Logging
import QuakeAssociation
import QuakeStore
import ServiceLifecycle
import NIOConcurrencyHelpers
import Varlink

/// Pulls every configured feed on its schedule, one loop per feed, and serves on-demand refreshes.
///
/// Each feed has exactly one loop, so a feed is never pulled twice at once; a refresh asked for
/// while a pull is running waits for that pull and gets its result. A failing feed backs off
/// exponentially (honouring `Retry-After` up to `retry-after-max`) and never stops the daemon. On
/// graceful shutdown the loops are cancelled: an in-flight import rolls back.
///
/// What a restart must not forget is in the store (``QuakeStore/feedState(url:)``): the validators,
/// written by the puller with each successful pull, and the backoff, written here after each
/// failure. A feed starts with what the store holds: its first pull is conditional, and a feed
/// that was backing off waits out its delay (at most the longest the current configuration could
/// have asked for), unless a refresh asks for it sooner.
public final class FeedScheduler: Service, Sendable {
    /// What the scheduler is configured with; replaced whole on reload.
    public struct Plan: Sendable, Equatable {
        public var feeds: [FeedSource]
        var policy: RetryPolicy
        /// Event retention: the import leaves out features older than this.
        var eventRetention: Duration?

        public init(_ configuration: DaemonConfiguration) {
            feeds = configuration.feeds
            policy = RetryPolicy(
                interval: configuration.interval, initialDelay: configuration.retryInitialDelay,
                maxDelay: configuration.retryMaxDelay, retryAfterMax: configuration.retryAfterMax)
            eventRetention = configuration.eventRetention
        }
    }

    /// Called after every pull, from the feed's loop.
    public typealias PullObserver = @Sendable (FeedStatus, PullResult) async -> Void

    private struct FeedRuntime {
        var status: FeedStatus
        var validators = FeedPuller.Validators()
        /// No scheduled pull before this: the backoff of a failing feed (nil after a success).
        var notBefore: Date?
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
    private let pullMetrics: PullMetrics

    /// Registers its series (``PullMetrics``) in `metrics`; `observer` hears of every pull.
    public init(
        store: QuakeStore, puller: FeedPuller, plan: Plan, logger: Logger, metrics: QuakedMetrics,
        observer: @escaping PullObserver = { _, _ in }
    ) {
        self.store = store
        self.puller = NIOLockedValueBox(puller)
        self.logger = logger
        self.observer = observer
        self.state = NIOLockedValueBox(State(plan: plan))
        self.pullMetrics = PullMetrics(metrics)
        let runtimes = plan.feeds.map { self.restoredRuntime($0) }
        state.withLockedValue { state in
            for (feed, runtime) in zip(plan.feeds, runtimes) { state.feeds[feed.name] = runtime }
        }
        pullMetrics.configureFeeds(plan.feeds.map(\.name))
        metrics.onScrape { [weak self] in
            guard let self else { return }
            self.pullMetrics.update(self.statuses())
        }
    }

    /// A feed's runtime as the store left it: its validators and backoff.
    private func restoredRuntime(_ feed: FeedSource) -> FeedRuntime {
        var runtime = FeedRuntime(status: FeedStatus(feed: feed))
        do {
            guard let stored = try store.feedState(url: feed.url.absoluteString) else { return runtime }
            runtime.validators = stored.validators
            runtime.status.consecutiveFailures = stored.consecutiveFailures
            if let next = stored.nextAttempt, next > Date() {
                runtime.notBefore = next
                runtime.status.nextPull = next
            }
        } catch {
            logger.warning(
                "cannot read the feed's saved state; starting afresh",
                metadata: ["feed.name": "\(feed.name)", "error": "\(error)"])
        }
        return runtime
    }

    /// Replaces the feeds and timings (SIGHUP), the pulls' limits and the association settings of
    /// their imports. Feeds that stay keep their status and validators.
    public func apply(_ plan: Plan, limits: FeedPuller.Limits, association: AssociationConfiguration?) {
        puller.withLockedValue {
            $0.limits = limits
            $0.association = association
        }
        let known = state.withLockedValue { Set($0.feeds.keys) }
        let added = plan.feeds.filter { !known.contains($0.name) }.map { ($0.name, self.restoredRuntime($0)) }
        let restored = Dictionary(added, uniquingKeysWith: { first, _ in first })
        state.withLockedValue { state in
            state.plan = plan
            var feeds: [String: FeedRuntime] = [:]
            for feed in plan.feeds {
                feeds[feed.name] =
                    state.feeds[feed.name] ?? restored[feed.name] ?? FeedRuntime(status: FeedStatus(feed: feed))
            }
            // Refreshes waiting on a feed that is gone get an answer rather than hang.
            for (name, runtime) in state.feeds where feeds[name] == nil {
                runtime.waiters.forEach {
                    $0.resume(returning: .failed(QuakedError(kind: .cancelled, message: "the feed was removed by a reload")))
                }
            }
            state.feeds = feeds
        }
        pullMetrics.configureFeeds(plan.feeds.map(\.name))
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
                continuation.resume(returning: .failed(Self.shuttingDown))
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
        waiters.forEach { $0.resume(returning: .failed(Self.shuttingDown)) }
    }

    private static let shuttingDown = QuakedError(kind: .cancelled, message: "quaked is shutting down")

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
        // Pull at start, unless the feed is backing off (also across a restart or a reload).
        var due = ContinuousClock.now
        let (notBefore, policy) = state.withLockedValue { ($0.feeds[feed.name]?.notBefore, $0.plan.policy) }
        if let notBefore {
            // No longer than this configuration could have asked for (a clock that jumped, a
            // configuration that changed).
            let longest = max(policy.maxDelay * 1.2, policy.retryAfterMax)
            let wait = Duration.milliseconds(Int64(notBefore.timeIntervalSinceNow * 1000))
            if wait > .zero { due = ContinuousClock.now + min(wait, longest) }
        }
        while !Task.isCancelled {
            guard let wakeup = state.withLockedValue({ $0.feeds[feed.name]?.wakeup }) else { return }
            if ContinuousClock.now < due {
                await wakeup.wait(until: due)
                if Task.isCancelled { return }
            }
            let delay = await pullOnce(feed).delay
            due = ContinuousClock.now + delay
        }
    }

    /// Pulls every feed once, one after another, now, without the loops (`quaked --once`): each
    /// pull is the one the loops make (conditional, its status, metrics and log), but a failure
    /// saves no backoff. Returns each feed's status and result, in configured order.
    public func pullEachOnce() async -> [(FeedStatus, PullResult)] {
        var results: [(FeedStatus, PullResult)] = []
        for feed in state.withLockedValue({ $0.plan.feeds }) {
            let (_, status, result) = await pullOnce(feed, savingBackoff: false)
            results.append((status, result))
        }
        return results
    }

    /// One pull: records the status, answers waiting refreshes, returns the delay to the next
    /// pull, the status and the result. A failure's backoff is saved in the store unless
    /// `savingBackoff` is false.
    private func pullOnce(_ feed: FeedSource, savingBackoff: Bool = true) async -> (
        delay: Duration, status: FeedStatus, result: PullResult
    ) {
        let (validators, policy, retention) = state.withLockedValue { state in
            state.feeds[feed.name]?.status.lastAttempt = Date()
            return (state.feeds[feed.name]?.validators ?? .init(), state.plan.policy, state.plan.eventRetention)
        }
        let started = ContinuousClock.now
        let puller = self.puller.withLockedValue { $0 }
        var logger = self.logger
        logger[metadataKey: "feed.name"] = "\(feed.name)"
        let result: PullResult
        var delay: Duration
        var newValidators = validators
        do {
            var metadata: Logger.Metadata = ["feed.url": "\(feed.url.absoluteString)"]
            if let proxy = puller.clients.route(for: feed.url).proxy { metadata["feed.proxy"] = "\(proxy)" }
            logger.debug("pulling", metadata: metadata)
            let expiringBefore = retention.map { Date().addingTimeInterval(-$0.timeInterval) }
            let outcome = try await puller.pull(
                feed, into: store, validators: validators, expiringBefore: expiringBefore)
            newValidators = outcome.validators
            result = outcome.report.map { .imported($0, httpStatus: outcome.httpStatus) } ?? .notModified
            let freshFor = outcome.freshUntil.map { Duration.milliseconds(Int64($0.timeIntervalSinceNow * 1000)) }
            delay = policy.delayAfterSuccess(freshFor: freshFor)
        } catch {
            var failure = QuakedError(error)
            if Task.isCancelled {
                failure = QuakedError(kind: .cancelled, message: "cancelled: quaked is stopping", cause: error)
            }
            result = .failed(failure)
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
            case .failed(let failure):
                runtime.status.lastResult = .failed
                runtime.status.failure = failure
                runtime.status.httpStatus = failure.httpStatus
            }
            if result.isSuccess {
                runtime.status.lastSuccess = Date()
                runtime.status.failure = nil
                runtime.status.consecutiveFailures = 0
                runtime.validators = newValidators
                runtime.notBefore = nil
            } else {
                runtime.status.consecutiveFailures += 1
            }
            if case .failed(let failure) = result {
                let retryAfter = failure.retryAfter.map {
                    Duration.milliseconds(Int64(max(0, $0.timeIntervalSinceNow) * 1000))
                }
                delay = policy.delayAfterFailure(runtime.status.consecutiveFailures, retryAfter: retryAfter)
            }
            // Shown with the result it follows from: a status that reports this pull's failure
            // already names when the next pull is.
            runtime.status.nextPull = Date().addingTimeInterval(delay.timeInterval)
            let waiters = runtime.waiters
            runtime.waiters = []
            // Refreshes that asked during this pull joined it: their wake-up is spent. (Callers
            // append and signal under this same lock, so none can slip in between.)
            runtime.wakeup.reset()
            let failures = runtime.status.consecutiveFailures
            state.feeds[feed.name] = runtime
            return (runtime.status, waiters, failures, previousFailures)
        }
        if case .failed(let failure) = result {
            let retryAfter = failure.retryAfter.map { Duration.milliseconds(Int64(max(0, $0.timeIntervalSinceNow) * 1000)) }
            // Logged once when a feed starts failing; repeats go to debug until it recovers.
            let level: Logger.Level = failures == 1 ? .warning : .debug
            var metadata = failure.logMetadata
            metadata["feed.failures"] = "\(failures)"
            metadata["retry.in"] = "\(delay.timeInterval)s"
            if let retryAfter, retryAfter > policy.retryAfterMax {
                metadata["retry.after_max"] = "\(policy.retryAfterMax.timeInterval)s"
            }
            logger.log(level: level, "pull failed", metadata: metadata)
            // The backoff outlives a restart; a cancelled pull (quaked stopping) is no failure of
            // the server's and leaves what was saved.
            if savingBackoff, !Task.isCancelled {
                let next = Date().addingTimeInterval(delay.timeInterval)
                state.withLockedValue { $0.feeds[feed.name]?.notBefore = next }
                do {
                    try await store.recordPullFailure(
                        url: feed.url.absoluteString, consecutiveFailures: failures, nextAttempt: next)
                } catch {
                    logger.warning("cannot save the feed's backoff", metadata: ["error": "\(error)"])
                }
            }
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
        pullMetrics.record(feed: status.name, result: result, duration: .milliseconds(status.durationMs ?? 0))
        await observer(status, result)
        return (delay, status, result)
    }

}

/// A refresh named a feed that is not configured.
public struct UnknownFeed: Error, Sendable, CustomStringConvertible {
    public var name: String
    public var description: String { "no configured feed is named '\(name)'" }
}
