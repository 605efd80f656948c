import Foundation
import QuakeFeed
import QuakeModel
import QuakeProtocol
import Testing
import Varlink

/// `contributors` is kept as text, the canonical JSON of io.quaked's `[]Contributor` (QuakeModel's
/// `Contributor.json`): it must be byte for byte what the generated encoder writes, since the
/// FetchHistory writer passes it through and the generated conversions decode it.
@Suite("Contributors' canonical JSON")
struct ContributorJSONTests {
    static let model: [Contributor] = [
        Contributor(
            source: "ingv", agency: "INGV", id: "20250305_0000090", time: 1_741_132_809_120, lat: 42.5, lon: 13.25,
            depth: 9.8, mag: 4.4, magType: "ML", status: "reviewed", updated: 1_741_133_000_000, preferred: true),
        Contributor(source: "emsc", id: "e\"1\\\n\t\u{1}ü€", time: -1, lat: -0.0, lon: 180, preferred: false),
        Contributor(
            source: "usgs", agency: "us", id: "us7000abcd", time: 0, lat: 0.1 + 0.2, lon: -1e-7, depth: 1e20,
            mag: -0.5, magType: "mww", status: "automatic", updated: Int64.max, preferred: false),
    ]

    static func wire(_ c: Contributor) -> IOQuaked.Contributor {
        IOQuaked.Contributor(
            source: c.source, agency: c.agency, id: c.id, time: Int(c.time), lat: c.lat, lon: c.lon, depth: c.depth,
            mag: c.mag, magType: c.magType, status: c.status, updated: c.updated.map(Int.init), preferred: c.preferred)
    }

    @Test("the model's JSON is the generated encoder's, for odd strings and numbers too")
    func canonicalIsGenerated() throws {
        let wire = Self.model.map(Self.wire)
        #expect(Contributor.json(Self.model) == String(decoding: wire.jsonBytes, as: UTF8.self))
        for (c, w) in zip(Self.model, wire) {
            #expect(c.json == String(decoding: w.jsonBytes, as: UTF8.self))
        }
        #expect(Contributor.json([]) == "[]")
        // A seeded spread of doubles, written the same way.
        var state: UInt64 = 0x2545_F491_4F6C_DD1D
        for _ in 0..<2_000 {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            let value = Double(bitPattern: state)
            guard value.isFinite else { continue }
            let c = Contributor(source: "s", id: "i", time: 1, lat: value, lon: Double(Int64(bitPattern: state) % 100_000) / 1000, preferred: true)
            #expect(c.json == String(decoding: Self.wire(c).jsonBytes, as: UTF8.self), "\(value)")
        }
        // And it reads back, by the model and strictly by the interface's decoder.
        #expect(Contributor.decode(json: Contributor.json(Self.model)) == Self.model)
        #expect(try [IOQuaked.Contributor].decode(json: Array(Contributor.json(Self.model).utf8)) == wire)
    }

    @Test("a stored quake's contributors text is the wire's typed array, both ways")
    func conversions() throws {
        var feature = FeedFeature(id: "20250305_0000090", time: 1_741_132_809_120)
        feature.mag = 4.4
        feature.agency = "INGV"
        feature.contributors = Contributor.json(Self.model)
        let quake = IOQuaked.Quake(feature)
        #expect(quake.agency == "INGV")
        #expect(quake.contributors == Self.model.map(Self.wire))
        #expect(quake.feature == feature)
        #expect(IOQuaked.Quake(values: quake.values) == quake)
        #expect(quake.values.last == .text(Contributor.json(Self.model)))
        // Without sources: neither, and neither member on the wire.
        let plain = IOQuaked.Quake(FeedFeature(id: "us1", time: 1))
        #expect(plain.agency == nil && plain.contributors == nil)
        #expect(!String(decoding: plain.jsonBytes, as: UTF8.self).contains("contributors"))
    }

    @Test("a row with the contributors column writes the quake's bytes (the text passed through)")
    func rowWithContributors() throws {
        var q = MembersTests.quake
        q.agency = "INGV"
        q.contributors = Self.model.map(Self.wire)
        let (row, buffers) = MembersTests.row(q)
        defer { for buffer in buffers { buffer.deallocate() } }
        let text = Contributor.json(Self.model)
        let json = UnsafeMutableRawBufferPointer.allocate(byteCount: text.utf8.count, alignment: 1)
        defer { json.deallocate() }
        json.copyBytes(from: Array(text.utf8))
        var values = row.values
        let index = try #require(IOQuaked.Quake.Members.names.firstIndex(of: "contributors"))
        #expect(index == IOQuaked.Quake.Members.names.count - 1)
        values[index] = .text(UnsafeRawBufferPointer(json))
        var writer = JSONWriter()
        IOQuaked.Quake.Members.begin(to: &writer)
        IOQuaked.Quake.Members.appendMembers(from: MembersTests.Row(values: values), to: &writer)
        IOQuaked.Quake.Members.end(to: &writer)
        #expect(writer.bytes == q.jsonBytes)
        #expect(try IOQuaked.Quake.decode(json: writer.bytes) == q)
    }

    @Test("FieldValue's contributors member is the typed array")
    func fieldValue() throws {
        let text = #"{"field":"contributors","new":{"contributors":\#(Contributor.json(Self.model))}}"#
        let change = try IOQuaked.FieldChange.decode(json: Array(text.utf8))
        #expect(change.new?.contributors == Self.model.map(Self.wire))
        #expect(change.new?.string == nil && change.old == nil)
        // A JSON string where the array belongs is refused.
        let string = #"{"field":"contributors","new":{"contributors":"[]"}}"#
        #expect(throws: VarlinkParameterError.self) { try IOQuaked.FieldChange.decode(json: Array(string.utf8)) }
    }
}
