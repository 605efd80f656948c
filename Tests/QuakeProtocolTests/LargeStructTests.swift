import Foundation
import QuakeProtocol
import Testing
import Varlink

/// A large generated struct (`Quake`: VarlinkIDL's `SwiftGenerator.largeStructFields` or more)
/// keeps its fields in one box that copies share until one changes: it must behave exactly as a
/// struct with stored fields, with equality, hashing, `Codable` and its mirror as Swift derives
/// them.
@Suite("Large generated structs")
struct LargeStructTests {
    static let quake = MembersTests.quake

    @Test("a changed copy leaves the original as it was, whichever way the field is changed")
    func copiesAreIndependent() {
        let original = Self.quake
        var set = original
        set.mag = 6.1
        set.place = nil
        #expect(set.mag == 6.1 && set.place == nil)
        #expect(original.mag == 4.5 && original.place == Self.quake.place)

        // In place (the _modify accessor), on a copy and then on the copy's own copy.
        var modified = original
        modified.title?.append(" (revised)")
        modified.time += 1
        var again = modified
        again.title?.append("!")
        #expect(original.title == "M 4.5" && original.time == 1_700_000_000_000)
        #expect(modified.title == "M 4.5 (revised)" && modified.time == 1_700_000_000_001)
        #expect(again.title == "M 4.5 (revised)!")

        #expect(original == Self.quake)
    }

    @Test("copies changed at once in other tasks each keep their own change")
    func copiesChangedConcurrently() async {
        let original = Self.quake
        let sigs = await withTaskGroup(of: (Int, Int?).self) { group in
            for n in 0..<16 {
                group.addTask {
                    var q = original
                    for _ in 0..<1000 { q.sig = n }
                    return (n, q.sig)
                }
            }
            return await group.reduce(into: [:]) { $0[$1.0] = $1.1 }
        }
        #expect(sigs.count == 16 && sigs.allSatisfy { $0.key == $0.value })
        #expect(original.sig == 312 && original == Self.quake)
    }

    @Test("equal exactly when every field is, with equal hashes")
    func equalityAndHash() throws {
        let a = Self.quake
        // The same values, built separately (another box).
        let b = try IOQuaked.Quake.decode(json: a.jsonBytes)
        #expect(a == b)
        #expect(a.hashValue == b.hashValue)
        #expect(Set([a, b]).count == 1)

        let changes: [(String, (inout IOQuaked.Quake) -> Void)] = [
            ("id", { $0.id += "x" }), ("mag", { $0.mag = nil }), ("time", { $0.time -= 1 }),
            ("net", { $0.net = "ak" }), ("cdi", { $0.cdi = 2.8 }), ("depth", { $0.depth = 11 }),
            ("contributors", { $0.contributors = [] }), ("agency", { $0.agency = "EMSC" }),
        ]
        for (field, change) in changes {
            var c = a
            change(&c)
            #expect(c != a, "a quake differing in \(field) compared equal")
            #expect(Set([a, c]).count == 2, "a quake differing in \(field) hashed into the same set element")
        }
    }

    @Test("Codable writes the interface's names and leaves out nil, and reads back the same value")
    func codable() throws {
        let a = Self.quake
        let encoded = try JSONEncoder().encode(a)
        let viaFoundation = try #require(try JSONSerialization.jsonObject(with: encoded) as? [String: Any])
        let viaWriter = try #require(try JSONSerialization.jsonObject(with: Data(a.jsonBytes)) as? [String: Any])
        #expect(Set(viaFoundation.keys) == Set(viaWriter.keys))
        #expect(viaFoundation["updated"] == nil && viaFoundation["mag"] as? Double == 4.5)
        #expect(try JSONDecoder().decode(IOQuaked.Quake.self, from: encoded) == a)

        // A required field missing is an error, as a derived decoder's is.
        var withoutTime = viaWriter
        withoutTime["time"] = nil
        #expect(throws: DecodingError.self) {
            try JSONDecoder().decode(IOQuaked.Quake.self, from: JSONSerialization.data(withJSONObject: withoutTime))
        }
    }

    @Test("its mirror shows the fields by name, in the interface's order, as a struct")
    func mirror() {
        let mirror = Mirror(reflecting: Self.quake)
        #expect(mirror.displayStyle == .struct)
        #expect(mirror.children.map(\.label) == IOQuaked.Quake.Members.names.map { Optional($0) })
        #expect(String(describing: Self.quake).hasPrefix(#"Quake(id: "us7000abcd", mag: Optional(4.5)"#))
    }
}
