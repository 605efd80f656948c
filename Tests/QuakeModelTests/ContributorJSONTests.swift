import Foundation
import QuakeModel
import Testing

/// `Contributor.decode(json:)` reads the store's canonical text with a scanner of its own and
/// hands everything else to `JSONDecoder`: it must give the decoder's result for any text.
@Suite struct ContributorJSONTests {
    static func randomContributor(_ random: inout SeededRandom, preferred: Bool) -> Contributor {
        let texts = ["usgs", "emsc", "INGV", "GFZ", "", "ca\u{301}fe\u{301}", "a \"quoted\" name", #"back\slash"#,
            "tab\there", "東京", "us7000abcd", "20250305_0000090"]
        func text() -> String { texts.randomElement(using: &random)! }
        func maybe<T>(_ value: @autoclosure () -> T) -> T? { Bool.random(using: &random) ? value() : nil }
        let doubles: [Double] = [0, -0.0, 1.5, -33.25, 1e-7, 123456.789, 5e20, 0.1, 179.99999999999997]
        return Contributor(
            source: text(), agency: maybe(text()), id: text(),
            time: Int64.random(in: -2_000_000_000_000...4_000_000_000_000, using: &random),
            lat: doubles.randomElement(using: &random)!, lon: Double.random(in: -180...180, using: &random),
            depth: maybe(doubles.randomElement(using: &random)!), mag: maybe(Double.random(in: -1...9, using: &random)),
            magType: maybe(text()), status: maybe(text()),
            updated: maybe(Int64.random(in: 0...Int64.max, using: &random)), preferred: preferred)
    }

    static func decoder(_ text: String) -> [Contributor]? {
        try? JSONDecoder().decode([Contributor].self, from: Data(text.utf8))
    }

    @Test("the canonical text of random contributors reads back as written, as JSONDecoder reads it")
    func roundTrip() {
        var random = SeededRandom(seed: 20261129)
        for _ in 0..<2_000 {
            let list = (0..<Int.random(in: 0...4, using: &random)).map {
                Self.randomContributor(&random, preferred: $0 == 0)
            }
            let text = Contributor.json(list)
            let decoded = Contributor.decode(json: text)
            #expect(decoded == list, "\(text)")
            #expect(decoded == Self.decoder(text), "\(text)")
        }
    }

    @Test("any text, canonical or cut, spliced or hand-written, reads as JSONDecoder reads it")
    func sameAsTheDecoder() {
        var random = SeededRandom(seed: 7)
        let pieces = [
            "[", "]", "{", "}", ",", ":", "\"", "null", "true", "false", "-", "0", "01", "1.", ".5", "1e5", "1E+2",
            "+1", "1e400", " ", "\"source\"", "\"id\"", "\"time\"", "\"lat\"", "\"lon\"", "\"preferred\"",
            "\"depth\"", "\"mag\"", "\"agency\"", "\"extra\"", "\\n", "9223372036854775808",
        ]
        var disagreements: [String] = []
        for round in 0..<5_000 {
            let list = (0..<Int.random(in: 1...3, using: &random)).map {
                Self.randomContributor(&random, preferred: $0 == 0)
            }
            var bytes = Array(Contributor.json(list).utf8)
            // One to three edits: a byte dropped, a piece inserted, or the text cut short.
            for _ in 0..<Int.random(in: 1...3, using: &random) where !bytes.isEmpty {
                let at = Int.random(in: 0..<bytes.count, using: &random)
                switch Int.random(in: 0..<3, using: &random) {
                case 0: bytes.remove(at: at)
                case 1: bytes.insert(contentsOf: Array(pieces.randomElement(using: &random)!.utf8), at: at)
                default: bytes.removeSubrange(at...)
                }
            }
            let text = String(decoding: bytes, as: UTF8.self)
            if Contributor.decode(json: text) != Self.decoder(text) {
                disagreements.append("round \(round): \(text)")
            }
        }
        #expect(disagreements.isEmpty, "\(disagreements.prefix(5))")
        // Hand-written texts the scanner must refuse or read as the decoder does.
        for text in [
            "[]", " []", "[{}]", #"[{"source":"a","id":"b","time":1,"lat":1,"lon":2,"preferred":true}]"#,
            #"[{"source":"a","id":"b","time":1.0,"lat":1,"lon":2,"preferred":true}]"#,
            #"[{"source":"a","id":"b","time":01,"lat":1,"lon":2,"preferred":true}]"#,
            #"[{"source":"a","id":"b","time":1,"lat":1,"lon":2,"preferred":true,"mag":null}]"#,
            #"[{"source":"a","id":"b","time":1,"lat":1,"lon":2,"preferred":true,"source":"c"}]"#,
            #"[{"source":"a\u0041","id":"b","time":1,"lat":1,"lon":2,"preferred":true}]"#,
            #"[{"source":"a","id":"b","time":1,"lat":-0,"lon":2e-3,"preferred":false}]"#,
        ] {
            #expect(Contributor.decode(json: text) == Self.decoder(text), "\(text)")
        }
    }
}
