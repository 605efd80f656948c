import Foundation
import QuakeModel
import Testing

@testable import QuakeStore

/// History's contributors written straight from the store's text (``ContributorsTranscoder``)
/// against the decoding path. In debug builds `fieldsJSON` itself compares every result with
/// `JSONEncoder`'s (``QuakeStore/checksHistory``), so each case below is checked byte for byte.
@Suite("History's contributors from the stored text")
struct ContributorsTranscoderTests {
    static func random(_ rng: inout SeededRandom) -> Contributor {
        func pick<T>(_ values: [T]) -> T { values[Int(rng.next() % UInt64(values.count))] }
        // Integral, short, long, tiny (exponent) and large reals; texts with and without escapes.
        let reals: [Double] = [10, 0, -0.0, 4.5, 33.123456, 38.123456789012344, 9007199254740992, -117.98765432101, 0.0001, 0.00001, 1e15, 1e-7, 6.02e23, 0.1 + 0.2]
        let texts = ["us", "EMSC", "INGV", "\"quoted\"", "back\\slash", "tab\there", "Ağrı", "line\nbreak"]
        return Contributor(
            source: pick(texts), agency: pick([nil, "EMSC", "GFZ", "\u{1}"]), id: pick(["us7000abcd", "20250305_0000090", "a\"b"]),
            time: pick([0, 1_700_000_000_123, -5, Int64.max]), lat: pick(reals), lon: pick(reals),
            depth: pick([nil, 10, 12.5, 1e-9]), mag: pick([nil, 4.2, 3, 0.00001]), magType: pick([nil, "mb", "Mw"]),
            status: pick([nil, "reviewed", "automatic"]), updated: pick([nil, 1_700_000_000_999, 0]),
            preferred: rng.next() % 2 == 0)
    }

    @Test("any contributors: the copy, where it is taken, writes what decoding and writing write")
    func differential() throws {
        var rng = SeededRandom(seed: 20_261_129)
        var copied = 0
        for round in 0..<4_000 {
            let old = (0..<Int(rng.next() % 4)).map { _ in Self.random(&rng) }
            let new = (0..<Int(rng.next() % 4)).map { _ in Self.random(&rng) }
            let change = FieldChange(
                field: "contributors", old: .contributors(Contributor.json(old)), new: .contributors(Contributor.json(new)))
            // (Debug builds also throw here when the bytes differ from the encoder's.)
            let json = try HistoryRecorder.fieldsJSON([change])
            #expect(json == (try HistoryRecorder.json([change])), "round \(round)")
            var out: [UInt8] = []
            if ContributorsTranscoder.write(Contributor.json(new), to: &out) { copied += 1 }
        }
        // The common texts take the copy.
        #expect(copied > 400, "the copy was taken \(copied) times")
    }

    @Test("mutated texts: whatever the copy takes, the encoder writes the same from the decoded contributors")
    func mutations() throws {
        var rng = SeededRandom(seed: 4_242)
        let alphabet = Array(#"{}[]",:-.0123456789eE+"\ntrufals"#.utf8) + Array("00112233445566778899".utf8)
        var taken = 0
        for round in 0..<20_000 {
            // Texts the copy takes before the mutation: plain strings.
            let base = (0..<(1 + Int(rng.next() % 2))).map { _ in
                var c = Self.random(&rng)
                (c.source, c.id, c.agency) = ("emsc", "20250305_0000090", rng.next() % 2 == 0 ? nil : "EMSC")
                return c
            }
            var bytes = Array(Contributor.json(base).utf8)
            for _ in 0..<(1 + Int(rng.next() % 3)) {
                let at = Int(rng.next() % UInt64(bytes.count))
                switch rng.next() % 3 {
                case 0: bytes[at] = alphabet[Int(rng.next() % UInt64(alphabet.count))]
                case 1: bytes.remove(at: at)
                default: bytes.insert(alphabet[Int(rng.next() % UInt64(alphabet.count))], at: at)
                }
                if bytes.isEmpty { bytes = Array("[]".utf8) }
            }
            let text = String(decoding: bytes, as: UTF8.self)
            var out: [UInt8] = []
            guard ContributorsTranscoder.write(text, to: &out) else { continue }
            taken += 1
            let expected = try? HistoryRecorder.json(FieldValue.contributors(text))
            #expect(String(decoding: out, as: UTF8.self) == expected, "round \(round): \(text)")
        }
        // Some mutations leave a valid text (a digit for a digit, say): the copy is exercised.
        #expect(taken > 200, "the copy took \(taken) mutated texts")
    }

    @Test("canonical texts of plain values are copied; anything the copy cannot be exact for is left to decoding")
    func whatIsCopied() {
        func copies(_ text: String) -> Bool {
            var out: [UInt8] = [1, 2]
            let taken = ContributorsTranscoder.write(text, to: &out)
            if !taken { #expect(out == [1, 2], "a refusal leaves the output as it was: \(text)") }
            return taken
        }
        let plain = Contributor(
            source: "emsc", agency: "EMSC", id: "20250305_0000090", time: 1_741_132_800_000, lat: 38.5, lon: 15,
            depth: 10, mag: 4.2, magType: "mb", status: "reviewed", updated: 1_741_132_900_000, preferred: true)
        #expect(copies(Contributor.json([plain])))
        #expect(copies("[]"))
        // Full-precision reals, as a description writes them (16 and 17 digits).
        #expect(copies(#"[{"source":"a","id":"b","time":1,"lat":0.30000000000000004,"lon":-117.98765432101234,"preferred":false}]"#))
        var out: [UInt8] = []
        _ = ContributorsTranscoder.write(Contributor.json([plain]), to: &out)
        #expect(
            String(decoding: out, as: UTF8.self)
                == #"{"contributors":[{"agency":"EMSC","depth":10,"id":"20250305_0000090","lat":38.5,"lon":15,"mag":4.2,"magType":"mb","preferred":true,"source":"emsc","status":"reviewed","time":1741132800000,"updated":1741132900000}]}"#
        )
        for text in [
            #"[{"source":"a","id":"b","time":1,"lat":1e-05,"lon":0,"preferred":true}]"#,  // exponent
            #"[{"source":"a","id":"b","time":1,"lat":4.50,"lon":0,"preferred":true}]"#,  // not the shortest text
            #"[{"source":"a","id":"b","time":1,"lat":0.1000000000000000055,"lon":0,"preferred":true}]"#,  // 19 digits, not 0.1
            #"[{"source":"a","id":"b","time":-0,"lat":1,"lon":0,"preferred":true}]"#,  // "-0" is written 0
            #"[{"source":"a\"b","id":"b","time":1,"lat":1,"lon":0,"preferred":true}]"#,  // an escape
            #"[{"source":"a","id":"b","time":1,"lat":1,"lon":0,"preferred":true,"agency":null}]"#,  // null
            #"[{"source":"a","id":"b","time":1,"lat":1,"lon":0}]"#,  // no preferred
            #"[{"source":"a","id":"b","id":"c","time":1,"lat":1,"lon":0,"preferred":true}]"#,  // a key twice
            #"[{"source":"a","id":"b","time":1,"lat":1,"lon":0,"preferred":true,"x":1}]"#,  // unknown key
            #"[{"source":"a", "id":"b","time":1,"lat":1,"lon":0,"preferred":true}]"#,  // white space
            #"[{"source":"a","id":"b","time":1,"lat":1,"lon":0,"preferred":true}"#,  // cut short
        ] {
            #expect(!copies(text), "\(text)")
        }
    }
}
