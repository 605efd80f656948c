import Foundation
import QuakeModel
import Testing

@Suite struct QuakeTimeTests {
    /// What gmtime_r and printf make of `ms` (the formatters QuakeTime replaced).
    static func gmtimeText(_ ms: Int64) -> String {
        let seconds = ms >= 0 ? ms / 1000 : (ms - 999) / 1000
        var t = time_t(seconds)
        var parts = tm()
        gmtime_r(&t, &parts)
        return String(
            format: "%04d-%02d-%02dT%02d:%02d:%02d.%03d", Int(parts.tm_year) + 1900, Int(parts.tm_mon) + 1,
            Int(parts.tm_mday), Int(parts.tm_hour), Int(parts.tm_min), Int(parts.tm_sec), Int(ms - seconds * 1000))
    }

    @Test func knownInstants() {
        #expect(QuakeTime.iso8601(0) == "1970-01-01T00:00:00.000Z")
        #expect(QuakeTime.iso8601(-1) == "1969-12-31T23:59:59.999Z")
        #expect(QuakeTime.iso8601(1_397_474_951_100) == "2014-04-14T11:29:11.100Z")
        #expect(QuakeTime.utcText(1_763_780_220_123) == "2025-11-22T02:57:00.123")
        #expect(QuakeTime.utcMinutes(1_763_780_220_123) == "2025-11-22 02:57")
        #expect(QuakeTime.utcText(253_402_300_799_999) == "9999-12-31T23:59:59.999")
        #expect(QuakeTime.utcText(-62_167_219_200_000) == "0000-01-01T00:00:00.000")
        #expect(QuakeTime.utcText(-62_167_219_200_001) == "-001-12-31T23:59:59.999")
        #expect(QuakeTime.utc(951_825_600_000) == .init(year: 2000, month: 2, day: 29, hour: 12, minute: 0, second: 0, millisecond: 0))
    }

    @Test func randomInstantsAgreeWithGmtimeAndFoundation() throws {
        var generator = SystemRandomNumberGenerator()
        let iso = Date.ISO8601FormatStyle(includingFractionalSeconds: true)
        for _ in 0..<2000 {
            // Years 1 to 9999.
            let ms = Int64.random(in: -62_135_596_800_000...253_402_300_799_999, using: &generator)
            let text = QuakeTime.utcText(ms)
            #expect(text == Self.gmtimeText(ms))
            #expect(QuakeTime.utcMinutes(ms) == String(text.prefix(16)).replacingOccurrences(of: "T", with: " "))
            // Foundation's calendar is Julian before 1582: from 1600 on, it reads the text back.
            if ms >= -11_676_096_000_000 {
                let parsed = try Date(QuakeTime.iso8601(ms), strategy: iso)
                #expect(QuakeTime.milliseconds(parsed) == ms, "\(ms)")
            }
        }
    }

    @Test func millisecondsOfADate() {
        let date = Date(timeIntervalSince1970: 1.2345)
        #expect(QuakeTime.milliseconds(date) == 1235)
        #expect(QuakeTime.milliseconds(date, rounding: .down) == 1234)
        #expect(QuakeTime.milliseconds(Date(timeIntervalSince1970: -1.2345), rounding: .down) == -1235)
        #expect(QuakeTime.milliseconds(Date(timeIntervalSince1970: -1.2345), rounding: .towardZero) == -1234)
        #expect(QuakeTime.milliseconds(QuakeTime.date(1_397_474_951_100)) == 1_397_474_951_100)
        let now = QuakeTime.now()
        #expect(abs(now - Int64(Date().timeIntervalSince1970 * 1000)) < 60_000)
    }

    @Test func civilDatesRoundTrip() {
        for days in stride(from: -800_000, through: 3_000_000, by: 997) {
            let (y, m, d) = CivilDate.date(days: days)
            #expect(CivilDate.days(year: y, month: m, day: d) == days)
        }
        #expect(CivilDate.days(year: 1970, month: 1, day: 1) == 0)
        #expect(CivilDate.days(year: 2000, month: 3, day: 1) == 11_017)
    }
}

@Suite struct QuakeDurationTests {
    @Test func everyUnit() {
        #expect(QuakeDuration.milliseconds("1500ms") == 1500)
        #expect(QuakeDuration.milliseconds("90") == 90_000)
        #expect(QuakeDuration.milliseconds("90s") == 90_000)
        #expect(QuakeDuration.milliseconds("5m") == 300_000)
        #expect(QuakeDuration.milliseconds("1.5h") == 5_400_000)
        #expect(QuakeDuration.milliseconds("7d") == 604_800_000)
        #expect(QuakeDuration.milliseconds("1w") == 604_800_000)
        #expect(QuakeDuration.milliseconds("0") == 0)
        #expect(QuakeDuration.milliseconds("0.0004s") == 0)
        #expect(QuakeDuration.parse("250ms") == .milliseconds(250))
    }

    @Test func notDurations() {
        for bad in ["", "s", "ms", "-1s", "5 m", "5x", "1y", "inf", "nans", "5mm", "1e300w", " 5s", "5s "] {
            #expect(QuakeDuration.milliseconds(bad) == nil, "\(bad)")
        }
    }

    @Test func textReadsBack() {
        #expect(QuakeDuration.text(.seconds(60)) == "60s")
        #expect(QuakeDuration.text(.seconds(120)) == "120s")
        #expect(QuakeDuration.text(.seconds(900)) == "15m")
        #expect(QuakeDuration.text(.seconds(7 * 86_400)) == "7d")
        #expect(QuakeDuration.text(.milliseconds(1500)) == "1500ms")
        #expect(QuakeDuration.text(.seconds(121)) == "121s")
        for ms in [0, 1, 999, 1000, 59_000, 3_600_000, 86_400_000 * 30, 123_456_789] as [Int64] {
            #expect(QuakeDuration.milliseconds(QuakeDuration.text(.milliseconds(ms))) == ms)
        }
    }
}
