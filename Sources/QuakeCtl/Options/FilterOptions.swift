import ArgumentParser
import QuakeMap
import Foundation
import QuakeFeed
import QuakeProtocol

/// The filter flags of `list`, `export` and `watch`. They are sent to quaked, which applies them
/// (io.quaked's Filter): a watch's cache then holds only the quakes that match.
public struct FilterOptions: ParsableArguments, Sendable {
    @Option(
        name: .customLong("min-mag"),
        help: ArgumentHelp("Only earthquakes of at least this magnitude.", valueName: "magnitude"))
    public var minMagnitude: Double?

    @Option(
        name: .customLong("max-mag"),
        help: ArgumentHelp("Only earthquakes of at most this magnitude.", valueName: "magnitude"))
    public var maxMagnitude: Double?

    @Option(help: ArgumentHelp("Only earthquakes within --radius of this point.", valueName: "lat,lon"))
    public var near: String?

    @Option(help: ArgumentHelp("The radius for --near in kilometres (default 100).", valueName: "km"))
    public var radius: Double?

    @Option(
        help: ArgumentHelp(
            "Only earthquakes in this box; it crosses the antimeridian when minlon > maxlon.",
            valueName: "minlat,minlon,maxlat,maxlon"))
    public var box: String?

    @Option(
        help: ArgumentHelp(
            "Only earthquakes inside the polygons of this GeoJSON file (a Polygon, MultiPolygon, Feature or FeatureCollection), edges included; or the GeoJSON itself, starting with {.",
            valueName: "file.geojson"))
    public var region: String?

    @Option(
        name: .customLong("type"),
        help: ArgumentHelp(
            "Only events of this type (earthquake, quarry blast, explosion, ...); repeat for several.",
            valueName: "type"))
    public var types: [String] = []

    @Option(help: ArgumentHelp("Only quakes with a PAGER alert of at least this level.", valueName: "green|yellow|orange|red"))
    public var alert: String?

    @Flag(help: "Only quakes with the tsunami flag.")
    public var tsunami = false

    @Flag(help: "Only quakes whose solution a seismologist has reviewed.")
    public var reviewed = false

    @Option(
        name: .customLong("min-sig"),
        help: ArgumentHelp("Only quakes of at least this significance (0 to about 1000).", valueName: "n"))
    public var minSignificance: Int?

    @Option(help: ArgumentHelp("Only earthquakes since then: \(TimeArgument.help).", valueName: "time"))
    public var since: String?

    @Option(
        name: .customLong("agency"),
        help: ArgumentHelp(
            "Only quakes with a report from this agency (us, emsc, ingv, ...; any case), one of the quake's sources; repeat for several.",
            valueName: "agency"))
    public var agencies: [String] = []

    @Option(
        name: .customLong("min-agencies"),
        help: ArgumentHelp(
            "Only quakes with reports from at least this many agencies (the entries of sources).", valueName: "n"))
    public var minAgencies: Int?

    public init() {}

    /// The part of the world a map of the quakes `filter` (what ``filter(now:sinceIsFilter:)``
    /// made of these flags) selects shows: the box of --box, the box around --near's circle, or
    /// the bounds of --region; nil for the whole world. Throws ValidationError naming the flag for
    /// a region of no area.
    public func viewport(of filter: IOQuaked.Filter?) throws -> Viewport? {
        guard let region = filter else { return nil }
        if let box = region.box {
            guard
                let viewport = Viewport(minLat: box.minLat, minLon: box.minLon, maxLat: box.maxLat, maxLon: box.maxLon)
            else {
                throw ValidationError("--box has no area to draw: give MINLAT < MAXLAT and MINLON ≠ MAXLON.")
            }
            return viewport
        }
        if let circle = region.near {
            return Viewport(lat: circle.lat, lon: circle.lon, radiusKm: circle.radiusKm)
        }
        let points = (region.polygons ?? []).flatMap(\.rings).flatMap(\.points)
        guard let minLat = points.map(\.lat).min(), let maxLat = points.map(\.lat).max(),
            let minLon = points.map(\.lon).min(), let maxLon = points.map(\.lon).max()
        else { return nil }
        return Viewport(minLat: max(-90, minLat), minLon: max(-180, minLon), maxLat: min(90, maxLat), maxLon: min(180, maxLon))
    }

    /// A map's title: "Earthquakes", with the flags given (``summary``).
    public var mapTitle: String {
        "Earthquakes" + (summary.map { " (\($0))" } ?? "")
    }

    /// The flags given, as a short text for a map's title (nil for none).
    public var summary: String? {
        var parts: [String] = []
        if let minMagnitude { parts.append("M ≥ \(Formatting.oneDecimal(minMagnitude))") }
        if let maxMagnitude { parts.append("M ≤ \(Formatting.oneDecimal(maxMagnitude))") }
        if let near { parts.append("within \(Formatting.oneDecimal(radius ?? 100)) km of \(near)") }
        if let box { parts.append("in \(box)") }
        if region != nil { parts.append("in the --region polygons") }
        if let since { parts.append("since \(since)") }
        if !agencies.isEmpty { parts.append("from " + agencies.map { $0.uppercased() }.joined(separator: " or ")) }
        if let minAgencies { parts.append("≥ \(minAgencies) agencies") }
        return parts.isEmpty ? nil : parts.joined(separator: ", ")
    }

    /// The filter the flags give (nil: none). `sinceIsFilter` false leaves `--since` to the
    /// command (watch's `--since now`). Throws ValidationError naming the flag.
    public func filter(now: Date = Date(), sinceIsFilter: Bool = true) throws -> IOQuaked.Filter? {
        var filter = QuakeFilter(minMagnitude: minMagnitude, maxMagnitude: maxMagnitude, reviewedOnly: reviewed)
        if radius != nil && near == nil { throw ValidationError("--radius needs --near LAT,LON.") }
        if let near {
            let parts = near.split(separator: ",").map { Double($0.trimmingCharacters(in: .whitespaces)) }
            guard parts.count == 2, let lat = parts[0], let lon = parts[1], (-90...90).contains(lat),
                (-180...180).contains(lon)
            else {
                throw ValidationError("--near takes LAT,LON in degrees, e.g. --near 37.77,-122.42.")
            }
            let km = radius ?? 100
            guard km.isFinite, km > 0 else { throw ValidationError("--radius must be a positive number of kilometres.") }
            filter.region = .circle(lat: lat, lon: lon, radiusKm: km)
        }
        if let box {
            guard near == nil else { throw ValidationError("--box and --near cannot be combined; give one region.") }
            let parts = box.split(separator: ",", omittingEmptySubsequences: false).map {
                Double($0.trimmingCharacters(in: .whitespaces))
            }
            guard parts.count == 4, let minLat = parts[0], let minLon = parts[1], let maxLat = parts[2],
                let maxLon = parts[3]
            else {
                throw ValidationError("--box takes MINLAT,MINLON,MAXLAT,MAXLON in degrees, e.g. --box 32,-125,42,-114.")
            }
            filter.region = .box(minLat: minLat, maxLat: maxLat, minLon: minLon, maxLon: maxLon)
        }
        if let region {
            guard near == nil && box == nil else {
                throw ValidationError("--region cannot be combined with --near or --box; give one region.")
            }
            filter.region = .polygons(try Self.polygons(region))
        }
        let types = types.flatMap { $0.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) } }
        if !types.isEmpty { filter.types = Array(Set(types)).sorted() }
        if let alert {
            guard let level = QuakeFilter.AlertLevel(rawValue: alert.lowercased()) else {
                throw ValidationError("--alert takes green, yellow, orange or red.")
            }
            filter.minAlert = level
        }
        if tsunami { filter.tsunami = true }
        filter.minSignificance = minSignificance.map(Int64.init)
        let agencies = agencies.flatMap { $0.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) } }
            .filter { !$0.isEmpty }
        if !self.agencies.isEmpty {
            guard !agencies.isEmpty else { throw ValidationError("--agency takes an agency's name, e.g. --agency emsc.") }
            filter.agencies = Array(Set(agencies.map { $0.lowercased() })).sorted()
        }
        filter.minAgencies = minAgencies.map(Int64.init)
        if let since, sinceIsFilter {
            guard let ms = TimeArgument.parse(since, now: now) else {
                throw ValidationError("--since \(since) is not a time; use \(TimeArgument.help).")
            }
            filter.since = Int64(ms)
        }
        do {
            try filter.validate()
        } catch let invalid as QuakeFilter.Invalid {
            throw ValidationError("\(Self.flag(for: invalid.field)): \(invalid.problem).")
        }
        return filter.isEmpty ? nil : IOQuaked.Filter(filter)
    }

    /// The polygons of `--region`: a GeoJSON file, or GeoJSON given inline; validated, so that a
    /// problem names the flag, the file and the ring.
    static func polygons(_ argument: String) throws -> PolygonRegion {
        let inline = argument.drop { $0.isWhitespace }.first == "{"
        let name = inline ? "--region" : "--region \(argument)"
        let data: Data
        if inline {
            data = Data(argument.utf8)
        } else {
            guard let read = FileManager.default.contents(atPath: argument) else {
                throw ValidationError("\(name): cannot read the file.")
            }
            data = read
        }
        do {
            let region = try GeoJSONRegion.parse(data)
            try region.validate()
            return region
        } catch let problem as GeoJSONRegion.Problem {
            throw ValidationError("\(name): \(problem).")
        } catch let problem as PolygonRegion.Problem {
            throw ValidationError("\(name): \(problem).")
        }
    }

    /// The flag that sets a filter field.
    static func flag(for field: String) -> String {
        switch field {
        case "minMagnitude": "--min-mag"
        case "maxMagnitude": "--max-mag"
        case let f where f.hasPrefix("near."): f == "near.radiusKm" ? "--radius" : "--near"
        case let f where f.hasPrefix("box"): "--box"
        case let f where f.hasPrefix("polygons"): "--region"
        case "types": "--type"
        case "minSignificance": "--min-sig"
        case "agencies": "--agency"
        case "minAgencies": "--min-agencies"
        default: "--" + field
        }
    }

    /// The same filter as a local one, for `list --cache`.
    public func localFilter(now: Date = Date()) throws -> QuakeFilter {
        guard let wire = try filter(now: now) else { return QuakeFilter() }
        return try QuakeFilter(wire)
    }
}
