import QuakeFeed
import QuakeModel

/// Reads the GeoJSON of GeoNet's quake API (`https://api.geonet.org.nz/quake?MMI=-1`, New
/// Zealand) as it arrives in chunks, and produces one ``SourceItem`` per feature, in order.
///
/// Each feature: `properties.publicID` is the id (`2019p545576`); `time` (any number of
/// fractional digits, ``SourceTime``); the geometry's 2-D `[lon, lat]`; `depth` already in km;
/// `magnitude` (GeoNet's summary magnitude, whose type the API does not say: `magnitudeType`
/// nil); `locality` as the place (`5 km north-west of Tokomaru Bay`); `mmi` is not kept. The
/// agency is ``agency`` (`WEL`, GeoNet's agency code in QuakeML and in EMSC's and the ISC's
/// bulletins, so that GeoNet's own solutions and those others relay name the same agency).
///
/// `quality` maps to QuakeML's evaluation (its values are `best`, `preliminary`, `automatic`
/// and `deleted`; the API's older `good` and `caution` were automatic solutions too):
/// - `deleted`: a ``SourceItem/retraction(source:id:updated:)`` of the id (whatever else the
///   feature says, even without a time);
/// - `best` (reviewed by a seismologist): mode `manual`, status `reviewed`;
/// - `preliminary`: status `preliminary`, mode unknown (nil);
/// - `automatic`, `good`, `caution`: mode `automatic`, status nil;
/// - anything else, or none: both nil.
///
/// Problems skip one feature (``skippedCount``, ``problems``): no `publicID` (`noID`), no
/// `time` or one that does not parse (`badTime`; GeoNet's own test fixture has a feature
/// without one), coordinates that are not finite numbers in range (`badCoordinates`).
/// Optional members of the wrong type are taken as absent.
///
/// Errors: a ``SourceError`` rejects the whole answer: not strict JSON or cut short
/// (`malformedJSON`, with `byteOffset`), not a FeatureCollection, or a feature or its
/// `properties` not an object (`wrongShape`), an HTML page (`htmlPage`); once thrown, the
/// reader keeps throwing it. The document is read strictly (QuakeFeed's `JSONReader` and
/// `FeedParser`, no Foundation decoder) and streamed: one feature (at most 1 MiB) is held at a
/// time. A blank answer is no events.
///
/// When `body` throws, its error propagates and the reader stays usable: the next `consume`
/// (an empty chunk will do) reads on from the feature after.
public struct GeoNetReader: Sendable {
    /// The agency of every report: GeoNet's agency code.
    public static let agency = "WEL"

    private var stream: FeatureCollectionStream

    public init(source: String) {
        stream = FeatureCollectionStream(
            source: source, remedy: "check that the URL is GeoNet's quake API (https://api.geonet.org.nz/quake?MMI=-1)")
    }

    public var source: String { stream.source }
    public var skippedCount: Int { stream.skippedCount }
    public var problems: [SourceProblem] { stream.problems }
    public var bytesConsumed: Int { stream.bytesConsumed }

    /// Reads the features `chunk` completes; calls `body` for each one's item. Throws
    /// ``SourceError``, or what `body` throws.
    public mutating func consume(_ chunk: [UInt8], _ body: (SourceItem) throws -> Void) throws {
        let source = stream.source
        try stream.consume(chunk, decode: { (r, index) throws(ReadStop) in
            try Self.feature(&r, index: index, source: source)
        }, body)
    }

    /// Ends the answer: throws if it was cut short or was no FeatureCollection.
    public mutating func finish(_ body: (SourceItem) throws -> Void) throws {
        let source = stream.source
        try stream.finish(decode: { (r, index) throws(ReadStop) in
            try Self.feature(&r, index: index, source: source)
        }, body)
    }

    /// QuakeML's evaluation mode and status for a `quality` (see the type's documentation).
    public static func evaluation(quality: String?) -> (
        mode: SourceReport.EvaluationMode?, status: SourceReport.EvaluationStatus?
    ) {
        switch quality {
        case "best": (.manual, .reviewed)
        case "preliminary": (nil, .preliminary)
        case "automatic", "good", "caution": (.automatic, nil)
        default: (nil, nil)
        }
    }

    static func feature(_ r: inout JSONReader, index: Int, source: String) throws(ReadStop) -> FeatureOutcome {
        let path = "features[\(index)]"
        try r.openObject(depth: 3, path: path)
        var coordinates: [Double]?
        var p: [String: JSONScalar] = [:]
        var started = false
        while let key = try r.nextKey(&started) {
            switch key {
            case "type":
                let at = r.i
                let type = try r.scalar(depth: 4)
                guard type.string == "Feature" else {
                    throw r.fail(.wrongType, "\(path).type: expected \"Feature\", found \(type.shown)", at: at)
                }
            case "geometry":
                coordinates = try r.geometryCoordinates(depth: 4, path: "\(path).geometry")
            case "properties":
                p = [:]
                if try r.nextNonWS() == UInt8(ascii: "n") {
                    try r.skipValue(depth: 4)
                    continue
                }
                try r.openObject(depth: 4, path: "\(path).properties")
                var inner = false
                while let name = try r.nextKey(&inner) {
                    switch name {
                    case "publicID", "time", "depth", "magnitude", "locality", "quality":
                        p[name] = try r.scalar(depth: 5)
                    default: try r.skipValue(depth: 5)
                    }
                }
            default:
                try r.skipValue(depth: 4)
            }
        }
        let id = p["publicID"]?.text
        func skip(_ kind: SourceProblem.Kind, _ message: String, _ member: String) -> FeatureOutcome {
            .skipped(SourceProblem(kind, message, source: source, id: id, path: "\(path).\(member)"))
        }
        guard let id else {
            return skip(.noID, "properties.publicID is not a non-empty string", "properties.publicID")
        }
        let quality = p["quality"]?.string
        if quality == "deleted" { return .item(.retraction(source: source, id: id, updated: nil)) }
        guard let timeValue = p["time"] else { return skip(.badTime, "properties.time is missing", "properties.time") }
        guard let time = timeValue.string.flatMap(SourceTime.milliseconds) else {
            return skip(.badTime, "time \(timeValue.shown) is not an ISO 8601 instant", "properties.time")
        }
        guard let coordinates, coordinates.count >= 2 else {
            return skip(
                .badCoordinates, "the geometry has no [longitude, latitude] coordinates", "geometry.coordinates")
        }
        let (longitude, latitude) = (coordinates[0], coordinates[1])
        guard latitude.isFinite, (-90...90).contains(latitude) else {
            return skip(.badCoordinates, "latitude \(latitude) is not in -90...90", "geometry.coordinates[1]")
        }
        guard longitude.isFinite, (-180...180).contains(longitude) else {
            return skip(.badCoordinates, "longitude \(longitude) is not in -180...180", "geometry.coordinates[0]")
        }
        let (mode, status) = evaluation(quality: quality)
        return .item(
            .report(
                SourceReport(
                    source: source, id: id, agency: agency, time: time, latitude: latitude, longitude: longitude,
                    depth: p["depth"]?.number, magnitude: p["magnitude"]?.number, place: p["locality"]?.text,
                    evaluationMode: mode, evaluationStatus: status)))
    }
}
