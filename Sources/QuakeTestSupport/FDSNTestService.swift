import Foundation
import NIOConcurrencyHelpers
import QuakeSources

/// Errors of ``FDSNTestService``'s event set.
public enum FDSNTestServiceError: Error, CustomStringConvertible {
    /// A feature the service cannot hold (not a USGS feature: no `id`, no `properties.time`, bad JSON…).
    case invalidFeature(String)
    /// A feed file could not be read or parsed.
    case unreadableFeed(path: String, detail: String)
    /// ``FDSNTestService/add(feature:)`` was given an id that is already there.
    case duplicateID(String)
    /// No event has this id.
    case unknownID(String)

    /// A one-line explanation.
    public var description: String {
        switch self {
        case .invalidFeature(let detail): return "not a USGS feature: \(detail)"
        case .unreadableFeed(let path, let detail): return "cannot load \(path): \(detail)"
        case .duplicateID(let id): return "an event with id \(id) is already there"
        case .unknownID(let id): return "no event with id \(id)"
        }
    }
}

/// The USGS FDSN event web service (`/fdsnws/event/1/query` and `/count`; GeoJSON, QuakeML 1.2 and FDSN
/// text), over an in-memory set of events, served by a ``FeedTestServer``; with faults injected on demand,
/// for pointing a client of the real service at in tests and benchmarks.
///
/// ```swift
/// let server = try await FeedTestServer.start()
/// let service = FDSNTestService(on: server)
/// try service.add(featuresOf: Fixtures.usgs("heltond__earthquakes__query.geojson"))
/// // GET service.baseURL + "query?format=geojson&starttime=2019-06-01&endtime=2019-06-02"
/// service.enqueueFaults([.tooManyRequests(retryAfter: 2), .truncated(afterBytes: 100)])
/// try await server.shutdown()
/// ```
///
/// What it implements of the real service (and where it differs):
/// - `query` answers a GeoJSON `FeatureCollection` shaped like the real one: `metadata` (`generated`
///   now, `url` the request's URL on this server, `title` "USGS Earthquakes", `status` 200, `api`
///   ``apiVersion``, `count`), `features` (each event's feature bytes exactly as they were added), and
///   a `bbox` over the returned events (left out when none has coordinates).
/// - `format=xml` (also `quakeml`, and no `format` at all, the real service's default) answers QuakeML
///   1.2, `format=text` the FDSN text format (``textLayout``: 14 columns by default, or 13): each event as
///   ``report(ofFeature:)`` makes it a report (a deleted one a retraction: QuakeML's `not existing`, the
///   text's `EventType`; no line in 13 columns), written by QuakeSources' `QuakeMLWriter` and `FDSNTextWriter`, with the same
///   selection, order, paging and search limit as GeoJSON. An answer without events is 204 No Content,
///   or 404 with `nodata=404`; GeoJSON keeps the USGS's empty collection unless `nodata` is given.
/// - Parameters: `starttime`/`endtime` (inclusive; `2024-01-02`, `2024-01-02T03:04:05`, a space instead
///   of `T`, an optional fraction and `Z`; always UTC; no default, unlike the real service's "30 days
///   ago"), `updatedafter` (inclusive), `minmagnitude`/`maxmagnitude` (inclusive; events without a
///   magnitude never match them), the circle `latitude`/`longitude`/`maxradiuskm` (great-circle distance
///   on a sphere of radius ``earthRadiusKm``, inclusive; the radius defaults to 20001.6 km),
///   the box `minlatitude`/`maxlatitude`/`minlongitude`/`maxlongitude` (longitudes -360…360, so
///   `170…190` crosses the antimeridian), `orderby` (`time`, `time-asc`, `magnitude`,
///   `magnitude-asc`), `limit` (1…``searchLimit``), `offset` (1-based), `includedeleted`
///   (`false`, `true`, `only`), `format` (`geojson`, `xml`, `quakeml` or `text` for `query`; `geojson`
///   or `text` for `count`) and `nodata` (`204`, `404`). The FDSN short names `start`, `end`, `minmag`,
///   `maxmag`, `lat`, `lon`, `minlat`, `maxlat`, `minlon`, `maxlon` are accepted too. Any other
///   parameter (including those of the real service this one does not implement, such as `eventid` or
///   `mindepth`), a malformed value, or a value out of range gets 400 with a plain-text body naming the
///   parameter.
/// - Events without coordinates never match a circle or a box. An event is deleted when its
///   `properties.status` is `deleted` (any case). Events of the same time come by id (descending for
///   `time`, ascending for `time-asc`); events of the same magnitude by time and id (newest first for
///   `magnitude`, oldest first for `magnitude-asc`); events without a magnitude come last in both
///   magnitude orders. Query values are percent-decoded with `+` as a space (``RecordedRequest/query``).
/// - The search limit: without `limit`, more than ``searchLimit`` matching events get 400
///   (``searchLimitMessage(matching:limit:)``); `count` answers `{"count":N,"maxAllowed":L}` or `N`.
/// - Faults apply to `query` requests, to whatever the answer would have been (a 400 too): a queue of
///   one-shot ``Fault``s (``enqueueFaults(_:)``), else ``failAlways``; then ``slowMode``. For the
///   QuakeML and text answers: a maintenance page with 200 (``Fault/maintenancePage(status:)``),
///   QuakeML cut mid-element (``Fault/malformedXML()``), text rows of the wrong width
///   (``Fault/wrongColumnCount(_:)``). `count` can
///   be switched off (``countAvailable``), made to lie (``countLies``) or made to fail (``countFault``).
/// - Every request to either endpoint is logged with its parsed query and the status answered
///   (``log``, ``queryRequests``, ``countRequests``).
///
/// Events are held as their serialized feature bytes plus the few numbers the filters read, sorted by
/// time (then id): a time window is a binary search, a response body a concatenation. 200,000 events
/// (a 140 MB feed from `scripts/gen-feed.py`) load in about 1 s in a release build (7 s in a debug
/// build, where the feed parser is unoptimized) and take about 200 MB. Everything can be changed while
/// the server runs; each request sees the events as they were when its answer was decided.
public final class FDSNTestService: Sendable {
    // Here: the events' and requests' types, the state, installing and the request log. The rest:
    // FDSNTestService+Query (the parameters and the filters), +Catalog (the events, sorted by time,
    // and their selection), +Responses (answering `query` and `count`), +Formats (QuakeML and text: the
    // features as reports, the bodies, no data), +Faults (the misbehaviour on demand), +Values (times,
    // distances, JSON values); FeatureEditor edits a feature's bytes.

    // MARK: Types

    /// One event as the filters see it (the numbers read from its feature).
    public struct Event: Sendable, Hashable {
        /// The feature's `id`.
        public let id: String
        /// `properties.time`, milliseconds since 1970 (UTC).
        public let time: Int64
        /// `properties.updated` in milliseconds, or ``time`` when the feature has none.
        public let updated: Int64
        /// `properties.mag`, if any.
        public let magnitude: Double?
        /// The first coordinate of the geometry, if any.
        public let longitude: Double?
        /// The second coordinate of the geometry, if any.
        public let latitude: Double?
        /// The third coordinate of the geometry (km), if any.
        public let depth: Double?
        /// `properties.status`, if any.
        public let status: String?

        /// Whether ``status`` is `deleted` (in any case).
        public var isDeleted: Bool { status.map { $0.lowercased() == "deleted" } ?? false }
    }

    /// The two methods the service answers.
    public enum Endpoint: String, Sendable, Hashable {
        /// `query`: the events.
        case query
        /// `count`: how many events match.
        case count
    }

    /// Why the service rejected a request's parameters (it answers 400 with ``message``).
    public struct QueryError: Error, Sendable, Hashable, CustomStringConvertible {
        /// The parameter at fault, as the request named it.
        public let parameter: String
        /// The explanation, which names the parameter.
        public let message: String

        /// An error about `parameter`.
        public init(parameter: String, message: String) {
            self.parameter = parameter
            self.message = message
        }

        /// ``message``.
        public var description: String { message }
    }

    /// One request to the service, as answered.
    public struct LoggedRequest: Sendable {
        /// Which method was asked.
        public let endpoint: Endpoint
        /// The request as the server received it (``RecordedRequest/query`` has the raw parameters).
        public let request: RecordedRequest
        /// The parsed parameters, or `nil` when they were rejected (or `count` was off).
        public let query: Query?
        /// The status answered (after any fault).
        public let status: Int
        /// The fault applied to this request, if any (one-shot, ``failAlways`` or ``countFault``;
        /// ``slowMode`` is not recorded here).
        public let fault: Fault?
        /// How many events matched the filters (before `limit`/`offset`), when the query was parsed.
        public let matched: Int?
        /// How many features the answer's body held (`query` with status 200 before any fault).
        public let returned: Int?
    }

    // MARK: State

    struct Stored {
        var event: Event
        var bytes: [UInt8]
    }

    struct State {
        /// Every event, sorted by (time, id).
        var ordered: [Stored] = []
        /// Event id → its time, to find it in `ordered`.
        var timeByID: [String: Int64] = [:]
        var searchLimit: Int
        var countAvailable = true
        var countLies: (@Sendable (Int) -> Int)?
        var countFault: Fault?
        var faults: [Fault] = []
        var failAlways: Fault?
        var slowMode: (chunkSize: Int, delay: Duration)?
        var textLayout: FDSNTextWriter.Layout = .fourteen
        var log: [LoggedRequest] = []
    }

    let state: NIOLockedValueBox<State>
    /// `http://127.0.0.1:PORT`, for `metadata.url`.
    let origin: String

    /// The path the service is installed at, e.g. `/fdsnws/event/1/`.
    public let basePath: String
    /// `http://127.0.0.1:PORT/fdsnws/event/1/` (what a client is configured with).
    public let baseURL: String
    /// The URL of `query`.
    public var queryURL: String { baseURL + "query" }
    /// The URL of `count`.
    public var countURL: String { baseURL + "count" }

    /// The path the real service has, and the default of ``init(on:basePath:searchLimit:)``.
    public static let defaultBasePath = "/fdsnws/event/1/"
    /// `metadata.api` of the answers.
    public static let apiVersion = "1.14.1"
    /// The sphere radius of the circle search (km).
    public static let earthRadiusKm = 6371.0

    /// Creates a service with no events and installs it on `server` at `basePath` (its `query` and
    /// `count` paths get handlers; see ``FeedTestServer/setHandler(_:_:)``).
    public init(
        on server: FeedTestServer, basePath: String = FDSNTestService.defaultBasePath, searchLimit: Int = 20000
    ) {
        var base = basePath.hasPrefix("/") ? basePath : "/" + basePath
        if !base.hasSuffix("/") { base += "/" }
        self.basePath = base
        self.origin = "http://127.0.0.1:\(server.port)"
        self.baseURL = server.url(base)
        self.state = NIOLockedValueBox(State(searchLimit: searchLimit))
        server.setHandler(base + "query") { [self] request in self.answer(.query, request) }
        server.setHandler(base + "count") { [self] request in self.answer(.count, request) }
    }

    /// Starts a server with a service on it, runs `body`, and shuts the server down, whether `body`
    /// throws or not.
    public static func withService<R>(
        searchLimit: Int = 20000, _ body: (FDSNTestService, FeedTestServer) async throws -> R
    ) async throws -> R {
        try await FeedTestServer.withServer { server in
            try await body(FDSNTestService(on: server, searchLimit: searchLimit), server)
        }
    }

    // MARK: Configuration

    /// Without `limit`, a query matching more events than this gets 400 (default 20000, the real
    /// service's); also the largest `limit` allowed and `count`'s `maxAllowed`.
    public var searchLimit: Int {
        get { state.withLockedValue { $0.searchLimit } }
        set { state.withLockedValue { $0.searchLimit = newValue } }
    }

    /// Whether `count` answers (default `true`); `false` makes it 404, as a service without it would.
    public var countAvailable: Bool {
        get { state.withLockedValue { $0.countAvailable } }
        set { state.withLockedValue { $0.countAvailable = newValue } }
    }

    // MARK: Request log

    /// Every request to `query` and `count`, in the order they were answered (each is logged once its
    /// answer is decided, before it is sent).
    public var log: [LoggedRequest] { state.withLockedValue { $0.log } }

    /// The requests to `query`, in the order of ``log``.
    public var queryRequests: [RecordedRequest] {
        state.withLockedValue { $0.log.filter { $0.endpoint == .query }.map(\.request) }
    }

    /// The requests to `count`, in the order of ``log``.
    public var countRequests: [RecordedRequest] {
        state.withLockedValue { $0.log.filter { $0.endpoint == .count }.map(\.request) }
    }

    /// Forgets the request log.
    public func clearLog() {
        state.withLockedValue { $0.log = [] }
    }
}
