import Foundation
import QuakeProtocol
import Testing
import Varlink
import VarlinkIDL

@Suite("Varlink interface files")
struct IDLTests {
    static func text(_ name: String) throws -> String {
        let url = try #require(Bundle.module.url(forResource: "Interfaces/\(name)", withExtension: "varlink"))
        return try String(contentsOf: url, encoding: .utf8)
    }

    @Test("every construct parses, with documentation and types")
    func everything() throws {
        let interface = try VarlinkInterface(parsing: try Self.text("org.example.everything"))
        #expect(interface.name == "org.example.everything")
        #expect(interface.documentation == ["Every construct of the Varlink IDL, for the parser."])
        #expect(interface.types.map(\.name) == ["Everything", "Point", "Color"])
        #expect(interface.methods.map(\.name) == ["Ping", "Empty"])
        #expect(interface.errors.map(\.name) == ["Broken", "Plain"])
        guard case .structure(let fields) = interface.types[0].shape else {
            Issue.record("Everything is not a struct")
            return
        }
        typealias T = VarlinkInterface.FieldType
        #expect(
            fields.map(\.type) == [
                T.bool, .int, .float, .string, .object, .optional(.int), .array(.string), .map(.float),
                .optional(.array(.optional(.named("Point")))), .inline(.structure([
                    .init(name: "x", documentation: [], type: .int), .init(name: "y", documentation: [], type: .int),
                ])), .inline(.enumeration(["one", "two", "three"])),
            ])
        #expect(fields[5].documentation == ["documented field"])
        #expect(interface.types[2].shape == .enumeration(["red", "green", "blue"]))
        #expect(interface.methods[1].parameters.isEmpty && interface.methods[1].reply.isEmpty)
    }

    @Test(
        "mistakes are refused with the line and what was expected",
        arguments: [
            ("interface x", "not a valid interface name"),
            ("interface a.b\nmethod lower() -> ()", "member name"),
            ("interface a.b\ntype T (x: Unknown)", "undefined type Unknown"),
            ("interface a.b\ntype T (x: int, x: int)", "listed twice"),
            ("interface a.b\ntype T (x: int)\ntype T (y: int)", "defined twice"),
            ("interface a.b\nmethod M(x: ??int) -> ()", "?? is not a type"),
            ("interface a.b\nmethod M(x: [int]int) -> ()", "map keys must be string"),
            ("interface a.b\nmethod M(x: int -> ()", "expected"),
            ("interface a.b\nwidget W ()", "expected type, method or error"),
            ("interface a.b\ntype T (a, b: int)", "an enum cannot have typed fields"),
            ("interface a.b\ntype T (a: int, b)", "expected \":\" and a type after b"),
        ])
    func mistakes(text: String, message: String) {
        #expect {
            _ = try VarlinkInterface(parsing: text)
        } throws: { error in
            guard let error = error as? VarlinkIDLError else { return false }
            return error.message.contains(message)
        }
    }

    @Test("the generated io.quaked types are the interface file's, member for member")
    func generatedTypesFollowTheInterface() throws {
        let interface = try VarlinkInterface(parsing: IOQuaked.interfaceDescription)
        #expect(interface.name == IOQuaked.interfaceName)
        #expect(IOQuaked.Method.allCases.map(\.rawValue) == interface.methods.map(\.name))
        #expect(IOQuaked.Method.allCases.map(\.qualifiedName).allSatisfy { $0.hasPrefix("io.quaked.") })
        // Every error name decodes to its own typed case (and nothing else does).
        for error in interface.errors {
            var writer = JSONWriter()
            writer.beginObject()
            for field in error.fields {
                writer.key(field.name)
                switch field.type {
                case .int, .optional(.int): writer.int(1)
                case .string, .optional(.string): writer.string("x")
                default: Issue.record("unexpected error field type in \(error.name).\(field.name)")
                }
            }
            writer.endObject()
            let failure = try IOQuaked.Failure(
                VarlinkCallError(name: "io.quaked.\(error.name)", parameters: writer.bytes))
            #expect(failure != nil, "io.quaked.\(error.name) has no typed error")
        }
        #expect(try IOQuaked.Failure(VarlinkCallError(name: "io.quaked.Nope", parameters: Array("{}".utf8))) == nil)
        // Enums: the generated cases are the interface's values.
        func values(_ name: String) -> [String] {
            guard case .enumeration(let values)? = interface.types.first(where: { $0.name == name })?.shape else {
                return []
            }
            return values
        }
        #expect(IOQuaked.ChangeKind.allCases.map(\.rawValue) == values("ChangeKind"))
        #expect(IOQuaked.DeleteReason.allCases.map(\.rawValue) == values("DeleteReason"))
        #expect(IOQuaked.Author.allCases.map(\.rawValue) == values("Author"))
        #expect(IOQuaked.PullResult.allCases.map(\.rawValue) == values("PullResult"))
        #expect(IOQuaked.SubscribeEvent.allCases.map(\.rawValue) == values("SubscribeEvent"))
        #expect(IOQuaked.QueryOrder.allCases.map(\.rawValue) == values("QueryOrder"))
    }

    @Test("org.varlink.service is generated into the runtime from its own interface file")
    func serviceInterface() throws {
        let interface = try VarlinkInterface(parsing: OrgVarlinkService.interfaceDescription)
        #expect(interface.name == "org.varlink.service")
        #expect(OrgVarlinkService.Method.allCases.map(\.rawValue) == ["GetInfo", "GetInterfaceDescription"])
        #expect(
            interface.errors.map(\.name) == [
                "InterfaceNotFound", "MethodNotFound", "MethodNotImplemented", "InvalidParameter", "PermissionDenied",
                "ExpectedMore",
            ])
    }

    @Test("the generator's output is deterministic and carries the interface text verbatim")
    func generatorOutput() throws {
        let text = try Self.text("org.example.everything")
        let interface = try VarlinkInterface(parsing: text)
        let make = {
            SwiftGenerator(
                interface: interface, text: text, namespace: "Everything", runtimeModule: "Varlink",
                sourceName: "org.example.everything.varlink"
            ).generate()
        }
        let source = make()
        #expect(source == make())
        #expect(source.contains("public enum Everything {"))
        #expect(source.contains("public struct Everything: VarlinkValue"))
        #expect(source.contains("public struct Inline: VarlinkValue"), "inline struct types are nested")
        #expect(source.contains("public enum Choice: String, VarlinkValue"))
        #expect(source.contains("public var map: [String: Double]"))
        #expect(source.contains("public var o: [String: JSONValue]"))
        #expect(source.contains("public var nested: [Point?]?"))
        #expect(source.contains("public static let name = \"org.example.everything.Broken\""))
        for line in text.split(separator: "\n") { #expect(source.contains(line)) }
    }
}

extension IDLTests {
    @Test("the generator hashes field names exactly as the runtime does")
    func keyHashesAgree() throws {
        let interface = try VarlinkInterface(parsing: IOQuaked.interfaceDescription)
        var names: Set<String> = []
        for type in interface.types {
            if case .structure(let fields) = type.shape { names.formUnion(fields.map(\.name)) }
        }
        for method in interface.methods { names.formUnion((method.parameters + method.reply).map(\.name)) }
        // Types of at most 40 fields (the generator takes up to 64 per type).
        let sorted = names.sorted()
        let types = stride(from: 0, to: sorted.count, by: 40).enumerated().map { number, start in
            "type T\(number) (" + sorted[start..<min(start + 40, sorted.count)].map { "\($0): int" }.joined(separator: ", ") + ")"
        }
        let text = "interface a.b\n" + types.joined(separator: "\n")
        let source = SwiftGenerator(
            interface: try VarlinkInterface(parsing: text), text: text, namespace: "AB", runtimeModule: "Varlink",
            sourceName: "a.b.varlink"
        ).generate()
        for name in names {
            let hash = JSONScanner.keyHash(name)
            let hex = "0x" + String(repeating: "0", count: 16 - String(hash, radix: 16).count) + String(hash, radix: 16)
            #expect(source.contains("case \(hex) where json.member(member, is: \"\(name)\")"), "\(name)")
        }
    }
}

extension IDLTests {
    @Test("one decoder per type for calls and replies: an undeclared member goes to the scanner's unknownMembers mode")
    func unknownMembersAreTheScannersMode() throws {
        let text = try Self.text("org.example.everything")
        let source = SwiftGenerator(
            interface: try VarlinkInterface(parsing: text), text: text, namespace: "Everything", runtimeModule: "Varlink",
            sourceName: "org.example.everything.varlink"
        ).generate()
        func count(_ needle: String) -> Int { source.components(separatedBy: needle).count - 1 }
        // Structs: Everything, its Inline, Point, Ping's and Empty's Parameters and Reply, Broken,
        // Plain; enums: Choice, Color. Each has one init(json:), no strict and lenient copies.
        #expect(count("public init(json: inout JSONScanner)") == 11)
        #expect(count("try json.unknownMember(member)") == 9)
        // Each struct with fields tries them in declaration order by name before it hashes.
        #expect(count("case 0...0 where json.takeMember(") == 6)
        #expect(count(".unknownField") == 0, "no decoder refuses on its own")

        // And io.quaked's generated types, both ways.
        let reply = #"{"version":"1","storeId":"s","headToken":1,"oldestToken":0,"quakeCount":0,"databaseBytes":0,"feeds":[],"subscribers":0,"clients":[],"next":{"a":["}",{"b":"\"]"}]}}"#
        let status = try IOQuaked.GetStatus.Reply.decode(json: Array(reply.utf8), unknownMembers: .skip)
        #expect(status.storeId == "s" && status.sources == nil)
        #expect(throws: VarlinkParameterError(path: ["next"], .unknownField)) {
            try IOQuaked.GetStatus.Reply.decode(json: Array(reply.utf8))
        }
        #expect(throws: VarlinkParameterError(path: ["near", "next"], .unknownField)) {
            try IOQuaked.Query.Parameters.decode(json: Array(#"{"near":{"lat":1,"lon":2,"radiusKm":3,"next":1}}"#.utf8))
        }
    }
}
