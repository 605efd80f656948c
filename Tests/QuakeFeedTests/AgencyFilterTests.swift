import Foundation
import QuakeFeed
import Testing

/// `agencies` and `minAgencies`: judged on the entries of a quake's `sources`.
@Suite struct AgencyFilterTests {
    static func image(_ sources: String?) -> QuakeImage { QuakeImage(mag: 4, lat: 42, lon: 13, time: 1, sources: sources) }

    @Test func agenciesMatchAnEntryOfSourcesIgnoringCase() {
        let filter = QuakeFilter(agencies: ["INGV", "gfz"])
        #expect(filter.matches(Self.image(",emsc,ingv,")))
        #expect(filter.matches(Self.image(",GFZ,")))
        #expect(!filter.matches(Self.image(",emsc,")))
        // An entry, not a part of one.
        #expect(!filter.matches(Self.image(",ingvx,emsc,")))
        #expect(!filter.matches(Self.image(nil)))
        #expect(!filter.matches(Self.image("")))
    }

    @Test func minAgenciesCountsTheDistinctEntries() {
        let two = QuakeFilter(minAgencies: 2)
        #expect(two.matches(Self.image(",us,ak,")))
        #expect(two.matches(Self.image(",emsc,ingv,gfz,")))
        #expect(!two.matches(Self.image(",us,")))
        #expect(!two.matches(Self.image(",us,US,")))  // one agency, twice
        #expect(!two.matches(Self.image(",,")))
        #expect(!two.matches(Self.image(nil)))
        #expect(QuakeFilter(minAgencies: 1).matches(Self.image(",us,")))
        #expect(!QuakeFilter(minAgencies: 1).matches(Self.image(nil)))
        #expect(QuakeImage.agencyCount(",us,ak,nc,") == 3)
        #expect(QuakeImage.agencyCount(nil) == 0)
    }

    @Test func theConditionsCombineWithTheOthers() {
        let filter = QuakeFilter(minMagnitude: 4.5, agencies: ["emsc"], minAgencies: 2)
        #expect(!filter.matches(QuakeImage(mag: 4.0, sources: ",emsc,ingv,")))
        #expect(filter.matches(QuakeImage(mag: 4.6, sources: ",emsc,ingv,")))
        #expect(!filter.matches(QuakeImage(mag: 4.6, sources: ",emsc,")))
    }

    @Test func invalidAgencyConditionsAreRefusedNamingTheField() {
        #expect(throws: QuakeFilter.Invalid(field: "agencies", problem: "an empty list matches nothing; leave it out for every agency")) {
            try QuakeFilter(agencies: []).validate()
        }
        #expect(throws: QuakeFilter.Invalid.self) { try QuakeFilter(agencies: [""]).validate() }
        #expect(throws: QuakeFilter.Invalid.self) { try QuakeFilter(agencies: ["a,b"]).validate() }
        #expect(throws: QuakeFilter.Invalid(field: "minAgencies", problem: "0 is below 1")) {
            try QuakeFilter(minAgencies: 0).validate()
        }
        #expect(throws: Never.self) { try QuakeFilter(agencies: ["us"], minAgencies: 1).validate() }
        #expect(!QuakeFilter(agencies: ["us"]).isEmpty)
    }

    @Test func aFeatureSourcesAreItsImages() throws {
        var feature = FeedFeature(id: "us1", time: 1)
        feature.sources = ",us,ak,"
        #expect(QuakeImage(feature).sources == ",us,ak,")
        #expect(QuakeFilter(agencies: ["AK"]).matches(feature))
    }

    @Test func theFilterRoundTripsThroughJSON() throws {
        let filter = QuakeFilter(agencies: ["emsc"], minAgencies: 2)
        let decoded = try JSONDecoder().decode(QuakeFilter.self, from: JSONEncoder().encode(filter))
        #expect(decoded == filter)
    }
}
