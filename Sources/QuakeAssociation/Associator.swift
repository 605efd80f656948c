import QuakeModel

/// The current reports and the events they form, kept in step item by item.
///
/// **Grouping.** The events are a pure function of the current set of reports, computed as a
/// constrained agglomerative clustering in Kruskal's order:
///
/// 1. Reports joined by an id link are put together first, transitively: a report whose
///    `links` name another report's id, or two reports with the same id (from two sources:
///    the USGS summary feed and the USGS FDSN service both say `us7000abcd`). An empty id
///    links nothing.
///    Id links may join two reports of one source (USGS aliases).
/// 2. Then every candidate pair — two reports of different sources whose origin times are
///    within `associate-time` and whose epicentres are within `associate-distance` — is taken
///    in increasing normalized distance sqrt((dt/time)² + (dd/distance)²), ties by the pair's
///    keys (smaller first, then larger). The pair's two groups merge when
///    - no source is in both groups (one source never merges with itself except through an
///      id link), and
///    - every cross pair of the two groups is within both windows (complete linkage).
///
/// Complete rather than single linkage: with single linkage an aftershock sequence, each shock
/// within the windows of the previous one but from another agency, chains into one event with
/// reports minutes and hundreds of kilometres apart; complete linkage keeps every event's
/// reports pairwise within the windows. Taking the pairs nearest first makes the nearest
/// candidate win when several qualify.
///
/// The result depends only on the sorted pair list, so not on arrival order. Groups only grow,
/// and both conditions only get harder as groups grow, so a refused merge stays refused: the
/// result is a fixpoint — no two events could merge under the rules. (Two events that could
/// would have only cross pairs of different sources within the windows, all candidate pairs;
/// the first of them was looked at when both events' groups were parts of them, and would
/// have merged them.) No id link joins two events: step 1 put its reports together.
///
/// **Incremental.** The candidate graph has an edge for each id link and each candidate pair.
/// The grouping of a connected component depends on that component only, so a change (a new
/// report, a revision, a retraction) recomputes the component of the changed report before
/// the change together with its component after: the same grouping a full recompute gives. A
/// time index (buckets `associate-time` wide) and id indexes make finding a report's
/// neighbours proportional to the neighbours, not to all reports.
///
/// A change costs its neighbourhood: the reports within the windows of it and of them, and so
/// on; for reports of separate quakes a handful. A dense swarm (shocks seconds and kilometres
/// apart for minutes) is one component and is regrouped whole on each change, in
/// O(k² log k) for k reports.
///
/// **Event ids.** A new event is named after the report that founds it: its preferred report
/// when it is created (the rules below, so a deterministic function of the group's reports).
/// It takes that report's own id as the agency gives it (`us7000abcd`, `20250305_0000090`), so
/// that with one source configured every event's id is its report's id. Only when that id is
/// taken — a live event has it (another report, retracted since, founded it; or another source
/// uses the same id for another quake), or another event of the same recompute took it just
/// before, in the order of the groups' first keys — or when it is empty, the event takes the
/// report's key `source:id`, then `source:id#2`, `#3`... An event being deleted in the same
/// recompute still holds its id: a new event never takes the id of one deleted beside it.
///
/// When a recompute regroups reports, the new groups are matched to the old events they share
/// reports with, largest overlap first (ties: the group holding the report the old event is
/// named after, then the old event created first, then the smaller old id, then the group with
/// the smaller first key); each old id goes to at most one group. So when an event splits in
/// two equal parts, its id stays with the report that gave it. An
/// old event left without a group is deleted as superseded by the group that took most of its
/// reports (ties: the smaller id), or with no successor when all its reports were retracted. So
/// an event keeps its id while it lives, two events merging keep one id and delete the other,
/// and a split creates a new event for the part that leaves. "Created first" is `Event.created`:
/// a new event's is one more than the largest the associator has given (or restored).
///
/// **Revisions and retractions.** A report replaces the stored one with its key unless both
/// have `updated` and the new one's is older (then it is ignored, as is a retraction older than
/// the report). A retraction that applies, or that names no current report, leaves a tombstone
/// for its key with its `updated` (the latest, when there are several): a report with that key
/// arriving later is ignored while its `updated` is at most the tombstone's (a slow mirror's
/// stale copy), and comes back, clearing the tombstone, when it is newer (the agency undeleted
/// it) or has no `updated`. A retraction without `updated` leaves no tombstone (nothing to
/// compare). Tombstones are bounded by the caller: `purgeTombstones(olderThan:)` forgets those
/// whose `updated` is older than a cut-off (after which a copy older than the cut-off would be
/// taken again), e.g. the store's retention horizon. After an `apply`, `report(_:)` and
/// `tombstone(_:)` say what the store keeps for each key the items named.
///
/// **Snapshot and restore.** `snapshot` is everything the state depends on: the reports, the
/// events with their members, preferred report and creation order, the tombstones, and the last
/// creation number given. `Associator.restore(_:configuration:)` rebuilds the state from one
/// (what a store persisted), adopting the stored event ids without emitting changes when they
/// are what the rules compute; a restored associator then behaves exactly as the one the
/// snapshot was taken of (the same changes, ids and creation numbers for any later items;
/// `lastRegroupedCount` aside, which after a restore counts every report). When they are not (a
/// store written under other windows or an older rule version, or a configuration whose
/// preferences changed), restore regroups everything as a recompute does, mapping the stored
/// events onto the groups by overlap, and returns those changes for the store to apply.
///
/// **Rollback.** `Associator` is a value: its storage is arrays, dictionaries and sets of
/// values, no class references, so a copy is independent of the original (copy-on-write), and
/// `let saved = associator; ...apply...; associator = saved` undoes a batch exactly, the
/// creation numbering included. The store keeps the old value until its transaction commits.
public struct Associator: Sendable {
    public let configuration: AssociationConfiguration

    // Reports by slot; a retracted report's slot is reused after the batch.
    private var slots: [SourceReport?] = []
    private var eventOfSlot: [String?] = []
    private var slotOfKey: [ReportKey: Int] = [:]
    private var freeSlots: [Int] = []
    // The time index: slots by floor(time / associate-time).
    private var buckets: [Int64: [Int]] = [:]
    // Slots by report id, and by each id their links name.
    private var slotsWithID: [String: [Int]] = [:]
    private var slotsLinking: [String: [Int]] = [:]

    private struct EventRecord: Sendable {
        var event: Event
        var created: UInt64 { event.created }
    }
    private var records: [String: EventRecord] = [:]
    private var sequence: UInt64 = 0
    // Retracted keys: the newest retraction's `updated`.
    private var tombstones: [ReportKey: Int64] = [:]

    /// How many reports the last `apply` regrouped: the neighbourhood of its changes.
    public private(set) var lastRegroupedCount = 0

    public init(configuration: AssociationConfiguration = AssociationConfiguration()) {
        self.configuration = configuration
    }

    /// The current events, by id.
    public var events: [Event] { records.values.map(\.event).sorted { $0.id < $1.id } }
    public var eventCount: Int { records.count }
    public var reportCount: Int { slotOfKey.count }
    /// The current reports, by key.
    public var reports: [SourceReport] { slotOfKey.keys.sorted().map { slots[slotOfKey[$0]!]! } }

    public func event(id: String) -> Event? { records[id]?.event }

    public func report(_ key: ReportKey) -> SourceReport? { slotOfKey[key].flatMap { slots[$0] } }

    /// The ids of the events holding a report whose id is `id` (each once, any order); none for
    /// an empty id.
    public func events(holdingReportID id: String) -> Set<String> {
        var result = Set<String>()
        for slot in slotsWithID[id] ?? [] { if let event = eventOfSlot[slot] { result.insert(event) } }
        return result
    }

    /// The `updated` of the newest retraction of a key that has no current report, if remembered.
    public func tombstone(_ key: ReportKey) -> Int64? { tombstones[key] }
    public var tombstoneCount: Int { tombstones.count }

    /// Forgets the tombstones whose `updated` is older than `cutoff` (epoch milliseconds); returns
    /// how many. A copy of such a report sent again afterwards is taken as new.
    @discardableResult
    public mutating func purgeTombstones(olderThan cutoff: Int64) -> Int {
        let before = tombstones.count
        tombstones = tombstones.filter { $0.value >= cutoff }
        return before - tombstones.count
    }

    /// The event that holds the report with this key.
    public func event(containing key: ReportKey) -> Event? {
        guard let slot = slotOfKey[key], let id = eventOfSlot[slot] else { return nil }
        return records[id]?.event
    }

    /// What is kept for one report key: its current report, or the newest retraction's
    /// `updated` (a tombstone), or neither.
    public typealias Revision = (report: SourceReport?, tombstone: Int64?)

    /// The revision rule (see the type's documentation) for one key: whether `item` changes the
    /// report kept, updating `kept`. A retraction of no report changes no report but may
    /// raise the tombstone. `apply` follows it, and a store counting its items can too.
    public static func revise(_ kept: inout Revision, with item: SourceItem) -> Bool {
        switch item {
        case .report(let report):
            if let stored = kept.report {
                if let new = report.updated, let old = stored.updated, new < old { return false }
                if stored == report { return false }
            } else if let tombstone = kept.tombstone, let updated = report.updated, updated <= tombstone {
                return false
            }
            kept = (report, nil)
            return true
        case .retraction(_, _, let updated):
            guard let stored = kept.report else {
                if let updated { kept.tombstone = max(kept.tombstone ?? updated, updated) }
                return false
            }
            if let new = updated, let old = stored.updated, new < old { return false }
            kept = (nil, updated)
            return true
        }
    }

    /// Applies one item; returns what changed.
    public mutating func apply(_ item: SourceItem) -> [EventChange] {
        apply(CollectionOfOne(item))
    }

    /// Applies items in order, recomputing once for them all; returns the net changes.
    /// Creations and updates come first (by id), then deletions (by id), so a deletion's
    /// successor is already there.
    ///
    /// `isTaken` says whether an event this associator does not hold has an id: an associator
    /// restored from a part of a store (the whole components of the reports a change touches)
    /// names a new event only by an id no event of the whole store has. It is asked only of ids
    /// this associator holds no event under.
    public mutating func apply(_ items: some Sequence<SourceItem>, isTaken: (String) -> Bool = { _ in false })
        -> [EventChange]
    {
        var seeds = Set<Int>()  // slots whose component (before their change) is recomputed
        var oldEvents = Set<String>()
        var freed: [Int] = []

        func coverBeforeChange(_ slot: Int) {
            guard !seeds.contains(slot) else { return }
            for other in component(from: [slot], visited: &seeds) {
                if let id = eventOfSlot[other] { oldEvents.insert(id) }
            }
        }

        for item in items {
            let key = ReportKey(item)
            let slot = slotOfKey[key]
            let tombstone = tombstones[key]
            var kept: Revision = (slot.map { slots[$0]! }, tombstone)
            let applies = Self.revise(&kept, with: item)
            if kept.tombstone != tombstone { tombstones[key] = kept.tombstone }
            guard applies else { continue }
            if let report = kept.report {
                if let slot {
                    coverBeforeChange(slot)
                    unindex(slot)
                    slots[slot] = report
                    index(slot)
                } else {
                    let slot: Int
                    if let free = freeSlots.popLast() {
                        slot = free
                        slots[slot] = report
                    } else {
                        slot = slots.count
                        slots.append(report)
                        eventOfSlot.append(nil)
                    }
                    slotOfKey[key] = slot
                    index(slot)
                    seeds.insert(slot)
                }
            } else if let slot {
                coverBeforeChange(slot)
                unindex(slot)
                slots[slot] = nil
                slotOfKey[key] = nil
                if let id = eventOfSlot[slot] { oldEvents.insert(id) }
                eventOfSlot[slot] = nil
                freed.append(slot)
                seeds.remove(slot)
            }
        }
        guard !seeds.isEmpty || !oldEvents.isEmpty else {
            lastRegroupedCount = 0
            return []
        }
        var visited = Set<Int>()
        let affected = component(from: seeds.filter { slots[$0] != nil }, visited: &visited)
        lastRegroupedCount = affected.count
        let changes = regroup(affected, oldEvents: oldEvents, isTaken: isTaken)
        freeSlots.append(contentsOf: freed)
        return changes
    }

    // MARK: - Indexes and the candidate graph

    private func bucket(_ time: Int64) -> Int64 {
        let width = configuration.associateTimeMilliseconds
        return time >= 0 ? time / width : -((-time + width - 1) / width)
    }

    private mutating func index(_ slot: Int) {
        let report = slots[slot]!
        buckets[bucket(report.time), default: []].append(slot)
        if !report.id.isEmpty { slotsWithID[report.id, default: []].append(slot) }
        for link in Set(report.links) where Self.isLink(link, of: report) { slotsLinking[link, default: []].append(slot) }
    }

    private mutating func unindex(_ slot: Int) {
        let report = slots[slot]!
        Self.remove(slot, from: &buckets, at: bucket(report.time))
        Self.remove(slot, from: &slotsWithID, at: report.id)
        for link in Set(report.links) where Self.isLink(link, of: report) { Self.remove(slot, from: &slotsLinking, at: link) }
    }

    private static func remove<K: Hashable>(_ slot: Int, from index: inout [K: [Int]], at key: K) {
        guard var list = index[key], let position = list.firstIndex(of: slot) else { return }
        list.swapAt(position, list.count - 1)
        list.removeLast()
        index[key] = list.isEmpty ? nil : list
    }

    /// Whether a link joins: an empty id (`,,` in a USGS `ids` list) or the report's own id does not.
    private static func isLink(_ link: String, of report: SourceReport) -> Bool {
        !link.isEmpty && link != report.id
    }

    /// The slots joined to `slot` by an id link.
    private func idNeighbours(_ slot: Int, into result: inout [Int]) {
        let report = slots[slot]!
        if !report.id.isEmpty {
            for other in slotsWithID[report.id] ?? [] where other != slot { result.append(other) }
            for other in slotsLinking[report.id] ?? [] where other != slot { result.append(other) }
        }
        for link in report.links where Self.isLink(link, of: report) {
            for other in slotsWithID[link] ?? [] where other != slot { result.append(other) }
        }
    }

    /// The slots of other sources within both windows of `slot`, with the normalized distance.
    private func windowNeighbours(_ slot: Int, _ body: (Int, Double) -> Void) {
        slots.withUnsafeBufferPointer { slots in
            let report = slots[slot].unsafelyUnwrapped
            let b = bucket(report.time)
            for near in (b - 1)...(b + 1) {
                guard let bucket = buckets[near] else { continue }
                for other in bucket where other != slot {
                    // Compared in place: no copy of the candidate report.
                    guard slots[other].unsafelyUnwrapped.source != report.source else { continue }
                    let (within, distance) = configuration.match(report, slots[other].unsafelyUnwrapped)
                    if within { body(other, distance) }
                }
            }
        }
    }

    /// The connected component(s) of `start` in the candidate graph, skipping and adding to `visited`.
    private func component(from start: some Sequence<Int>, visited: inout Set<Int>) -> [Int] {
        var result: [Int] = []
        var stack: [Int] = []
        for slot in start where visited.insert(slot).inserted { stack.append(slot) }
        var neighbours: [Int] = []
        while let slot = stack.popLast() {
            result.append(slot)
            neighbours.removeAll(keepingCapacity: true)
            idNeighbours(slot, into: &neighbours)
            windowNeighbours(slot) { other, _ in neighbours.append(other) }
            for other in neighbours where visited.insert(other).inserted { stack.append(other) }
        }
        return result
    }

    // MARK: - Grouping

    /// Groups `affected` (a union of components) by the rules; the groups' slots, each sorted
    /// by key, the groups sorted by their first key.
    private func group(_ affected: [Int]) -> [[Int]] {
        let members = affected.map { ($0, ReportKey(slots[$0]!)) }.sorted { $0.1 < $1.1 }.map(\.0)
        var local: [Int: Int] = [:]
        local.reserveCapacity(members.count)
        for (position, slot) in members.enumerated() { local[slot] = position }
        var parent = Array(members.indices)
        var groupMembers = members.indices.map { [$0] }
        func find(_ x: Int) -> Int {
            var x = x
            while parent[x] != x {
                parent[x] = parent[parent[x]]
                x = parent[x]
            }
            return x
        }
        func union(_ a: Int, _ b: Int) {
            let (keep, drop) = groupMembers[a].count >= groupMembers[b].count ? (a, b) : (b, a)
            parent[drop] = keep
            groupMembers[keep].append(contentsOf: groupMembers[drop])
            groupMembers[drop] = []
        }

        // 1. Id links.
        var neighbours: [Int] = []
        for (position, slot) in members.enumerated() {
            neighbours.removeAll(keepingCapacity: true)
            idNeighbours(slot, into: &neighbours)
            for other in neighbours {
                guard let otherPosition = local[other] else { preconditionFailure("the affected set is not closed") }
                let a = find(position)
                let b = find(otherPosition)
                if a != b { union(a, b) }
            }
        }

        // 2. Candidate pairs, nearest first, ties by the pair's keys (positions are in key order).
        var pairs: [(distance: Double, a: Int, b: Int)] = []
        for (position, slot) in members.enumerated() {
            windowNeighbours(slot) { other, distance in
                guard let otherPosition = local[other] else { preconditionFailure("the affected set is not closed") }
                if position < otherPosition { pairs.append((distance, position, otherPosition)) }
            }
        }
        pairs.sort { ($0.distance, $0.a, $0.b) < ($1.distance, $1.a, $1.b) }
        for pair in pairs {
            let a = find(pair.a)
            let b = find(pair.b)
            guard a != b else { continue }
            if canMerge(groupMembers[a].map { members[$0] }, groupMembers[b].map { members[$0] }) { union(a, b) }
        }

        // Positions are in key order: sorting them sorts a group by key, and the groups by first key.
        var groups: [[Int]] = []
        for position in members.indices where find(position) == position {
            groups.append(groupMembers[position].sorted())
        }
        groups.sort { $0[0] < $1[0] }
        return groups.map { $0.map { members[$0] } }
    }

    /// No source in both groups, and every cross pair within both windows.
    private func canMerge(_ a: [Int], _ b: [Int]) -> Bool {
        for x in a {
            let rx = slots[x]!
            for y in b {
                let ry = slots[y]!
                if rx.source == ry.source || !configuration.match(rx, ry).within { return false }
            }
        }
        return true
    }

    /// Recomputes the groups of `affected` and maps them onto the old events.
    private mutating func regroup(
        _ affected: [Int], oldEvents: Set<String>, reserved: Set<String> = [], isTaken: (String) -> Bool
    ) -> [EventChange] {
        var old = oldEvents
        for slot in affected { if let id = eventOfSlot[slot] { old.insert(id) } }
        let groups = group(affected)

        // Overlaps of the new groups with the old events.
        var overlap: [String: [Int: Int]] = [:]  // old id -> group -> shared reports
        for (g, group) in groups.enumerated() {
            for slot in group { if let id = eventOfSlot[slot] { overlap[id, default: [:]][g, default: 0] += 1 } }
        }
        // The group holding the report an old event is named after (its own id, or its key
        // `source:id`, with or without a `#n`): on a tie it keeps the name, so a split leaves the
        // id with the report that gave it.
        var namer: [String: Int] = [:]
        for (g, group) in groups.enumerated() {
            for slot in group {
                let report = slots[slot]!
                if overlap[report.id] != nil { namer[report.id] = g }
                let key = ReportKey(report).description
                if overlap[key] != nil { namer[key] = g }
            }
        }
        func namingGroup(_ id: String) -> Int? {
            if let g = namer[id] { return g }
            guard let hash = id.lastIndex(of: "#") else { return nil }
            return namer[String(id[..<hash])]
        }
        var candidates: [(count: Int, names: Bool, created: UInt64, old: String, group: Int)] = []
        for (id, byGroup) in overlap {
            let naming = namingGroup(id)
            for (g, count) in byGroup { candidates.append((count, naming == g, records[id]!.created, id, g)) }
        }
        candidates.sort {
            if $0.count != $1.count { return $0.count > $1.count }
            if $0.names != $1.names { return $0.names }
            if $0.created != $1.created { return $0.created < $1.created }
            if $0.old != $1.old { return $0.old < $1.old }
            return $0.group < $1.group
        }
        var idOfGroup = [String?](repeating: nil, count: groups.count)
        var taken = Set<String>()
        for candidate in candidates where idOfGroup[candidate.group] == nil && !taken.contains(candidate.old) {
            idOfGroup[candidate.group] = candidate.old
            taken.insert(candidate.old)
        }

        var newEvents: [Event] = []
        var changes: [EventChange] = []
        for (g, group) in groups.enumerated() {
            let reports = group.map { slots[$0]! }
            let preferred = configuration.preferred(reports)
            var id: String
            if let kept = idOfGroup[g] {
                id = kept
            } else {
                // The founding report's own id; its key, then #2, #3... when that is taken.
                func free(_ id: String) -> Bool {
                    records[id] == nil && !taken.contains(id) && !reserved.contains(id) && !isTaken(id)
                }
                id = preferred.id
                if id.isEmpty || !free(id) {
                    let base = ReportKey(preferred).description
                    id = base
                    var n = 1
                    while !free(id) {
                        n += 1
                        id = "\(base)#\(n)"
                    }
                }
                taken.insert(id)
                idOfGroup[g] = id
            }
            newEvents.append(Event(id: id, reports: reports.map(ReportKey.init), preferred: preferred, created: 0))
        }

        var deletions: [EventChange] = []
        let kept = Set(idOfGroup.compactMap { $0 })
        for id in old.sorted() where !kept.contains(id) {
            // Superseded by the group that took most of its reports (ties: the smaller id).
            var best: (count: Int, id: String)?
            for (g, count) in overlap[id] ?? [:] {
                let successor = idOfGroup[g]!
                if best == nil || count > best!.count || (count == best!.count && successor < best!.id) {
                    best = (count, successor)
                }
            }
            deletions.append(.deleted(id, supersededBy: best?.id))
        }
        var before: [String: EventRecord] = [:]
        for id in old {
            before[id] = records[id]
            records[id] = nil
        }
        for (g, event) in newEvents.enumerated() {
            for slot in groups[g] { eventOfSlot[slot] = event.id }
            var event = event
            if let record = before[event.id] {
                event.created = record.created
                records[event.id] = EventRecord(event: event)
                if record.event != event { changes.append(.updated(event)) }
            } else {
                sequence += 1
                event.created = sequence
                records[event.id] = EventRecord(event: event)
                changes.append(.created(event))
            }
        }
        changes.sort { $0.eventID < $1.eventID }
        return changes + deletions
    }
}

// MARK: - Snapshot and restore

/// Everything an `Associator`'s behaviour depends on, as a store persists it.
public struct AssociationSnapshot: Sendable, Hashable {
    /// An event as stored: its id, its members, its creation order and, when known, the key of
    /// the report its row was made from.
    public struct StoredEvent: Sendable, Hashable {
        public var id: String
        /// The member reports' keys (any order).
        public var members: [ReportKey]
        /// `Event.created`. Only the order matters; stored events with equal numbers (a store
        /// that kept none) are ordered by id.
        public var created: UInt64
        /// The preferred report the stored row shows; when it is not the one the configuration
        /// prefers now (or is no member), restore reports the event updated. Nil: not compared.
        public var preferred: ReportKey?

        public init(id: String, members: [ReportKey], created: UInt64, preferred: ReportKey? = nil) {
            self.id = id
            self.members = members
            self.created = created
            self.preferred = preferred
        }
    }

    /// A retracted key and the newest retraction's `updated`.
    public struct Tombstone: Sendable, Hashable {
        public var key: ReportKey
        public var updated: Int64

        public init(key: ReportKey, updated: Int64) {
            self.key = key
            self.updated = updated
        }
    }

    /// The current reports (by key, in a snapshot).
    public var reports: [SourceReport]
    /// The events (by id, in a snapshot).
    public var events: [StoredEvent]
    /// The tombstones (by key, in a snapshot).
    public var tombstones: [Tombstone]
    /// The last creation number given (it may belong to an event deleted since). Zero when not
    /// kept: restore then continues from the largest of the events', which gives later events
    /// other numbers but never another order, so the same ids and groupings.
    public var lastCreated: UInt64

    public init(reports: [SourceReport], events: [StoredEvent], tombstones: [Tombstone] = [], lastCreated: UInt64 = 0) {
        self.reports = reports
        self.events = events
        self.tombstones = tombstones
        self.lastCreated = lastCreated
    }
}

extension Associator {
    /// The whole state, for a store to persist; `restore` gives it back.
    public var snapshot: AssociationSnapshot {
        AssociationSnapshot(
            reports: reports,
            events: records.values.map(\.event).sorted { $0.id < $1.id }.map {
                AssociationSnapshot.StoredEvent(id: $0.id, members: $0.reports, created: $0.created, preferred: $0.preferredKey)
            },
            tombstones: tombstones.keys.sorted().map { AssociationSnapshot.Tombstone(key: $0, updated: tombstones[$0]!) },
            lastCreated: sequence)
    }

    /// Rebuilds an associator from a snapshot (what a store persisted), adopting its event ids.
    ///
    /// When the stored events are what the rules compute from the reports (and each stored
    /// preferred key, when given, is the one preferred now), nothing changes: `changes` is empty
    /// and the associator behaves exactly as the one the snapshot was taken of. Otherwise every
    /// report is regrouped as one recompute does, the stored events playing the old events
    /// (their ids go to the groups they overlap most, the others are deleted as superseded, or
    /// without a successor when none of their members is left), and `changes` says what to do
    /// to the stored events to get the restored ones.
    ///
    /// Inconsistent input is repaired, not refused: of two reports with one key the one a
    /// revision would keep stays; a member naming no report is dropped; a report claimed by two
    /// events stays with the first by id (a second event with an id already seen is dropped
    /// and its members count as in no event); a report in no event is regrouped; a tombstone
    /// for a key with a current report is dropped.
    ///
    /// A snapshot may be a part of a store: whole connected components of its candidate graph
    /// (every report joined to one of them by an id link or a candidate pair is in it, and so
    /// is every member of their events), the tombstones of the keys the next items name, and
    /// the store's last creation number. Such an associator behaves, for items whose reports
    /// and their old versions are all within the part's components or joined to nothing outside
    /// them, as the whole store's would, given `isTaken` (see ``apply(_:isTaken:)``).
    public static func restore(
        _ snapshot: AssociationSnapshot, configuration: AssociationConfiguration,
        isTaken: (String) -> Bool = { _ in false }
    ) -> (associator: Associator, changes: [EventChange]) {
        var associator = Associator(configuration: configuration)
        let changes = associator.load(snapshot, isTaken: isTaken)
        return (associator, changes)
    }

    private mutating func load(_ snapshot: AssociationSnapshot, isTaken: (String) -> Bool) -> [EventChange] {
        for report in snapshot.reports {
            let key = ReportKey(report)
            if let slot = slotOfKey[key] {
                if let new = report.updated, let old = slots[slot]!.updated, new < old { continue }
                unindex(slot)
                slots[slot] = report
                index(slot)
            } else {
                slotOfKey[key] = slots.count
                slots.append(report)
                eventOfSlot.append(nil)
                index(slots.count - 1)
            }
        }
        for tombstone in snapshot.tombstones where slotOfKey[tombstone.key] == nil {
            tombstones[tombstone.key] = max(tombstones[tombstone.key] ?? tombstone.updated, tombstone.updated)
        }
        var emptied: [String] = []
        var stalePreferred: [String] = []  // stored preferring a report that is not a member
        for stored in snapshot.events.sorted(by: { $0.id < $1.id }) where records[stored.id] == nil && !emptied.contains(stored.id) {
            var members: [ReportKey] = []
            for key in Set(stored.members).sorted() {
                guard let slot = slotOfKey[key], eventOfSlot[slot] == nil else { continue }
                eventOfSlot[slot] = stored.id
                members.append(key)
            }
            guard !members.isEmpty else {
                emptied.append(stored.id)
                continue
            }
            let reports = members.map { slots[slotOfKey[$0]!]! }
            let storedPreferred = stored.preferred.flatMap { key in reports.first { ReportKey($0) == key } }
            if stored.preferred != nil && storedPreferred == nil { stalePreferred.append(stored.id) }
            let preferred = storedPreferred ?? configuration.preferred(reports)
            records[stored.id] = EventRecord(
                event: Event(id: stored.id, reports: members, preferred: preferred, created: stored.created))
        }
        sequence = max(snapshot.lastCreated, records.values.map(\.created).max() ?? 0)
        let all = Array(slots.indices)
        lastRegroupedCount = all.count
        var changes = all.isEmpty ? [] : regroup(all, oldEvents: Set(records.keys), reserved: Set(emptied), isTaken: isTaken)
        // Stored events with no report left are deleted, among the deletions by id; those whose
        // stored preferred report is gone are updated (their row shows it).
        if !emptied.isEmpty || !stalePreferred.isEmpty {
            let split = changes.firstIndex { if case .deleted = $0 { true } else { false } } ?? changes.count
            var updates = Array(changes[..<split])
            let changed = Set(updates.map(\.eventID))
            for id in stalePreferred where !changed.contains(id) {
                if let record = records[id] { updates.append(.updated(record.event)) }
            }
            let deletions = (changes[split...] + emptied.map { EventChange.deleted($0, supersededBy: nil) })
            changes = updates.sorted { $0.eventID < $1.eventID } + deletions.sorted { $0.eventID < $1.eventID }
        }
        return changes
    }
}
