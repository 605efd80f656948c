/// A Varlink error reply as a client receives it: the error's fully qualified name and its
/// parameters. Generated `Failure` enums turn it into a typed error.
public struct VarlinkCallError: Error, Sendable, Hashable, CustomStringConvertible {
    /// E.g. `io.quaked.NoSuchQuake`.
    public var name: String
    /// The parameters' JSON text.
    public var parameters: [UInt8]

    public init(name: String, parameters: [UInt8]) {
        self.name = name
        self.parameters = parameters
    }

    public init(_ error: some VarlinkError) {
        self.init(name: type(of: error).name, parameters: error.jsonBytes)
    }

    /// Decodes the error's parameters as `T`. A reply's: members `T` does not declare (added by
    /// a newer server) are skipped unless `unknownMembers` is `.refuse`.
    public func decode<T: VarlinkValue>(
        _ type: T.Type, unknownMembers: JSONScanner.UnknownMembers = .skip
    ) throws(VarlinkParameterError) -> T {
        try T.decode(json: parameters, unknownMembers: unknownMembers)
    }

    public var description: String { "\(name) \(String(decoding: parameters, as: UTF8.self))" }
}
