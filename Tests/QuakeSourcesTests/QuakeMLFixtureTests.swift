import Foundation
import QuakeModel
import QuakeSources
import Testing

@Suite struct QuakeMLFixtureTests {
    @Test func ingvThirteenEvents() throws {
        let parsed = parseQuakeML(try fixture("INGV__qquake__events.xml"))
        #expect(parsed.error == nil)
        #expect(parsed.items.count == 13)
        #expect(parsed.skipped == 0)
        let r = try #require(parsed.report("25870121"))
        #expect(r.source == "test")
        #expect(r.time == ms("2020-12-29T11:19:54.080Z"))
        #expect(abs(r.latitude - 45.4033) < 1e-9)
        #expect(abs(r.longitude - 16.2017) < 1e-9)
        #expect(r.depth == 9.1)
        #expect(r.magnitude == 6.3)
        #expect(r.magnitudeType == "Mw")
        print(parsed.reports.map { "\($0)" }.joined(separator: "\n"))
    }
}
