import Foundation
import Logging
import QuakeSystemd
import NIOConcurrencyHelpers

/// Re-reads the configuration (SIGHUP, `io.quaked.Reload`) and applies what can change while
/// running: feeds, interval, retry timings, HTTP limits, history and event retention.
///
/// A configuration that does not load is rejected whole; the running one stays. Changes to the
/// state directory or the socket take effect at the next restart and say so in the log.
public final class Reloader: Sendable {
    private let loader: ConfigurationLoader
    private let current: NIOLockedValueBox<DaemonConfiguration>
    private let notifier: SystemdNotifier
    private let logger: Logger
    private let applyConfiguration: @Sendable (DaemonConfiguration) async -> Void
    /// One reload at a time.
    private let inProgress = NIOLockedValueBox(false)

    public init(
        loader: ConfigurationLoader, configuration: DaemonConfiguration, notifier: SystemdNotifier, logger: Logger,
        apply: @escaping @Sendable (DaemonConfiguration) async -> Void
    ) {
        self.loader = loader
        self.current = NIOLockedValueBox(configuration)
        self.notifier = notifier
        self.logger = logger
        self.applyConfiguration = apply
    }

    public var configuration: DaemonConfiguration { current.withLockedValue { $0 } }

    /// Reloads; throws ``ConfigurationError`` when the new configuration is rejected.
    public func reload() async throws {
        guard
            inProgress.withLockedValue({ busy in
                defer { busy = true }; return !busy
            })
        else {
            throw ConfigurationError(key: "reload", source: "reload", problem: "a reload is already in progress")
        }
        defer { inProgress.withLockedValue { $0 = false } }
        notifier.reloading()
        defer { notifier.ready() }
        let new: DaemonConfiguration
        do {
            new = try loader.load()
        } catch {
            logger.error("reload rejected; the running configuration stays", metadata: QuakedError(error).logMetadata)
            throw error
        }
        let old = current.withLockedValue { state in
            defer { state = new }; return state
        }
        if new.stateDirectory != old.stateDirectory || new.socketPath != old.socketPath
            || new.socketGroup != old.socketGroup
        {
            logger.warning("state directory and socket changes take effect at the next restart")
        }
        if new.metricsListen != old.metricsListen {
            logger.warning("a change of metrics-listen takes effect at the next restart; the listener stays as it is")
        }
        if new.httpListen != old.httpListen {
            logger.warning("a change of http-listen takes effect at the next restart; the listener stays as it is")
        }
        await applyConfiguration(new)
        logger.info(
            "configuration reloaded",
            metadata: ["feeds": "\(new.feeds.map(\.name).joined(separator: ","))", "interval": "\(new.interval)"])
    }
}
