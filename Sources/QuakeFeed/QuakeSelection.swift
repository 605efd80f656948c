/// Which stored quakes an HTTP answer holds (QuakeHTTP's summary feeds and FDSN event service),
/// in which order, and which slice of them.
///
/// Every condition that is set must hold: the ``filter`` (judged by ``QuakeFilter/matches(_:)``,
/// the one rule every reader of the store follows), then the conditions the filter has no word
/// for. ``offset`` matches are skipped, then at most ``limit`` are returned. Here, beside
/// QuakeFilter, so that the HTTP parameter parsers (QuakeHTTPQuery) need no store; its SQL is
/// QuakeStore's, as the filter's is.
public struct QuakeSelection: Sendable, Hashable {
    public enum Order: String, Sendable, Hashable, CaseIterable {
        /// Newest first (then by id).
        case timeDescending
        /// Oldest first (then by id).
        case timeAscending
        /// Largest first, then newest; quakes without a magnitude last.
        case magnitudeDescending
        /// Smallest first, then newest; quakes without a magnitude last.
        case magnitudeAscending
    }

    public var filter: QuakeFilter
    /// Event time at or before, in milliseconds since the Unix epoch.
    public var until: Int64?
    /// `updated` after (strictly), in milliseconds since the Unix epoch; a quake without `updated`
    /// does not match.
    public var updatedAfter: Int64?
    /// The quake with this id, or whose `ids` list names it.
    public var eventID: String?
    /// Only quakes with a latitude and a longitude (an FDSN answer's events all have an origin).
    public var requirePosition: Bool
    /// At least this far (km, great circle) from the centre of the filter's circle: the FDSN
    /// `minradius` (ignored without a circle).
    public var minDistanceKm: Double?
    public var order: Order
    /// Matches skipped before the first one returned.
    public var offset: Int
    /// At most this many are returned (nil: all).
    public var limit: Int?

    public init(
        filter: QuakeFilter = QuakeFilter(), until: Int64? = nil, updatedAfter: Int64? = nil, eventID: String? = nil,
        requirePosition: Bool = false, minDistanceKm: Double? = nil, order: Order = .timeDescending, offset: Int = 0,
        limit: Int? = nil
    ) {
        self.filter = filter
        self.until = until
        self.updatedAfter = updatedAfter
        self.eventID = eventID
        self.requirePosition = requirePosition
        self.minDistanceKm = minDistanceKm
        self.order = order
        self.offset = offset
        self.limit = limit
    }

    /// Whether a quake with these values is one of the matches (the SQL conditions aside).
    public func matches(_ image: QuakeImage) -> Bool {
        guard filter.matches(image) else { return false }
        if let minDistanceKm, case .circle(let lat, let lon, _) = filter.region {
            guard let qLat = image.lat, let qLon = image.lon, Geodesy.distanceKm(qLat, qLon, lat, lon) >= minDistanceKm
            else { return false }
        }
        return true
    }
}
