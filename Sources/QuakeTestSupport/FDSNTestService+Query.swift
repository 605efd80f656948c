extension FDSNTestService {
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
        /// `nodata`, 204 or 404, as given (an answer without events is 204 unless it is 404).
        public var noData: Int?

        /// A query; every parameter has the real service's default (except that there is no default
        /// start time), so `Query()` matches every event that is not deleted, newest first.
        public init(
            startTime: Int64? = nil, endTime: Int64? = nil, updatedAfter: Int64? = nil,
            minMagnitude: Double? = nil, maxMagnitude: Double? = nil, circle: Circle? = nil, box: Box? = nil,
            orderBy: Order = .time, limit: Int? = nil, offset: Int = 1, includeDeleted: Deleted = .exclude,
            format: String? = "geojson", noData: Int? = nil
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
            self.noData = noData
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
            if let (name, value) = given["nodata"] {
                guard value == "204" || value == "404" else {
                    throw QueryError(parameter: name, message: "Bad \(name) value \"\(value)\". Must be 204 or 404.")
                }
                noData = Int(value)
            }
        }

        /// Parameter name (with the FDSN short names) → its canonical name.
        static let canonicalNames: [String: String] = {
            var names: [String: String] = [:]
            for name in [
                "starttime", "endtime", "updatedafter", "minmagnitude", "maxmagnitude", "latitude", "longitude",
                "maxradiuskm", "minlatitude", "maxlatitude", "minlongitude", "maxlongitude", "orderby", "limit",
                "offset", "includedeleted", "format", "nodata",
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
}
