import Foundation
import QuakeAssociation
import QuakeFeed
import QuakeModel
import Testing

/// `prefer = AGENCY[,AGENCY...] region=...` at the Associator: a polygon region (a GeoJSON file's,
/// as quaked.conf gives it) ranks its agencies as declared, with the filters' point-in-polygon
/// rule, and below reviewed beats automatic.
@Suite("regional preferences")
struct RegionalPreferenceTests {
    /// A rough outline of mainland Italy and Sicily as one ring, with a hole east of Rome, in
    /// GeoJSON's [longitude, latitude]. Its outer ring's bounding box holds Corsica
    /// (42.2, 9.0), which is outside the ring.
    static let italy = """
        {"type":"Feature","properties":{"name":"Italy, roughly"},"geometry":{"type":"Polygon","coordinates":[
          [[7.0,44.0],[7.0,46.5],[13.5,46.5],[13.5,45.5],[12.5,44.0],[16.0,41.5],[18.5,40.5],[18.5,39.5],
           [15.5,38.0],[15.5,36.5],[12.0,37.5],[12.5,38.5],[15.5,40.0],[12.0,41.5],[10.0,43.5],[7.0,44.0]],
          [[12.5,42.0],[13.0,42.0],[13.0,42.3],[12.5,42.3],[12.5,42.0]]
        ]}}
        """

    static func polygon() throws -> PolygonRegion {
        let region = try GeoJSONRegion.parse(Data(italy.utf8))
        try region.validate()
        return region
    }

    /// The preferred report's key when EMSC's and INGV's reports of one quake at `lat`, `lon`
    /// (INGV's 3 s later and 5 km north) meet under `configuration`.
    func preferred(
        _ configuration: AssociationConfiguration, lat: Double, lon: Double, emscReviewed: Bool = false,
        ingvAgency: String? = "INGV"
    ) -> String {
        var associator = Associator(configuration: configuration)
        _ = associator.add(
            report("emsc", "20260101_0000001", t: 0, lat: lat, lon: lon, agency: "EMSC", reviewed: emscReviewed),
            report("ingv", "44012345", t: 3, lat: lat + north(5), lon: lon, agency: ingvAgency))
        #expect(associator.eventCount == 1, "one quake")
        return associator.events.first?.preferredKey.description ?? "none"
    }

    @Test("the polygon holds what a filter's polygon holds: inside, on an edge and a vertex, not in a hole, not outside")
    func polygonContains() throws {
        let polygons = try Self.polygon()
        let region = Region.polygon(polygons)
        let points: [(lat: Double, lon: Double, inside: Bool)] = [
            (42.35, 13.4, true),  // L'Aquila
            (37.6, 14.0, true),  // Sicily
            (46.5, 10.0, true),  // on the northern edge
            (44.0, 7.0, true),  // a vertex
            (42.15, 12.75, false),  // in the hole
            (42.0, 12.75, true),  // on the hole's edge: the hole excludes only its inside
            (42.2, 9.0, false),  // Corsica: in the bounding box, outside the ring
            (38.0, 23.7, false),  // Athens
        ]
        for point in points {
            #expect(region.contains(latitude: point.lat, longitude: point.lon) == point.inside, "\(point)")
            #expect(
                region.contains(latitude: point.lat, longitude: point.lon)
                    == polygons.contains(lat: point.lat, lon: point.lon), "the filters' rule at \(point)")
        }
    }

    @Test("in the polygon the declared agency is preferred to an earlier source; outside it, the source order holds")
    func polygonRanksAsDeclared() throws {
        let polygon = Region.polygon(try Self.polygon())
        let plain = AssociationConfiguration(sourceOrder: ["emsc", "ingv"])
        #expect(preferred(plain, lat: 42.35, lon: 13.4) == "emsc:20260101_0000001", "the source order without prefer")

        let italy = AssociationConfiguration(
            sourceOrder: ["emsc", "ingv"], regionalPreferences: [RegionalPreference(agencies: ["INGV"], region: polygon)])
        #expect(preferred(italy, lat: 42.35, lon: 13.4) == "ingv:44012345", "in the polygon")
        #expect(preferred(italy, lat: 37.6, lon: 14.0) == "ingv:44012345", "in Sicily")
        #expect(preferred(italy, lat: 42.15, lon: 12.75) == "emsc:20260101_0000001", "INGV's report in the hole")
        #expect(preferred(italy, lat: 42.2, lon: 9.0) == "emsc:20260101_0000001", "in Corsica, outside the ring")
        #expect(preferred(italy, lat: 38.0, lon: 23.7) == "emsc:20260101_0000001", "in Greece")
        // Only INGV's own epicentre is looked at: on the edge it is in.
        #expect(preferred(italy, lat: 46.5 - north(5), lon: 10.0) == "ingv:44012345", "INGV's report on the edge")
        // Reviewed or manual still beats automatic, in the region too.
        #expect(preferred(italy, lat: 42.35, lon: 13.4, emscReviewed: true) == "emsc:20260101_0000001")
        // The agency matches the report's agency or its source's name, case ignored.
        for agencies in [["ingv"], ["Ingv"], ["INGV"]] {
            let configuration = AssociationConfiguration(
                sourceOrder: ["emsc", "ingv"], regionalPreferences: [RegionalPreference(agencies: agencies, region: polygon)])
            #expect(preferred(configuration, lat: 42.35, lon: 13.4, ingvAgency: nil) == "ingv:44012345", "\(agencies) by source")
            #expect(preferred(configuration, lat: 42.35, lon: 13.4) == "ingv:44012345", "\(agencies) by agency")
        }
        // A name that is neither the agency nor the source matches nothing.
        let other = AssociationConfiguration(
            sourceOrder: ["emsc", "ingv"], regionalPreferences: [RegionalPreference(agencies: ["INGVX"], region: polygon)])
        #expect(preferred(other, lat: 42.35, lon: 13.4) == "emsc:20260101_0000001")
    }

    @Test("declarations rank in order: an earlier line first, and within a line an earlier agency first")
    func declarationOrder() throws {
        let polygon = Region.polygon(try Self.polygon())
        let box = Region.box(minLat: 35, maxLat: 48, minLon: 6, maxLon: 19)
        func configuration(_ preferences: [RegionalPreference]) -> AssociationConfiguration {
            AssociationConfiguration(sourceOrder: ["ingv", "emsc"], regionalPreferences: preferences)
        }
        // Within one line: EMSC before INGV, whatever the source order.
        #expect(
            preferred(configuration([RegionalPreference(agencies: ["EMSC", "INGV"], region: polygon)]), lat: 42.35, lon: 13.4)
                == "emsc:20260101_0000001")
        #expect(
            preferred(configuration([RegionalPreference(agencies: ["INGV", "EMSC"], region: polygon)]), lat: 42.35, lon: 13.4)
                == "ingv:44012345")
        // Two lines: the earlier one first, whether a box or the polygon.
        let emscThenIngv = configuration([
            RegionalPreference(agencies: ["EMSC"], region: box), RegionalPreference(agencies: ["INGV"], region: polygon),
        ])
        #expect(preferred(emscThenIngv, lat: 42.35, lon: 13.4) == "emsc:20260101_0000001")
        let ingvThenEmsc = AssociationConfiguration(
            sourceOrder: ["emsc", "ingv"],
            regionalPreferences: [
                RegionalPreference(agencies: ["INGV"], region: polygon), RegionalPreference(agencies: ["EMSC"], region: box),
            ])
        #expect(preferred(ingvThenEmsc, lat: 42.35, lon: 13.4) == "ingv:44012345")
        // Where the earlier line's region does not reach (Corsica: in the box, outside the
        // polygon), the later line decides.
        #expect(preferred(ingvThenEmsc, lat: 42.2, lon: 9.0) == "emsc:20260101_0000001")
        let ingvPolygonThenIngvBox = configuration([
            RegionalPreference(agencies: ["EMSC"], region: polygon), RegionalPreference(agencies: ["INGV"], region: box),
        ])
        #expect(preferred(ingvPolygonThenIngvBox, lat: 42.2, lon: 9.0) == "ingv:44012345")
    }

    @Test("a changed preference regroups nothing but re-prefers on restore, reporting the event updated")
    func restoreUnderAnotherPreference() throws {
        let polygon = Region.polygon(try Self.polygon())
        let plain = AssociationConfiguration(sourceOrder: ["emsc", "ingv"])
        var associator = Associator(configuration: plain)
        _ = associator.add(
            report("emsc", "20260101_0000001", t: 0, lat: 42.35, lon: 13.4, agency: "EMSC"),
            report("ingv", "44012345", t: 3, lat: 42.35 + north(5), lon: 13.4, agency: "INGV"))
        let id = try #require(associator.events.first?.id)
        #expect(associator.events.first?.preferredKey.description == "emsc:20260101_0000001")

        let italy = AssociationConfiguration(
            sourceOrder: ["emsc", "ingv"], regionalPreferences: [RegionalPreference(agencies: ["INGV"], region: polygon)])
        let restored = Associator.restore(associator.snapshot, configuration: italy)
        #expect(restored.associator.events.map(\.id) == [id], "the event keeps its id")
        #expect(restored.associator.events.first?.preferredKey.description == "ingv:44012345")
        #expect(restored.changes.map(\.eventID) == [id])
        #expect(restored.changes.allSatisfy { if case .updated = $0 { true } else { false } }, "\(restored.changes)")
        // Under the same configuration, restore changes nothing.
        #expect(Associator.restore(associator.snapshot, configuration: plain).changes.isEmpty)
    }
}
