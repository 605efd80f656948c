import Logging
import Synchronization

/// Process-wide logging set-up for the daemon.
public enum QuakedLogging {
    private static let bootstrapped = Atomic<Bool>(false)

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
