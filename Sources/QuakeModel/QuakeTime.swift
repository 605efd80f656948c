import Foundation

/// Instants as quaked and quakectl keep them: whole milliseconds since 1970-01-01T00:00:00Z, as
/// the store's columns, the interface's `time`/`updated` and the feed hold them; and their UTC text.
///
/// The text is computed in integers (``CivilDate``), so it is the same on every platform and
/// never passes through `Date`'s binary seconds (11.100 is never printed as 11.099).
public enum QuakeTime {
    /// `date` in milliseconds since the epoch, rounded to the nearest by default. `.down` gives
    /// the millisecond the instant falls in; `.towardZero` what `Int(seconds * 1000)` gives.
    public static func milliseconds(
        _ date: Date, rounding rule: FloatingPointRoundingRule = .toNearestOrAwayFromZero
    ) -> Int64 {
        Int64((date.timeIntervalSince1970 * 1000).rounded(rule))
    }

    /// The current time in milliseconds since the epoch (rounded to the nearest).
    public static func now() -> Int64 { milliseconds(Date()) }

    /// The `Date` of `milliseconds` since the epoch.
    public static func date(_ milliseconds: some BinaryInteger) -> Date {
        Date(timeIntervalSince1970: Double(milliseconds) / 1000)
    }

    /// The UTC calendar fields of an instant (proleptic Gregorian, astronomical years: 0 is 1 BC).
    public struct UTCFields: Sendable, Equatable {
        public var year: Int
        public var month: Int
        public var day: Int
        public var hour: Int
        public var minute: Int
        public var second: Int
        public var millisecond: Int

        public init(year: Int, month: Int, day: Int, hour: Int, minute: Int, second: Int, millisecond: Int) {
            (self.year, self.month, self.day) = (year, month, day)
            (self.hour, self.minute, self.second, self.millisecond) = (hour, minute, second, millisecond)
        }
    }

    /// The UTC fields of `milliseconds` since the epoch (the millisecond it falls in, before or
    /// after 1970).
    public static func utc(_ milliseconds: some BinaryInteger) -> UTCFields {
        let ms = Int64(milliseconds)
        let (days, rest) = ms.quotientAndRemainder(dividingBy: 86_400_000)
        let (day, msOfDay) = rest < 0 ? (days - 1, rest + 86_400_000) : (days, rest)
        let (year, month, dayOfMonth) = CivilDate.date(days: Int(day))
        let millis = Int(msOfDay)
        return UTCFields(
            year: year, month: month, day: dayOfMonth, hour: millis / 3_600_000, minute: millis / 60_000 % 60,
            second: millis / 1000 % 60, millisecond: millis % 1000)
    }

    /// ISO 8601 in UTC with milliseconds: `2025-11-22T02:57:00.123Z` (the export formats, the log,
    /// `QUAKE_TIME`).
    public static func iso8601(_ milliseconds: some BinaryInteger) -> String {
        utcText(milliseconds) + "Z"
    }

    /// `2025-11-22T02:57:00.123`: UTC with milliseconds and no zone designator, as FDSN event
    /// services write and read times.
    public static func utcText(_ milliseconds: some BinaryInteger) -> String {
        let f = utc(milliseconds)
        return "\(pad(f.year, 4))-\(pad(f.month, 2))-\(pad(f.day, 2))T\(pad(f.hour, 2)):\(pad(f.minute, 2))"
            + ":\(pad(f.second, 2)).\(pad(f.millisecond, 3))"
    }

    /// `2025-11-22 02:57`: UTC to the minute, for a column or a footer.
    public static func utcMinutes(_ milliseconds: some BinaryInteger) -> String {
        let f = utc(milliseconds)
        return "\(pad(f.year, 4))-\(pad(f.month, 2))-\(pad(f.day, 2)) \(pad(f.hour, 2)):\(pad(f.minute, 2))"
    }

    /// `value` in at least `width` characters, zero-padded after the sign (as printf's `%04d`).
    static func pad(_ value: Int, _ width: Int) -> String {
        let digits = String(value.magnitude)
        let sign = value < 0 ? "-" : ""
        return sign + String(repeating: "0", count: max(0, width - sign.count - digits.count)) + digits
    }
}
