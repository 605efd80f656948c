/// A value with a Varlink type: what generated types and the built-in types conform to.
///
/// Decoding is strict, as systemd's sd-varlink is: an `int` is a JSON integer (not 1.0 or 1.5), a
/// required field must be present and not null. Every failure is a ``VarlinkParameterError``
/// naming the field. A member a struct does not declare is refused too when the scanner's
/// ``JSONScanner/unknownMembers`` is `.refuse` (a server decoding a call's parameters), and
/// skipped when it is `.skip` (a client decoding a reply: the interface may have gained optional
/// fields since the client was built, which Varlink's evolution rule allows).
public protocol VarlinkValue: Sendable {
    init(json: inout JSONScanner) throws(VarlinkParameterError)
    func write(to writer: inout JSONWriter)
}

/// A call's parameters or a reply's: the field that was wrong (a dotted path for nested fields,
/// with array indexes, e.g. `near.lat` or `ids[2]`), and why. The Varlink error for it is
/// `org.varlink.service.InvalidParameter` with `{"parameter": path}`.
public struct VarlinkParameterError: Error, Sendable, Hashable, CustomStringConvertible {
    public enum Reason: Sendable, Hashable {
        /// A field the type does not declare.
        case unknownField
        /// A required field that is absent or null.
        case missing
        /// The same field twice in one object.
        case duplicate
        /// A value of the wrong JSON type (or an integer out of range, an unknown enum value).
        case wrongType(expected: String)
        /// Bytes that are not JSON.
        case malformed(String)
    }

    /// From the outermost field inwards; empty means the parameters object itself.
    public var path: [String]
    public var reason: Reason

    public init(path: [String] = [], _ reason: Reason) {
        self.path = path
        self.reason = reason
    }

    /// The field's name as InvalidParameter reports it: `parameters` for the object as a whole.
    public var parameter: String {
        guard var name = path.first else { return "parameters" }
        for part in path.dropFirst() {
            if part.hasPrefix("[") { name += part } else { name += "." + part }
        }
        return name
    }

    /// The same error, one level further out.
    public func inField(_ name: String) -> VarlinkParameterError {
        var copy = self
        copy.path.insert(name, at: 0)
        return copy
    }

    public var description: String {
        switch reason {
        case .unknownField: "\(parameter): no such field"
        case .missing: "\(parameter): required, and missing or null"
        case .duplicate: "\(parameter): given twice"
        case .wrongType(let expected): "\(parameter): expected \(expected)"
        case .malformed(let detail): "\(parameter): \(detail)"
        }
    }
}

extension Bool: VarlinkValue {
    @inlinable public init(json: inout JSONScanner) throws(VarlinkParameterError) { self = try json.readBool() }
    @inlinable public func write(to writer: inout JSONWriter) { writer.bool(self) }
}

extension Int: VarlinkValue {
    @inlinable public init(json: inout JSONScanner) throws(VarlinkParameterError) { self = try json.readInt() }
    @inlinable public func write(to writer: inout JSONWriter) { writer.int(self) }
}

extension Double: VarlinkValue {
    @inlinable public init(json: inout JSONScanner) throws(VarlinkParameterError) { self = try json.readDouble() }
    @inlinable public func write(to writer: inout JSONWriter) { writer.double(self) }
}

extension String: VarlinkValue {
    @inlinable public init(json: inout JSONScanner) throws(VarlinkParameterError) { self = try json.readString() }
    @inlinable public func write(to writer: inout JSONWriter) { writer.string(self) }
}

extension Optional: VarlinkValue where Wrapped: VarlinkValue {
    @inlinable public init(json: inout JSONScanner) throws(VarlinkParameterError) {
        self = try json.readNull() ? nil : Wrapped(json: &json)
    }
    @inlinable public func write(to writer: inout JSONWriter) {
        if let value = self { value.write(to: &writer) } else { writer.null() }
    }
}

extension Array: VarlinkValue where Element: VarlinkValue {
    @inlinable public init(json: inout JSONScanner) throws(VarlinkParameterError) {
        self = []
        try json.beginArray()
        while try json.nextElement() {
            do {
                append(try Element(json: &json))
            } catch {
                throw error.inField("[\(count)]")
            }
        }
    }
    @inlinable public func write(to writer: inout JSONWriter) {
        writer.beginArray()
        for element in self {
            writer.separator()
            element.write(to: &writer)
        }
        writer.endArray()
    }
}

extension Dictionary: VarlinkValue where Key == String, Value: VarlinkValue {
    @inlinable public init(json: inout JSONScanner) throws(VarlinkParameterError) {
        self = [:]
        try json.beginObject()
        while let key = try json.nextKey() {
            guard self[key] == nil else { throw VarlinkParameterError(path: [key], .duplicate) }
            do {
                self[key] = try Value(json: &json)
            } catch {
                throw error.inField(key)
            }
        }
    }
    @inlinable public func write(to writer: inout JSONWriter) {
        writer.beginObject()
        for (key, value) in self.sorted(by: { $0.key < $1.key }) {
            writer.key(key)
            value.write(to: &writer)
        }
        writer.endObject()
    }
}

extension VarlinkValue {
    /// Decodes one value from a whole JSON text (nothing but white space may follow it). Members
    /// no struct declares are refused unless `unknownMembers` is `.skip` (for a reply's value).
    public static func decode(
        json bytes: some Collection<UInt8>, unknownMembers: JSONScanner.UnknownMembers = .refuse
    ) throws(VarlinkParameterError) -> Self {
        let array = Array(bytes)
        var scanner = JSONScanner(array, unknownMembers: unknownMembers)
        let value = try Self(json: &scanner)
        try scanner.finish()
        return value
    }

    /// The value's JSON text.
    public var jsonBytes: [UInt8] {
        var writer = JSONWriter()
        write(to: &writer)
        return writer.bytes
    }
}
