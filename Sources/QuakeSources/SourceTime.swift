import QuakeModel

/// The ISO 8601 instants agencies write, read in integers (``CivilDate``), without Foundation's
/// formatters: faster, and no rounding through `Date`'s `Double`.
///
/// Accepted: `YYYY-MM-DDThh:mm:ss`, then optionally a fraction of any number of digits (`.`
/// or `,`), then optionally a zone: `Z`, `+hh:mm`, `-hh:mm`, `+hhmm` or `+hh`. A time without a
/// zone is UTC (INGV, IRIS and SeisComP write them so). A space may stand for the `T`, and
/// surrounding whitespace is ignored. The fraction is rounded to the nearest millisecond
/// (half up: `.0005` is 1 ms). Fields are checked (month 1...12, the month's days, hour 0...23,
/// minute 0...59, second 0...60; a leap second counts as the next minute's 0th).
public enum SourceTime {
    /// Milliseconds since the epoch of `text`, or nil when it is not an instant of the accepted
    /// form.
    public static func milliseconds(_ text: some Collection<UInt8>) -> Int64? {
        if let result = text.withContiguousStorageIfAvailable({ parse($0) }) { return result }
        return Array(text).withUnsafeBufferPointer { parse($0) }
    }

    /// ``milliseconds(_:)-(Collection<UInt8>)`` of a string.
    public static func milliseconds(_ text: String) -> Int64? {
        var text = text
        return text.withUTF8 { parse($0) }
    }

    private static func parse(_ b: UnsafeBufferPointer<UInt8>) -> Int64? {
        var start = 0
        var end = b.count
        while start < end, isSpace(b[start]) { start += 1 }
        while end > start, isSpace(b[end - 1]) { end -= 1 }
        var i = start
        func digits(_ n: Int) -> Int? {
            guard end - i >= n else { return nil }
            var value = 0
            for k in 0..<n {
                let c = b[i + k]
                guard c >= 0x30, c <= 0x39 else { return nil }
                value = value * 10 + Int(c - 0x30)
            }
            i += n
            return value
        }
        func expect(_ c: UInt8) -> Bool {
            guard i < end, b[i] == c else { return false }
            i += 1
            return true
        }
        guard let year = digits(4), expect(0x2D), let month = digits(2), expect(0x2D), let day = digits(2)
        else { return nil }
        guard i < end, b[i] == 0x54 || b[i] == 0x20 || b[i] == 0x74 else { return nil }
        i += 1
        guard let hour = digits(2), expect(0x3A), let minute = digits(2), expect(0x3A), let second = digits(2)
        else { return nil }
        guard (1...12).contains(month), day >= 1, day <= daysIn(month: month, year: year),
            hour <= 23, minute <= 59, second <= 60
        else { return nil }
        var millis = 0
        if i < end, b[i] == 0x2E || b[i] == 0x2C {
            i += 1
            var count = 0
            var roundUp = false
            while i < end, b[i] >= 0x30, b[i] <= 0x39 {
                let d = Int(b[i] - 0x30)
                if count < 3 {
                    millis = millis * 10 + d
                } else if count == 3 {
                    roundUp = d >= 5
                }
                count += 1
                i += 1
            }
            guard count > 0 else { return nil }
            for _ in count..<max(count, 3) { millis *= 10 }
            if roundUp { millis += 1 }
        }
        var offsetMinutes = 0
        if i < end {
            if b[i] == 0x5A || b[i] == 0x7A {
                i += 1
            } else if b[i] == 0x2B || b[i] == 0x2D {
                let sign = b[i] == 0x2D ? -1 : 1
                i += 1
                guard let h = digits(2), h <= 23 else { return nil }
                var m = 0
                if i < end {
                    _ = expect(0x3A)
                    guard let mm = digits(2), mm <= 59 else { return nil }
                    m = mm
                }
                offsetMinutes = sign * (h * 60 + m)
            }
        }
        guard i == end else { return nil }
        let days = CivilDate.days(year: year, month: month, day: day)
        let seconds = Int64(days) * 86_400 + Int64(hour * 3600 + (minute - offsetMinutes) * 60 + second)
        return seconds * 1000 + Int64(millis)
    }

    private static func isSpace(_ c: UInt8) -> Bool { c == 0x20 || c == 0x09 || c == 0x0A || c == 0x0D }

    private static func daysIn(month: Int, year: Int) -> Int {
        switch month {
        case 2: (year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)) ? 29 : 28
        case 4, 6, 9, 11: 30
        default: 31
        }
    }
}
