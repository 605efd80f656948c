import QuakeClient
import QuakeProtocol
import Foundation

/// A point in time given on the command line: a span back from now (`30m`, `2h`, `7d`, `1w`), a
/// date (`2025-11-22`, UTC midnight), a date and time in ISO 8601 (`2025-11-22T10:00:00Z`), or
/// milliseconds since the epoch.
public enum TimeArgument {
    public static let help = "30m, 2h, 7d, 1w, 2025-11-22, 2025-11-22T10:00:00Z or epoch milliseconds"

    /// Milliseconds since the epoch, or `nil` when `text` is none of the accepted forms.
    public static func parse(_ text: String, now: Date = Date()) -> Int? {
        let nowMs = Int((now.timeIntervalSince1970 * 1000).rounded())
        if let unit = text.last, let amount = Double(text.dropLast()), amount >= 0 {
            let seconds: Double? =
                switch unit {
                case "s": 1
                case "m": 60
                case "h": 3600
                case "d": 86_400
                case "w": 604_800
                default: nil
                }
            if let seconds { return nowMs - Int(amount * seconds * 1000) }
        }
        if let ms = Int(text), ms >= 0 { return ms }
        if let date = try? Date(text, strategy: Date.ISO8601FormatStyle(includingFractionalSeconds: true)) {
            return Int((date.timeIntervalSince1970 * 1000).rounded())
        }
        if let date = try? Date(text, strategy: Date.ISO8601FormatStyle()) {
            return Int((date.timeIntervalSince1970 * 1000).rounded())
        }
        if let date = try? Date(text, strategy: Date.ISO8601FormatStyle().year().month().day()) {
            return Int((date.timeIntervalSince1970 * 1000).rounded())
        }
        return nil
    }
}
