import Logging
import Synchronization

/// Process-wide logging set-up for the daemon.
public enum QuakedLogging {
    private static let bootstrapped = Atomic<Bool>(false)

    /// A record's metadata as both handlers write it: the handler's own, then the provider's,
    /// then the call's; an attached error as `error`.
    static func metadata(
        of event: LogEvent, handler: Logger.Metadata, provider: Logger.MetadataProvider?
    ) -> Logger.Metadata {
        var merged = handler
        if let provided = provider?.get() { merged.merge(provided) { $1 } }
        if let explicit = event.metadata { merged.merge(explicit) { $1 } }
        if let error = event.error { merged["error"] = "\(error)" }
        return merged
    }

    /// Bootstraps swift-log with the handler for ``LogDestination/detect(environment:)``.
    /// Only the first call has an effect (swift-log traps on a second bootstrap); tests should
    /// use ``makeHandler(label:level:destination:identifier:)`` instead.
    ///
    /// - Parameter identifier: `SYSLOG_IDENTIFIER` in the journal, e.g. `"quaked"`.
    public static func bootstrap(level: Logger.Level, identifier: String) {
        guard bootstrapped.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged
        else { return }
        let destination = LogDestination.detect()
        LoggingSystem.bootstrap { label in
            makeHandler(label: label, level: level, destination: destination, identifier: identifier)
        }
    }

    /// The handler `bootstrap` would install for `destination`.
    public static func makeHandler(
        label: String, level: Logger.Level, destination: LogDestination, identifier: String = "quaked"
    ) -> any LogHandler {
        switch destination {
        case .journal: JournalLogHandler(label: label, identifier: identifier, level: level)
        case .stderr: StderrLogHandler(label: label, level: level)
        }
    }
}
