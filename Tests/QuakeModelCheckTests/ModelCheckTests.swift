import Foundation
import QuakeFeed
import QuakeModelCheck
import QuakeTestSupport
import Testing

/// The checker's own machinery: a printed case seed must give back the same case, and the
/// documents it writes must be feeds that say what the case says. The store's properties are
/// checked with it by QuakeStoreTests and `quake-bench model`.
@Suite struct ModelCheckTests {
    @Test func aCaseSeedGivesBackTheSameCase() {
        let generator = ModelGenerator(templates: 8, shape: ModelShape())
        func steps(_ index: Int) -> [ModelStep] {
            var random = SeededRandom(seed: SeededRandom.caseSeed(20261127, index))
            return generator.makeCase(&random)
        }
        #expect(steps(3) == steps(3))
        #expect(steps(3).count == ModelShape().steps)
        #expect(steps(3) != steps(4), "another case of the same run")
    }

    @Test func aWrittenDocumentIsAFeedWithTheVersionsItWasAskedFor() throws {
        let writer = try DocumentWriter(feed: ModelCheck.templateFeed)
        let generator = ModelGenerator(templates: writer.templateCount, shape: ModelShape(steps: 40))
        var random = SeededRandom(seed: 20261127)
        let elements = generator.makeCase(&random).flatMap { step -> [DocumentElement] in
            if case .importDocument(let elements, _) = step { elements } else { [] }
        }
        let versions = elements.compactMap { element -> FeatureVersion? in
            if case .feature(let version) = element { version } else { nil }
        }
        try #require(versions.count > 5 && versions.count < elements.count, "features and junk both")
        let document = writer.document(elements)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(document)) as? [String: Any])
        let features = try #require(object["features"] as? [Any])
        #expect(features.count == elements.count)
        for (element, written) in zip(elements, features) {
            guard case .feature(let version) = element else { continue }
            let feature = try #require(written as? [String: Any])
            let properties = try #require(feature["properties"] as? [String: Any])
            #expect(feature["id"] as? String == version.id)
            #expect(properties["time"] as? Int64 == version.time)
            #expect((properties["updated"] as? Int64) == version.updated)
            #expect((properties["mag"] as? Double) == version.mag)
            #expect((properties["ids"] as? String) == version.ids.map { ",\($0.joined(separator: ",")),"})
            for key in version.nulls { #expect(properties[key] is NSNull, "\(key) of \(version)") }
            // A property both given a value and set to null is written null.
            for (key, value) in version.overrides where !version.nulls.contains(key) {
                #expect(properties[key] as? String == value, "\(key) of \(version)")
            }
        }
    }

    @Test func aShortRunOfCasesHoldsOnARealStore() async throws {
        let result = try await ModelCheck.run(cases: 4, seed: 20261127, shape: ModelShape(steps: 6))
        if let counterexample = result.counterexample { Issue.record("\(counterexample)") }
        #expect(result.cases == 4)
        #expect(result.transactions > 0, "the cases changed the store")
    }
}
