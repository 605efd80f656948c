import ArgumentParser
import Foundation
import QuakeClient
import QuakeModel

/// `watch --exec` digests and quiet hours: when the command runs, not which changes it gets.
/// Changes are queued in the cache's outbox as they are applied, so a stop or a crash loses none.
public struct DigestOptions: ParsableArguments, Sendable {
    @Option(
        help: ArgumentHelp(
            "Run --exec's command once per window of this length (5m), with every change of the window as one JSON array on stdin.",
            valueName: "duration"))
    public var batch: String?

    @Option(
        name: .customLong("quiet-hours"),
        help: ArgumentHelp(
            "Hold --exec's changes during these hours of the --tz clock (22:00-07:00); run one digest when they end.",
            valueName: "HH:MM-HH:MM"))
    public var quietHours: String?

    @Option(
        name: .customLong("quiet-min-mag"),
        help: ArgumentHelp("During quiet hours, still run --exec at once for quakes of at least this magnitude.", valueName: "magnitude"))
    public var quietMinMag: Double?

    public init() {}

    /// Whether any of the flags is given.
    public var isSet: Bool { batch != nil || quietHours != nil || quietMinMag != nil }

    /// The plan the flags give (times in `timeZone`), or nil for none: each change runs the
    /// command as it arrives. Throws ValidationError naming the flag.
    public func plan(timeZone: TimeZone) throws -> OutboxPlan? {
        var plan = OutboxPlan(timeZone: timeZone)
        if let batch {
            guard let milliseconds = DurationArgument.milliseconds(batch), milliseconds >= 1000 else {
                throw ValidationError(
                    "--batch takes a duration of at least a second: \(QuakeDuration.examples) (got \"\(batch)\").")
            }
            plan.batchMilliseconds = milliseconds
        }
        if let quietHours {
            guard let hours = QuietHours(parsing: quietHours) else {
                throw ValidationError(
                    "--quiet-hours takes HH:MM-HH:MM in 24-hour time, start and end different, e.g. 22:00-07:00 (got \"\(quietHours)\")."
                )
            }
            plan.quietHours = hours
        }
        if let quietMinMag {
            guard quietHours != nil else { throw ValidationError("--quiet-min-mag needs --quiet-hours.") }
            guard quietMinMag.isFinite else { throw ValidationError("--quiet-min-mag must be a magnitude, e.g. 6.") }
            plan.quietMinMagnitude = quietMinMag
        }
        return isSet ? plan : nil
    }
}
