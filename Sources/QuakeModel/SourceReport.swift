/// One source's current solution for one of its events: what an agency says about a quake.
///
/// Every source kind (a USGS summary feed, an FDSN event service in QuakeML or text, EMSC's
/// websocket, GeoNet's API) produces reports. A newer report under the same `source` and `id`
/// replaces the older one; reports of one physical quake from different sources are associated
/// into one event.
public struct SourceReport: Sendable, Hashable {
    /// The configured source's name (`source = NAME KIND URL`), not the agency.
    public var source: String
    /// The agency's own id for the event (`20250305_0000090`, `gfz2021inzw`, `us7000abcd`).
    public var id: String
    /// The agency whose solution this is (QuakeML `creationInfo/agencyID`, FDSN text `Author`,
    /// EMSC `auth`), when the source says.
    public var agency: String?
    /// Origin time, in milliseconds since the epoch (UTC).
    public var time: Int64
    /// Degrees north, -90...90.
    public var latitude: Double
    /// Degrees east, -180...180.
    public var longitude: Double
    /// Kilometres below the surface (QuakeML's metres are converted), when known.
    public var depth: Double?
    public var magnitude: Double?
    /// As the agency spells it: `ML`, `mb`, `Mww`.
    public var magnitudeType: String?
    /// The agency's region name or place text (`CENTRAL ITALY`, `15 km N of Town`).
    public var place: String?
    /// QuakeML's event type (`earthquake`, `quarry blast`), when given.
    public var eventType: String?
    public var evaluationMode: EvaluationMode?
    public var evaluationStatus: EvaluationStatus?
    /// When the agency last changed the solution, in milliseconds since the epoch, when known.
    public var updated: Int64?
    /// Other ids the agency says name the same event (the USGS `ids` list), without this one.
    public var links: [String]

    public init(
        source: String, id: String, agency: String? = nil, time: Int64, latitude: Double, longitude: Double,
        depth: Double? = nil, magnitude: Double? = nil, magnitudeType: String? = nil, place: String? = nil,
        eventType: String? = nil, evaluationMode: EvaluationMode? = nil, evaluationStatus: EvaluationStatus? = nil,
        updated: Int64? = nil, links: [String] = []
    ) {
        self.source = source
        self.id = id
        self.agency = agency
        self.time = time
        self.latitude = latitude
        self.longitude = longitude
        self.depth = depth
        self.magnitude = magnitude
        self.magnitudeType = magnitudeType
        self.place = place
        self.eventType = eventType
        self.evaluationMode = evaluationMode
        self.evaluationStatus = evaluationStatus
        self.updated = updated
        self.links = links
    }

    /// Whether a person has looked at it: a manual solution, or one whose status is reviewed,
    /// confirmed or final. Reviewed beats automatic when a preferred report is chosen.
    public var isReviewed: Bool {
        if evaluationMode == .manual { return true }
        switch evaluationStatus {
        case .reviewed?, .confirmed?, .final?: return true
        default: return false
        }
    }

    /// QuakeML 1.2's EvaluationMode.
    public enum EvaluationMode: String, Sendable, Hashable, CaseIterable {
        case automatic
        case manual
    }

    /// QuakeML 1.2's EvaluationStatus.
    public enum EvaluationStatus: String, Sendable, Hashable, CaseIterable {
        case preliminary
        case confirmed
        case reviewed
        case final
        case rejected
    }
}

/// What a source says in one item of its answer: a report, or that an event of its is gone
/// (QuakeML's `not existing`, a USGS deletion, GeoNet's `quality: deleted`).
public enum SourceItem: Sendable, Hashable {
    case report(SourceReport)
    case retraction(source: String, id: String, updated: Int64?)
}
