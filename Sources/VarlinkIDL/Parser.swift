extension VarlinkInterface {
    /// Parses an interface definition. Names are checked against the grammar of varlink.org
    /// (interface names in reverse-domain form, member names in upper camel case, field names
    /// starting with a letter); every named type a field refers to must be defined.
    public init(parsing text: String) throws(VarlinkIDLError) {
        var parser = IDLParser(text)
        self = try parser.parseInterface()
    }
}

private struct IDLParser {
    private let chars: [Character]
    private var position = 0
    private var line = 1
    private var column = 1
    /// Comment lines seen since the last declaration: the next one's documentation.
    private var pendingDocs: [String] = []

    init(_ text: String) {
        chars = Array(text)
    }

    mutating func parseInterface() throws(VarlinkIDLError) -> VarlinkInterface {
        skipSpace()
        let docs = takeDocs()
        try expectKeyword("interface")
        let name = try identifier(allowDots: true)
        guard Self.isInterfaceName(name) else { throw fail("\"\(name)\" is not a valid interface name") }
        var interface = VarlinkInterface(name: name, documentation: docs)
        var names = Set<String>()
        while true {
            skipSpace()
            if atEnd { break }
            let docs = takeDocs()
            let keyword = try identifier(allowDots: false)
            let memberName = try identifier(allowDots: false)
            guard Self.isMemberName(memberName) else {
                throw fail("\"\(memberName)\" is not a valid member name (upper camel case)")
            }
            guard names.insert(memberName).inserted else { throw fail("\"\(memberName)\" is defined twice") }
            switch keyword {
            case "type":
                let shape = try parseShape()
                interface.types.append(.init(name: memberName, documentation: docs, shape: shape))
            case "method":
                let parameters = try parseStructFields()
                skipSpace()
                try expect("-")
                try expect(">")
                let reply = try parseStructFields()
                interface.methods.append(
                    .init(name: memberName, documentation: docs, parameters: parameters, reply: reply))
            case "error":
                let fields = try parseStructFields()
                interface.errors.append(.init(name: memberName, documentation: docs, fields: fields))
            default:
                throw fail("expected type, method or error, found \"\(keyword)\"")
            }
        }
        try checkReferences(interface)
        return interface
    }

    private func checkReferences(_ interface: VarlinkInterface) throws(VarlinkIDLError) {
        let defined = Set(interface.types.map(\.name))
        func check(_ type: VarlinkInterface.FieldType, _ where_: String) throws(VarlinkIDLError) {
            switch type {
            case .named(let name):
                guard defined.contains(name) else {
                    throw VarlinkIDLError(line: 0, column: 0, message: "\(where_) refers to undefined type \(name)")
                }
            case .optional(let inner), .array(let inner), .map(let inner): try check(inner, where_)
            case .inline(.structure(let fields)): for f in fields { try check(f.type, where_) }
            default: break
            }
        }
        for t in interface.types {
            if case .structure(let fields) = t.shape { for f in fields { try check(f.type, "type \(t.name)") } }
        }
        for m in interface.methods { for f in m.parameters + m.reply { try check(f.type, "method \(m.name)") } }
        for e in interface.errors { for f in e.fields { try check(f.type, "error \(e.name)") } }
    }

    // MARK: Grammar

    /// `( ... )` after a type name: an enum when every member is a bare name, else a struct.
    private mutating func parseShape() throws(VarlinkIDLError) -> VarlinkInterface.Shape {
        skipSpace()
        try expect("(")
        var fields: [VarlinkInterface.Field] = []
        var values: [String] = []
        skipSpace()
        if peek == ")" {
            advance()
            return .structure([])
        }
        while true {
            skipSpace()
            let docs = takeDocs()
            let name = try identifier(allowDots: false)
            guard Self.isFieldName(name) else { throw fail("\"\(name)\" is not a valid field name") }
            skipSpace()
            if peek == ":" {
                guard values.isEmpty else { throw fail("an enum cannot have typed fields") }
                advance()
                fields.append(.init(name: name, documentation: docs, type: try parseType()))
            } else {
                guard fields.isEmpty else { throw fail("expected \":\" and a type after \(name)") }
                values.append(name)
            }
            skipSpace()
            if peek == "," {
                advance()
                continue
            }
            try expect(")")
            break
        }
        let names = fields.isEmpty ? values : fields.map(\.name)
        guard Set(names).count == names.count else { throw fail("a field or value is listed twice") }
        return fields.isEmpty ? .enumeration(values) : .structure(fields)
    }

    private mutating func parseStructFields() throws(VarlinkIDLError) -> [VarlinkInterface.Field] {
        switch try parseShape() {
        case .structure(let fields): return fields
        case .enumeration: throw fail("expected fields with types")
        }
    }

    private mutating func parseType() throws(VarlinkIDLError) -> VarlinkInterface.FieldType {
        skipSpace()
        switch peek {
        case "?":
            advance()
            let inner = try parseType()
            if case .optional = inner { throw fail("?? is not a type") }
            return .optional(inner)
        case "[":
            advance()
            skipSpace()
            if peek == "]" {
                advance()
                return .array(try parseType())
            }
            let key = try identifier(allowDots: false)
            guard key == "string" else { throw fail("map keys must be string") }
            try expect("]")
            return .map(try parseType())
        case "(":
            return .inline(try parseShape())
        default:
            let name = try identifier(allowDots: false)
            switch name {
            case "bool": return .bool
            case "int": return .int
            case "float": return .float
            case "string": return .string
            case "object": return .object
            default:
                guard Self.isMemberName(name) else { throw fail("unknown type \"\(name)\"") }
                return .named(name)
            }
        }
    }

    // MARK: Lexing

    private var atEnd: Bool { position >= chars.count }
    private var peek: Character? { atEnd ? nil : chars[position] }

    private mutating func advance() {
        if chars[position] == "\n" {
            line += 1
            column = 1
        } else {
            column += 1
        }
        position += 1
    }

    /// Skips white space and collects comments (`# ...` to the end of the line).
    private mutating func skipSpace() {
        while let c = peek {
            if c == "#" {
                advance()
                var text = ""
                while let c = peek, c != "\n" {
                    text.append(c)
                    advance()
                }
                pendingDocs.append(text.hasPrefix(" ") ? String(text.dropFirst()) : text)
            } else if c.isWhitespace {
                if c == "\n", position + 1 < chars.count, chars[position + 1] == "\n" {
                    // A blank line ends a comment block that belongs to nothing below it.
                    if !pendingDocs.isEmpty, !nextNonSpaceIsComment(from: position + 1) { pendingDocs = [] }
                }
                advance()
            } else {
                break
            }
        }
    }

    private func nextNonSpaceIsComment(from index: Int) -> Bool {
        var i = index
        while i < chars.count, chars[i].isWhitespace { i += 1 }
        return i < chars.count && chars[i] == "#"
    }

    private mutating func takeDocs() -> [String] {
        defer { pendingDocs = [] }
        return pendingDocs
    }

    private mutating func identifier(allowDots: Bool) throws(VarlinkIDLError) -> String {
        skipSpace()
        var text = ""
        while let c = peek, c.isASCII, c.isLetter || c.isNumber || c == "_" || (allowDots && (c == "." || c == "-")) {
            text.append(c)
            advance()
        }
        guard !text.isEmpty else { throw fail("expected a name, found \(peek.map { "\"\($0)\"" } ?? "the end")") }
        return text
    }

    private mutating func expectKeyword(_ word: String) throws(VarlinkIDLError) {
        let found = try identifier(allowDots: false)
        guard found == word else { throw fail("expected \"\(word)\", found \"\(found)\"") }
    }

    private mutating func expect(_ c: Character) throws(VarlinkIDLError) {
        skipSpace()
        guard peek == c else { throw fail("expected \"\(c)\", found \(peek.map { "\"\($0)\"" } ?? "the end")") }
        advance()
    }

    private func fail(_ message: String) -> VarlinkIDLError {
        VarlinkIDLError(line: line, column: column, message: message)
    }

    // MARK: Names (varlink.org grammar)

    static func isInterfaceName(_ name: String) -> Bool {
        let parts = name.split(separator: ".", omittingEmptySubsequences: false)
        return parts.count >= 2
            && parts.allSatisfy { part in
                guard let first = part.first, first.isLetter, part.last != "-" else { return false }
                return part.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-") }
            }
    }

    static func isMemberName(_ name: String) -> Bool {
        guard let first = name.first, first.isUppercase else { return false }
        return name.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber) }
    }

    static func isFieldName(_ name: String) -> Bool {
        guard let first = name.first, first.isLetter, name.last != "_" else { return false }
        return !name.contains("__") && name.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "_") }
    }
}
