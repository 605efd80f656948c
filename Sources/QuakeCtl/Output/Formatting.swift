import QuakeClient
import QuakeProtocol
import Foundation
import QuakeFeed

/// How quakes, magnitudes, times and counts read in a terminal.
public enum Formatting {
    /// `M 4.5`, or `M ?` when unknown.
    public static func magnitude(_ mag: Double?) -> String {
        // Appended into one small string: no second string for the number.
        var text = "M "
        if let mag, mag.isFinite { appendOneDecimal(mag, to: &text) } else { text += "?" }
        return text
    }

    /// `4.5`: `%.1f` (the value's exact binary value rounded half to even), and `0.0` for what
    /// rounds to zero from below. Worked out with integers: `watch` prints tens of thousands of
    /// these in a catch-up, and `String(format:)` was a sixth of its time.
    public static func oneDecimal(_ value: Double) -> String {
        var text = ""
        appendOneDecimal(value, to: &text)
        return text
    }

    /// ``oneDecimal(_:)``'s text appended to `text` (a catch-up prints two per magnitude change).
    static func appendOneDecimal(_ value: Double, to text: inout some TextOutput) {
        guard let tenths = roundedTenths(value.magnitude) else {
            let s = String(format: "%.1f", value)
            text += s == "-0.0" ? "0.0" : s
            return
        }
        if tenths == 0 {
            text += "0.0"
            return
        }
        if value < 0 { text += "-" }
        if tenths < smallTenths.count {
            text += smallTenths[tenths]
            return
        }
        text += String(tenths / 10)
        text += decimalPoints[tenths % 10]
    }

    /// `.0` to `.9`, appended whole (appending a `Unicode.Scalar` goes through the slow path).
    private static let decimalPoints = (0..<10).map { ".\($0)" }

    /// `0.0` to `99.9` (every magnitude there is), each made once: making the integer part's
    /// text for each value was a third of the magnitude column's time in a catch-up.
    private static let smallTenths = (0..<1000).map { "\($0 / 10)\(decimalPoints[$0 % 10])" }

    /// `magnitude` × 10 rounded to an integer as `%.1f` rounds: from the exact value, a tie to
    /// even. Each comparison is one fused multiply-add, whose single rounding keeps the sign of
    /// the exact difference. Nil beyond 10^14 (and for NaN and infinities).
    static func roundedTenths(_ magnitude: Double) -> Int? {
        guard magnitude < 1e14 else { return nil }  // false for NaN too
        var floor = (magnitude * 10).rounded(.down)
        // The floor of the exact product (the rounded product may be one off).
        while (-floor).addingProduct(magnitude, 10) < 0 { floor -= 1 }
        while (-(floor + 1)).addingProduct(magnitude, 10) >= 0 { floor += 1 }
        // The exact product against floor + ½, as 20 × magnitude against 2 × floor + 1.
        let half = (-(2 * floor + 1)).addingProduct(magnitude, 20)
        let tenths = Int(floor)
        return half > 0 || (half == 0 && tenths % 2 == 1) ? tenths + 1 : tenths
    }

    /// The sample app's colours: below 1 green, below 2 yellow, below 3 orange, below 5 red,
    /// 5 and above purple; unknown or negative gray.
    public static func magnitudeColor(_ mag: Double?) -> ANSIColor {
        guard let mag, mag.isFinite, mag >= 0 else { return .gray }
        switch mag {
        case ..<1: return .green
        case ..<2: return .yellow
        case ..<3: return .orange
        case ..<5: return .red
        default: return .purple
        }
    }

    /// "3 minutes ago", "in 5 seconds", "just now".
    public static func relative(_ ms: Int, now: Date = Date()) -> String {
        let seconds = (Double(ms) / 1000 - now.timeIntervalSince1970)
        let magnitude = abs(seconds)
        if magnitude < 1 { return "just now" }
        let (value, unit): (Int, String)
        switch magnitude {
        case ..<60: (value, unit) = (Int(magnitude), "second")
        case ..<3600: (value, unit) = (Int(magnitude / 60), "minute")
        case ..<86_400: (value, unit) = (Int(magnitude / 3600), "hour")
        case ..<(86_400 * 30): (value, unit) = (Int(magnitude / 86_400), "day")
        case ..<(86_400 * 365): (value, unit) = (Int(magnitude / (86_400 * 30)), "month")
        default: (value, unit) = (Int(magnitude / (86_400 * 365)), "year")
        }
        // Appended piece by piece (a catch-up prints one per change; an interpolation's buffer
        // for each was a tenth of `watch`'s printing). Short enough to stay in the string's
        // inline storage: no allocation.
        var text = seconds >= 0 ? "in " : ""
        text += String(value)
        text += " "
        text += unit
        if value != 1 { text += "s" }
        if seconds < 0 { text += " ago" }
        return text
    }

    /// `2025-11-22 02:57:00 UTC` in UTC; in another zone the local time and the zone's offset
    /// from UTC then, `2025-11-22 11:57:00 +09:00` (abbreviations are often missing or ambiguous;
    /// an offset is neither). An offset that is not whole minutes (local mean time, before about
    /// 1900) shows its seconds.
    public static func absolute(_ ms: Int, timeZone: TimeZone = .current) -> String {
        let (c, offset) = localParts(ms, timeZone)
        let zone = offset == 0 && isUTC(timeZone) ? "UTC" : offsetText(offset)
        return String(
            format: "%04d-%02d-%02d %02d:%02d:%02d %@", c.year ?? 0, c.month ?? 0, c.day ?? 0, c.hour ?? 0,
            c.minute ?? 0, c.second ?? 0, zone)
    }

    /// The width of ``absolute(_:timeZone:)``'s text in `timeZone` (for a column).
    public static func absoluteWidth(_ timeZone: TimeZone) -> Int { isUTC(timeZone) ? 23 : 26 }

    /// ISO 8601 with milliseconds and the zone's offset then: `2026-11-24T07:10:05.123+09:00`
    /// (`+00:00` in UTC).
    public static func iso8601Local(_ ms: Int, timeZone: TimeZone) -> String {
        let (c, offset) = localParts(ms, timeZone)
        let millis = ((ms % 1000) + 1000) % 1000
        return String(
            format: "%04d-%02d-%02dT%02d:%02d:%02d.%03d", c.year ?? 0, c.month ?? 0, c.day ?? 0, c.hour ?? 0,
            c.minute ?? 0, c.second ?? 0, millis) + offsetText(offset)
    }

    /// The calendar fields of `ms` in `timeZone` (to the second, rounded down) and the zone's
    /// offset from UTC then, in seconds.
    static func localParts(_ ms: Int, _ timeZone: TimeZone) -> (DateComponents, Int) {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = timeZone
        let seconds = ms >= 0 ? ms / 1000 : -((-ms + 999) / 1000)
        let date = Date(timeIntervalSince1970: Double(seconds))
        let c = calendar.dateComponents([.year, .month, .day, .hour, .minute, .second], from: date)
        return (c, timeZone.secondsFromGMT(for: date))
    }

    /// `+09:00`, `-03:30`, `+00:00`; `+00:53:28` when the offset has seconds.
    static func offsetText(_ seconds: Int) -> String {
        let magnitude = abs(seconds)
        var text = (seconds < 0 ? "-" : "+") + String(format: "%02d:%02d", magnitude / 3600, magnitude / 60 % 60)
        if magnitude % 60 != 0 { text += String(format: ":%02d", magnitude % 60) }
        return text
    }

    /// Zones that are UTC by name: their times read `UTC`, not `+00:00`.
    static func isUTC(_ timeZone: TimeZone) -> Bool {
        utcNames.contains(timeZone.identifier) && timeZone.secondsFromGMT() == 0
    }

    static let utcNames: Set<String> = [
        "UTC", "GMT", "Etc/UTC", "Etc/GMT", "Etc/UCT", "UCT", "Etc/Universal", "Universal", "Etc/Zulu", "Zulu",
        "Etc/GMT0", "Etc/GMT+0", "Etc/GMT-0", "GMT0", "GMT+0", "GMT-0", "Etc/Greenwich", "Greenwich",
    ]

    /// A depth or distance given in kilometres, in `unit` with at most `decimals` decimals
    /// (trailing zeros dropped): `10.5 km`, `6.52 mi`.
    public static func distance(kilometres: Double, _ unit: DistanceUnit, decimals: Int = 2) -> String {
        let value = unit.value(kilometres: kilometres)
        var text = String(format: "%.\(decimals)f", value)
        if text.contains(".") {
            while text.hasSuffix("0") { text.removeLast() }
            if text.hasSuffix(".") { text.removeLast() }
        }
        if text == "-0" { text = "0" }
        return "\(text) \(unit.rawValue)"
    }

    /// A USGS place in `unit`: its leading distance (`8km W of Templeton, California`,
    /// `12 km NE of ...`) converted, rounded to whole units as the feed gives it
    /// (`5 mi W of Templeton, California`); other places, and all places in km, unchanged.
    public static func place(_ place: String, _ unit: DistanceUnit) -> String {
        guard unit != .km else { return place }
        let digits = place.prefix { $0.isASCII && ($0.isNumber || $0 == ".") }
        guard !digits.isEmpty, let km = Double(digits) else { return place }
        var rest = place.dropFirst(digits.count)
        if rest.hasPrefix(" ") { rest = rest.dropFirst() }
        guard rest.hasPrefix("km "), km.isFinite else { return place }
        return distance(kilometres: km, unit, decimals: 0) + rest.dropFirst(2)
    }

    /// A time as the style wants it.
    public static func time(_ ms: Int, _ style: OutputStyle, now: Date = Date()) -> String {
        style.absoluteTimes ? absolute(ms, timeZone: style.timeZone) : relative(ms, now: now)
    }

    /// `1,234`.
    public static func count(_ n: some BinaryInteger) -> String {
        let digits = String(n.magnitude)
        var out = ""
        for (i, ch) in digits.enumerated() {
            if i > 0 && (digits.count - i) % 3 == 0 { out.append(",") }
            out.append(ch)
        }
        return (n < 0 ? "-" : "") + out
    }

    /// `1 earthquake`, `1,234 earthquakes`.
    public static func earthquakes(_ n: Int) -> String {
        "\(count(n)) earthquake\(n == 1 ? "" : "s")"
    }

    /// `12.3 MB`.
    public static func bytes(_ n: Int) -> String {
        let units = ["bytes", "KB", "MB", "GB", "TB"]
        var value = Double(n)
        var unit = 0
        while value >= 1000 && unit < units.count - 1 {
            value /= 1000
            unit += 1
        }
        return unit == 0 ? "\(n) bytes" : "\(oneDecimal(value)) \(units[unit])"
    }

    /// `340 ms`, `2.5 s`.
    public static func duration(ms: Int) -> String {
        ms < 1000 ? "\(ms) ms" : "\(oneDecimal(Double(ms) / 1000)) s"
    }

    /// `text` cut to `width` characters with an ellipsis, or padded to it.
    public static func fit(_ text: String, _ width: Int) -> String {
        var fitted = ""
        appendFitted(text, width, to: &fitted)
        return fitted
    }

    /// ``fit(_:_:)``'s text, appended to `row`.
    static func appendFitted(_ text: String, _ width: Int, to row: inout some TextOutput) {
        // Plain ASCII (no CR, which joins a following LF into one character) has a character per
        // byte: counted and cut without walking grapheme clusters.
        let ascii = asciiCount(text)
        let count = ascii ?? text.count
        guard count > width else {
            row += text
            row.appendSpaces(width - count)
            return
        }
        if ascii != nil {
            row += String(decoding: text.utf8.prefix(max(width - 1, 0)), as: UTF8.self)
        } else {
            row += String(text.prefix(max(width - 1, 0)))
        }
        row += "…"
    }

    /// The character count of an ASCII text without CR (one byte each); nil for any other text.
    static func asciiCount(_ text: String) -> Int? {
        var text = text
        return text.withUTF8 { bytes in
            for byte in bytes where byte >= 0x80 || byte == 0x0D { return nil }
            return bytes.count
        }
    }

    /// A coloured, fixed-width magnitude column (`M 4.5`, `M ?`).
    public static func magnitudeColumn(_ mag: Double?, _ style: OutputStyle) -> String {
        var column = ""
        appendMagnitudeColumn(mag, style, to: &column)
        return column
    }

    /// ``magnitudeColumn(_:_:)``, appended to `row`.
    static func appendMagnitudeColumn(_ mag: Double?, _ style: OutputStyle, to row: inout some TextOutput) {
        let text = magnitude(mag)
        style.appendPainted(text, magnitudeColor(mag), to: &row)
        row.appendSpaces(6 - text.utf8.count)  // ASCII: a character per byte
    }

    /// One quake as a list row: magnitude, place, time, id; with an `agencyWidth`, the agencies
    /// (``agencies(net:sources:)``, cut to fit) in a column before the id.
    public static func row(
        mag: Double?, place: String?, time: Int, id: String, placeWidth: Int, _ style: OutputStyle,
        now: Date = Date(), agencies: String? = nil, agencyWidth: Int = 0
    ) -> String {
        var row = ""
        row.reserveCapacity(placeWidth + id.utf8.count + 64)
        appendRow(
            mag: mag, place: place, time: time, id: id, placeWidth: placeWidth, style, now: now, agencies: agencies,
            agencyWidth: agencyWidth, to: &row)
        return row
    }

    /// ``row(mag:place:time:id:placeWidth:_:now:agencies:agencyWidth:)``'s text appended to `row`:
    /// a catch-up prints one per change, so the columns and their padding are written in place
    /// rather than made as strings of their own and joined.
    static func appendRow(
        mag: Double?, place: String?, time: Int, id: String, placeWidth: Int, _ style: OutputStyle, now: Date,
        agencies: String?, agencyWidth: Int, to row: inout some TextOutput
    ) {
        appendMagnitudeColumn(mag, style, to: &row)
        row.appendSpaces(2)
        appendFitted(place.map { Formatting.place($0, style.units) } ?? "(unknown place)", placeWidth, to: &row)
        row.appendSpaces(2)
        appendFitted(Formatting.time(time, style, now: now), style.absoluteTimes ? absoluteWidth(style.timeZone) : 16, to: &row)
        row.appendSpaces(2)
        if agencyWidth > 0 {
            appendFitted(fitAgencies(agencies ?? "", agencyWidth), agencyWidth, to: &row)
            row.appendSpaces(2)
        }
        style.appendPainted(id, .gray, to: &row)
    }

    /// A quake's agencies for people: the entries of `sources` (`,us,ak,`), upper-cased, each
    /// once, `+`-joined, the preferred report's agency (`net`) first and the others in the order
    /// `sources` lists them: `US+AK`, `EMSC+INGV`. A quake without `sources` shows its `net`; nil
    /// when it has neither.
    public static func agencies(net: String?, sources: String?) -> String? {
        agencyList(net: net, sources: sources).map { $0.joined(separator: "+") }
    }

    /// The agencies of ``agencies(net:sources:)`` as a list (nil for none).
    public static func agencyList(net: String?, sources: String?) -> [String]? {
        var names: [String] = []
        let preferred = net.map { $0.trimmingCharacters(in: .whitespaces).uppercased() }
        if let preferred, !preferred.isEmpty { names.append(preferred) }
        for entry in (sources ?? "").split(separator: ",") {
            let name = entry.trimmingCharacters(in: .whitespaces).uppercased()
            if !name.isEmpty, !names.contains(name) { names.append(name) }
        }
        return names.isEmpty ? nil : names
    }

    /// Agencies (`US+AK+NC+CI`) cut to `width` at a whole name, with how many were left out:
    /// `US+AK +2`. A first name too long alone is cut by ``fit(_:_:)``.
    static func fitAgencies(_ text: String, _ width: Int) -> String {
        guard text.count > width else { return text }
        let names = text.split(separator: "+")
        var shown = String(names[0])
        var count = 1
        while count < names.count {
            let next = shown + "+" + names[count]
            let rest = names.count - count - 1
            guard next.count + (rest > 0 ? " +\(rest)".count : 0) <= width else { break }
            shown = next
            count += 1
        }
        return count < names.count ? shown + " +\(names.count - count)" : shown
    }

    /// A width for the agencies column that suits these texts (at most 16 characters); 0, no
    /// column, when none has agencies.
    public static func agencyWidth(_ texts: some Sequence<String?>) -> Int {
        min(16, texts.reduce(0) { max($0, $1?.count ?? 0) })
    }

    /// A width for the place column that suits these places (between 12 and 48 characters).
    public static func placeWidth(_ places: some Sequence<String?>) -> Int {
        min(48, max(12, places.reduce(0) { max($0, ($1 ?? "(unknown place)").count) }))
    }
}
