import Foundation
import QuakeModel
import QuakeTestSupport
import Testing
import VarlinkIDL

/// The quake record's declaration against the other places a field must be written: the
/// interface's `Quake` type (io.quaked.varlink, parsed with VarlinkIDL) and the store's shipped
/// schema.
@Suite struct QuakeRecordTests {
    static func quakeType() throws -> [VarlinkInterface.Field] {
        let file = Fixtures.packageRoot.appendingPathComponent("Sources/QuakeProtocol/io.quaked.varlink")
        let interface = try VarlinkInterface(parsing: try String(contentsOf: file, encoding: .utf8))
        let quake = try #require(interface.types.first { $0.name == "Quake" })
        guard case .structure(let fields) = quake.shape else {
            Issue.record("Quake is not a struct")
            return []
        }
        return fields
    }

    @Test func theInterfacesQuakeHasTheDeclaredFieldsInOrderWithTheirKinds() throws {
        let wire = try Self.quakeType()
        #expect(wire.map(\.name) == QuakeRecord.names)
        for (field, declared) in zip(wire, QuakeRecord.fields) {
            var base: VarlinkInterface.FieldType =
                switch declared.kind {
                case .text: .string
                case .integer: .int
                case .real: .float
                }
            if let json = declared.jsonType {
                // A text holding JSON: its wire type is the interface type it names (`[]Contributor`).
                #expect(json.hasPrefix("[]"), "\(declared.name): \(json)")
                base = .array(.named(String(json.dropFirst(2))))
            }
            #expect(
                field.type == (declared.isRequired ? base : .optional(base)),
                "\(field.name): the interface says \(field.type), the declaration \(declared.kind)\(declared.isRequired ? "" : "?")")
        }
    }

    @Test func namesAreUniqueIdentifiersTheDecoderCanPack() {
        #expect(Set(QuakeRecord.names).count == QuakeRecord.names.count)
        for field in QuakeRecord.fields {
            #expect(field.name.utf8.count <= 8 || field.origin != .property, "\(field.name): the decoder packs keys of up to 8 bytes")
            #expect(field.name.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber) }, "\(field.name)")
            #expect(!field.doc.isEmpty)
        }
        #expect(QuakeRecord.fields.filter(\.isRequired).map(\.name) == ["id", "time"])
        let coordinates = QuakeRecord.fields.compactMap { field -> Int? in
            if case .coordinate(let i) = field.origin { i } else { nil }
        }
        #expect(coordinates == [0, 1, 2])
    }

    @Test func snakeCaseIsWhatPostgreSQLTablesUse() {
        #expect(QuakeRecord.fields.first { $0.name == "magType" }?.snakeCaseName == "mag_type")
        #expect(QuakeRecord.fields.first { $0.name == "time" }?.snakeCaseName == "time")
        #expect(QuakeRecord.fields.filter(\.isTime).map(\.name) == ["time", "updated"])
    }

    @Test func valuesKeepTheirKind() {
        #expect(QuakeValue(nil as String?) == .null)
        #expect(QuakeValue(Int?.some(3)) == .integer(3))
        #expect(QuakeValue(2.5 as Double?).real == 2.5)
        #expect(QuakeValue("x" as String?).integer == nil)
    }

    /// These USGS fields have no other meaning in the code (GeoNet's `mmi` is GeoNet's own, so
    /// not that one), so a file that names one writes the field list out by hand: only the declaration, the migrations that
    /// have shipped and the interface may (the generated code is written under .build).
    @Test func theFieldNamesAreWrittenOnlyInTheDeclarationTheShippedMigrationsAndTheInterface() throws {
        let names = ["dmin", "cdi", "nst"]
        #expect(names.allSatisfy { QuakeRecord.index(of: $0) != nil })
        let allowed: Set = [
            "Sources/QuakeModel/QuakeRecord.swift", "Sources/QuakeStore/StoreSchema.swift",
            "Sources/QuakeProtocol/io.quaked.varlink",
        ]
        let sources = Fixtures.packageRoot.appendingPathComponent("Sources")
        let files = try #require(FileManager.default.enumerator(at: sources, includingPropertiesForKeys: nil))
        let word = try Regex("\\b(" + names.joined(separator: "|") + ")\\b")
        var found: [String] = []
        for case let url as URL in files where ["swift", "varlink"].contains(url.pathExtension) {
            let path = "Sources" + url.path.dropFirst(sources.path.count)
            guard !allowed.contains(path) else { continue }
            if try String(contentsOf: url, encoding: .utf8).contains(word) { found.append(path) }
        }
        #expect(found.isEmpty, "field names written out by hand in \(found.sorted())")
    }
}
