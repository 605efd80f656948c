/// The one duration grammar of quaked's configuration and quakectl's options: a non-negative
/// number with an optional unit, `ms`, `s` (the default), `m`, `h`, `d` or `w`: `1500ms`, `90`,
/// `90s`, `5m`, `2h`, `7d`, `1w`. Fractions are allowed (`1.5h`); the result is whole milliseconds.
public enum QuakeDuration {
    /// The units, with their length in seconds.
    public static let units: [(suffix: String, seconds: Double)] = [
        ("ms", 0.001), ("s", 1), ("m", 60), ("h", 3600), ("d", 86_400), ("w", 604_800),
    ]

    /// Examples for help texts and messages.
    public static let examples = "250ms, 30s, 5m, 2h, 7d or 1w"

    /// `text` in whole milliseconds (rounded to the nearest), or nil when it is not a duration
    /// (or too long to count in milliseconds).
    public static func milliseconds(_ text: String) -> Int64? {
        var number = Substring(text)
        var factor = 1.0
        for (suffix, seconds) in units where text.hasSuffix(suffix) {
            let candidate = text.dropLast(suffix.count)
            if Double(candidate) != nil {
                number = candidate
                factor = seconds
                break
            }
        }
        guard let value = Double(number), value.isFinite, value >= 0 else { return nil }
        let milliseconds = (value * factor * 1000).rounded()
        guard milliseconds < 9.2e18 else { return nil }
        return Int64(milliseconds)
    }

    /// `text` as a `Duration`, or nil when it is not a duration.
    public static func parse(_ text: String) -> Duration? {
        milliseconds(text).map { .milliseconds($0) }
    }

    /// A duration as ``parse(_:)`` reads it, in the largest unit that keeps it a whole number
    /// (`15m`, `7d`, `1500ms`), except that up to two minutes whole seconds stay seconds (`60s`,
    /// `120s`, as timeouts are usually written).
    public static func text(_ duration: Duration) -> String {
        let (seconds, attoseconds) = duration.components
        let milliseconds = seconds * 1000 + attoseconds / 1_000_000_000_000_000
        if milliseconds % 1000 != 0 { return "\(milliseconds)ms" }
        let whole = milliseconds / 1000
        if whole <= 120 { return "\(whole)s" }
        for (suffix, unit) in [("d", Int64(86_400)), ("h", 3600), ("m", 60)] where whole % unit == 0 {
            return "\(whole / unit)\(suffix)"
        }
        return "\(whole)s"
    }
}
