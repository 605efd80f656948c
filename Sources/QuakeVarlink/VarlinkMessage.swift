import Foundation

/// A Varlink call: `{"method": "io.quaked.GetStatus", "parameters": {...}, "more": true}`.
public struct VarlinkCall: Sendable, Codable, Hashable {
    public var method: String
    public var parameters: JSONValue?
    /// The caller accepts several replies (every one but the last with `continues`).
    public var more: Bool?
    /// The caller wants no reply.
    public var oneway: Bool?
    /// The caller allows the connection to be upgraded (unused by quaked).
    public var upgrade: Bool?

    public init(method: String, parameters: JSONValue? = nil, more: Bool? = nil, oneway: Bool? = nil) {
        self.method = method
        self.parameters = parameters
        self.more = more
        self.oneway = oneway
    }

    /// The interface part of `method` (`io.quaked` of `io.quaked.GetStatus`).
    public var interface: String {
        guard let dot = method.lastIndex(of: ".") else { return "" }
        return String(method[..<dot])
    }

    /// The member part of `method` (`GetStatus`).
    public var member: String {
        guard let dot = method.lastIndex(of: ".") else { return method }
        return String(method[method.index(after: dot)...])
    }
}

/// A Varlink reply: parameters, or an error name with its parameters.
public struct VarlinkReply: Sendable, Codable, Hashable {
    public var parameters: JSONValue?
    public var continues: Bool?
    public var error: String?
    /// Parameters already encoded as a JSON object, written as they are (large replies skip
    /// the JSONValue tree). Takes the place of `parameters` on the wire.
    public var encodedParameters: [UInt8]?

    public init(parameters: JSONValue? = nil, continues: Bool? = nil, error: String? = nil) {
        self.parameters = parameters
        self.continues = continues
        self.error = error
    }

    /// A reply whose parameters are `value` encoded once, straight to bytes.
    public init(encoding value: some Encodable, continues: Bool? = nil) throws {
        self.encodedParameters = [UInt8](try VarlinkCoding.encoder().encode(value))
        self.continues = continues
    }

    enum CodingKeys: String, CodingKey {
        case parameters, continues, error
    }

    /// The message's bytes, NUL-terminated.
    public func frame() throws -> [UInt8] {
        guard let encodedParameters else { return try VarlinkCoding.frame(self) }
        var bytes = Array(#"{"parameters":"#.utf8)
        bytes.reserveCapacity(encodedParameters.count + 48)
        bytes += encodedParameters
        if continues == true { bytes += Array(#","continues":true"#.utf8) }
        bytes += [UInt8(ascii: "}"), 0]
        return bytes
    }
}

/// Encoding and decoding of Varlink messages (each a JSON object followed by a NUL byte on the wire).
public enum VarlinkCoding {
    public static func encoder() -> JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .custom { date, encoder in
            var c = encoder.singleValueContainer()
            try c.encode(Int64((date.timeIntervalSince1970 * 1000).rounded()))
        }
        return encoder
    }

    public static func decoder() -> JSONDecoder {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .custom { decoder in
            let c = try decoder.singleValueContainer()
            return Date(timeIntervalSince1970: Double(try c.decode(Int64.self)) / 1000)
        }
        return decoder
    }

    /// Any Encodable as a JSONValue (for `parameters`).
    public static func value(_ value: some Encodable) throws -> JSONValue {
        try decoder().decode(JSONValue.self, from: encoder().encode(value))
    }

    /// Decodes `parameters` (absent means `{}`) into a typed value.
    public static func decode<T: Decodable>(_ type: T.Type, from parameters: JSONValue?) throws -> T {
        try decoder().decode(T.self, from: encoder().encode(parameters ?? .object([:])))
    }

    /// One message's bytes, NUL-terminated.
    public static func frame(_ message: some Encodable) throws -> [UInt8] {
        var bytes = [UInt8](try encoder().encode(message))
        bytes.append(0)
        return bytes
    }
}

/// Error names of the Varlink service interface, which every Varlink service answers with.
public enum VarlinkErrorName {
    public static let interfaceNotFound = "org.varlink.service.InterfaceNotFound"
    public static let methodNotFound = "org.varlink.service.MethodNotFound"
    public static let methodNotImplemented = "org.varlink.service.MethodNotImplemented"
    public static let invalidParameter = "org.varlink.service.InvalidParameter"
    public static let permissionDenied = "org.varlink.service.PermissionDenied"
    public static let expectedMore = "org.varlink.service.ExpectedMore"
}
