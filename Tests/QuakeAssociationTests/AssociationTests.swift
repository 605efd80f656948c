import QuakeAssociation
import QuakeModel
import Testing

/// A report for the tests: time in seconds from a fixed origin, position in degrees.
func report(
    _ source: String, _ id: String, t: Double, lat: Double = 35, lon: Double = 139, mag: Double? = 4,
    agency: String? = nil, reviewed: Bool = false, updated: Int64? = nil, links: [String] = []
) -> SourceReport {
    SourceReport(
        source: source, id: id, agency: agency, time: base + Int64((t * 1000).rounded()), latitude: lat, longitude: lon,
        depth: 10, magnitude: mag, magnitudeType: "ml", place: "\(source) place", eventType: "earthquake",
        evaluationMode: reviewed ? .manual : .automatic, evaluationStatus: reviewed ? .reviewed : .preliminary,
        updated: updated, links: links)
}

let base: Int64 = 1_767_225_600_000  // 2026-01-01 00:00 UTC

/// Kilometres north as degrees of latitude.
func north(_ km: Double) -> Double { km / 111.194_926_6 }

extension Associator {
    /// The grouping, as sorted lists of keys.
    var grouping: [[String]] { events.map { $0.reports.map(\.description) }.sorted { $0.lexicographicallyPrecedes($1) } }

    mutating func add(_ reports: SourceReport...) -> [EventChange] { apply(reports.map(SourceItem.report)) }
}

@Suite("association examples")
struct AssociationExampleTests {
    @Test("two agencies, one quake 3 s and 20 km apart: one event, in either order")
    func oneQuakeTwoAgencies() {
        let a = report("usgs", "us1", t: 0)
        let b = report("emsc", "em1", t: 3, lat: 35 + north(20))
        for order in [[a, b], [b, a]] {
            var associator = Associator()
            for r in order { _ = associator.apply(.report(r)) }
            #expect(associator.grouping == [["emsc:em1", "usgs:us1"]])
        }
        #expect(abs(Association.distanceKm(35, 139, 35 + north(20), 139) - 20) < 1e-6)
    }

    @Test("20 s apart: two events; 120 km apart: two events; the windows are inclusive")
    func outsideTheWindows() {
        var associator = Associator()
        _ = associator.add(report("usgs", "us1", t: 0), report("emsc", "em1", t: 20))
        #expect(associator.eventCount == 2)
        associator = Associator()
        _ = associator.add(report("usgs", "us1", t: 0), report("emsc", "em1", t: 1, lat: 35 + north(120)))
        #expect(associator.eventCount == 2)
        associator = Associator()
        _ = associator.add(report("usgs", "us1", t: 0), report("emsc", "em1", t: 16, lat: 35 + north(99.9)))
        #expect(associator.eventCount == 1)
    }

    @Test("one source twice, close by: two events")
    func sameSourceTwice() {
        var associator = Associator()
        _ = associator.add(report("usgs", "us1", t: 0), report("usgs", "us2", t: 2))
        #expect(associator.grouping == [["usgs:us1"], ["usgs:us2"]])
    }

    @Test("a USGS ids link joins two reports of one source, far apart; and a link to another source's id")
    func idLinks() {
        var associator = Associator()
        _ = associator.add(report("usgs", "us1", t: 0), report("usgs", "ci9", t: 100, lat: 40, links: ["us1"]))
        #expect(associator.grouping == [["usgs:ci9", "usgs:us1"]])
        // The same id from two sources (the summary feed and the FDSN service) is a link too.
        _ = associator.add(report("fdsn", "us1", t: 300))
        #expect(associator.grouping == [["fdsn:us1", "usgs:ci9", "usgs:us1"]])
        // A link naming another agency's id.
        var other = Associator()
        _ = other.add(report("emsc", "em7", t: 0, lat: 10), report("usgs", "us7", t: 500, lat: 20, links: ["em7"]))
        #expect(other.grouping == [["emsc:em7", "usgs:us7"]])
        // An empty id in a links list (a USGS ids string split carelessly) links nothing.
        var empty = Associator()
        _ = empty.add(report("a", "", t: 0), report("b", "b1", t: 500, links: [""]), report("c", "c1", t: 900, links: ["", "b1"]))
        #expect(empty.grouping == [["a:"], ["b:b1", "c:c1"]])
        // Retracting the linking report splits them again.
        let changes = other.apply(.retraction(source: "usgs", id: "us7", updated: nil))
        #expect(other.grouping == [["emsc:em7"]])
        #expect(changes.count == 1)
    }

    @Test("an aftershock sequence does not chain into one event (complete linkage)")
    func noChaining() {
        // Shocks 12 s and 60 km apart, alternately reported by two agencies: each within the
        // windows of the next, the first and the third not (24 s).
        var associator = Associator()
        _ = associator.add(
            report("a", "a1", t: 0), report("b", "b1", t: 12, lat: 35 + north(60)),
            report("a", "a2", t: 24, lat: 35 + north(120)), report("b", "b2", t: 36, lat: 35 + north(180)))
        #expect(associator.eventCount == 2)
        for event in associator.events { #expect(event.reports.count == 2) }
        // Single linkage would make one event of all four; each event's reports are within the windows.
        #expect(associator.grouping == [["a:a1", "b:b1"], ["a:a2", "b:b2"]])
        // Three agencies, a main shock and an aftershock 10 s later and 50 km away: the nearest wins.
        var sequence = Associator()
        _ = sequence.add(
            report("a", "main", t: 0), report("a", "after", t: 10, lat: 35 + north(50)),
            report("b", "b1", t: 2, lat: 35 + north(5)), report("c", "c1", t: 9, lat: 35 + north(45)))
        #expect(sequence.grouping == [["a:after", "c:c1"], ["a:main", "b:b1"]])
    }

    @Test("a revision that moves a report out splits its event, one that moves it back merges")
    func splitAndMerge() {
        var associator = Associator()
        var changes = associator.add(report("usgs", "us1", t: 0, updated: 1), report("emsc", "em1", t: 3, updated: 1))
        #expect(changes == [.created(associator.events[0])])
        #expect(associator.events.map(\.id) == ["em1"])  // no source order: the key breaks the tie... after updated
        let id = associator.events[0].id

        changes = associator.apply(.report(report("emsc", "em1", t: 60, updated: 2)))
        #expect(associator.grouping == [["emsc:em1"], ["usgs:us1"]])
        // The event keeps its id (it shares one report with each part; the smaller first key keeps it).
        #expect(changes.count == 2)
        #expect(changes.contains { if case .updated(let event) = $0 { event.id == id } else { false } })
        #expect(changes.contains { if case .created = $0 { true } else { false } })

        changes = associator.apply(.report(report("emsc", "em1", t: 2, updated: 3)))
        #expect(associator.grouping == [["emsc:em1", "usgs:us1"]])
        #expect(changes.count == 2)
        let survivor = associator.events[0].id
        let deleted = changes.compactMap { if case .deleted(let gone, let by) = $0 { (gone, by) } else { nil } }
        #expect(deleted.count == 1)
        #expect(deleted.first?.1 == survivor)
        #expect(deleted.first?.0 != survivor)
        #expect(changes.first == .updated(associator.events[0]))

        // A stale revision (older updated) is ignored; a retraction of one report updates the event.
        #expect(associator.apply(.report(report("emsc", "em1", t: 60, updated: 2))) == [])
        changes = associator.apply(.retraction(source: "emsc", id: "em1", updated: 4))
        #expect(associator.grouping == [["usgs:us1"]])
        #expect(changes == [.updated(associator.events[0])])
        changes = associator.apply(.retraction(source: "usgs", id: "us1", updated: nil))
        #expect(changes == [.deleted(survivor, supersededBy: nil)])
        #expect(associator.eventCount == 0)
    }

    @Test("a merge keeps the event created first and deletes the other as superseded")
    func mergeKeepsTheOlderEvent() {
        var associator = Associator()
        _ = associator.add(report("b", "b1", t: 0))
        _ = associator.add(report("a", "a1", t: 30))
        let (first, second) = ("b1", "a1")
        #expect(Set(associator.events.map(\.id)) == [first, second])
        // a:a1 is revised to 2 s: both join; each old event shares one report; b:b1 was created first.
        let changes = associator.apply(.report(report("a", "a1", t: 2, updated: 5)))
        #expect(associator.events.map(\.id) == [first])
        #expect(changes == [.updated(associator.events[0]), .deleted(second, supersededBy: first)])
    }

    @Test("preferred: reviewed beats automatic, then a regional authority, then source order, then updated, then the key")
    func preferredRules() {
        func preferred(_ configuration: AssociationConfiguration, _ reports: SourceReport...) -> String {
            var associator = Associator(configuration: configuration)
            _ = associator.apply(reports.map(SourceItem.report))
            #expect(associator.eventCount == 1)
            return associator.events[0].preferredKey.description
        }
        let ordered = AssociationConfiguration(sourceOrder: ["a", "b", "c"])
        // Source order.
        #expect(preferred(ordered, report("a", "1", t: 0), report("b", "2", t: 1), report("c", "3", t: 2)) == "a:1")
        // Reviewed beats the source order.
        #expect(
            preferred(ordered, report("a", "1", t: 0), report("b", "2", t: 1), report("c", "3", t: 2, reviewed: true))
                == "c:3")
        // A regional authority (by agency or by source name) beats the source order, inside its region only.
        let regional = AssociationConfiguration(
            sourceOrder: ["a", "b", "c"],
            regionalPreferences: [
                RegionalPreference(agencies: ["GFZ"], region: .circle(lat: 35, lon: 139, radiusKm: 50))
            ])
        #expect(
            preferred(regional, report("a", "1", t: 0), report("c", "3", t: 1, agency: "GFZ")) == "c:3")
        #expect(
            preferred(
                regional, report("a", "1", t: 0, lat: 36), report("c", "3", t: 1, lat: 36 + north(10), agency: "GFZ"))
                == "a:1")
        #expect(
            preferred(regional, report("a", "1", t: 0), report("c", "3", t: 1, agency: "GFZ", reviewed: true))
                == "c:3")
        #expect(
            preferred(regional, report("a", "1", t: 0, reviewed: true), report("c", "3", t: 1, agency: "GFZ"))
                == "a:1")
        // Then the most recently updated, then the key.
        let unordered = AssociationConfiguration()
        #expect(preferred(unordered, report("a", "1", t: 0, updated: 5), report("b", "2", t: 1, updated: 9)) == "b:2")
        #expect(preferred(unordered, report("a", "1", t: 0, updated: 9), report("b", "2", t: 1, updated: 5)) == "a:1")
        #expect(preferred(unordered, report("b", "1", t: 0), report("a", "2", t: 1)) == "a:2")
        // The preferred report gives the event's figures.
        var associator = Associator(configuration: ordered)
        _ = associator.add(report("b", "2", t: 1, mag: 5.2), report("a", "1", t: 0, mag: 4.9))
        #expect(associator.events[0].magnitude == 4.9)
        #expect(associator.events[0].time == base)
        #expect(associator.events[0].place == "a place")
    }

    @Test("regions: a circle, a box, a box across the antimeridian")
    func regions() {
        let circle = Region.circle(lat: 0, lon: 179.5, radiusKm: 120)
        #expect(circle.contains(latitude: 0, longitude: -179.5))  // 111 km across the antimeridian
        #expect(!circle.contains(latitude: 0, longitude: 178))
        let box = Region.box(minLat: -50, maxLat: -30, minLon: 165, maxLon: 180)
        #expect(box.contains(latitude: -41, longitude: 174))
        #expect(!box.contains(latitude: -41, longitude: -175))
        let across = Region.box(minLat: -50, maxLat: -30, minLon: 170, maxLon: -175)
        #expect(across.contains(latitude: -41, longitude: 175))
        #expect(across.contains(latitude: -41, longitude: -178))
        #expect(!across.contains(latitude: -41, longitude: 0))
        #expect(!across.contains(latitude: -29, longitude: 175))
    }

    @Test("quakes either side of the antimeridian associate")
    func acrossTheAntimeridian() {
        var associator = Associator()
        _ = associator.add(report("a", "1", t: 0, lat: -15, lon: 179.9), report("b", "2", t: 1, lat: -15, lon: -179.9))
        #expect(associator.eventCount == 1)
    }
}

@Suite("association details")
struct AssociationDetailTests {
    @Test("when several events qualify, the nearest by normalized distance wins, in any order")
    func nearestWins() {
        // a:1 and b:1 are 150 km apart (two events); c:1 is within the windows of both, nearer b:1.
        let a = report("a", "a1", t: 0, lat: 35)
        let b = report("b", "b1", t: 0, lat: 35 + north(150))
        let c = report("c", "c1", t: 1, lat: 35 + north(90))
        for order in [[a, b, c], [c, a, b], [b, c, a]] {
            var associator = Associator()
            for r in order { _ = associator.apply(.report(r)) }
            #expect(associator.grouping == [["a:a1"], ["b:b1", "c:c1"]])
        }
        // Time counts too: x is 12 s and 20 km from a (0.78), 5 s and 70 km from b (0.77), and a and
        // b are 17 s apart: x joins b, the farther in kilometres.
        let x = report("x", "x1", t: 12, lat: 35 + north(20))
        let y = report("y", "y1", t: 17, lat: 35 + north(90))
        for order in [[a, x, y], [y, x, a], [x, a, y]] {
            var associator = Associator()
            for r in order { _ = associator.apply(.report(r)) }
            #expect(associator.grouping == [["a:a1"], ["x:x1", "y:y1"]])
        }
    }

    @Test("a split in equal parts keeps the id with the report it is named after; a new event takes its report's id, else source:id, else #2")
    func idsOnSplits() {
        var associator = Associator()
        // Another quake whose agency's id is "b:b1", as a report's key would be written.
        _ = associator.add(report("x", "b:b1", t: 500))
        _ = associator.add(report("a", "a1", t: 0, updated: 1))
        _ = associator.add(report("b", "b1", t: 1, updated: 1))
        #expect(associator.events.map(\.id) == ["a1", "b:b1"])
        // a:a1 moves away: the old event shares one report with each part; the part holding
        // the report it is named after, {a:a1}, keeps the id, {b:b1} is new.
        var changes = associator.apply(.report(report("a", "a1", t: 100, updated: 2)))
        #expect(associator.event(containing: ReportKey(source: "a", id: "a1"))?.id == "a1")
        #expect(associator.event(containing: ReportKey(source: "b", id: "b1"))?.id == "b1")
        #expect(changes.map(\.description) == ["updated a1 [a:a1] preferred a:a1", "created b1 [b:b1] preferred b:b1"])
        // Retracted and back next to b:b1: it joins b:b1, which keeps its id though a:a1 is now
        // preferred (more recently updated).
        changes = associator.apply(.retraction(source: "a", id: "a1", updated: 3))
        #expect(changes == [.deleted("a1", supersededBy: nil)])
        changes = associator.apply(.report(report("a", "a1", t: 0, updated: 4)))
        #expect(associator.events.map(\.id) == ["b1", "b:b1"])
        #expect(changes == [.updated(associator.event(id: "b1")!)])
        #expect(associator.event(id: "b1")?.preferredKey.description == "a:a1")
        // Now b:b1 leaves: the id b1 goes with b's report, though {a:a1} has the smaller first
        // key, and {a:a1} takes its report's id a1 again (free since the retraction).
        changes = associator.apply(.report(report("b", "b1", t: 100, updated: 5)))
        #expect(associator.event(containing: ReportKey(source: "a", id: "a1"))?.id == "a1")
        #expect(associator.event(containing: ReportKey(source: "b", id: "b1"))?.id == "b1")
        #expect(changes.map(\.eventID) == ["a1", "b1"])
        // c and d join b1; then b:b1 leaves again: the two reports of c and d are the larger
        // part and keep b1, and b's report takes a new event: its id b1 is taken, its key b:b1
        // names x's event, so b:b1#2.
        changes = associator.add(report("c", "c1", t: 101), report("d", "d1", t: 102))
        #expect(changes.map(\.eventID) == ["b1"])
        changes = associator.apply(.report(report("b", "b1", t: 300, updated: 6)))
        #expect(associator.event(id: "b1")?.reports.map(\.description) == ["c:c1", "d:d1"])
        #expect(associator.event(containing: ReportKey(source: "b", id: "b1"))?.id == "b:b1#2")
        #expect(changes.map(\.eventID) == ["b1", "b:b1#2"])
    }

    @Test("one source: every event's id is its report's id; the same id from another source is a link")
    func oneSourceIDs() {
        var associator = Associator()
        let ids = ["us7000abcd", "us7000abce", "ci40000001", "20250305_0000090"]
        let changes = associator.apply(ids.enumerated().map { .report(report("usgs", $1, t: Double($0) * 2)) })
        #expect(changes.map(\.eventID) == ids.sorted())
        #expect(associator.events.map(\.id) == ids.sorted())
        for event in associator.events { #expect(event.reports == [ReportKey(source: "usgs", id: event.id)]) }
        // The FDSN service's copy of one of them joins it by the id link; the id stays.
        #expect(associator.apply(.report(report("fdsn", "us7000abcd", t: 0.5))).map(\.eventID) == ["us7000abcd"])
        #expect(associator.event(id: "us7000abcd")?.reports.count == 2)
    }

    @Test("another source's report with a live event's id, after that id's report left: source:id; an empty id: source:")
    func takenIDs() {
        var associator = Associator(configuration: AssociationConfiguration(sourceOrder: ["usgs", "emsc"]))
        _ = associator.add(report("usgs", "123", t: 0), report("emsc", "e1", t: 1))
        #expect(associator.events.map(\.id) == ["123"])
        // usgs:123 is retracted; the event lives on with emsc:e1 and keeps "123".
        #expect(associator.apply(.retraction(source: "usgs", id: "123", updated: nil)).map(\.eventID) == ["123"])
        // Another agency's "123", another quake: "123" is live, so "geonet:123".
        let changes = associator.add(report("geonet", "123", t: 300, lat: 0))
        #expect(changes.map(\.eventID) == ["geonet:123"])
        // An empty id is no event id: the key "x:".
        _ = associator.add(report("x", "", t: 900, lat: -20))
        #expect(associator.event(containing: ReportKey(source: "x", id: ""))?.id == "x:")
        // With "123" deleted, usgs's 123 comes back: the same id as geonet:123 is an id link, so
        // it joins that event.
        _ = associator.apply(.retraction(source: "emsc", id: "e1", updated: nil))
        #expect(associator.event(id: "123") == nil)
        _ = associator.add(report("usgs", "123", t: 5000, lat: 10))
        #expect(associator.event(containing: ReportKey(source: "usgs", id: "123"))?.id == "geonet:123")
        // A deleted event's id is free again: a new event founded by a report "123" takes it.
        _ = associator.apply(.retraction(source: "usgs", id: "123", updated: nil))
        _ = associator.apply(.retraction(source: "geonet", id: "123", updated: nil))
        _ = associator.add(report("emsc", "123", t: 7000, lat: 10))
        #expect(associator.event(containing: ReportKey(source: "emsc", id: "123"))?.id == "123")
    }

    @Test("a batch gives its net changes; a change recomputes only its neighbourhood")
    func batchesAndNeighbourhoods() {
        var associator = Associator()
        // 1,000 quakes a minute apart, each from two agencies.
        var items: [SourceItem] = []
        for i in 0..<1000 {
            items.append(.report(report("a", "a\(i)", t: Double(i * 60))))
            items.append(.report(report("b", "b\(i)", t: Double(i * 60 + 2), lat: 35 + north(10))))
        }
        let changes = associator.apply(items)
        #expect(changes.count == 1000)
        #expect(changes.allSatisfy { if case .created(let event) = $0 { event.reports.count == 2 } else { false } })
        #expect(associator.lastRegroupedCount == 2000)
        // A third agency's report of quake 500: only that quake's reports are regrouped.
        let third = associator.apply(.report(report("c", "c500", t: 30_001)))
        #expect(associator.lastRegroupedCount == 3)
        #expect(third.count == 1)
        // Moved onto quake 700: the old and the new neighbourhood.
        _ = associator.apply(.report(report("c", "c500", t: 42_001, updated: 9)))
        #expect(associator.lastRegroupedCount == 5)
        #expect(associator.event(containing: ReportKey(source: "c", id: "c500"))?.reports.count == 3)
        #expect(associator.event(containing: ReportKey(source: "a", id: "a500"))?.reports.count == 2)
        // The same report again changes nothing.
        #expect(associator.apply(.report(report("c", "c500", t: 42_001, updated: 9))) == [])
        #expect(associator.eventCount == 1000)
        #expect(associator.reportCount == 2001)
    }
}
