import Foundation
import Logging
import QuakeSystemd
import QuakeStore
import ServiceLifecycle
import NIOConcurrencyHelpers
import Varlink
import UnixSignals

/// Reloads the configuration on SIGHUP (swift-service-lifecycle leaves SIGHUP to us).
struct ReloadOnHangup: Service {
    let reloader: Reloader
    /// Trapped by the caller, before the daemon says it is ready.
    let signals: UnixSignalsSequence

    func run() async throws {
        for await _ in signals.cancelOnGracefulShutdown() {
            try? await reloader.reload()  // a rejected reload is logged; the daemon carries on
        }
    }
}

/// Sends `WATCHDOG=1` every half `WATCHDOG_USEC`, but only while the daemon works: each ping
/// follows a successful read of the store and a scheduler that is not wedged.
struct WatchdogPinger: Service {
    let notifier: SystemdNotifier
    let interval: Duration
    let store: QuakeStore
    let logger: Logger

    func run() async throws {
        await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                do {
                    _ = try store.head()
                    notifier.watchdog()
                } catch {
                    logger.error("health check failed; not pinging the watchdog", metadata: ["error": "\(error)"])
                }
                try? await Task.sleep(for: interval)
            }
        }
    }
}

/// Purges old history and applies event retention, at start-up, after a reload, and then every
/// ``interval(historyMaxAge:eventRetention:)``: hourly, or more often when an age is short, so
/// that what is kept never outlives its age by more than a tenth of it.
final class StoreMaintenance: Service, Sendable {
    private let store: QuakeStore
    private let logger: Logger
    private let settings: NIOLockedValueBox<(historyMaxAge: Duration, hardMaxAge: Duration, eventRetention: Duration?)>
    private let wakeup = Wakeup()
    private let storeMetrics: StoreMetrics

    /// Registers what the store holds (``StoreMetrics``) in `metrics`, read when scraped.
    init(store: QuakeStore, configuration: DaemonConfiguration, logger: Logger, metrics: QuakedMetrics) {
        self.store = store
        self.logger = logger
        self.settings = NIOLockedValueBox(
            (configuration.historyMaxAge, configuration.historyHardMaxAge, configuration.eventRetention))
        self.storeMetrics = StoreMetrics(metrics)
        metrics.onScrape { [weak self] in
            guard let self else { return }
            // Named clients not seen for history-hard-max-age hold nothing back and get no series.
            let hardMaxAge = self.settings.withLockedValue { $0.hardMaxAge }
            try self.storeMetrics.update(from: self.store, clientWindow: hardMaxAge)
        }
    }

    func apply(_ configuration: DaemonConfiguration) {
        settings.withLockedValue {
            $0 = (configuration.historyMaxAge, configuration.historyHardMaxAge, configuration.eventRetention)
        }
        wakeup.signal()
    }

    func run() async throws {
        await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                await self.runOnce()
                let (historyMaxAge, _, eventRetention) = self.settings.withLockedValue { $0 }
                await self.wakeup.wait(
                    until: .now + Self.interval(historyMaxAge: historyMaxAge, eventRetention: eventRetention))
            }
        }
    }

    /// How long between two passes: a tenth of the shorter age, at least a minute and at most
    /// an hour.
    static func interval(historyMaxAge: Duration, eventRetention: Duration?) -> Duration {
        let shortest = min(historyMaxAge, eventRetention ?? historyMaxAge)
        return min(max(shortest / 10, .seconds(60)), .seconds(3600))
    }

    func runOnce() async {
        let (historyMaxAge, hardMaxAge, eventRetention) = settings.withLockedValue { $0 }
        do {
            if let eventRetention, let token = try await store.applyRetention(maxAge: eventRetention) {
                logger.info("expired old quakes", metadata: ["history.token": "\(token)"])
            }
            // History named clients still need stays, up to the hard maximum age; a client not
            // seen for that long no longer holds anything back.
            let now = Date()
            let needed = try store.oldestClientToken(seenSince: now - hardMaxAge.timeInterval)
            var purge = try await store.purgeHistory(olderThan: historyMaxAge, keepingAfter: needed, now: now)
            let hard = try await store.purgeHistory(olderThan: hardMaxAge, now: now)
            purge.removed += hard.removed
            if purge.removed > 0 {
                logger.info(
                    "purged old history",
                    metadata: ["history.removed": "\(purge.removed)", "history.oldest": "\(purge.oldestToken)"])
            }
        } catch {
            logger.error("store maintenance failed", metadata: ["error": "\(error)"])
        }
    }
}
