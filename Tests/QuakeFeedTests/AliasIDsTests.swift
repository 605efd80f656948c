import QuakeFeed
import QuakeModel
import Testing

@Suite("A feature's alias ids")
struct AliasIDsTests {
    /// `aliasIDs` splits ASCII lists over their bytes: the same entries as splitting the
    /// Characters, for random lists of ids, commas and empty entries, and for lists that are not
    /// ASCII (where a comma followed by a combining mark is one Character, not a separator).
    @Test("ASCII lists split over bytes give the entries a Character split gives")
    func byteSplitMatchesCharacterSplit() {
        var random = SeededRandom(seed: 20261129)
        let pieces = ["", ",", ",,", "us", "us7000abcd", "ci40000000", "emsc2512", "gfz2021inzw", " ", "a-b_c.d"]
        let unusual = [",\u{301}", "é", "日本", "\u{301}", "x\u{0}y"]
        for round in 0..<2_000 {
            var ids = ""
            for _ in 0..<Int.random(in: 0...8, using: &random) {
                ids += pieces.randomElement(using: &random)!
                if round % 4 == 0, Int.random(in: 0..<6, using: &random) == 0 {
                    ids += unusual.randomElement(using: &random)!
                }
            }
            var feature = FeedFeature(id: "us7000abcd", time: 0)
            feature.ids = ids
            let expected = ids.split(separator: ",", omittingEmptySubsequences: true).map(String.init)
            #expect(feature.aliasIDs == expected, "ids \(ids.debugDescription)")
        }
        var feature = FeedFeature(id: "a", time: 0)
        feature.ids = ",b,\u{301}c,"
        #expect(feature.aliasIDs == ["b,\u{301}c"])
        feature.ids = nil
        #expect(feature.aliasIDs.isEmpty)
    }
}
