import QuakeModel

/// The source kinds' parsers: each turns an agency's answer into ``SourceItem``s.
///
/// - ``QuakeMLReader``: QuakeML 1.2 and 1.0/1.0.1 from FDSN event services (EMSC, GFZ, INGV,
///   ISC, IRIS, USGS ComCat, SeisComP, GeoNet), streamed through libxml2's SAX2 push parser
///   on the caller's thread;
/// - ``FDSNTextReader``: the FDSN event text format (13 or 14 columns), line by line;
/// - ``EMSCMessageReader``: one message of EMSC's websocket; ``EMSCGeoJSONReader``: EMSC's FDSN
///   `format=json` answer; ``GeoNetReader``: GeoNet's quake API (strict JSON, over QuakeFeed's
///   `JSONReader` and `FeedParser`);
/// - ``SourceTime``: the ISO 8601 instants they read, in integer milliseconds;
/// - ``QuakeMLWriter``, ``FDSNTextWriter``: reports written back as QuakeML 1.2 and FDSN text.
///
/// The readers take the answer's body in chunks as it arrives, hold one event or line at a
/// time, and report the same way: a ``SourceError`` (thrown) rejects the whole answer, a
/// ``SourceProblem`` (counted, the first ones kept) skips one event. An empty body is no
/// events, as FDSN services answer HTTP 204 when nothing matches.
public enum QuakeSources {}
