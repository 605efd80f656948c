import QuakeAssociation
import QuakeModel
import Testing

@Suite("association state: tombstones, snapshot and restore, rollback")
struct AssociationStateTests {
    let us1 = ReportKey(source: "usgs", id: "us1")

    @Test("a retraction is remembered: an older copy stays out, a newer one comes back")
    func tombstones() {
        var associator = Associator()
        _ = associator.add(report("usgs", "us1", t: 0, updated: 10), report("emsc", "em1", t: 1, updated: 10))
        #expect(associator.apply(.retraction(source: "usgs", id: "us1", updated: 20)).count == 1)
        #expect(associator.tombstone(us1) == 20)
        #expect(associator.report(us1) == nil)
        // The old copy again (a slow mirror), and a copy as old as the retraction: nothing.
        let before = associator.snapshot
        #expect(associator.apply(.report(report("usgs", "us1", t: 0, updated: 10))) == [])
        #expect(associator.apply(.report(report("usgs", "us1", t: 0, updated: 20))) == [])
        #expect(associator.snapshot == before)
        // An older retraction does not move the tombstone back.
        #expect(associator.apply(.retraction(source: "usgs", id: "us1", updated: 15)) == [])
        #expect(associator.tombstone(us1) == 20)
        // Undeleted: a newer report comes back and clears the tombstone.
        let changes = associator.apply(.report(report("usgs", "us1", t: 0, updated: 21)))
        #expect(changes.count == 1)
        #expect(associator.grouping == [["emsc:em1", "usgs:us1"]])
        #expect(associator.tombstone(us1) == nil)
        #expect(associator.tombstoneCount == 0)
        // A retraction of a key never seen is remembered too; one without updated is not.
        _ = associator.apply(.retraction(source: "gfz", id: "g1", updated: 30))
        _ = associator.apply(.retraction(source: "gfz", id: "g2", updated: nil))
        #expect(associator.apply(.report(report("gfz", "g1", t: 2, updated: 29))) == [])
        #expect(associator.tombstoneCount == 1)
        // A report without updated cannot be told stale: it comes back.
        _ = associator.apply(.retraction(source: "usgs", id: "us1", updated: 40))
        #expect(associator.apply(.report(report("usgs", "us1", t: 0))).count == 1)
        #expect(associator.report(us1) != nil)
    }

    @Test("in one batch: a report, its retraction and its stale copy leave nothing but the tombstone")
    func tombstonesInABatch() {
        var associator = Associator()
        let changes = associator.apply([
            .report(report("usgs", "us1", t: 0, updated: 1)), .retraction(source: "usgs", id: "us1", updated: 2),
            .report(report("usgs", "us1", t: 0, updated: 1)),
        ])
        #expect(changes == [])
        #expect(associator.eventCount == 0)
        #expect(associator.tombstone(us1) == 2)
    }

    @Test("purgeTombstones forgets those older than the cut-off; a copy is then taken again")
    func purge() {
        var associator = Associator()
        for (i, updated) in [100, 200, 300].enumerated() {
            _ = associator.apply(.retraction(source: "usgs", id: "us\(i + 1)", updated: Int64(updated)))
        }
        #expect(associator.tombstoneCount == 3)
        #expect(associator.purgeTombstones(olderThan: 200) == 1)
        #expect(associator.tombstoneCount == 2)
        #expect(associator.tombstone(us1) == nil)
        #expect(associator.apply(.report(report("usgs", "us1", t: 0, updated: 50))).count == 1)
        #expect(associator.apply(.report(report("usgs", "us2", t: 100, updated: 150))) == [])
        #expect(associator.snapshot.tombstones.map(\.updated) == [200, 300])
    }

    @Test("restore from a snapshot adopts the ids, emits nothing and behaves the same afterwards")
    func restoreSame() {
        let configuration = AssociationConfiguration(sourceOrder: ["usgs", "emsc"])
        var original = Associator(configuration: configuration)
        _ = original.add(
            report("usgs", "us1", t: 0, updated: 1), report("emsc", "em1", t: 2, updated: 1),
            report("emsc", "em2", t: 60, updated: 1), report("usgs", "us3", t: 200, updated: 1))
        // us1 moves to em2: the id us1 goes with its report (the part holding the report it is
        // named after), so em2 is superseded by us1 and em1 is left in a new event, em1.
        _ = original.apply(.report(report("usgs", "us1", t: 61, updated: 2)))
        #expect(original.events.map(\.description) == ["em1 [emsc:em1] preferred emsc:em1", "us1 [emsc:em2 usgs:us1] preferred usgs:us1", "us3 [usgs:us3] preferred usgs:us3"])
        _ = original.apply(.retraction(source: "usgs", id: "us3", updated: 5))
        let snapshot = original.snapshot
        #expect(snapshot.tombstones == [.init(key: ReportKey(source: "usgs", id: "us3"), updated: 5)])
        // em1's event was created fourth, after us3, which is gone: the last number given is
        // kept whatever event had it.
        #expect(snapshot.lastCreated == 4)
        #expect(snapshot.events.map(\.created) == [4, 1])
        var (restored, changes) = Associator.restore(snapshot, configuration: configuration)
        #expect(changes == [])
        #expect(restored.snapshot == snapshot)
        #expect(restored.events == original.events)
        for item: SourceItem in [
            .report(report("usgs", "us1", t: 1, updated: 3)), .report(report("usgs", "us3", t: 200, updated: 4)),
            .report(report("gfz", "g1", t: 62, updated: 1)), .retraction(source: "emsc", id: "em1", updated: 9),
        ] {
            #expect(restored.apply(item) == original.apply(item))
            #expect(restored.snapshot == original.snapshot)
        }
        // An empty snapshot.
        let (empty, none) = Associator.restore(AssociationSnapshot(reports: [], events: []), configuration: configuration)
        #expect(none == [] && empty.eventCount == 0)
    }

    @Test("restore from a store of another rule version regroups and returns the changes")
    func restoreRegroups() {
        // Written when each report was its own event (one source, or no association yet).
        let reports = [
            report("usgs", "us1", t: 0), report("emsc", "em1", t: 2), report("gfz", "g1", t: 3),
            report("usgs", "us2", t: 300),
        ]
        let stored = reports.enumerated().map {
            AssociationSnapshot.StoredEvent(id: $1.id, members: [ReportKey($1)], created: UInt64($0 + 1))
        }
        let configuration = AssociationConfiguration(sourceOrder: ["usgs", "emsc", "gfz"])
        let (restored, changes) = Associator.restore(
            AssociationSnapshot(reports: reports, events: stored), configuration: configuration)
        #expect(restored.grouping == [["emsc:em1", "gfz:g1", "usgs:us1"], ["usgs:us2"]])
        // us1 (created first) keeps its id and takes the others; they are superseded by it.
        #expect(restored.events.map(\.id) == ["us1", "us2"])
        #expect(
            changes == [
                .updated(restored.event(id: "us1")!), .deleted("em1", supersededBy: "us1"),
                .deleted("g1", supersededBy: "us1"),
            ])
        // Restoring what it made again changes nothing.
        #expect(Associator.restore(restored.snapshot, configuration: configuration).changes == [])

        // Other windows: the stored three-agency event splits; the created one takes its id.
        let narrow = AssociationConfiguration(associateTimeMilliseconds: 2500, sourceOrder: ["usgs", "emsc", "gfz"])
        let (split, splitChanges) = Associator.restore(restored.snapshot, configuration: narrow)
        // em1 and g1 are nearest and pair first; us1 is 3 s from g1, outside: it leaves. The event
        // us1 keeps its id with the larger part; the part that leaves would be "us1", which is
        // live: "usgs:us1".
        #expect(split.grouping == [["emsc:em1", "gfz:g1"], ["usgs:us1"], ["usgs:us2"]])
        #expect(
            splitChanges.map(\.description) == [
                "updated us1 [emsc:em1 gfz:g1] preferred emsc:em1", "created usgs:us1 [usgs:us1] preferred usgs:us1",
            ])

        // Another source order: the same groups, the preferred report changes.
        let reordered = AssociationConfiguration(sourceOrder: ["gfz"])
        let (preferred, preferredChanges) = Associator.restore(restored.snapshot, configuration: reordered)
        #expect(preferred.events.map(\.id) == ["us1", "us2"])
        #expect(preferredChanges == [.updated(preferred.event(id: "us1")!)])
        #expect(preferred.event(id: "us1")?.preferredKey == ReportKey(source: "gfz", id: "g1"))
    }

    @Test("restore repairs: unknown members, a report claimed twice, a report in no event, an empty event")
    func restoreRepairs() {
        let a = report("usgs", "us1", t: 0)
        let b = report("emsc", "em1", t: 1)
        let c = report("usgs", "us2", t: 500)
        let d = report("usgs", "us3", t: 900)
        let snapshot = AssociationSnapshot(
            reports: [a, b, c, d],
            events: [
                .init(id: "E1", members: [ReportKey(a), ReportKey(source: "x", id: "gone")], created: 1),
                .init(id: "E2", members: [ReportKey(a), ReportKey(b)], created: 2),
                .init(id: "E3", members: [ReportKey(source: "x", id: "gone")], created: 3),
                .init(id: "us2", members: [], created: 4),
            ],
            tombstones: [.init(key: ReportKey(c), updated: 7), .init(key: ReportKey(source: "x", id: "gone"), updated: 7)])
        let (restored, changes) = Associator.restore(snapshot, configuration: AssociationConfiguration())
        // E1 keeps a:us1 and gains em1 (E2's other member); E2 is superseded by E1; E3 and the
        // empty us2 have no reports left; us2 and us3, in no event, are new events — us2's own
        // id is a stored event's being deleted, so it takes its key.
        #expect(restored.grouping == [["emsc:em1", "usgs:us1"], ["usgs:us2"], ["usgs:us3"]])
        #expect(restored.events.map(\.id) == ["E1", "us3", "usgs:us2"])
        #expect(
            changes.map(\.description) == [
                "updated E1 [emsc:em1 usgs:us1] preferred emsc:em1", "created us3 [usgs:us3] preferred usgs:us3",
                "created usgs:us2 [usgs:us2] preferred usgs:us2", "deleted E2 superseded by E1", "deleted E3",
                "deleted us2",
            ])
        #expect(restored.snapshot.tombstones == [.init(key: ReportKey(source: "x", id: "gone"), updated: 7)])
    }

    @Test("rollback: a batch applied to a copy leaves the original as it was")
    func rollback() {
        var associator = Associator(configuration: AssociationConfiguration(sourceOrder: ["usgs"]))
        _ = associator.add(report("usgs", "us1", t: 0, updated: 1), report("emsc", "em1", t: 1, updated: 1))
        _ = associator.apply(.retraction(source: "gfz", id: "g0", updated: 3))
        let before = associator.snapshot
        let twin = associator
        // The store's transaction: apply to the live value, keep the old one until commit.
        let saved = associator
        let changes = associator.apply([
            .report(report("gfz", "g1", t: 2, updated: 2)), .retraction(source: "emsc", id: "em1", updated: 4),
            .report(report("usgs", "us2", t: 100, updated: 1)), .report(report("gfz", "g0", t: 100, updated: 5)),
        ])
        #expect(changes.map(\.description) == ["updated us1 [gfz:g1 usgs:us1] preferred usgs:us1", "created us2 [gfz:g0 usgs:us2] preferred usgs:us2"])
        #expect(associator.snapshot != before)
        #expect(saved.snapshot == before)
        // The transaction failed: roll back; the original behaves as one that never saw the batch.
        associator = saved
        #expect(associator.snapshot == before)
        var reference = twin
        let next: [SourceItem] = [.report(report("emsc", "em2", t: 100, updated: 1)), .report(report("gfz", "g1", t: 1))]
        #expect(associator.apply(next) == reference.apply(next))
        #expect(associator.snapshot == reference.snapshot)
        #expect(associator.events.map(\.created) == reference.events.map(\.created))
    }
}
