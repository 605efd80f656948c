/// A parsed Varlink interface definition (the `.varlink` IDL of varlink.org).
///
/// The parser keeps what a code generator needs: every type, method and error with its fields
/// in declaration order, and the comment lines above each (its documentation).
public struct VarlinkInterface: Sendable, Hashable {
    /// The interface's reverse-domain name, e.g. `io.quaked`.
    public var name: String
    public var documentation: [String]
    public var types: [TypeDefinition] = []
    public var methods: [Method] = []
    public var errors: [ErrorDefinition] = []

    /// A named type: a struct (`type Near (lat: float, ...)`) or an enum (`type Kind (a, b)`).
    public struct TypeDefinition: Sendable, Hashable {
        public var name: String
        public var documentation: [String]
        public var shape: Shape
    }

    public struct Method: Sendable, Hashable {
        public var name: String
        public var documentation: [String]
        public var parameters: [Field]
        public var reply: [Field]
    }

    public struct ErrorDefinition: Sendable, Hashable {
        public var name: String
        public var documentation: [String]
        public var fields: [Field]
    }

    /// A struct's fields or an enum's values.
    public enum Shape: Sendable, Hashable {
        case structure([Field])
        case enumeration([String])
    }

    public struct Field: Sendable, Hashable {
        public var name: String
        public var documentation: [String]
        public var type: FieldType

        public init(name: String, documentation: [String] = [], type: FieldType) {
            self.name = name
            self.documentation = documentation
            self.type = type
        }
    }

    /// A field's type. `?T` is `optional`; anonymous structs and enums may appear inline.
    public indirect enum FieldType: Sendable, Hashable {
        case bool, int, float, string, object
        case named(String)
        case optional(FieldType)
        case array(FieldType)
        case map(FieldType)
        case inline(Shape)
    }
}

/// Why an interface text could not be parsed: the line and column, and what was expected.
public struct VarlinkIDLError: Error, Sendable, Hashable, CustomStringConvertible {
    public var line: Int
    public var column: Int
    public var message: String

    public var description: String { "line \(line), column \(column): \(message)" }
}
