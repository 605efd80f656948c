import Foundation
import QuakeAssociation
import QuakeModel
import Testing

/// One random schedule: a configuration and the items fed to the associator one by one.
struct Schedule: CustomStringConvertible {
    var configuration: AssociationConfiguration
    var steps: [SourceItem]

    var description: String {
        var lines = [
            "configuration: sources \(configuration.sourceOrder), regional \(configuration.regionalPreferences)"
        ]
        for (index, step) in steps.enumerated() {
            switch step {
            case .report(let r):
                let t = Double(r.time - base) / 1000
                var line =
                    "\(index): report \(r.source):\(r.id) t=\(t)s lat=\(String(format: "%.4f", r.latitude)) lon=\(String(format: "%.4f", r.longitude))"
                line += " updated=\(r.updated.map(String.init) ?? "nil")"
                if r.isReviewed { line += " reviewed" }
                if let agency = r.agency { line += " agency=\(agency)" }
                if !r.links.isEmpty { line += " links=\(r.links)" }
                lines.append(line)
            case .retraction(let source, let id, let updated):
                lines.append("\(index): retract \(source):\(id) updated=\(updated.map(String.init) ?? "nil")")
            }
        }
        return lines.joined(separator: "\n")
    }
}

struct ScheduleFailure: Error, CustomStringConvertible {
    var step: Int
    var message: String
    var description: String { "at step \(step): \(message)" }
}

/// What the schedules exercised, to show the generator does its job.
struct ScheduleStats {
    var steps = 0
    var reports = 0
    var maxEvents = 0
    var multiSourceEvents = 0
    var merges = 0  // events deleted as superseded
    var splits = 0  // events created while an existing event lost reports
    var retractions = 0
    var idLinkedSameSource = 0
    var sameSourceNeighbours = 0  // events left apart though within the windows, one source
    var ignored = 0  // items the rules ignore (stale copies, old retractions)
    var tombstoneHits = 0  // reports kept out by a tombstone
    var undeleted = 0  // reports back after a retraction
    var plainIDs = 0  // events created with their report's own id
    var keyIDs = 0  // events created with source:id (or #n): the own id was taken
    var restoreRegroups = 0  // scrambled snapshots restored (regrouped)
}

@Suite("association schedules")
struct AssociationScheduleTests {
    static let agencies = ["usgs", "emsc", "gfz", "geonet"]

    /// A schedule; a `large` one has 12 to 25 quakes over ten minutes and 500 km instead of 2 to 7
    /// over two and a half minutes and 300 km.
    static func generate(_ random: inout SeededRandom, large: Bool = false) -> Schedule {
        let agencies = Array(agencies.shuffled(using: &random).prefix(Int.random(in: 2...4, using: &random)))
        var configuration = AssociationConfiguration(
            sourceOrder: Array(agencies.shuffled(using: &random).prefix(Int.random(in: 0...agencies.count, using: &random))))
        if Bool.random(using: &random) {
            let region: Region =
                Bool.random(using: &random)
                ? .circle(lat: 35, lon: 139, radiusKm: Double.random(in: 20...150, using: &random))
                : .box(minLat: 34, maxLat: 36, minLon: 138, maxLon: 139.5)
            configuration.regionalPreferences = [
                RegionalPreference(agencies: [agencies.randomElement(using: &random)!.uppercased()], region: region)
            ]
        }
        var counter = 0
        func nextID(_ agency: String) -> String {
            counter += 1
            return "\(agency)\(counter)"
        }
        func offset(_ latitude: Double, _ longitude: Double, km: Double, random: inout SeededRandom) -> (Double, Double) {
            let bearing = Double.random(in: 0..<(2 * .pi), using: &random)
            let distance = Double.random(in: 0...km, using: &random)
            let dLat = distance * cos(bearing) / 111.195
            let dLon = distance * sin(bearing) / (111.195 * cos(latitude * .pi / 180))
            return (latitude + dLat, longitude + dLon)
        }
        func makeReport(
            _ agency: String, _ id: String, time: Double, _ latitude: Double, _ longitude: Double, magnitude: Double,
            random: inout SeededRandom
        ) -> SourceReport {
            let reviewed = Int.random(in: 0..<5, using: &random) == 0
            return SourceReport(
                source: agency, id: id, agency: agency.uppercased(), time: base + Int64(time * 1000), latitude: latitude,
                longitude: longitude, depth: 10, magnitude: (magnitude * 10).rounded() / 10, magnitudeType: "ml",
                place: "\(agency) place", evaluationMode: reviewed ? .manual : .automatic)
        }

        // Quakes: main shocks spread over a few minutes and 300 km, aftershocks within the windows of one.
        var quakes: [(time: Double, latitude: Double, longitude: Double, magnitude: Double)] = []
        let span = large ? 600.0 : 150.0
        let radius = large ? 250.0 : 150.0
        for _ in 0..<Int.random(in: large ? 12...25 : 2...7, using: &random) {
            if let main = quakes.randomElement(using: &random), Int.random(in: 0..<3, using: &random) == 0 {
                let (latitude, longitude) = offset(main.latitude, main.longitude, km: 70, random: &random)
                quakes.append((main.time + Double.random(in: 4...15, using: &random), latitude, longitude, main.magnitude - 1))
            } else {
                let (latitude, longitude) = offset(35, 139, km: radius, random: &random)
                quakes.append(
                    (Double.random(in: 0...span, using: &random), latitude, longitude, Double.random(in: 3...6, using: &random)))
            }
        }
        var initial: [SourceReport] = []
        var byQuake: [[SourceReport]] = []
        for quake in quakes {
            var these: [SourceReport] = []
            for agency in agencies where Int.random(in: 0..<4, using: &random) != 0 {
                let (latitude, longitude) = offset(quake.latitude, quake.longitude, km: 25, random: &random)
                these.append(
                    makeReport(
                        agency, nextID(agency), time: quake.time + Double.random(in: -3...3, using: &random), latitude,
                        longitude, magnitude: quake.magnitude + Double.random(in: -0.3...0.3, using: &random),
                        random: &random))
            }
            // A second event of one source close by.
            if Int.random(in: 0..<6, using: &random) == 0 {
                let agency = agencies.randomElement(using: &random)!
                let (latitude, longitude) = offset(quake.latitude, quake.longitude, km: 30, random: &random)
                these.append(
                    makeReport(
                        agency, nextID(agency), time: quake.time + Double.random(in: 1...6, using: &random), latitude,
                        longitude, magnitude: quake.magnitude - 1, random: &random))
            }
            // USGS-style ids: the first agency names another's id, or an alias of its own, far off.
            if let first = these.first(where: { $0.source == agencies[0] }), Int.random(in: 0..<3, using: &random) == 0 {
                var linked = first
                if let other = these.first(where: { $0.source != first.source }), Bool.random(using: &random) {
                    linked.links = [other.id]
                    these[these.firstIndex(of: first)!] = linked
                } else {
                    let (latitude, longitude) = offset(quake.latitude, quake.longitude, km: 200, random: &random)
                    var alias = makeReport(
                        first.source, nextID(first.source), time: quake.time + Double.random(in: -30...30, using: &random),
                        latitude, longitude, magnitude: quake.magnitude, random: &random)
                    alias.links = [first.id]
                    these.append(alias)
                }
            }
            byQuake.append(these)
            initial += these
        }
        var steps = initial.shuffled(using: &random).map(SourceItem.report)
        // Revisions and retractions, each after the report it changes.
        for _ in 0..<Int.random(in: 0...(initial.count + 2), using: &random) {
            guard !initial.isEmpty else { break }
            let position = Int.random(in: 0..<initial.count, using: &random)
            var revised = initial[position]
            let after = steps.firstIndex { if case .report(let r) = $0 { r.id == revised.id } else { false } }!
            let insert = Int.random(in: (after + 1)...steps.count, using: &random)
            switch Int.random(in: 0..<10, using: &random) {
            case 0...1:  // a small revision
                revised.time += Int64.random(in: -2000...2000, using: &random)
                (revised.latitude, revised.longitude) = offset(revised.latitude, revised.longitude, km: 10, random: &random)
                revised.magnitude = revised.magnitude.map { $0 + 0.1 }
            case 2...3:  // out of the windows
                revised.time += Int64.random(in: 15000...40000, using: &random) * (Bool.random(using: &random) ? 1 : -1)
            case 4:
                (revised.latitude, revised.longitude) = offset(revised.latitude, revised.longitude, km: 200, random: &random)
            case 5...6:  // onto another quake
                let quake = quakes.randomElement(using: &random)!
                revised.time = base + Int64((quake.time + Double.random(in: -2...2, using: &random)) * 1000)
                (revised.latitude, revised.longitude) = offset(quake.latitude, quake.longitude, km: 15, random: &random)
            case 7:  // an id link
                if let other = initial.randomElement(using: &random), other.id != revised.id { revised.links = [other.id] }
            case 8:  // reviewed now
                revised.evaluationMode = .manual
            default:
                steps.insert(.retraction(source: revised.source, id: revised.id, updated: nil), at: insert)
                continue
            }
            initial[position] = revised
            steps.insert(.report(revised), at: insert)
        }
        // Updated times by position: a later item is newer (tens apart, so that an undeleted
        // copy fits between).
        for index in steps.indices {
            switch steps[index] {
            case .report(var r):
                r.updated = Int64(index + 1) * 10
                steps[index] = .report(r)
            case .retraction(let source, let id, _):
                steps[index] = .retraction(source: source, id: id, updated: Int64(index + 1) * 10)
            }
        }
        // After a retraction, some time later: an older copy of the report (a slow mirror; the
        // tombstone keeps it out), a copy as old as the retraction (out too), or the report
        // undeleted (newer than the retraction: back).
        for index in steps.indices.reversed() {
            guard case .retraction(let source, let id, let updated?) = steps[index], Int.random(in: 0..<3, using: &random) != 0
            else { continue }
            let versions = steps[..<index].compactMap { item -> SourceReport? in
                if case .report(let r) = item, r.source == source, r.id == id { r } else { nil }
            }
            guard var copy = versions.randomElement(using: &random) else { continue }
            switch Int.random(in: 0..<4, using: &random) {
            case 0: copy.updated = updated
            case 1: copy.updated = updated + 5
            default: break
            }
            steps.insert(.report(copy), at: Int.random(in: (index + 1)...steps.count, using: &random))
        }
        // Stale items, as a slow mirror might send them: an old version again, a retraction older
        // than the report; both are ignored.
        for _ in 0..<Int.random(in: 0...2, using: &random) {
            guard !steps.isEmpty else { break }
            let position = Int.random(in: 0..<steps.count, using: &random)
            let insert = Int.random(in: (position + 1)...steps.count, using: &random)
            switch steps[position] {
            case .report(let r) where Bool.random(using: &random):
                steps.insert(.report(r), at: insert)
            case .report(let r):
                steps.insert(.retraction(source: r.source, id: r.id, updated: r.updated! - 1), at: insert)
            case .retraction:
                break
            }
        }
        return schedule(configuration, steps)
    }

    static func schedule(_ configuration: AssociationConfiguration, _ steps: [SourceItem]) -> Schedule {
        Schedule(configuration: configuration, steps: steps)
    }

    // MARK: - The rules, written again independently of the library

    static func distanceKm(_ a: SourceReport, _ b: SourceReport) -> Double {
        let rad = Double.pi / 180
        let h =
            pow(sin((b.latitude - a.latitude) * rad / 2), 2) + cos(a.latitude * rad) * cos(b.latitude * rad)
            * pow(sin((b.longitude - a.longitude) * rad / 2), 2)
        return 2 * 6371.0 * asin(min(1, sqrt(h)))
    }

    static func within(_ a: SourceReport, _ b: SourceReport, _ configuration: AssociationConfiguration) -> Bool {
        abs(a.time - b.time) <= configuration.associateTimeMilliseconds
            && distanceKm(a, b) <= configuration.associateDistanceKm + 1e-9
    }

    /// Whether two reports are within a hair of a window's edge, where the library's and the
    /// test's floating point may round differently.
    static func nearEdge(_ a: SourceReport, _ b: SourceReport, _ configuration: AssociationConfiguration) -> Bool {
        abs(distanceKm(a, b) - configuration.associateDistanceKm) < 1e-6
    }

    /// The id-link components of the reports: key -> component representative.
    static func idComponents(_ reports: [SourceReport]) -> [ReportKey: ReportKey] {
        var parent: [ReportKey: ReportKey] = [:]
        for r in reports { parent[ReportKey(r)] = ReportKey(r) }
        func find(_ k: ReportKey) -> ReportKey {
            var k = k
            while parent[k]! != k { k = parent[k]! }
            return k
        }
        var byID: [String: [ReportKey]] = [:]
        for r in reports where !r.id.isEmpty { byID[r.id, default: []].append(ReportKey(r)) }
        for r in reports {
            for other in (byID[r.id] ?? []) + r.links.flatMap({ byID[$0] ?? [] }) {
                let (a, b) = (find(ReportKey(r)), find(other))
                if a != b { parent[a] = b }
            }
        }
        var result: [ReportKey: ReportKey] = [:]
        for r in reports { result[ReportKey(r)] = find(ReportKey(r)) }
        return result
    }

    /// The rank of a report by the preferred rules, smaller first, written out as a tuple.
    static func rank(_ r: SourceReport, _ configuration: AssociationConfiguration) -> (Int, Int, Int, Int64, String, String) {
        var regional = Int.max
        var index = 0
        search: for preference in configuration.regionalPreferences {
            for agency in preference.agencies {
                if (agency == r.agency || agency == r.source)
                    && preference.region.contains(latitude: r.latitude, longitude: r.longitude)
                {
                    regional = index
                    break search
                }
                index += 1
            }
        }
        return (
            r.isReviewed ? 0 : 1, regional, configuration.sourceOrder.firstIndex(of: r.source) ?? Int.max,
            -(r.updated ?? Int64.min + 1), r.source, r.id
        )
    }

    /// Plays a schedule, checking the rules after every step; throws the first violation.
    @discardableResult
    static func play(_ schedule: Schedule, stats: inout ScheduleStats) throws -> Associator {
        let configuration = schedule.configuration
        var associator = Associator(configuration: configuration)
        var model: [ReportKey: SourceReport] = [:]
        var tombstones: [ReportKey: Int64] = [:]
        var mirror: [String: Event] = [:]
        var shuffler = SeededRandom(seed: UInt64(schedule.steps.count))
        // From a third of the way on, a twin restored from a snapshot plays along.
        let twinStart = schedule.steps.count / 3
        var twin: Associator?
        for (step, item) in schedule.steps.enumerated() {
            func fail(_ message: String) -> ScheduleFailure { ScheduleFailure(step: step, message: message) }
            let previous = associator.events
            let previousMembers = Set(previous.flatMap(\.reports))
            // The model of the current reports and the tombstones: a newer item replaces, an older
            // one is ignored; a retraction that applies, or names no report, is remembered with its
            // updated, and keeps out a later copy of the report that is not newer.
            var ignored = false
            switch item {
            case .report(let r):
                let key = ReportKey(r)
                if let old = model[key] {
                    if let o = old.updated, let n = r.updated, n < o { ignored = true }
                } else if let t = tombstones[key] {
                    if let n = r.updated, n <= t {
                        ignored = true
                        stats.tombstoneHits += 1
                    } else {
                        tombstones[key] = nil
                        stats.undeleted += 1
                    }
                }
                if !ignored { model[key] = r }
            case .retraction(let source, let id, let updated):
                let key = ReportKey(source: source, id: id)
                if let old = model[key] {
                    if let o = old.updated, let n = updated, n < o {
                        ignored = true
                    } else {
                        model[key] = nil
                        stats.retractions += 1
                        if let updated { tombstones[key] = updated }
                    }
                } else {
                    ignored = true
                    if let updated { tombstones[key] = max(tombstones[key] ?? updated, updated) }
                }
            }
            if ignored { stats.ignored += 1 }
            let snapshotBefore = associator.snapshot
            let saved = associator
            if step == twinStart {
                twin = Associator.restore(snapshotBefore, configuration: configuration).associator
                try checkScrambledRestore(snapshotBefore, configuration, stats: &stats, step: step)
            }
            let changes = associator.apply(item)
            stats.steps += 1

            // What the rules ignore changes nothing (a tombstone may move).
            let snapshotAfter = associator.snapshot
            if ignored {
                if !changes.isEmpty { throw fail("an ignored item changed \(changes)") }
                if snapshotAfter.reports != snapshotBefore.reports || snapshotAfter.events != snapshotBefore.events {
                    throw fail("an ignored item changed the state")
                }
            }
            let modelTombstones = tombstones.keys.sorted().map { AssociationSnapshot.Tombstone(key: $0, updated: tombstones[$0]!) }
            if snapshotAfter.tombstones != modelTombstones {
                throw fail("tombstones \(snapshotAfter.tombstones), the model's \(modelTombstones)")
            }
            // A copy is a value: the one kept before the step is as it was (the store's rollback).
            if saved.snapshot != snapshotBefore { throw fail("applying the step to one copy changed another") }
            // Restored from the snapshot before the step, an associator emits nothing, then gives
            // the same changes and the same state; so does the twin restored earlier.
            var (restored, restoreChanges) = Associator.restore(snapshotBefore, configuration: configuration)
            if !restoreChanges.isEmpty { throw fail("restoring the snapshot before the step changed \(restoreChanges)") }
            let restoredChanges = restored.apply(item)
            if restoredChanges != changes {
                func created(_ changes: [EventChange]) -> [UInt64] {
                    changes.compactMap { if case .created(let e) = $0 { e.created } else if case .updated(let e) = $0 { e.created } else { nil } }
                }
                throw fail(
                    "restored, the step gives \(restoredChanges) (created \(created(restoredChanges))), not \(changes) (created \(created(changes)))")
            }
            if restored.snapshot != snapshotAfter { throw fail("restored, the step leaves another state") }
            if twin != nil {
                let twinChanges = twin!.apply(item)
                if twinChanges != changes { throw fail("the twin restored at step \(twinStart) gives \(twinChanges), not \(changes)") }
            }

            // The changes, applied to a mirror, give the associator's events.
            for change in changes {
                switch change {
                case .created(let event):
                    if mirror[event.id] != nil { throw fail("\(change): the id is live") }
                    mirror[event.id] = event
                case .updated(let event):
                    if mirror[event.id] == nil { throw fail("\(change): no such event") }
                    if mirror[event.id] == event { throw fail("\(change): nothing changed") }
                    mirror[event.id] = event
                case .deleted(let id, let survivor):
                    if mirror.removeValue(forKey: id) == nil { throw fail("\(change): no such event") }
                    if let survivor, associator.event(id: survivor) == nil {
                        throw fail("\(change): the survivor does not exist")
                    }
                    if survivor != nil { stats.merges += 1 }
                }
            }
            // An event that keeps its id keeps some of its reports; a superseded one's survivor took
            // some of them; one deleted without a survivor has none left.
            let before = Dictionary(uniqueKeysWithValues: previous.map { ($0.id, Set($0.reports)) })
            for change in changes {
                switch change {
                case .updated(let event):
                    if before[event.id]?.isDisjoint(with: event.reports) ?? true {
                        throw fail("\(change) shares no report with the event it was")
                    }
                case .deleted(let id, let survivor?):
                    if before[id]!.isDisjoint(with: associator.event(id: survivor)?.reports ?? []) {
                        throw fail("\(change): the survivor took none of its reports")
                    }
                case .deleted(let id, nil):
                    if before[id]!.contains(where: { associator.report($0) != nil }) {
                        throw fail("\(change) without a survivor, but some of its reports are left")
                    }
                case .created: break
                }
            }
            let events = associator.events
            if mirror.values.sorted(by: { $0.id < $1.id }) != events {
                throw fail("the changes \(changes) do not give the events \(events)")
            }

            // A new event takes its founding (preferred) report's own id, else its key, else #2...:
            // the first of those no event held before the step and no other event holds now.
            let previousIDs = Set(previous.map(\.id))
            let currentIDs = Set(events.map(\.id))
            for case .created(let event) in changes {
                let founder = event.preferredKey
                var candidates = founder.id.isEmpty ? [] : [founder.id]
                candidates.append(founder.description)
                while !candidates.contains(event.id) && candidates.count < 1000 {
                    candidates.append("\(founder)#\(candidates.count + (founder.id.isEmpty ? 1 : 0))")
                }
                guard let position = candidates.firstIndex(of: event.id) else {
                    throw fail("\(event.id) is not named after its founding report \(founder)")
                }
                for taken in candidates[..<position] where !previousIDs.contains(taken) && !currentIDs.contains(taken) {
                    throw fail("\(event.id) was created though \(taken), its founder \(founder)'s, was free")
                }
                if event.id == founder.id { stats.plainIDs += 1 } else { stats.keyIDs += 1 }
            }

            // The reports are the model's.
            let reports = model.values.sorted { ReportKey($0) < ReportKey($1) }
            if associator.reports != reports { throw fail("the associator's reports are not the model's") }

            // Each report in exactly one event.
            let members = events.flatMap(\.reports)
            if members.sorted() != reports.map(ReportKey.init) {
                throw fail("the events' reports \(members.sorted()) are not the reports \(reports.map(ReportKey.init))")
            }
            for event in events where event.reports.isEmpty { throw fail("an empty event \(event.id)") }

            // Within an event: reports of other id components are of other sources and within the windows.
            let component = idComponents(reports)
            for event in events {
                let rs = event.reports.map { model[$0]! }
                for i in rs.indices {
                    for j in rs.indices where i < j && component[ReportKey(rs[i])] != component[ReportKey(rs[j])] {
                        if rs[i].source == rs[j].source {
                            throw fail("\(event.id) holds \(ReportKey(rs[i])) and \(ReportKey(rs[j])), one source, not linked")
                        }
                        if !within(rs[i], rs[j], configuration) && !nearEdge(rs[i], rs[j], configuration) {
                            throw fail("\(event.id) holds \(ReportKey(rs[i])) and \(ReportKey(rs[j])), outside the windows")
                        }
                    }
                    if i > 0 && rs[i].source == rs[0].source && component[ReportKey(rs[i])] == component[ReportKey(rs[0])] {
                        stats.idLinkedSameSource += 1
                    }
                }
                if Set(rs.map(\.source)).count > 1 { stats.multiSourceEvents += 1 }
                // The preferred report follows the rules.
                let best = rs.min { rank($0, configuration) < rank($1, configuration) }!
                if event.preferred != best {
                    throw fail(
                        ReportKey(event.preferred) == ReportKey(best)
                            ? "\(event.id) holds an old version of its preferred report \(ReportKey(best))"
                            : "\(event.id) prefers \(event.preferredKey), the rules \(ReportKey(best))")
                }
            }

            // A fixpoint: no two events would match.
            for i in events.indices {
                for j in events.indices where i < j {
                    let a = events[i].reports.map { model[$0]! }
                    let b = events[j].reports.map { model[$0]! }
                    if a.contains(where: { x in b.contains { component[ReportKey($0)] == component[ReportKey(x)] } }) {
                        throw fail("\(events[i].id) and \(events[j].id) are id-linked")
                    }
                    let disjoint = Set(a.map(\.source)).isDisjoint(with: b.map(\.source))
                    if disjoint && a.allSatisfy({ x in b.allSatisfy { within(x, $0, configuration) } }) {
                        if !a.contains(where: { x in b.contains { nearEdge(x, $0, configuration) } }) {
                            throw fail("\(events[i].id) and \(events[j].id) would merge")
                        }
                    }
                    if !disjoint
                        && a.contains(where: { x in b.contains { x.source == $0.source && within(x, $0, configuration) } })
                    {
                        stats.sameSourceNeighbours += 1
                    }
                }
            }

            // From scratch, and in another order, the same grouping and preferred reports.
            var fresh = Associator(configuration: configuration)
            _ = fresh.apply(reports.map(SourceItem.report))
            if Self.summary(fresh) != Self.summary(associator) {
                throw fail("incremental \(summary(associator)) but from scratch \(summary(fresh))")
            }
            var shuffled = Associator(configuration: configuration)
            for r in reports.shuffled(using: &shuffler) { _ = shuffled.apply(.report(r)) }
            if summary(shuffled) != summary(associator) {
                throw fail("in order \(summary(associator)) but shuffled \(summary(shuffled))")
            }

            // Ids stay: an event whose reports are all in one event now, with only reports no
            // event held before, keeps its id.
            for old in previous {
                guard let now = associator.event(containing: old.reports[0]) else { continue }
                let current = Set(now.reports)
                if current.isSuperset(of: old.reports), current.subtracting(old.reports).isDisjoint(with: previousMembers),
                    now.id != old.id
                {
                    throw fail("\(old.id) only grew, into \(now), but lost its id")
                }
            }
            if changes.contains(where: { if case .created = $0 { true } else { false } }),
                previous.contains(where: { old in
                    old.reports.contains { model[$0] != nil } && associator.event(containing: old.reports[0]).map {
                        !Set($0.reports).isSuperset(of: old.reports.filter { model[$0] != nil })
                    } ?? false
                })
            {
                stats.splits += 1
            }
            stats.maxEvents = max(stats.maxEvents, events.count)
            stats.reports = max(stats.reports, reports.count)
        }

        // The whole schedule as one batch gives the same events as item by item.
        var batch = Associator(configuration: configuration)
        _ = batch.apply(schedule.steps)
        if batch.events.map(\.reports).sorted(by: { $0.lexicographicallyPrecedes($1) })
            != associator.events.map(\.reports).sorted(by: { $0.lexicographicallyPrecedes($1) })
        {
            throw ScheduleFailure(step: schedule.steps.count, message: "one batch gives \(batch.events), item by item \(associator.events)")
        }
        try checkScrambledRestore(associator.snapshot, configuration, stats: &stats, step: schedule.steps.count)
        return associator
    }

    /// The grouping and the preferred reports: each event as its preferred key, then its members.
    static func summary(_ a: Associator) -> [[ReportKey]] {
        a.events.map { [$0.preferredKey] + $0.reports }.sorted { $0.lexicographicallyPrecedes($1) }
    }

    /// A store written under other rules: the snapshot's reports in random stored events (a
    /// random partition; ids old, made up, or reports' own ids and keys; random creation order,
    /// equal numbers included; a preferred key or none; empty events; members naming no report).
    /// Restoring gives the rules' grouping, the changes it returns turn the stored events into
    /// the restored ones, and restoring what it made changes nothing.
    static func checkScrambledRestore(
        _ snapshot: AssociationSnapshot, _ configuration: AssociationConfiguration, stats: inout ScheduleStats, step: Int
    ) throws {
        func fail(_ message: String) -> ScheduleFailure {
            ScheduleFailure(step: step, message: "restoring a scrambled snapshot: \(message)")
        }
        var random = SeededRandom(seed: UInt64(step) &* 7919 &+ UInt64(snapshot.reports.count))
        let keys = snapshot.reports.map(ReportKey.init).shuffled(using: &random)
        let count = Int.random(in: 1...(keys.count + 1), using: &random)
        var groups = [[ReportKey]](repeating: [], count: count)
        for key in keys { groups[Int.random(in: 0..<count, using: &random)].append(key) }
        var pool = snapshot.events.map(\.id) + keys.map(\.id) + keys.map(\.description) + (0..<count).map { "S\($0)" }
        pool.shuffle(using: &random)
        var stored: [AssociationSnapshot.StoredEvent] = []
        var used = Set<String>()
        for var group in groups {
            let id = pool.first { !used.contains($0) }!
            used.insert(id)
            if Int.random(in: 0..<8, using: &random) == 0 { group.append(ReportKey(source: "nowhere", id: id)) }
            stored.append(
                .init(
                    id: id, members: group, created: UInt64.random(in: 0...UInt64(count), using: &random),
                    preferred: Bool.random(using: &random) ? group.randomElement(using: &random) : nil))
        }
        let scrambled = AssociationSnapshot(reports: snapshot.reports, events: stored, tombstones: snapshot.tombstones)
        let (restored, changes) = Associator.restore(scrambled, configuration: configuration)
        stats.restoreRegroups += 1
        var fresh = Associator(configuration: configuration)
        _ = fresh.apply(snapshot.reports.map(SourceItem.report))
        if summary(fresh) != summary(restored) {
            throw fail("\(summary(restored)), from scratch \(summary(fresh)); stored \(stored)")
        }
        let known = Set(keys)
        var mirror: [String: (members: Set<ReportKey>, preferred: ReportKey?)] = [:]
        for event in stored { mirror[event.id] = (Set(event.members).intersection(known), event.preferred) }
        for change in changes {
            switch change {
            case .created(let event):
                if mirror[event.id] != nil { throw fail("\(change): the id is stored") }
                mirror[event.id] = (Set(event.reports), event.preferredKey)
            case .updated(let event):
                guard let old = mirror[event.id] else { throw fail("\(change): no such stored event") }
                if old.members == Set(event.reports) && (old.preferred == nil || old.preferred == event.preferredKey) {
                    throw fail("\(change): nothing changed")
                }
                mirror[event.id] = (Set(event.reports), event.preferredKey)
            case .deleted(let id, let survivor):
                if mirror.removeValue(forKey: id) == nil { throw fail("\(change): no such stored event") }
                if let survivor, restored.event(id: survivor) == nil { throw fail("\(change): no such survivor") }
            }
        }
        for event in restored.events {
            guard let now = mirror[event.id], now.members == Set(event.reports) else {
                throw fail("the changes \(changes) do not give \(event); stored \(stored)")
            }
            if let preferred = now.preferred, preferred != event.preferredKey {
                throw fail("\(event.id) was stored preferring \(preferred), now \(event.preferredKey), but no update says so")
            }
        }
        if mirror.count != restored.eventCount { throw fail("the changes \(changes) leave stored events the restore has not") }
        if restored.snapshot.tombstones != snapshot.tombstones { throw fail("the tombstones changed") }
        let again = Associator.restore(restored.snapshot, configuration: configuration).changes
        if !again.isEmpty { throw fail("restoring the restored state changed \(again)") }
    }

    /// Drops steps while the schedule still fails: the smallest schedule that shows the failure.
    static func shrink(_ schedule: Schedule) -> (Schedule, ScheduleFailure) {
        func failure(_ candidate: Schedule) -> ScheduleFailure? {
            var stats = ScheduleStats()
            do {
                try play(candidate, stats: &stats)
                return nil
            } catch let failure as ScheduleFailure {
                return failure
            } catch {
                return ScheduleFailure(step: -1, message: "\(error)")
            }
        }
        var smallest = schedule
        var last = failure(schedule) ?? ScheduleFailure(step: -1, message: "does not fail again")
        var chunk = max(1, smallest.steps.count / 2)
        while chunk >= 1 {
            var removed = false
            var start = 0
            while start < smallest.steps.count {
                var candidate = smallest
                candidate.steps.removeSubrange(start..<min(start + chunk, candidate.steps.count))
                if let failed = failure(candidate) {
                    smallest = candidate
                    last = failed
                    removed = true
                } else {
                    start += chunk
                }
            }
            if !removed { chunk /= 2 }
        }
        // Then drop the configuration's preferences, when the failure does not need them.
        var plain = smallest
        plain.configuration = AssociationConfiguration()
        if let failed = failure(plain) { return (plain, failed) }
        return (smallest, last)
    }

    @Test("random schedules: a partition by the rules, a fixpoint, the same as from scratch and in any order, stable ids, tombstones, restore and rollback")
    func randomSchedules() throws {
        let environment = ProcessInfo.processInfo.environment
        let seed = environment["QUAKED_ASSOCIATION_SEED"].flatMap { UInt64($0) } ?? 20_261_127
        let cases = environment["QUAKED_ASSOCIATION_CASES"].flatMap { Int($0) } ?? 300
        let first = environment["QUAKED_ASSOCIATION_FIRST"].flatMap { Int($0) } ?? 0
        var stats = ScheduleStats()
        for index in first..<(first + cases) {
            var random = SeededRandom(seed: SeededRandom.caseSeed(seed, index))
            // Every fifteenth case is large: many quakes, so components of many reports.
            let schedule = Self.generate(&random, large: index % 15 == 14)
            do {
                try Self.play(schedule, stats: &stats)
            } catch {
                let (smallest, failure) = Self.shrink(schedule)
                Issue.record(
                    """
                    association schedules: seed \(seed), case \(index) (QUAKED_ASSOCIATION_SEED=\(seed) QUAKED_ASSOCIATION_FIRST=\(index) QUAKED_ASSOCIATION_CASES=1): \(error)
                    shrunk to \(smallest.steps.count) of \(schedule.steps.count) steps, failing \(failure):
                    \(smallest)
                    """)
                return
            }
        }
        print(
            "association schedules: seed \(seed): \(cases) cases from \(first), \(stats.steps) steps, up to \(stats.reports) reports and \(stats.maxEvents) events, \(stats.multiSourceEvents) multi-source event checks, \(stats.merges) merges, \(stats.splits) splits, \(stats.retractions) retractions, \(stats.idLinkedSameSource) id-linked same-source pairs, \(stats.sameSourceNeighbours) same-source neighbours kept apart; \(stats.ignored) items ignored, \(stats.tombstoneHits) copies kept out by a tombstone, \(stats.undeleted) undeleted; new events named by their report's id \(stats.plainIDs), by source:id \(stats.keyIDs); \(stats.restoreRegroups) scrambled snapshots restored"
        )
        #expect(stats.merges > cases / 10, "the generator hardly merged")
        #expect(stats.splits > cases / 10, "the generator hardly split")
        #expect(stats.tombstoneHits > cases / 10, "hardly a stale copy after a retraction")
        #expect(stats.undeleted > cases / 20, "hardly an undeleted report")
        #expect(stats.keyIDs > 0, "no new event found its report's id taken")
    }
}
