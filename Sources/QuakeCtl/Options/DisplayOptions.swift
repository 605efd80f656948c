import ArgumentParser
import Foundation

/// A unit for depths and distances in text output. Machine-readable output (JSON, CSV, GeoJSON,
/// the `--exec` environment) is always in kilometres.
public enum DistanceUnit: String, Sendable, CaseIterable {
    case km
    case mi

    /// The international mile.
    public static let kilometresPerMile = 1.609344

    /// `kilometres` in this unit.
    public func value(kilometres: Double) -> Double {
        switch self {
        case .km: kilometres
        case .mi: kilometres / Self.kilometresPerMile
        }
    }
}

/// `--tz ZONE`: the time zone of the times in text output.
///
/// Accepted: the IANA names Foundation knows that have the Area/Location form (`Asia/Tokyo`,
/// `America/Argentina/Buenos_Aires`, `Etc/GMT-9`), and `UTC` and `GMT`. Rejected, although
/// Foundation's `TimeZone(identifier:)` on Linux accepts some of them: abbreviations (`JST`, `PST`,
/// ambiguous in general), custom offsets (`GMT+5`, `+09:00`) and names in the wrong case (the
/// error suggests the right one).
public enum TimeZoneArgument {
    public static let examples = "e.g. Asia/Tokyo, America/Los_Angeles or UTC"

    /// The zone `name` names, or nil.
    public static func parse(_ name: String) -> TimeZone? {
        if name == "UTC" || name == "GMT" { return TimeZone(identifier: name) ?? TimeZone(secondsFromGMT: 0) }
        // Area/Location names from the zone database; the Etc/ ones (Etc/GMT-9) are not all
        // in Foundation's list on Linux, though the database has them.
        guard name.contains("/"), knownIdentifiers.contains(name) || name.hasPrefix("Etc/") else { return nil }
        return TimeZone(identifier: name)
    }

    /// The zone, or a ValidationError naming `--tz`.
    public static func validated(_ name: String) throws -> TimeZone {
        if let zone = parse(name) { return zone }
        var message = "--tz \(name.debugDescription) is not an IANA time zone name (\(examples))."
        if let match = knownIdentifiers.first(where: { $0.lowercased() == name.lowercased() }),
            parse(match) != nil
        {
            message += " Did you mean \(match)?"
        } else if name.lowercased() == "utc" || name.lowercased() == "gmt" {
            message += " Did you mean \(name.uppercased())?"
        }
        throw ValidationError(message)
    }

    static let knownIdentifiers = Set(TimeZone.knownTimeZoneIdentifiers)
}

/// `--tz`, for commands whose text shows times but no distances (`status`).
public struct TimeZoneOptions: ParsableArguments, Sendable {
    @Option(
        name: .customLong("tz"),
        help: ArgumentHelp(
            "Show times in this time zone (an IANA name, \(TimeZoneArgument.examples)); implies --absolute. Default: the local zone ($TZ).",
            valueName: "zone"))
    public var tz: String?

    public init() {}

    public func validate() throws {
        if let tz { _ = try TimeZoneArgument.validated(tz) }
    }

    /// `style` with the zone; an explicit `--tz` also makes times absolute (a relative time has
    /// no zone). JSON is unaffected: it is always UTC.
    public func apply(to style: OutputStyle) throws -> OutputStyle {
        var style = style
        if let tz {
            style.timeZone = try TimeZoneArgument.validated(tz)
            style.absoluteTimes = true
        }
        return style
    }
}

/// `--tz` and `--units`, for the commands whose text shows times and depths or distances.
public struct DisplayOptions: ParsableArguments, Sendable {
    @Option(
        name: .customLong("tz"),
        help: ArgumentHelp(
            "Show times in this time zone (an IANA name, \(TimeZoneArgument.examples)); implies --absolute. Default: the local zone ($TZ).",
            valueName: "zone"))
    public var tz: String?

    @Option(help: ArgumentHelp("Show depths and distances in kilometres or miles.", valueName: "km|mi"))
    public var units: String = "km"

    public init() {}

    public func validate() throws {
        if let tz { _ = try TimeZoneArgument.validated(tz) }
        _ = try unit()
    }

    public func unit() throws -> DistanceUnit {
        guard let unit = DistanceUnit(rawValue: units) else {
            throw ValidationError("--units takes km or mi, not \(units.debugDescription).")
        }
        return unit
    }

    /// The local zone, unless `--tz` names one.
    public func timeZone() throws -> TimeZone {
        try tz.map(TimeZoneArgument.validated) ?? .current
    }

    /// `style` with the zone and the unit; an explicit `--tz` also makes times absolute. JSON
    /// is unaffected: it is always UTC and kilometres.
    public func apply(to style: OutputStyle) throws -> OutputStyle {
        var style = style
        style.timeZone = try timeZone()
        if tz != nil { style.absoluteTimes = true }
        style.units = try unit()
        return style
    }
}
