import QuakeClient
import QuakeProtocol
import Foundation
import QuakeModel

/// A point in time given on the command line: a span back from now in the duration grammar
/// (``QuakeDuration``, with a unit: `30m`, `2h`, `7d`, `1w`), a
/// date (`2025-11-22`, UTC midnight), a date and time in ISO 8601 (`2025-11-22T10:00:00Z`), or
/// milliseconds since the epoch.
public enum TimeArgument {
    public static let help = "30m, 2h, 7d, 1w, 2025-11-22, 2025-11-22T10:00:00Z or epoch milliseconds"

    /// Milliseconds since the epoch, or `nil` when `text` is none of the accepted forms.
    public static func parse(_ text: String, now: Date = Date()) -> Int? {
        let nowMs = Int(QuakeTime.milliseconds(now))
        // A span has a unit: a bare number is epoch milliseconds.
        if text.last?.isLetter == true, let span = QuakeDuration.milliseconds(text) { return nowMs - Int(span) }
        if let ms = Int(text), ms >= 0 { return ms }
        if let date = try? Date(text, strategy: Date.ISO8601FormatStyle(includingFractionalSeconds: true)) {
            return Int(QuakeTime.milliseconds(date))
        }
        if let date = try? Date(text, strategy: Date.ISO8601FormatStyle()) {
            return Int(QuakeTime.milliseconds(date))
        }
        if let date = try? Date(text, strategy: Date.ISO8601FormatStyle().year().month().day()) {
            return Int(QuakeTime.milliseconds(date))
        }
        return nil
    }
}
