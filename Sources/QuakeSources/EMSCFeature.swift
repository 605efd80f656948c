import QuakeFeed
import QuakeModel

/// One EMSC GeoJSON feature, as the seismicportal websocket sends it in a message's `data` and
/// its FDSN event service answers it (`format=json`), and the rules that make it a
/// ``SourceItem``:
///
/// - id: `properties.unid` (`20250305_0000090`), else the feature's `id` (EMSC writes both, the
///   same); none, or empty: skipped (`noID`);
/// - time: `properties.time`, any number of fractional digits (``SourceTime``); missing or not
///   an instant: skipped (`badTime`);
/// - latitude and longitude: `properties.lat` and `lon`, else the geometry's `[lon, lat]`; not
///   finite numbers in -90...90 and -180...180: skipped (`badCoordinates`);
/// - depth in km, positive down: `properties.depth`, else the negated third coordinate (EMSC's
///   geometry carries `-depth`);
/// - magnitude `mag`, its type `magtype` as EMSC spells it (`ml`, `mw`), place `flynn_region`,
///   agency `auth` (the agency whose solution EMSC relays: `GUC`, `AFAD`, `EMSC`), updated
///   `lastupdate` (nil when it does not parse);
/// - event type: `evtype`, the two-letter code of the NEIC-ISC-EMSC nomenclature (certainty,
///   then kind), mapped to QuakeML 1.2's event type text so that every source speaks one
///   vocabulary (``eventType(code:)``: `ke` known and `se` suspected earthquake both give
///   `earthquake`); the certainty is dropped, `uk` (unknown) gives nil, and a code not in the
///   table is kept as sent;
/// - `source_id` and `source_catalog` (EMSC's own origin id in its `EMSC-RTS` catalogue) are
///   read and not kept: they name no other agency's event, so they are no link.
///
/// Optional members of the wrong type (a string `mag`, a numeric `flynn_region`) are taken as
/// absent. A feature that is not an object, or whose `properties` is not an object (null is
/// none), is the wrong shape: the whole message or answer is rejected. EMSC sends no deletions
/// on the socket, so a feature is always a report.
enum EMSCFeature {
    /// EMSC's two-letter event type codes and QuakeML 1.2's event type for each.
    static let eventTypes: [String: String] = [
        "ke": "earthquake", "se": "earthquake", "fe": "earthquake", "de": "earthquake",
        "kr": "rock burst", "sr": "rock burst",
        "ki": "induced or triggered event", "si": "induced or triggered event",
        "km": "mining explosion", "sm": "mining explosion",
        "kh": "chemical explosion", "sh": "chemical explosion",
        "kx": "experimental explosion", "sx": "experimental explosion",
        "kn": "nuclear explosion", "sn": "nuclear explosion",
        "ls": "landslide",
    ]

    /// QuakeML 1.2's event type for EMSC's `evtype` code (any case): nil for `uk` (unknown) and
    /// an empty code, the code itself when the table does not know it.
    static func eventType(code: String) -> String? {
        let lower = code.lowercased()
        if lower.isEmpty || lower == "uk" { return nil }
        return eventTypes[lower] ?? code
    }

    /// Reads the feature at the cursor (`depth` its nesting) and makes it an item or a problem;
    /// `path` (`data`, `features[3]`) names it in messages. Throws ``ReadStop`` for bad JSON and
    /// a wrong shape.
    static func read(_ r: inout JSONReader, depth: Int, path: String, source: String) throws(ReadStop)
        -> FeatureOutcome
    {
        try r.openObject(depth: depth, path: path)
        var featureID: JSONScalar?
        var coordinates: [Double]?
        var p: [String: JSONScalar] = [:]
        var started = false
        while let key = try r.nextKey(&started) {
            switch key {
            case "id":
                featureID = try r.scalar(depth: depth + 1)
            case "type":
                let at = r.i
                let type = try r.scalar(depth: depth + 1)
                guard type.string == "Feature" else {
                    throw r.fail(.wrongType, "\(path).type: expected \"Feature\", found \(type.shown)", at: at)
                }
            case "geometry":
                coordinates = try r.geometryCoordinates(depth: depth + 1, path: "\(path).geometry")
            case "properties":
                p = [:]
                if try r.nextNonWS() == UInt8(ascii: "n") {
                    try r.skipValue(depth: depth + 1)
                    continue
                }
                try r.openObject(depth: depth + 1, path: "\(path).properties")
                var inner = false
                while let name = try r.nextKey(&inner) {
                    switch name {
                    case "unid", "time", "lat", "lon", "depth", "mag", "magtype", "flynn_region", "auth",
                        "lastupdate", "evtype":
                        p[name] = try r.scalar(depth: depth + 2)
                    default:
                        try r.skipValue(depth: depth + 2)
                    }
                }
            default:
                try r.skipValue(depth: depth + 1)
            }
        }
        let id = p["unid"]?.text ?? featureID?.text
        func skip(_ kind: SourceProblem.Kind, _ message: String, _ member: String) -> FeatureOutcome {
            .skipped(SourceProblem(kind, message, source: source, id: id, path: "\(path).\(member)"))
        }
        guard let id else {
            return skip(.noID, "no id: neither properties.unid nor id is a non-empty string", "properties.unid")
        }
        guard let timeValue = p["time"] else { return skip(.badTime, "properties.time is missing", "properties.time") }
        guard let time = timeValue.string.flatMap(SourceTime.milliseconds) else {
            return skip(.badTime, "time \(timeValue.shown) is not an ISO 8601 instant", "properties.time")
        }
        let latitude = p["lat"]?.number ?? coordinates.flatMap { $0.count >= 2 ? $0[1] : nil }
        guard let latitude, latitude.isFinite, (-90...90).contains(latitude) else {
            return skip(
                .badCoordinates, "latitude \((p["lat"] ?? .null).shown) is not in -90...90", "properties.lat")
        }
        let longitude = p["lon"]?.number ?? coordinates.flatMap { $0.first }
        guard let longitude, longitude.isFinite, (-180...180).contains(longitude) else {
            return skip(
                .badCoordinates, "longitude \((p["lon"] ?? .null).shown) is not in -180...180", "properties.lon")
        }
        var depthKM = p["depth"]?.number
        if depthKM == nil, let coordinates, coordinates.count >= 3, coordinates[2].isFinite {
            depthKM = -coordinates[2] + 0  // + 0: -0.0 is 0
        }
        return .item(
            .report(
                SourceReport(
                    source: source, id: id, agency: p["auth"]?.text, time: time, latitude: latitude,
                    longitude: longitude, depth: depthKM, magnitude: p["mag"]?.number,
                    magnitudeType: p["magtype"]?.text, place: p["flynn_region"]?.text,
                    eventType: p["evtype"]?.string.flatMap(eventType(code:)),
                    updated: p["lastupdate"]?.string.flatMap(SourceTime.milliseconds))))
    }
}
