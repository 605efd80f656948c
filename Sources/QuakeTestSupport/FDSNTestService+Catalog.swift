import Foundation
import QuakeFeed

extension FDSNTestService {
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
    static func matching(_ query: Query, in state: State) -> [Int] {
        let low = query.startTime.map { boundary($0, after: false, in: state.ordered) } ?? 0
        let high = query.endTime.map { boundary($0, after: true, in: state.ordered) } ?? state.ordered.count
        guard low < high else { return [] }
        return (low..<high).filter { query.matches(state.ordered[$0].event) }
    }

    /// How many events match, and the positions of the page answered, in the query's order.
    static func select(_ query: Query, in state: State) -> (matched: Int, page: [Int]) {
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
}
