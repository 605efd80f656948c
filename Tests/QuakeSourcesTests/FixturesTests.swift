import Foundation
import Testing

@Suite struct SourceFixturesTests {
    @Test func fixturesAreBundled() throws {
        let url = try #require(Bundle.module.url(forResource: "Fixtures", withExtension: nil))
        let names = try FileManager.default.contentsOfDirectory(atPath: url.path)
        #expect(names.contains("README.md"))
    }
}
