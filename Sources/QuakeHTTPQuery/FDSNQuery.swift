import Foundation
import QuakeFeed
import QuakeModel
import QuakeSources

/// The parameters of an FDSN event query (`query` and `count`), read and checked.
public struct FDSNQuery: Sendable {
    public enum Format: String, Sendable {
        case xml, text, geojson
    }

    public var selection: QuakeSelection
    public var format: Format = .xml
    /// The status answered when nothing matches: 204 (the default) or 404.
    public var noData: Int = 204

    /// Every parameter the service takes: its name, its aliases, and a description for the WADL.
    public struct Parameter: Sendable {
        public var name: String
        public var aliases: [String]
        public var type: String
        public var doc: String
        public var options: [String] = []
        public var defaultValue: String? = nil
    }

    public static let parameters: [Parameter] = [
        Parameter(name: "starttime", aliases: ["start"], type: "xs:dateTime", doc: "Events at or after this time (UTC)."),
        Parameter(name: "endtime", aliases: ["end"], type: "xs:dateTime", doc: "Events at or before this time (UTC)."),
        Parameter(
            name: "updatedafter", aliases: [], type: "xs:dateTime",
            doc: "Events updated after this time (UTC); an event without an update time does not match."),
        Parameter(name: "minmagnitude", aliases: ["minmag"], type: "xs:double", doc: "Events with this magnitude or more."),
        Parameter(name: "maxmagnitude", aliases: ["maxmag"], type: "xs:double", doc: "Events with this magnitude or less."),
        Parameter(name: "minlatitude", aliases: ["minlat"], type: "xs:double", doc: "Southern edge of a box, degrees (-90 to 90).", defaultValue: "-90.0"),
        Parameter(name: "maxlatitude", aliases: ["maxlat"], type: "xs:double", doc: "Northern edge of a box, degrees (-90 to 90).", defaultValue: "90.0"),
        Parameter(
            name: "minlongitude", aliases: ["minlon"], type: "xs:double",
            doc: "Western edge of a box, degrees (-180 to 180); a box crosses the antimeridian when it is east of maxlongitude.",
            defaultValue: "-180.0"),
        Parameter(name: "maxlongitude", aliases: ["maxlon"], type: "xs:double", doc: "Eastern edge of a box, degrees (-180 to 180).", defaultValue: "180.0"),
        Parameter(name: "latitude", aliases: ["lat"], type: "xs:double", doc: "Centre of a circle, degrees (-90 to 90).", defaultValue: "0.0"),
        Parameter(name: "longitude", aliases: ["lon"], type: "xs:double", doc: "Centre of a circle, degrees (-180 to 180).", defaultValue: "0.0"),
        Parameter(name: "minradius", aliases: [], type: "xs:double", doc: "Events at least this far from the centre, degrees (0 to 180).", defaultValue: "0.0"),
        Parameter(name: "maxradius", aliases: [], type: "xs:double", doc: "Events at most this far from the centre, degrees (0 to 180).", defaultValue: "180.0"),
        Parameter(name: "maxradiuskm", aliases: [], type: "xs:double", doc: "Events at most this far from the centre, km (as the USGS's service takes it)."),
        Parameter(name: "limit", aliases: [], type: "xs:int", doc: "At most this many events (1 or more)."),
        Parameter(name: "offset", aliases: [], type: "xs:int", doc: "The first event returned, counted from 1.", defaultValue: "1"),
        Parameter(
            name: "orderby", aliases: [], type: "xs:string", doc: "The order of the events.",
            options: ["time", "time-asc", "magnitude", "magnitude-asc"], defaultValue: "time"),
        Parameter(name: "eventid", aliases: [], type: "xs:string", doc: "The event with this id (any of its ids)."),
        Parameter(name: "format", aliases: [], type: "xs:string", doc: "The answer's format (quakeml is xml).", options: ["xml", "quakeml", "text", "geojson"], defaultValue: "xml"),
        Parameter(name: "nodata", aliases: [], type: "xs:int", doc: "The status when nothing matches.", options: ["204", "404"], defaultValue: "204"),
        Parameter(
            name: "includeallorigins", aliases: [], type: "xs:boolean",
            doc: "Accepted; every event has one origin, its preferred one.", defaultValue: "false"),
        Parameter(
            name: "includeallmagnitudes", aliases: [], type: "xs:boolean",
            doc: "Accepted; every event has at most one magnitude, its preferred one.", defaultValue: "false"),
        Parameter(name: "includearrivals", aliases: [], type: "xs:boolean", doc: "Accepted; no arrivals are kept.", defaultValue: "false"),
    ]

    /// The names the service accepts, aliases included.
    static let acceptedNames: [String: String] = {
        var names: [String: String] = [:]
        for p in parameters {
            names[p.name] = p.name
            for alias in p.aliases { names[alias] = p.name }
        }
        return names
    }()

    /// The kilometres in a degree of great circle, on the sphere the store's distances use.
    public static let kmPerDegree = 6371 * Double.pi / 180

    /// Reads the query; throws ``ParameterError`` naming the parameter and what it accepts.
    public init(_ items: [(name: String, value: String)]?) throws {
        guard let items else { throw ParameterError("The query string has a malformed %-escape.") }
        var values: [String: (given: String, value: String)] = [:]
        for (name, value) in items {
            let lower = name.lowercased()
            guard let canonical = Self.acceptedNames[lower] else {
                throw ParameterError(
                    "Unknown parameter \(name). Accepted: "
                        + Self.parameters.map { ([$0.name] + $0.aliases).joined(separator: "/") }.joined(separator: ", ") + ".")
            }
            if let earlier = values[canonical] {
                throw ParameterError("\(name) is given twice (also as \(earlier.given)).")
            }
            values[canonical] = (name, value)
        }
        func text(_ name: String) -> (given: String, value: String)? { values[name] }
        func time(_ name: String) throws -> Int64? {
            guard let (given, value) = text(name) else { return nil }
            guard let ms = Self.time(value) else {
                throw ParameterError(
                    "\(given)=\(value) is not a time: use YYYY-MM-DDThh:mm:ss[.ssssss] (UTC, or with Z or an offset), or YYYY-MM-DD.")
            }
            return ms
        }
        func number(_ name: String, _ range: ClosedRange<Double>, _ what: String) throws -> Double? {
            guard let (given, value) = text(name) else { return nil }
            guard let number = Double(value), number.isFinite, range.contains(number) else {
                throw ParameterError("\(given)=\(value) is not \(what).")
            }
            return number
        }
        func integer(_ name: String, _ minimum: Int, _ what: String) throws -> Int? {
            guard let (given, value) = text(name) else { return nil }
            guard let number = Int(value), number >= minimum else { throw ParameterError("\(given)=\(value) is not \(what).") }
            return number
        }
        func boolean(_ name: String) throws {
            guard let (given, value) = text(name) else { return }
            guard ["true", "false"].contains(value.lowercased()) else {
                throw ParameterError("\(given)=\(value) is not a boolean: use true or false.")
            }
        }

        var filter = QuakeFilter()
        var selection = QuakeSelection(requirePosition: true)
        filter.since = try time("starttime")
        selection.until = try time("endtime")
        if let since = filter.since, let until = selection.until, until < since {
            throw ParameterError("endtime is before starttime: nothing could match.")
        }
        selection.updatedAfter = try time("updatedafter")
        filter.minMagnitude = try number("minmagnitude", -10...12, "a magnitude (a number from -10 to 12)")
        filter.maxMagnitude = try number("maxmagnitude", -10...12, "a magnitude (a number from -10 to 12)")
        if let minimum = filter.minMagnitude, let maximum = filter.maxMagnitude, maximum < minimum {
            throw ParameterError("maxmagnitude \(maximum) is below minmagnitude \(minimum): nothing could match.")
        }

        let minLat = try number("minlatitude", -90...90, "a latitude (a number from -90 to 90)")
        let maxLat = try number("maxlatitude", -90...90, "a latitude (a number from -90 to 90)")
        let minLon = try number("minlongitude", -180...180, "a longitude (a number from -180 to 180)")
        let maxLon = try number("maxlongitude", -180...180, "a longitude (a number from -180 to 180)")
        let lat = try number("latitude", -90...90, "a latitude (a number from -90 to 90)")
        let lon = try number("longitude", -180...180, "a longitude (a number from -180 to 180)")
        let minRadius = try number("minradius", 0...180, "a distance in degrees (a number from 0 to 180)")
        let maxRadius = try number("maxradius", 0...180, "a distance in degrees (a number from 0 to 180)")
        let maxRadiusKm = try number("maxradiuskm", 0...20_001.6, "a distance in km (a number from 0 to 20001.6)")
        let box = minLat != nil || maxLat != nil || minLon != nil || maxLon != nil
        let circle = minRadius != nil || maxRadius != nil || maxRadiusKm != nil
        if box && circle {
            throw ParameterError(
                "A box (minlatitude, maxlatitude, minlongitude, maxlongitude) and a circle (minradius, maxradius, maxradiuskm) cannot be combined: use one.")
        }
        if maxRadius != nil && maxRadiusKm != nil {
            throw ParameterError("maxradius (degrees) and maxradiuskm (km) say the same: give one.")
        }
        if box {
            let south = minLat ?? -90
            let north = maxLat ?? 90
            if north < south {
                throw ParameterError("maxlatitude \(north) is south of minlatitude \(south): nothing could match.")
            }
            filter.region = .box(minLat: south, maxLat: north, minLon: minLon ?? -180, maxLon: maxLon ?? 180)
        } else if circle {
            let radiusKm = maxRadiusKm ?? (maxRadius ?? 180) * Self.kmPerDegree
            let inner = (minRadius ?? 0) * Self.kmPerDegree
            if inner > radiusKm {
                throw ParameterError("minradius is beyond the circle's maximum radius: nothing could match.")
            }
            filter.region = .circle(lat: lat ?? 0, lon: lon ?? 0, radiusKm: radiusKm)
            if inner > 0 { selection.minDistanceKm = inner }
        }
        selection.filter = filter

        selection.limit = try integer("limit", 1, "a limit (a whole number, 1 or more)")
        selection.offset = (try integer("offset", 1, "an offset (a whole number, 1 or more: 1 is the first event)") ?? 1) - 1
        if let (given, value) = text("orderby") {
            switch value.lowercased() {
            case "time": selection.order = .timeDescending
            case "time-asc": selection.order = .timeAscending
            case "magnitude": selection.order = .magnitudeDescending
            case "magnitude-asc": selection.order = .magnitudeAscending
            default:
                throw ParameterError("\(given)=\(value) is not an order: use time, time-asc, magnitude or magnitude-asc.")
            }
        }
        if let (given, value) = text("eventid") {
            guard !value.isEmpty else { throw ParameterError("\(given) is empty: give an event id.") }
            selection.eventID = value
        }
        if let (given, value) = text("format") {
            switch value.lowercased() {
            case "xml", "quakeml": format = .xml
            case "text": format = .text
            case "geojson": format = .geojson
            default: throw ParameterError("\(given)=\(value) is not a format: use xml (or quakeml), text or geojson.")
            }
        }
        if let (given, value) = text("nodata") {
            guard let code = Int(value), code == 204 || code == 404 else {
                throw ParameterError("\(given)=\(value) is not a status for no data: use 204 or 404.")
            }
            noData = code
        }
        try boolean("includeallorigins")
        try boolean("includeallmagnitudes")
        try boolean("includearrivals")
        self.selection = selection
    }

    /// An FDSN time: `YYYY-MM-DDThh:mm:ss` with any fraction, UTC unless it says `Z` or an
    /// offset; or a date alone (its midnight, UTC).
    static func time(_ text: String) -> Int64? {
        if text.utf8.count == 10, text.utf8.allSatisfy({ $0 == UInt8(ascii: "-") || ($0 >= 0x30 && $0 <= 0x39) }) {
            return SourceTime.milliseconds(text + "T00:00:00")
        }
        return SourceTime.milliseconds(text)
    }

    /// A stored quake as an FDSN event: the report QuakeMLWriter and FDSNTextWriter write. Its
    /// agency is the quake's (the preferred contributor's), else its network.
    public static func report(_ q: FeedFeature) -> SourceReport {
        var mode: SourceReport.EvaluationMode?
        var status: SourceReport.EvaluationStatus?
        switch q.status?.lowercased() {
        case "reviewed":
            mode = .manual
            status = .reviewed
        case "automatic":
            mode = .automatic
        default:
            break
        }
        return SourceReport(
            source: "quaked", id: q.id, agency: q.agency ?? q.net, time: q.time, latitude: q.lat ?? 0,
            longitude: q.lon ?? 0, depth: q.depth, magnitude: q.mag, magnitudeType: q.magType, place: q.place,
            eventType: q.type, evaluationMode: mode, evaluationStatus: status, updated: q.updated)
    }
}
