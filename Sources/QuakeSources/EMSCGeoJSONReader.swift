import QuakeFeed
import QuakeModel

/// Reads the GeoJSON answer of EMSC's FDSN event service
/// (`https://www.seismicportal.eu/fdsnws/event/1/query?...&format=json`) as it arrives in
/// chunks: a FeatureCollection (`metadata.totalCount`, then `features`) of the same features
/// the websocket sends, and one ``SourceItem`` per feature, in order (the rules are
/// `EMSCFeature`'s, as for ``EMSCMessageReader``). The websocket's catch-up after a reconnect
/// asks the service for what it missed in this format.
///
/// The document is checked strictly (RFC 8259 with QuakeFeed's `JSONReader` and `FeedParser`:
/// no Foundation decoder, no trailing commas) and streamed: only the current feature is held
/// (at most 1 MiB), never the document.
///
/// Errors: a ``SourceError`` rejects the whole answer: not strict JSON or cut short
/// (`malformedJSON`, with `byteOffset`), not a FeatureCollection or a feature or its
/// `properties` not an object (`wrongShape`), an HTML page (`htmlPage`); once thrown, the
/// reader keeps throwing it. A feature without an id, with a bad time or impossible
/// coordinates is skipped (``skippedCount``, ``problems``). An empty or blank answer (HTTP 204)
/// is no events and no error.
///
/// When `body` throws, its error propagates and the reader stays usable: the next `consume`
/// (an empty chunk will do) reads on from the feature after.
public struct EMSCGeoJSONReader: Sendable {
    private var stream: FeatureCollectionStream

    public init(source: String) {
        stream = FeatureCollectionStream(
            source: source, remedy: "check that the URL asks EMSC's FDSN event service for format=json")
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
            try EMSCFeature.read(&r, depth: 3, path: "features[\(index)]", source: source)
        }, body)
    }

    /// Ends the answer: throws if it was cut short or was no FeatureCollection.
    public mutating func finish(_ body: (SourceItem) throws -> Void) throws {
        let source = stream.source
        try stream.finish(decode: { (r, index) throws(ReadStop) in
            try EMSCFeature.read(&r, depth: 3, path: "features[\(index)]", source: source)
        }, body)
    }
}
