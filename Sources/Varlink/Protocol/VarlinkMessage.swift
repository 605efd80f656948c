/// A Varlink call as received: `{"method": "io.quaked.GetStatus", "parameters": {...}, "more": true}`.
///
/// Parsed strictly: the message must be an object with a string `method`; `parameters`, when
/// present, must be an object (its bytes are kept for the method's own strict decoding), or null,
/// which means `{}` as in systemd's sd-varlink (varlink-go sends it); `more`, `oneway` and
/// `upgrade` must be booleans; any other member is refused.
public struct VarlinkCall: Sendable, Hashable {
    public var method: String
    /// The parameters object's JSON text (`{}` when the call had none).
    public var parameters: [UInt8]
    /// The caller accepts several replies (every one but the last with `continues`).
    public var more: Bool
    /// The caller wants no reply.
    public var oneway: Bool
    /// The caller allows the connection to be upgraded (no quaked method upgrades).
    public var upgrade: Bool

    public init(method: String, parameters: [UInt8] = Array("{}".utf8), more: Bool = false, oneway: Bool = false) {
        self.method = method
        self.parameters = parameters
        self.more = more
        self.oneway = oneway
        self.upgrade = false
    }

    /// Parses one message (without its NUL). Errors name the member that is wrong: `method`,
    /// `parameters`, `more`, ... or `message` when the bytes are not a JSON object at all.
    public init(parsing frame: [UInt8]) throws(VarlinkParameterError) {
        var json = JSONScanner(frame)
        var method: String?
        var parameters: [UInt8]?
        var more: Bool?
        var oneway: Bool?
        var upgrade: Bool?
        do {
            try json.beginObject()
        } catch {
            throw VarlinkParameterError(path: ["message"], error.reason)
        }
        var seen: UInt64 = 0
        while let key = try json.nextKey() {
            switch key {
            case "method": method = try json.field("method", seen: &seen, bit: 1)
            case "parameters":
                guard seen & 2 == 0 else { throw VarlinkParameterError(path: ["parameters"], .duplicate) }
                seen |= 2
                do {
                    // Only checked here (an object, valid JSON); the method decodes it field by field.
                    if try json.readNull() { continue }
                    var probe = json
                    try probe.beginObject()
                    parameters = Array(json.slice(try json.skipValue()))
                } catch {
                    throw VarlinkParameterError(path: ["parameters"], error.reason)
                }
            case "more": more = try json.field("more", seen: &seen, bit: 4)
            case "oneway": oneway = try json.field("oneway", seen: &seen, bit: 8)
            case "upgrade": upgrade = try json.field("upgrade", seen: &seen, bit: 16)
            default: throw VarlinkParameterError(path: [key], .unknownField)
            }
        }
        try json.finish()
        guard let method, !method.isEmpty else { throw VarlinkParameterError(path: ["method"], .missing) }
        self.method = method
        self.parameters = parameters ?? Array("{}".utf8)
        self.more = more ?? false
        self.oneway = oneway ?? false
        self.upgrade = upgrade ?? false
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

    /// The message's bytes, NUL-terminated.
    public func frame() -> [UInt8] {
        var writer = JSONWriter(capacity: parameters.count + method.utf8.count + 48)
        writer.beginObject()
        writer.key("method")
        writer.string(method)
        writer.key("parameters")
        writer.raw(parameters)
        if more {
            writer.key("more")
            writer.bool(true)
        }
        if oneway {
            writer.key("oneway")
            writer.bool(true)
        }
        writer.endObject()
        writer.bytes.append(0)
        return writer.bytes
    }
}

/// A Varlink reply as received: parameters (JSON text), or an error's name and parameters.
public struct VarlinkReply: Sendable, Hashable {
    public var parameters: [UInt8]
    public var continues: Bool
    public var error: String?

    /// Parses one reply message: `parameters` must be an object (or null), `continues` a boolean
    /// that never comes with an error, `error` a string. Any other member is skipped, as
    /// ``decode(_:frame:unknownMembers:)`` skips it, unless `unknownMembers` is `.refuse`.
    public init(parsing frame: [UInt8], unknownMembers: JSONScanner.UnknownMembers = .skip) throws(VarlinkParameterError) {
        let (result, continues) = try Self.decode(JSONObjectText.self, frame: frame, unknownMembers: unknownMembers)
        switch result {
        case .success(let object):
            self.parameters = object.bytes
            self.error = nil
        case .failure(let error):
            self.parameters = error.parameters
            self.error = error.name
        }
        self.continues = continues
    }

    /// A reply decoded in one pass: the parameters straight into `R` (not first checked, copied and
    /// then decoded), or the error with its parameters' text.
    ///
    /// Strict about what is there (types, required fields, duplicates, JSON itself), but by default
    /// a member nobody declares, in the message or at any depth of the parameters, is skipped: a
    /// newer server may have added optional fields since the client's interface was generated
    /// (Varlink's evolution rule; the reference clients ignore them too). `.refuse` makes it an
    /// error, for a checker that wants replies exactly as the interface has them.
    public static func decode<R: VarlinkValue>(
        _ type: R.Type, frame: [UInt8], unknownMembers: JSONScanner.UnknownMembers = .skip
    ) throws(VarlinkParameterError) -> (result: Result<R, VarlinkCallError>, continues: Bool) {
        var json = JSONScanner(frame, unknownMembers: unknownMembers)
        var value: R?
        var valueError: VarlinkParameterError?
        var raw: [UInt8]?
        var continues: Bool?
        var error: String?
        var seen: UInt64 = 0
        try json.beginObject()
        while let key = try json.nextKey() {
            switch key {
            case "parameters":
                guard seen & 1 == 0 else { throw VarlinkParameterError(path: ["parameters"], .duplicate) }
                seen |= 1
                if try json.readNull() { continue }
                var probe = json
                try probe.beginObject()
                if error == nil {
                    // Most replies are not errors: decode at once, and keep the text only if
                    // this turns out to be an error's parameters after all.
                    let start = json
                    do {
                        value = try R(json: &json)
                        continue
                    } catch let failure {
                        valueError = failure
                        json = start
                    }
                }
                raw = Array(json.slice(try json.skipValue()))
            case "continues": continues = try json.field("continues", seen: &seen, bit: 2)
            case "error": error = try json.field("error", seen: &seen, bit: 4)
            default: try json.unknownMember(key)
            }
        }
        try json.finish()
        if let error {
            if continues == true { throw VarlinkParameterError(path: ["continues"], .unknownField) }
            let parameters = raw ?? value?.jsonBytes ?? Array("{}".utf8)
            return (.failure(VarlinkCallError(name: error, parameters: parameters)), false)
        }
        if let valueError { throw valueError }
        if let value { return (.success(value), continues ?? false) }
        // No parameters means an empty object.
        return (.success(try R.decode(json: Array("{}".utf8), unknownMembers: unknownMembers)), continues ?? false)
    }

    /// Starts a reply frame in `writer`: write the parameters object next, then call
    /// ``endFrame(_:continues:)``. For replies built in one buffer, without a copy.
    public static func beginFrame(_ writer: inout JSONWriter) {
        writer.raw(#"{"parameters":"#)
    }

    /// Ends a frame begun with ``beginFrame(_:)``.
    public static func endFrame(_ writer: inout JSONWriter, continues: Bool = false) {
        if continues { writer.raw(#","continues":true"#) }
        writer.bytes += [UInt8(ascii: "}"), 0]
    }

    /// A reply frame for a value.
    public static func frame(_ value: some VarlinkValue, continues: Bool = false) -> [UInt8] {
        var writer = JSONWriter(capacity: 512)
        writer.raw(#"{"parameters":"#)
        value.write(to: &writer)
        if continues { writer.raw(#","continues":true"#) }
        writer.bytes += [UInt8(ascii: "}"), 0]
        return writer.bytes
    }

    /// An error reply frame.
    public static func frame(error: some VarlinkError) -> [UInt8] {
        frame(errorName: type(of: error).name, parameters: error.jsonBytes)
    }

    public static func frame(errorName: String, parameters: some Collection<UInt8>) -> [UInt8] {
        var writer = JSONWriter(capacity: parameters.count + 64)
        writer.beginObject()
        writer.key("error")
        writer.string(errorName)
        writer.key("parameters")
        writer.raw(parameters)
        writer.endObject()
        writer.bytes.append(0)
        return writer.bytes
    }
}

/// A Varlink method: its fully qualified name and its parameter and reply types.
public protocol VarlinkMethod {
    associatedtype Parameters: VarlinkValue
    associatedtype Reply: VarlinkValue
    static var name: String { get }
}

/// A Varlink error with typed parameters (generated from an interface's `error` lines).
public protocol VarlinkError: Error, VarlinkValue {
    /// The fully qualified name, e.g. `io.quaked.NoSuchQuake`.
    static var name: String { get }
}

/// Any JSON object, kept as its text (checked, not decoded).
struct JSONObjectText: VarlinkValue {
    var bytes: [UInt8]

    init(json: inout JSONScanner) throws(VarlinkParameterError) {
        var probe = json
        try probe.beginObject()
        bytes = Array(json.slice(try json.skipValue()))
    }

    func write(to writer: inout JSONWriter) { writer.raw(bytes) }
}
