import QuakeProtocol
import QuakeTestSupport
import Varlink

/// The daemon's methods through the generated types, each on a fresh connection, as
/// ``DaemonHarness/call(_:_:)`` makes its untyped calls.
extension DaemonHarness {
    /// One call and its reply; a Varlink error reply throws `VarlinkCallError`.
    func call<M: VarlinkMethod>(_ method: M.Type, _ parameters: M.Parameters) async throws -> M.Reply {
        try await result(method, parameters).get()
    }

    /// One call and its reply or its error reply, for calls expected to fail.
    func result<M: VarlinkMethod>(
        _ method: M.Type, _ parameters: M.Parameters
    ) async throws -> Result<M.Reply, VarlinkCallError> {
        let path = socketPath
        let call = VarlinkCall(method: M.name, parameters: parameters.jsonBytes).frame()
        // The blocking read on a Dispatch thread, so in-process servers keep running meanwhile.
        let reply = try await onBlockingThread { () throws -> [UInt8]? in
            let client = try UnixSocketClient(path: path)
            try client.send(call)
            return try client.receiveBytes(timeout: .seconds(60))
        }
        guard let reply else { throw HarnessError(stderr: "connection closed") }
        return try VarlinkReply.decode(M.Reply.self, frame: reply).result
    }

    /// GetStatus's reply.
    func getStatus() async throws -> IOQuaked.GetStatus.Reply {
        try await call(IOQuaked.GetStatus.self, .init())
    }
}
