import Foundation
import NIOConcurrencyHelpers
import QuakeFeed
import QuakeModel

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

/// The USGS FDSN event web service (`/fdsnws/event/1/query` and `/count`, GeoJSON), over an in-memory
/// set of events, served by a ``FeedTestServer``; with faults injected on demand, for pointing a client
/// of the real service at in tests and benchmarks.
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
/// - Parameters: `starttime`/`endtime` (inclusive; `2024-01-02`, `2024-01-02T03:04:05`, a space instead
///   of `T`, an optional fraction and `Z`; always UTC; no default, unlike the real service's "30 days
///   ago"), `updatedafter` (inclusive), `minmagnitude`/`maxmagnitude` (inclusive; events without a
///   magnitude never match them), the circle `latitude`/`longitude`/`maxradiuskm` (great-circle distance
///   on a sphere of radius ``earthRadiusKm``, inclusive; the radius defaults to 20001.6 km),
///   the box `minlatitude`/`maxlatitude`/`minlongitude`/`maxlongitude` (longitudes -360…360, so
///   `170…190` crosses the antimeridian), `orderby` (`time`, `time-asc`, `magnitude`,
///   `magnitude-asc`), `limit` (1…``searchLimit``), `offset` (1-based), `includedeleted`
///   (`false`, `true`, `only`) and `format` (`geojson` only for `query`; `geojson` or `text` for
///   `count`). The FDSN short names `start`, `end`, `minmag`, `maxmag`, `lat`, `lon`, `minlat`,
///   `maxlat`, `minlon`, `maxlon` are accepted too. Any other parameter (including those of the real
///   service this one does not implement, such as `eventid` or `mindepth`), a malformed value, or a
///   value out of range gets 400 with a plain-text body naming the parameter.
/// - Events without coordinates never match a circle or a box. An event is deleted when its
///   `properties.status` is `deleted` (any case). Events of the same time come by id (descending for
///   `time`, ascending for `time-asc`); events of the same magnitude by time and id (newest first for
///   `magnitude`, oldest first for `magnitude-asc`); events without a magnitude come last in both
///   magnitude orders. Query values are percent-decoded with `+` as a space (``RecordedRequest/query``).
/// - The search limit: without `limit`, more than ``searchLimit`` matching events get 400
///   (``searchLimitMessage(matching:limit:)``); `count` answers `{"count":N,"maxAllowed":L}` or `N`.
/// - Faults apply to `query` requests, to whatever the answer would have been (a 400 too): a queue of
///   one-shot ``Fault``s (``enqueueFaults(_:)``), else ``failAlways``; then ``slowMode``. `count` can
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

    /// A parsed `query` or `count` request: the filters, the order and the page.
    public struct Query: Sendable, Hashable {
        /// `orderby`.
        public enum Order: String, Sendable, Hashable, CaseIterable {
            /// Newest first (the default).
            case time
            /// Oldest first.
            case timeAscending = "time-asc"
            /// Largest magnitude first.
            case magnitude
            /// Smallest magnitude first.
            case magnitudeAscending = "magnitude-asc"
        }

        /// `includedeleted`.
        public enum Deleted: String, Sendable, Hashable, CaseIterable {
            /// Deleted events are left out (the default).
            case exclude = "false"
            /// Deleted events are included.
            case include = "true"
            /// Only deleted events.
            case only
        }

        /// A circle search: events within `maxRadiusKm` of a point (inclusive).
        public struct Circle: Sendable, Hashable {
            /// The centre's latitude, -90…90.
            public var latitude: Double
            /// The centre's longitude, -180…180.
            public var longitude: Double
            /// The radius in km, 0…20001.6.
            public var maxRadiusKm: Double

            /// A circle of `maxRadiusKm` around (`latitude`, `longitude`).
            public init(latitude: Double, longitude: Double, maxRadiusKm: Double = 20001.6) {
                self.latitude = latitude
                self.longitude = longitude
                self.maxRadiusKm = maxRadiusKm
            }
        }

        /// A latitude/longitude box (inclusive). Longitudes may run from -360 to 360, so a box across the
        /// antimeridian is, for example, `minLongitude: 170, maxLongitude: 190`.
        public struct Box: Sendable, Hashable {
            /// The southern edge, -90…90.
            public var minLatitude: Double
            /// The northern edge, -90…90.
            public var maxLatitude: Double
            /// The western edge, -360…360.
            public var minLongitude: Double
            /// The eastern edge, -360…360.
            public var maxLongitude: Double

            /// A box; each edge defaults to the whole world's.
            public init(
                minLatitude: Double = -90, maxLatitude: Double = 90, minLongitude: Double = -180,
                maxLongitude: Double = 180
            ) {
                self.minLatitude = minLatitude
                self.maxLatitude = maxLatitude
                self.minLongitude = minLongitude
                self.maxLongitude = maxLongitude
            }
        }

        /// `starttime` in milliseconds (inclusive).
        public var startTime: Int64?
        /// `endtime` in milliseconds (inclusive).
        public var endTime: Int64?
        /// `updatedafter` in milliseconds (inclusive, on ``Event/updated``).
        public var updatedAfter: Int64?
        /// `minmagnitude` (inclusive).
        public var minMagnitude: Double?
        /// `maxmagnitude` (inclusive).
        public var maxMagnitude: Double?
        /// `latitude`, `longitude`, `maxradiuskm`.
        public var circle: Circle?
        /// `minlatitude`, `maxlatitude`, `minlongitude`, `maxlongitude`.
        public var box: Box?
        /// `orderby`.
        public var orderBy: Order
        /// `limit`: at most this many events (and no search limit).
        public var limit: Int?
        /// `offset`: the 1-based position of the first event returned.
        public var offset: Int
        /// `includedeleted`.
        public var includeDeleted: Deleted
        /// `format`, as given.
        public var format: String?

        /// A query; every parameter has the real service's default (except that there is no default
        /// start time), so `Query()` matches every event that is not deleted, newest first.
        public init(
            startTime: Int64? = nil, endTime: Int64? = nil, updatedAfter: Int64? = nil,
            minMagnitude: Double? = nil, maxMagnitude: Double? = nil, circle: Circle? = nil, box: Box? = nil,
            orderBy: Order = .time, limit: Int? = nil, offset: Int = 1, includeDeleted: Deleted = .exclude,
            format: String? = "geojson"
        ) {
            self.startTime = startTime
            self.endTime = endTime
            self.updatedAfter = updatedAfter
            self.minMagnitude = minMagnitude
            self.maxMagnitude = maxMagnitude
            self.circle = circle
            self.box = box
            self.orderBy = orderBy
            self.limit = limit
            self.offset = offset
            self.includeDeleted = includeDeleted
            self.format = format
        }

        /// Parses request parameters (names and values already percent-decoded) as the service does;
        /// throws a ``QueryError`` naming the first bad parameter. `maximumLimit` is the largest
        /// `limit` allowed (the service passes its ``FDSNTestService/searchLimit``).
        public init(parameters: [String: String], maximumLimit: Int = 20000) throws(QueryError) {
            self.init(format: nil)
            var given: [String: (name: String, value: String)] = [:]
            for name in parameters.keys.sorted() {
                guard let canonical = Self.canonicalNames[name] else {
                    throw QueryError(parameter: name, message: "Unknown parameter \"\(name)\".")
                }
                if let earlier = given[canonical] {
                    throw QueryError(
                        parameter: name, message: "Parameter \"\(name)\" repeats \"\(earlier.name)\".")
                }
                given[canonical] = (name, parameters[name]!)
            }

            func time(_ key: String) throws(QueryError) -> Int64? {
                guard let (name, value) = given[key] else { return nil }
                guard let ms = FDSNTestService.parseTime(value) else {
                    throw QueryError(
                        parameter: name,
                        message: "Bad \(name) value \"\(value)\". Use ISO8601 UTC, e.g. 2024-01-02 or "
                            + "2024-01-02T03:04:05.678Z."
                    )
                }
                return ms
            }
            func number(_ key: String, _ range: ClosedRange<Double>? = nil) throws(QueryError) -> Double? {
                guard let (name, value) = given[key] else { return nil }
                guard let number = Double(value), number.isFinite else {
                    throw QueryError(parameter: name, message: "Bad \(name) value \"\(value)\". Expected a number.")
                }
                if let range, !range.contains(number) {
                    throw QueryError(
                        parameter: name,
                        message: "Bad \(name) value \"\(value)\". Must be between \(range.lowerBound) and "
                            + "\(range.upperBound)."
                    )
                }
                return number
            }
            func integer(_ key: String, _ range: ClosedRange<Int>) throws(QueryError) -> Int? {
                guard let (name, value) = given[key] else { return nil }
                guard let number = Int(value) else {
                    throw QueryError(parameter: name, message: "Bad \(name) value \"\(value)\". Expected an integer.")
                }
                guard range.contains(number) else {
                    throw QueryError(
                        parameter: name,
                        message: "Bad \(name) value \"\(value)\". Must be between \(range.lowerBound) and "
                            + "\(range.upperBound)."
                    )
                }
                return number
            }
            func choice<T: RawRepresentable<String> & CaseIterable>(_ key: String, _: T.Type) throws(QueryError) -> T? {
                guard let (name, value) = given[key] else { return nil }
                guard let choice = T(rawValue: value) else {
                    let allowed = T.allCases.map(\.rawValue).joined(separator: ", ")
                    throw QueryError(
                        parameter: name, message: "Bad \(name) value \"\(value)\". Must be one of \(allowed).")
                }
                return choice
            }
            func ordered(_ low: String, _ lowValue: Double?, _ high: String, _ highValue: Double?) throws(QueryError) {
                if let lowValue, let highValue, lowValue > highValue {
                    let lowName = given[low]!.name
                    let highName = given[high]!.name
                    throw QueryError(
                        parameter: lowName, message: "\(lowName) must be less than or equal to \(highName).")
                }
            }

            startTime = try time("starttime")
            endTime = try time("endtime")
            if let startTime, let endTime, startTime > endTime {
                let name = given["starttime"]!.name
                throw QueryError(
                    parameter: name, message: "\(name) must be before or equal to \(given["endtime"]!.name).")
            }
            updatedAfter = try time("updatedafter")
            minMagnitude = try number("minmagnitude")
            maxMagnitude = try number("maxmagnitude")
            try ordered("minmagnitude", minMagnitude, "maxmagnitude", maxMagnitude)

            let latitude = try number("latitude", -90...90)
            let longitude = try number("longitude", -180...180)
            let radius = try number("maxradiuskm", 0...20001.6)
            if latitude != nil || longitude != nil || radius != nil {
                guard let latitude, let longitude else {
                    let name = (given["latitude"] ?? given["longitude"] ?? given["maxradiuskm"])!.name
                    throw QueryError(
                        parameter: name, message: "\(name) needs both latitude and longitude for a circle search.")
                }
                circle = Circle(latitude: latitude, longitude: longitude, maxRadiusKm: radius ?? 20001.6)
            }

            let minLatitude = try number("minlatitude", -90...90)
            let maxLatitude = try number("maxlatitude", -90...90)
            let minLongitude = try number("minlongitude", -360...360)
            let maxLongitude = try number("maxlongitude", -360...360)
            try ordered("minlatitude", minLatitude, "maxlatitude", maxLatitude)
            try ordered("minlongitude", minLongitude, "maxlongitude", maxLongitude)
            if minLatitude != nil || maxLatitude != nil || minLongitude != nil || maxLongitude != nil {
                box = Box(
                    minLatitude: minLatitude ?? -90, maxLatitude: maxLatitude ?? 90,
                    minLongitude: minLongitude ?? -180, maxLongitude: maxLongitude ?? 180)
                if let box, box.minLongitude > box.maxLongitude || box.minLatitude > box.maxLatitude {
                    // Only one edge given, beyond the other's default (e.g. minlongitude=190).
                    let name =
                        (given["minlongitude"] ?? given["maxlongitude"] ?? given["minlatitude"]
                        ?? given["maxlatitude"])!.name
                    throw QueryError(parameter: name, message: "\(name) makes an empty box.")
                }
            }

            orderBy = try choice("orderby", Order.self) ?? .time
            limit = try integer("limit", 1...max(maximumLimit, 1))
            offset = try integer("offset", 1...Int(Int32.max)) ?? 1
            includeDeleted = try choice("includedeleted", Deleted.self) ?? .exclude
            format = given["format"]?.value
        }

        /// Parameter name (with the FDSN short names) → its canonical name.
        static let canonicalNames: [String: String] = {
            var names: [String: String] = [:]
            for name in [
                "starttime", "endtime", "updatedafter", "minmagnitude", "maxmagnitude", "latitude", "longitude",
                "maxradiuskm", "minlatitude", "maxlatitude", "minlongitude", "maxlongitude", "orderby", "limit",
                "offset", "includedeleted", "format",
            ] {
                names[name] = name
            }
            let aliases = [
                "start": "starttime", "end": "endtime", "minmag": "minmagnitude", "maxmag": "maxmagnitude",
                "lat": "latitude", "lon": "longitude", "minlat": "minlatitude", "maxlat": "maxlatitude",
                "minlon": "minlongitude", "maxlon": "maxlongitude",
            ]
            names.merge(aliases) { $1 }
            return names
        }()

        /// Whether `event` passes the filters (not the page).
        public func matches(_ event: Event) -> Bool {
            if let startTime, event.time < startTime { return false }
            if let endTime, event.time > endTime { return false }
            if let updatedAfter, event.updated < updatedAfter { return false }
            switch includeDeleted {
            case .exclude: if event.isDeleted { return false }
            case .only: if !event.isDeleted { return false }
            case .include: break
            }
            if minMagnitude != nil || maxMagnitude != nil {
                guard let magnitude = event.magnitude else { return false }
                if let minMagnitude, magnitude < minMagnitude { return false }
                if let maxMagnitude, magnitude > maxMagnitude { return false }
            }
            if circle != nil || box != nil {
                guard let latitude = event.latitude, let longitude = event.longitude else { return false }
                if let box {
                    guard latitude >= box.minLatitude, latitude <= box.maxLatitude else { return false }
                    let inside = [longitude - 360, longitude, longitude + 360].contains {
                        $0 >= box.minLongitude && $0 <= box.maxLongitude
                    }
                    if !inside { return false }
                }
                if let circle {
                    let distance = FDSNTestService.distanceKm(
                        latitude: circle.latitude, longitude: circle.longitude, latitude, longitude)
                    if distance > circle.maxRadiusKm { return false }
                }
            }
            return true
        }
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

    /// A misbehaviour of the service for one request (queued with ``enqueueFaults(_:)``) or for every
    /// request (``failAlways``, ``countFault``).
    public enum Fault: Sendable {
        /// 429 Too Many Requests with `Retry-After: seconds`, instead of the answer.
        case tooManyRequests(retryAfter: Int)
        /// 503 Service Unavailable, with `Retry-After: seconds` or without one, instead of the answer.
        case serviceUnavailable(retryAfter: Int?)
        /// The real answer, with its full `Content-Length` announced, cut after `afterBytes` body bytes
        /// (then the connection closes; see ``TestResponse/Behavior/truncate(afterBytes:)``).
        case truncated(afterBytes: Int)
        /// The real answer, its body drip-fed in `chunkSize`-byte pieces with `delay` before each.
        case slow(chunkSize: Int, delay: Duration)
        /// The real answer's head and first `afterBytes` body bytes, then nothing until the client gives up.
        case stalled(afterBytes: Int)
        /// Nothing at all, not even the head, until the client gives up.
        case stalledBeforeHead
        /// This response instead of the answer (e.g. `.status(500)`, or an HTML page with 200).
        case response(TestResponse)
        /// The real answer, changed by `transform` (any status, headers, body or behaviour).
        case transform(@Sendable (TestResponse) -> TestResponse)

        /// 200 with an HTML page instead of JSON, as a proxy or a maintenance page would answer.
        public static func html(
            status: Int = 200, _ page: String = "<html><body><h1>Service temporarily unavailable</h1></body></html>\n"
        ) -> Fault {
            .response(TestResponse(status: status, body: .bytes(Array(page.utf8)), contentType: "text/html"))
        }

        /// The response this fault gives in place of `answer`.
        func apply(to answer: () -> TestResponse) -> TestResponse {
            switch self {
            case .tooManyRequests(let seconds):
                var response = TestResponse.status(429, body: "Error 429: Too Many Requests\n")
                response.retryAfter = "\(seconds)"
                return response
            case .serviceUnavailable(let seconds):
                var response = TestResponse.status(503, body: "Error 503: Service Unavailable\n")
                response.retryAfter = seconds.map { "\($0)" }
                return response
            case .truncated(let afterBytes): return answer().truncated(afterBytes: afterBytes)
            case .slow(let chunkSize, let delay): return answer().slow(chunkSize: chunkSize, delay: delay)
            case .stalled(let afterBytes): return answer().stalled(afterBytes: afterBytes)
            case .stalledBeforeHead: return answer().with(.stallBeforeHead)
            case .response(let response): return response
            case .transform(let transform): return transform(answer())
            }
        }
    }

    /// The two methods the service answers.
    public enum Endpoint: String, Sendable, Hashable {
        /// `query`: the events.
        case query
        /// `count`: how many events match.
        case count
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

    private struct Stored {
        var event: Event
        var bytes: [UInt8]
    }

    private struct State {
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
        var log: [LoggedRequest] = []
    }

    private let state: NIOLockedValueBox<State>
    /// `http://127.0.0.1:PORT`, for `metadata.url`.
    private let origin: String

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

    /// When set, `count` answers this function of the true count instead (e.g. `{ $0 / 2 }`).
    public var countLies: (@Sendable (Int) -> Int)? {
        get { state.withLockedValue { $0.countLies } }
        set { state.withLockedValue { $0.countLies = newValue } }
    }

    /// When set, every `count` request gets this fault (until cleared).
    public var countFault: Fault? {
        get { state.withLockedValue { $0.countFault } }
        set { state.withLockedValue { $0.countFault = newValue } }
    }

    /// When set, every `query` request that finds no one-shot fault queued gets this fault (until cleared).
    public var failAlways: Fault? {
        get { state.withLockedValue { $0.failAlways } }
        set { state.withLockedValue { $0.failAlways = newValue } }
    }

    /// When set, every `query` answer that is otherwise delivered normally is drip-fed: `chunkSize`
    /// bytes at a time, `delay` before each (until cleared).
    public var slowMode: (chunkSize: Int, delay: Duration)? {
        get { state.withLockedValue { $0.slowMode } }
        set { state.withLockedValue { $0.slowMode = newValue } }
    }

    /// Queues one-shot faults: the next `query` requests get them in order, one each, whatever their
    /// parameters; after them, requests are answered normally again (or get ``failAlways``).
    public func enqueueFaults(_ faults: [Fault]) {
        state.withLockedValue { $0.faults.append(contentsOf: faults) }
    }

    /// How many one-shot faults are still queued.
    public var pendingFaults: Int { state.withLockedValue { $0.faults.count } }

    /// Drops the queued one-shot faults, ``failAlways``, ``slowMode`` and ``countFault``.
    public func clearFaults() {
        state.withLockedValue {
            $0.faults = []
            $0.failAlways = nil
            $0.slowMode = nil
            $0.countFault = nil
        }
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

    // MARK: Events

    /// How many events the service holds (deleted ones included).
    public var eventCount: Int { state.withLockedValue { $0.ordered.count } }

    /// The earliest and latest event time, or `nil` without events.
    public var timeRange: ClosedRange<Int64>? {
        state.withLockedValue { state in
            guard let first = state.ordered.first, let last = state.ordered.last else { return nil }
            return first.event.time...last.event.time
        }
    }

    /// The event with this id, if any.
    public func event(id: String) -> Event? {
        state.withLockedValue { state in Self.index(of: id, in: state).map { state.ordered[$0].event } }
    }

    /// The feature bytes the service answers for this event, if any.
    public func feature(id: String) -> [UInt8]? {
        state.withLockedValue { state in Self.index(of: id, in: state).map { state.ordered[$0].bytes } }
    }

    /// The events `query` would answer for `query`, in order, `offset` and `limit` applied; the
    /// search limit is not.
    public func events(matching query: Query) -> [Event] {
        state.withLockedValue { state in Self.select(query, in: state).page.map { state.ordered[$0].event } }
    }

    /// How many events pass `query`'s filters (what `count` answers, before ``countLies``).
    public func count(matching query: Query) -> Int {
        state.withLockedValue { state in Self.matching(query, in: state).count }
    }

    /// Adds every feature of a USGS GeoJSON feed file (streamed, so files of hundreds of MB are fine),
    /// replacing events with the same id (a later feature wins over an earlier one). Elements of
    /// `features` that are not USGS features (no `id` or `time`, wrongly typed fields) are skipped.
    /// Returns how many features were taken.
    @discardableResult
    public func add(featuresOf file: URL) throws -> Int {
        let handle: FileHandle
        do { handle = try FileHandle(forReadingFrom: file) } catch {
            throw FDSNTestServiceError.unreadableFeed(path: file.path, detail: "\(error)")
        }
        defer { try? handle.close() }
        var parser = FeedParser()
        var incoming: [Stored] = []
        var positionByID: [String: Int] = [:]
        do {
            while true {
                guard let data = try handle.read(upToCount: 4 << 20), !data.isEmpty else { break }
                try data.withUnsafeBytes { chunk in
                    try parser.consume(chunk, decode: true) { element in
                        guard case .record(let record)? = element.decoded else { return }
                        let stored = Stored(
                            event: Self.event(record, arena: element.arena), bytes: Array(element.bytes))
                        if let position = positionByID[stored.event.id] {
                            incoming[position] = stored
                        } else {
                            positionByID[stored.event.id] = incoming.count
                            incoming.append(stored)
                        }
                    }
                }
            }
            try parser.finish()
        } catch {
            throw FDSNTestServiceError.unreadableFeed(path: file.path, detail: "\(error)")
        }
        state.withLockedValue { state in
            let replaced = incoming.contains { state.timeByID[$0.event.id] != nil }
            if replaced {
                state.ordered.removeAll { positionByID[$0.event.id] != nil }
            }
            for stored in incoming { state.timeByID[stored.event.id] = stored.event.time }
            state.ordered.append(contentsOf: incoming)
            state.ordered.sort { Self.precedes($0.event, $1.event) }
        }
        return incoming.count
    }

    /// Adds one feature (the JSON of a USGS feature object); throws
    /// ``FDSNTestServiceError/duplicateID(_:)`` if its id is already there.
    public func add(feature: [UInt8]) throws {
        let stored = try Self.stored(feature)
        try state.withLockedValue { state in
            guard state.timeByID[stored.event.id] == nil else {
                throw FDSNTestServiceError.duplicateID(stored.event.id)
            }
            Self.insert(stored, into: &state)
        }
    }

    /// Adds one feature given as a JSON string (see ``add(feature:)``).
    public func add(feature: String) throws {
        try add(feature: Array(feature.utf8))
    }

    /// Adds one feature, or replaces the event with its id; returns whether it replaced one.
    @discardableResult
    public func upsert(feature: [UInt8]) throws -> Bool {
        let stored = try Self.stored(feature)
        return state.withLockedValue { state in
            let existed = Self.remove(stored.event.id, from: &state)
            Self.insert(stored, into: &state)
            return existed
        }
    }

    /// Removes an event altogether (as if it had never been there, unlike ``markDeleted(id:updated:)``);
    /// returns whether it was there.
    @discardableResult
    public func remove(id: String) -> Bool {
        state.withLockedValue { Self.remove(id, from: &$0) }
    }

    /// Removes every event.
    public func removeAll() {
        state.withLockedValue {
            $0.ordered = []
            $0.timeByID = [:]
        }
    }

    /// Deletes an event the USGS way: sets `properties.status` to `"deleted"` and `properties.updated`
    /// to `updated` (default: the old value + 1 ms). The event stays, for `includedeleted`.
    public func markDeleted(id: String, updated: Int64? = nil) throws {
        try update(id: id, properties: ["status": "deleted"], updated: updated)
    }

    /// Sets `properties.mag` (`nil` writes `null`) and `properties.updated` (default: the old value + 1 ms).
    public func setMagnitude(id: String, mag: Double?, updated: Int64? = nil) throws {
        try update(id: id, properties: ["mag": mag.map(PropertyValue.double) ?? .null], updated: updated)
    }

    /// Moves an event: sets its geometry to a point and `properties.updated` (default: the old value + 1 ms).
    public func setLocation(
        id: String, longitude: Double, latitude: Double, depth: Double, updated: Int64? = nil
    ) throws {
        let point =
            "{\"type\":\"Point\",\"coordinates\":[\(PropertyValue.double(longitude).json),"
            + "\(PropertyValue.double(latitude).json),\(PropertyValue.double(depth).json)]}"
        try edit(id: id, properties: [:], updated: updated, geometry: Array(point.utf8))
    }

    /// Sets properties of an event (adding those it lacks), and `properties.updated` to `updated`
    /// (default: the old value + 1 ms; an `"updated"` entry in `properties` wins over both). The
    /// numbers the filters read (`time`, `mag`, `status`…) follow the new values.
    public func update(id: String, properties: [String: PropertyValue], updated: Int64? = nil) throws {
        try edit(id: id, properties: properties, updated: updated, geometry: nil)
    }

    /// A JSON value for ``update(id:properties:updated:)``; literals work (`"deleted"`, `4.5`, `3`, `nil`).
    public enum PropertyValue: Sendable, Hashable, ExpressibleByStringLiteral, ExpressibleByIntegerLiteral,
        ExpressibleByFloatLiteral, ExpressibleByBooleanLiteral, ExpressibleByNilLiteral
    {
        /// A JSON string.
        case string(String)
        /// A JSON integer.
        case int(Int64)
        /// A JSON number (non-finite values are written as `null`).
        case double(Double)
        /// `true` or `false`.
        case bool(Bool)
        /// `null`.
        case null
        /// Any JSON text, written as given (it must be valid JSON).
        case raw(String)

        /// A string literal is a ``string(_:)``.
        public init(stringLiteral value: String) { self = .string(value) }
        /// An integer literal is an ``int(_:)``.
        public init(integerLiteral value: Int64) { self = .int(value) }
        /// A floating-point literal is a ``double(_:)``.
        public init(floatLiteral value: Double) { self = .double(value) }
        /// `true` and `false` are a ``bool(_:)``.
        public init(booleanLiteral value: Bool) { self = .bool(value) }
        /// `nil` is ``null``.
        public init(nilLiteral: ()) { self = .null }

        /// The value as JSON text.
        public var json: String {
            switch self {
            case .string(let text): return FDSNTestService.jsonString(text)
            case .int(let number): return "\(number)"
            case .double(let number): return number.isFinite ? "\(number)" : "null"
            case .bool(let flag): return flag ? "true" : "false"
            case .null: return "null"
            case .raw(let text): return text
            }
        }
    }

    // MARK: Answering

    /// What a request gets, decided under the lock; ``make`` builds the body after it.
    private struct Plan {
        var make: () -> TestResponse
        var query: Query?
        var fault: Fault?
        var matched: Int?
        var returned: Int?
    }

    private func answer(_ endpoint: Endpoint, _ request: RecordedRequest) -> TestResponse {
        let parameters = request.query
        let plan = state.withLockedValue { state in
            endpoint == .query ? planQuery(request, parameters, &state) : Self.planCount(parameters, &state)
        }
        let response = plan.make()
        state.withLockedValue {
            $0.log.append(
                LoggedRequest(
                    endpoint: endpoint, request: request, query: plan.query, status: response.status,
                    fault: plan.fault, matched: plan.matched, returned: plan.returned))
        }
        return response
    }

    private func planQuery(_ request: RecordedRequest, _ parameters: [String: String], _ state: inout State) -> Plan {
        let fault: Fault? = state.faults.isEmpty ? state.failAlways : state.faults.removeFirst()
        var plan = Plan(make: { TestResponse.status(500) }, fault: fault)
        do throws(QueryError) {
            let query = try Query(parameters: parameters, maximumLimit: state.searchLimit)
            guard query.format == "geojson" else {
                let given = query.format.map { "\"\($0)\"" } ?? "none (the real service's default is quakeml)"
                throw QueryError(
                    parameter: "format", message: "Bad format value \(given). This test service only answers geojson.")
            }
            let (matched, page) = Self.select(query, in: state)
            plan.matched = matched
            if query.limit == nil && matched > state.searchLimit {
                let body = Self.searchLimitMessage(matching: matched, limit: state.searchLimit)
                plan.make = { TestResponse.status(400, body: body) }
            } else {
                plan.query = query
                plan.returned = page.count
                let features = page.map { state.ordered[$0] }
                let url = origin + request.uri
                plan.make = { Self.featureCollection(features, url: url) }
            }
        } catch {
            let response = Self.badRequest(error.message)
            plan.make = { response }
        }
        if let fault {
            let make = plan.make
            plan.make = { fault.apply(to: make) }
        }
        if let slow = state.slowMode {
            let make = plan.make
            plan.make = {
                let response = make()
                guard case .normal = response.behavior else { return response }
                return response.slow(chunkSize: slow.chunkSize, delay: slow.delay)
            }
        }
        return plan
    }

    private static func planCount(_ parameters: [String: String], _ state: inout State) -> Plan {
        guard state.countAvailable else {
            return Plan(make: { TestResponse.status(404, body: "Error 404: Not Found\n\nNo count method here.\n") })
        }
        var plan = Plan(make: { TestResponse.status(500) }, fault: state.countFault)
        do throws(QueryError) {
            let query = try Query(parameters: parameters, maximumLimit: state.searchLimit)
            if let format = query.format, format != "geojson", format != "text" {
                throw QueryError(
                    parameter: "format",
                    message: "Bad format value \"\(format)\". This test service counts in geojson or text only.")
            }
            let matched = matching(query, in: state).count
            let told = state.countLies?(matched) ?? matched
            let response =
                query.format == "geojson"
                ? TestResponse.text("{\"count\":\(told),\"maxAllowed\":\(state.searchLimit)}")
                : TestResponse.text("\(told)", contentType: "text/plain")
            plan.query = query
            plan.matched = matched
            plan.make = { response }
        } catch {
            let response = badRequest(error.message)
            plan.make = { response }
        }
        if let fault = plan.fault {
            let make = plan.make
            plan.make = { fault.apply(to: make) }
        }
        return plan
    }

    /// The body of the 400 answered when a query without `limit` matches more than the search limit.
    public static func searchLimitMessage(matching: Int, limit: Int) -> String {
        "Error 400: Bad Request\n\n\(matching) matching events exceeds search limit of \(limit). "
            + "Modify the search to match fewer events.\n"
    }

    private static func badRequest(_ message: String) -> TestResponse {
        TestResponse.status(400, body: "Error 400: Bad Request\n\n\(message)\n")
    }

    private static func featureCollection(_ features: [Stored], url: String) -> TestResponse {
        let generated = QuakeTime.milliseconds(Date(), rounding: .down)
        let head =
            "{\"type\":\"FeatureCollection\",\"metadata\":{\"generated\":\(generated),\"url\":\(jsonString(url)),"
            + "\"title\":\"USGS Earthquakes\",\"status\":200,\"api\":\"\(apiVersion)\",\"count\":\(features.count)},"
            + "\"features\":["
        var tail = "]"
        var minimum = (lon: Double.infinity, lat: Double.infinity, depth: Double.infinity)
        var maximum = (lon: -Double.infinity, lat: -Double.infinity, depth: -Double.infinity)
        var size = head.utf8.count + 64
        for stored in features {
            size += stored.bytes.count + 1
            guard let lon = stored.event.longitude, let lat = stored.event.latitude else { continue }
            minimum.lon = min(minimum.lon, lon)
            minimum.lat = min(minimum.lat, lat)
            maximum.lon = max(maximum.lon, lon)
            maximum.lat = max(maximum.lat, lat)
            if let depth = stored.event.depth {
                minimum.depth = min(minimum.depth, depth)
                maximum.depth = max(maximum.depth, depth)
            }
        }
        if minimum.lon.isFinite {
            if !minimum.depth.isFinite { (minimum.depth, maximum.depth) = (0, 0) }
            let numbers = [minimum.lon, minimum.lat, minimum.depth, maximum.lon, maximum.lat, maximum.depth]
            tail += ",\"bbox\":[" + numbers.map { PropertyValue.double($0).json }.joined(separator: ",") + "]"
        }
        tail += "}"
        var body: [UInt8] = []
        body.reserveCapacity(size)
        body.append(contentsOf: head.utf8)
        for (position, stored) in features.enumerated() {
            if position > 0 { body.append(UInt8(ascii: ",")) }
            body.append(contentsOf: stored.bytes)
        }
        body.append(contentsOf: tail.utf8)
        return TestResponse(body: .bytes(body), contentType: "application/json")
    }

    // MARK: Selection

    /// Whether `a` sorts before `b`: by time, then id.
    private static func precedes(_ a: Event, _ b: Event) -> Bool {
        a.time != b.time ? a.time < b.time : a.id < b.id
    }

    /// The first position in `ordered` whose time is not below `time` (`after`: above `time`).
    private static func boundary(_ time: Int64, after: Bool, in ordered: [Stored]) -> Int {
        var low = 0
        var high = ordered.count
        while low < high {
            let middle = (low + high) / 2
            let t = ordered[middle].event.time
            if after ? t <= time : t < time { low = middle + 1 } else { high = middle }
        }
        return low
    }

    /// The position of the event with this id.
    private static func index(of id: String, in state: State) -> Int? {
        guard let time = state.timeByID[id] else { return nil }
        var position = boundary(time, after: false, in: state.ordered)
        while position < state.ordered.count, state.ordered[position].event.time == time {
            if state.ordered[position].event.id == id { return position }
            position += 1
        }
        return nil
    }

    /// The positions of the matching events, by time then id.
    private static func matching(_ query: Query, in state: State) -> [Int] {
        let low = query.startTime.map { boundary($0, after: false, in: state.ordered) } ?? 0
        let high = query.endTime.map { boundary($0, after: true, in: state.ordered) } ?? state.ordered.count
        guard low < high else { return [] }
        return (low..<high).filter { query.matches(state.ordered[$0].event) }
    }

    /// How many events match, and the positions of the page answered, in the query's order.
    private static func select(_ query: Query, in state: State) -> (matched: Int, page: [Int]) {
        var positions = matching(query, in: state)
        let events = state.ordered
        switch query.orderBy {
        case .timeAscending: break
        case .time: positions.reverse()
        case .magnitude, .magnitudeAscending:
            let descending = query.orderBy == .magnitude
            positions.sort { a, b in
                let (x, y) = (events[a].event, events[b].event)
                switch (x.magnitude, y.magnitude) {
                case (let m?, let n?) where m != n: return descending ? m > n : m < n
                case (.some, .none): return true
                case (.none, .some): return false
                default: return descending ? precedes(y, x) : precedes(x, y)
                }
            }
        }
        let start = min(max(query.offset - 1, 0), positions.count)
        let end = query.limit.map { min(start + max($0, 0), positions.count) } ?? positions.count
        return (positions.count, Array(positions[start..<end]))
    }

    // MARK: Storage

    private static func insert(_ stored: Stored, into state: inout State) {
        var low = 0
        var high = state.ordered.count
        while low < high {
            let middle = (low + high) / 2
            if precedes(state.ordered[middle].event, stored.event) { low = middle + 1 } else { high = middle }
        }
        state.ordered.insert(stored, at: low)
        state.timeByID[stored.event.id] = stored.event.time
    }

    private static func remove(_ id: String, from state: inout State) -> Bool {
        guard let position = index(of: id, in: state) else { return false }
        state.ordered.remove(at: position)
        state.timeByID[id] = nil
        return true
    }

    /// Rewrites an event's properties (and geometry), sets `properties.updated`, re-reads its numbers.
    private func edit(id: String, properties: [String: PropertyValue], updated: Int64?, geometry: [UInt8]?) throws {
        try state.withLockedValue { state in
            guard let position = Self.index(of: id, in: state) else { throw FDSNTestServiceError.unknownID(id) }
            let old = state.ordered[position]
            var values = properties.mapValues { Array($0.json.utf8) }
            if values["updated"] == nil { values["updated"] = Array("\(updated ?? old.event.updated + 1)".utf8) }
            var bytes: [UInt8]? = old.bytes
            if let geometry {
                bytes = bytes.flatMap { FeatureEditor.replacingMember("geometry", with: geometry, in: $0) }
            }
            guard let edited = bytes.flatMap({ FeatureEditor.settingProperties(values, in: $0) }) else {
                throw FDSNTestServiceError.invalidFeature("cannot edit the feature of \(id)")
            }
            let stored = try Self.stored(edited)
            guard stored.event.id == id else {
                throw FDSNTestServiceError.invalidFeature("an edit cannot change the id of \(id)")
            }
            state.ordered.remove(at: position)
            state.timeByID[id] = nil
            Self.insert(stored, into: &state)
        }
    }

    /// A feature's bytes and numbers, or ``FDSNTestServiceError/invalidFeature(_:)``.
    private static func stored(_ given: [UInt8]) throws -> Stored {
        let bytes = FeatureEditor.trimmed(given)
        let decoded: (DecodedElement, arena: [UInt8])
        do {
            decoded = try bytes.withUnsafeBytes { try FeedParser.decodeElement($0, index: 0, base: 0) }
        } catch {
            throw FDSNTestServiceError.invalidFeature("\(error)")
        }
        switch decoded.0 {
        case .record(let record):
            let event = decoded.arena.withUnsafeBytes { Self.event(record, arena: $0) }
            return Stored(event: event, bytes: bytes)
        case .skipped(let reason, let detail):
            throw FDSNTestServiceError.invalidFeature("\(reason.rawValue): \(detail)")
        }
    }

    private static func event(_ record: FeatureRecord, arena: UnsafeRawBufferPointer) -> Event {
        Event(
            id: FeatureRecord.string(record.id, in: arena) ?? "",
            time: record.time,
            updated: record.updated ?? record.time,
            magnitude: record.mag,
            longitude: record.lon,
            latitude: record.lat,
            depth: record.depth,
            status: FeatureRecord.string(record.status, in: arena))
    }

    // MARK: Helpers

    /// Great-circle distance in km between two points (haversine, sphere of ``earthRadiusKm``).
    public static func distanceKm(
        latitude: Double, longitude: Double, _ otherLatitude: Double, _ otherLongitude: Double
    ) -> Double {
        let radians = Double.pi / 180
        let dLat = (otherLatitude - latitude) * radians
        let dLon = (otherLongitude - longitude) * radians
        let a =
            sin(dLat / 2) * sin(dLat / 2) + cos(latitude * radians) * cos(otherLatitude * radians) * sin(dLon / 2)
            * sin(dLon / 2)
        return 2 * earthRadiusKm * asin(min(1, a.squareRoot()))
    }

    /// Milliseconds since 1970 of an FDSN time (`2024-01-02`, `2024-01-02T03:04:05`, a space for the `T`,
    /// an optional `.SSS…` fraction (digits beyond milliseconds are dropped) and an optional `Z`; UTC),
    /// or `nil` if `text` is not one.
    public static func parseTime(_ text: String) -> Int64? {
        let b = Array(text.utf8)
        var i = 0
        func digits(_ count: Int) -> Int? {
            guard i + count <= b.count else { return nil }
            var value = 0
            for _ in 0..<count {
                let c = b[i]
                guard c >= UInt8(ascii: "0"), c <= UInt8(ascii: "9") else { return nil }
                value = value * 10 + Int(c - UInt8(ascii: "0"))
                i += 1
            }
            return value
        }
        func expect(_ c: Character) -> Bool {
            guard i < b.count, b[i] == c.asciiValue! else { return false }
            i += 1
            return true
        }
        guard let year = digits(4), expect("-"), let month = digits(2), expect("-"), let day = digits(2),
            (1...12).contains(month), day >= 1, day <= daysIn(month: month, year: year)
        else { return nil }
        var seconds = 0
        var milliseconds = 0
        if i < b.count, b[i] == UInt8(ascii: "T") || b[i] == UInt8(ascii: " ") {
            i += 1
            guard let hour = digits(2), expect(":"), let minute = digits(2), expect(":"), let second = digits(2),
                hour < 24, minute < 60, second < 60
            else { return nil }
            seconds = hour * 3600 + minute * 60 + second
            if i < b.count, b[i] == UInt8(ascii: ".") {
                i += 1
                var count = 0
                while i < b.count, b[i] >= UInt8(ascii: "0"), b[i] <= UInt8(ascii: "9") {
                    if count < 3 { milliseconds = milliseconds * 10 + Int(b[i] - UInt8(ascii: "0")) }
                    count += 1
                    i += 1
                }
                guard count > 0 else { return nil }
                if count < 3 { for _ in count..<3 { milliseconds *= 10 } }
            }
            if i < b.count, b[i] == UInt8(ascii: "Z") { i += 1 }
        }
        guard i == b.count else { return nil }
        let days = CivilDate.days(year: year, month: month, day: day)
        return (Int64(days) * 86400 + Int64(seconds)) * 1000 + Int64(milliseconds)
    }

    /// `ms` as an FDSN time, `YYYY-MM-DDTHH:MM:SS.SSS` (UTC), which ``parseTime(_:)`` reads back exactly.
    public static func formatTime(_ ms: Int64) -> String {
        QuakeTime.utcText(ms)
    }

    private static func daysIn(month: Int, year: Int) -> Int {
        switch month {
        case 2: return (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 ? 29 : 28
        case 4, 6, 9, 11: return 30
        default: return 31
        }
    }

    /// `text` as a JSON string literal.
    static func jsonString(_ text: String) -> String {
        var result = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": result += "\\\""
            case "\\": result += "\\\\"
            case "\n": result += "\\n"
            case "\r": result += "\\r"
            case "\t": result += "\\t"
            case _ where scalar.value < 0x20:
                let hex = String(scalar.value, radix: 16)
                result += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: result.unicodeScalars.append(scalar)
            }
        }
        return result + "\""
    }
}

/// Byte-level edits of one feature's JSON that keep every other byte as it was.
///
/// Not a validating parser: it walks JSON the ``FeedParser`` has already accepted. Keys are compared
/// byte for byte as written (USGS keys have no escapes).
enum FeatureEditor {
    /// `bytes` without leading and trailing whitespace.
    static func trimmed(_ bytes: [UInt8]) -> [UInt8] {
        var start = 0
        var end = bytes.count
        while start < end, isSpace(bytes[start]) { start += 1 }
        while end > start, isSpace(bytes[end - 1]) { end -= 1 }
        return start == 0 && end == bytes.count ? bytes : Array(bytes[start..<end])
    }

    /// The feature with `properties[key]` set to each value (raw JSON), missing keys appended.
    static func settingProperties(_ values: [String: [UInt8]], in bytes: [UInt8]) -> [UInt8]? {
        guard let root = members(bytes, objectAt: firstNonSpace(bytes, from: 0)),
            let properties = root.members.first(where: { key(bytes, $0.key) == "properties" }),
            bytes[properties.value.lowerBound] == UInt8(ascii: "{"),
            let inner = members(bytes, objectAt: properties.value.lowerBound)
        else { return nil }
        var edits: [(range: Range<Int>, replacement: [UInt8])] = []
        var missing = values
        for member in inner.members {
            guard let name = key(bytes, member.key), let value = values[name] else { continue }
            missing[name] = nil
            edits.append((member.value, value))
        }
        if !missing.isEmpty {
            var addition: [UInt8] = []
            for (name, value) in missing.sorted(by: { $0.key < $1.key }) {
                if !inner.members.isEmpty || !addition.isEmpty { addition.append(UInt8(ascii: ",")) }
                addition.append(contentsOf: FDSNTestService.jsonString(name).utf8)
                addition.append(UInt8(ascii: ":"))
                addition.append(contentsOf: value)
            }
            edits.append((inner.close..<inner.close, addition))
        }
        return apply(edits, to: bytes)
    }

    /// The feature with its top-level member `name` replaced by `value` (raw JSON), or appended.
    static func replacingMember(_ name: String, with value: [UInt8], in bytes: [UInt8]) -> [UInt8]? {
        guard let root = members(bytes, objectAt: firstNonSpace(bytes, from: 0)) else { return nil }
        if let member = root.members.first(where: { key(bytes, $0.key) == name }) {
            return apply([(member.value, value)], to: bytes)
        }
        var addition: [UInt8] = root.members.isEmpty ? [] : [UInt8(ascii: ",")]
        addition.append(contentsOf: FDSNTestService.jsonString(name).utf8)
        addition.append(UInt8(ascii: ":"))
        addition.append(contentsOf: value)
        return apply([(root.close..<root.close, addition)], to: bytes)
    }

    private static func apply(_ edits: [(range: Range<Int>, replacement: [UInt8])], to bytes: [UInt8]) -> [UInt8] {
        var result = bytes
        for edit in edits.sorted(by: { $0.range.lowerBound > $1.range.lowerBound }) {
            result.replaceSubrange(edit.range, with: edit.replacement)
        }
        return result
    }

    private static func key(_ bytes: [UInt8], _ range: Range<Int>) -> String? {
        String(decoding: bytes[range], as: UTF8.self)
    }

    private static func isSpace(_ c: UInt8) -> Bool {
        c == UInt8(ascii: " ") || c == UInt8(ascii: "\n") || c == UInt8(ascii: "\r") || c == UInt8(ascii: "\t")
    }

    private static func firstNonSpace(_ bytes: [UInt8], from start: Int) -> Int {
        var i = start
        while i < bytes.count, isSpace(bytes[i]) { i += 1 }
        return i
    }

    /// The members of the object whose `{` is at `start`: each key's bytes (inside the quotes) and
    /// value's range, and the position of the closing `}`.
    private static func members(
        _ bytes: [UInt8], objectAt start: Int
    ) -> (members: [(key: Range<Int>, value: Range<Int>)], close: Int)? {
        guard start < bytes.count, bytes[start] == UInt8(ascii: "{") else { return nil }
        var result: [(key: Range<Int>, value: Range<Int>)] = []
        var i = firstNonSpace(bytes, from: start + 1)
        if i < bytes.count, bytes[i] == UInt8(ascii: "}") { return (result, i) }
        while i < bytes.count {
            guard bytes[i] == UInt8(ascii: "\""), let keyEnd = skipValue(bytes, from: i) else { return nil }
            let keyRange = (i + 1)..<(keyEnd - 1)
            i = firstNonSpace(bytes, from: keyEnd)
            guard i < bytes.count, bytes[i] == UInt8(ascii: ":") else { return nil }
            let valueStart = firstNonSpace(bytes, from: i + 1)
            guard let valueEnd = skipValue(bytes, from: valueStart) else { return nil }
            result.append((keyRange, valueStart..<valueEnd))
            i = firstNonSpace(bytes, from: valueEnd)
            guard i < bytes.count else { return nil }
            if bytes[i] == UInt8(ascii: "}") { return (result, i) }
            guard bytes[i] == UInt8(ascii: ",") else { return nil }
            i = firstNonSpace(bytes, from: i + 1)
        }
        return nil
    }

    /// The position just after the value starting at `start`.
    private static func skipValue(_ bytes: [UInt8], from start: Int) -> Int? {
        guard start < bytes.count else { return nil }
        var i = start
        switch bytes[i] {
        case UInt8(ascii: "\""):
            i += 1
            while i < bytes.count {
                switch bytes[i] {
                case UInt8(ascii: "\\"): i += 2
                case UInt8(ascii: "\""): return i + 1
                default: i += 1
                }
            }
            return nil
        case UInt8(ascii: "{"), UInt8(ascii: "["):
            var depth = 0
            while i < bytes.count {
                switch bytes[i] {
                case UInt8(ascii: "\""):
                    guard let end = skipValue(bytes, from: i) else { return nil }
                    i = end
                    continue
                case UInt8(ascii: "{"), UInt8(ascii: "["): depth += 1
                case UInt8(ascii: "}"), UInt8(ascii: "]"):
                    depth -= 1
                    if depth == 0 { return i + 1 }
                default: break
                }
                i += 1
            }
            return nil
        default:
            while i < bytes.count {
                switch bytes[i] {
                case UInt8(ascii: ","), UInt8(ascii: "}"), UInt8(ascii: "]"), UInt8(ascii: " "), UInt8(ascii: "\n"),
                    UInt8(ascii: "\r"), UInt8(ascii: "\t"):
                    return i
                default: i += 1
                }
            }
            return i
        }
    }
}
