import Varlink

/// Calls through an interface's generated types (`IOQuaked.GetStatus` and the like): the method's
/// name, its parameters written and its reply read by the generated code, strictly (a reply
/// member the interface does not declare fails the call).
///
/// ```swift
/// let status = try client.call(IOQuaked.GetStatus.self, .init())
/// #expect(status.subscribers == 1)
/// ```
///
/// Tests of the wire itself (malformed frames, hand-written messages) send bytes with
/// ``send(_:)`` and read them with ``receive(timeout:)`` instead.
extension UnixSocketClient {
    /// One call and its reply. A Varlink error reply throws `VarlinkCallError` (its `name` and
    /// `parameters`); ``result(_:_:timeout:)`` returns it instead, for calls expected to fail.
    public func call<M: VarlinkMethod>(
        _ method: M.Type, _ parameters: M.Parameters, timeout: Duration = .seconds(30)
    ) throws -> M.Reply {
        try result(method, parameters, timeout: timeout).get()
    }

    /// One call and its reply or its error reply, for tests that expect an error.
    public func result<M: VarlinkMethod>(
        _ method: M.Type, _ parameters: M.Parameters, timeout: Duration = .seconds(30)
    ) throws -> Result<M.Reply, VarlinkCallError> {
        try send(VarlinkCall(method: M.name, parameters: parameters.jsonBytes).frame())
        guard let reply = try next(M.self, timeout: timeout) else {
            throw Failure(description: "connection closed")
        }
        return reply.result
    }

    /// Sends a call with `more` (`Subscribe`, `Snapshot`): read its replies with
    /// ``next(_:timeout:)``.
    public func callMore<M: VarlinkMethod>(_ method: M.Type, _ parameters: M.Parameters) throws {
        try send(VarlinkCall(method: M.name, parameters: parameters.jsonBytes, more: true).frame())
    }

    /// The next reply to a call of `method`: its parameters or its error, and whether more
    /// replies follow (`continues`); nil when the connection closed. Throws on a timeout, and on a
    /// message that is not a reply of `method` (`VarlinkParameterError`).
    public func next<M: VarlinkMethod>(
        _ method: M.Type, timeout: Duration = .seconds(10)
    ) throws -> (result: Result<M.Reply, VarlinkCallError>, continues: Bool)? {
        guard let frame = try receiveBytes(timeout: timeout) else { return nil }
        return try VarlinkReply.decode(M.Reply.self, frame: frame)
    }

    /// The next reply to a call of `method` with `more`, which must not be an error; nil when the
    /// connection closed.
    public func nextReply<M: VarlinkMethod>(_ method: M.Type, timeout: Duration = .seconds(10)) throws -> M.Reply? {
        try next(method, timeout: timeout).map { try $0.result.get() }
    }
}

extension Result where Failure == VarlinkCallError {
    /// The error reply, when the call failed.
    public var error: VarlinkCallError? {
        guard case .failure(let error) = self else { return nil }
        return error
    }
}
