import Foundation
import NIOCore
import NIOPosix
import QuakeProtocol
import Varlink

/// Why quaked could not be reached.
public struct QuakedConnectionError: Error, Sendable, Hashable, CustomStringConvertible {
    public enum Kind: Sendable, Hashable {
        /// The socket exists but this user may not connect (not in the socket's group).
        case permissionDenied
        /// No socket, nobody listening, or another connect failure.
        case unreachable
    }

    public var kind: Kind
    public var path: String
    public var reason: String

    public var description: String { "cannot reach quaked at \(path) (\(reason))" }
}

/// One connection to quaked, with a typed method per io.quaked call: over its Unix socket, or
/// over the stdin and stdout of `ssh HOST quakectl bridge` (``SSHRoute``).
///
/// Error replies are thrown typed: `IOQuaked.Failure` for io.quaked's errors,
/// `OrgVarlinkService.Failure` for the service interface's (PermissionDenied, InvalidParameter,
/// ...); anything else as the `VarlinkCallError` it came as.
public struct QuakedConnection: Sendable {
    public let client: VarlinkClient
    /// Where it is connected to.
    public let endpoint: QuakedEndpoint
    /// Over ssh: the ssh process this connection runs over, which the connection started and
    /// ends (``stop()``; ``with(_:_:)`` waits for it or ends it). Nil on a socket.
    public let sshChild: SSHChild?

    init(client: VarlinkClient, endpoint: QuakedEndpoint, sshChild: SSHChild? = nil) {
        self.client = client
        self.endpoint = endpoint
        self.sshChild = sshChild
    }

    /// How long connecting to quaked's socket may take (here and in ``StdioBridge``).
    public static let connectTimeout: TimeAmount = .seconds(10)

    /// Connects to the Unix socket at `path` (an ssh route needs ``with(_:_:)``, which also ends
    /// the ssh child).
    public static func connect(to path: String) async throws -> QuakedConnection {
        do {
            let client = try await VarlinkClient.connect(
                unixDomainSocketPath: path,
                bootstrap: ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton).connectTimeout(connectTimeout))
            return QuakedConnection(client: client, endpoint: .socket(path))
        } catch let error as IOError {
            throw QuakedConnectionError(errno: error.errnoCode, path: path)
        } catch let error as QuakedConnectionError {
            throw error
        } catch {
            throw QuakedConnectionError(kind: .unreachable, path: path, reason: "\(error)")
        }
    }

    public func close() async {
        await client.close()
    }

    /// Closes the connection and, over ssh, sends its ssh child SIGTERM at once (a watch that
    /// stops: ssh would otherwise wait for a remote bridge that waits on quaked).
    public func stop() async {
        await client.close()
        sshChild?.signal(SIGTERM)
    }

    /// Calls `M` and returns its reply; error replies are thrown typed.
    public func call<M: VarlinkMethod>(_ method: M.Type, _ parameters: M.Parameters) async throws -> M.Reply {
        try await Self.typed { try await client.call(method, parameters) }
    }

    /// Calls `M` with `more`; its replies as they come, error replies thrown typed.
    public func callMore<M: VarlinkMethod>(_ method: M.Type, _ parameters: M.Parameters) async throws
        -> TypedReplies<M.Reply>
    {
        TypedReplies(replies: try await Self.typed { try await client.callMore(method, parameters) })
    }

    public func status() async throws -> IOQuaked.GetStatus.Reply {
        try await call(IOQuaked.GetStatus.self, .init())
    }

    /// Pulls one feed, runs one source, or (both nil) every feed and every source, and waits.
    public func refresh(feed: String?, source: String? = nil) async throws -> IOQuaked.Refresh.Reply {
        try await call(IOQuaked.Refresh.self, .init(feed: feed, source: source))
    }

    public func reload() async throws {
        _ = try await call(IOQuaked.Reload.self, .init())
    }

    public func metrics() async throws -> IOQuaked.Metrics.Reply {
        try await call(IOQuaked.Metrics.self, .init())
    }

    public func subscribe(client name: String?, heartbeatSeconds: Int?, filter: IOQuaked.Filter? = nil) async throws
        -> TypedReplies<IOQuaked.Subscribe.Reply>
    {
        try await callMore(
            IOQuaked.Subscribe.self, .init(client: name, heartbeatSeconds: heartbeatSeconds, filter: filter))
    }

    public func fetchHistory(
        storeId: String?, after: Int, limit: Int? = nil, maxChanges: Int? = nil, client name: String? = nil,
        filter: IOQuaked.Filter? = nil
    ) async throws -> IOQuaked.FetchHistory.Reply {
        try await call(
            IOQuaked.FetchHistory.self,
            .init(storeId: storeId, after: after, limit: limit, maxChanges: maxChanges, client: name, filter: filter))
    }

    /// FetchHistory called with `more`: the pages after `after` one after another, until one
    /// with `hasMore` false (the head as quaked read it then). A quaked that answers the call
    /// once ends the sequence after its one page, `hasMore` or not: ask again after its
    /// `nextAfter`. Iterate to the end before the next call on this connection.
    public func fetchHistoryPages(
        storeId: String?, after: Int, limit: Int? = nil, maxChanges: Int? = nil, client name: String? = nil,
        filter: IOQuaked.Filter? = nil
    ) async throws -> TypedReplies<IOQuaked.FetchHistory.Reply> {
        try await callMore(
            IOQuaked.FetchHistory.self,
            .init(storeId: storeId, after: after, limit: limit, maxChanges: maxChanges, client: name, filter: filter))
    }

    public func acknowledge(client name: String, token: Int, error: String? = nil) async throws {
        _ = try await call(IOQuaked.Acknowledge.self, .init(client: name, token: token, error: error))
    }

    public func snapshot(pageSize: Int?, filter: IOQuaked.Filter? = nil) async throws
        -> TypedReplies<IOQuaked.Snapshot.Reply>
    {
        try await callMore(IOQuaked.Snapshot.self, .init(pageSize: pageSize, filter: filter))
    }

    public func query(_ parameters: IOQuaked.Query.Parameters) async throws -> IOQuaked.Query.Reply {
        try await call(IOQuaked.Query.self, parameters)
    }

    public func get(id: String) async throws -> IOQuaked.Quake {
        try await call(IOQuaked.Get.self, .init(id: id)).quake
    }

    /// Every source's report of the event `id`, the preferred first (GetReports); nil from a
    /// quaked older than the method, which answers MethodNotFound.
    public func reports(id: String) async throws -> [IOQuaked.Report]? {
        do {
            return try await call(IOQuaked.GetReports.self, .init(id: id)).reports
        } catch OrgVarlinkService.Failure.methodNotFound {
            return nil
        }
    }

    public func delete(ids: [String]) async throws -> IOQuaked.Delete.Reply {
        try await call(IOQuaked.Delete.self, .init(ids: ids))
    }

    /// Runs a call, turning an error reply into its interface's typed error.
    static func typed<T>(_ body: () async throws -> T) async throws -> T {
        do {
            return try await body()
        } catch let error as VarlinkCallError {
            throw typed(error)
        }
    }

    /// The typed form of an error reply (the reply itself when no interface knows it).
    public static func typed(_ error: VarlinkCallError) -> any Error {
        do {
            if let failure = try IOQuaked.Failure(error) { return failure }
            if let failure = try OrgVarlinkService.Failure(error) { return failure }
        } catch {
            return VarlinkConnectionError.invalidReply("the error \(error) has parameters that do not match its interface")
        }
        return error
    }
}

/// Replies of a call made with `more`, with error replies thrown typed.
public struct TypedReplies<Element: VarlinkValue>: AsyncSequence, Sendable {
    let replies: VarlinkReplies<Element>

    public func makeAsyncIterator() -> Iterator { Iterator(base: replies.makeAsyncIterator()) }

    public struct Iterator: AsyncIteratorProtocol, Sendable {
        var base: VarlinkReplies<Element>.Iterator
        public mutating func next() async throws -> Element? {
            do {
                return try await base.next()
            } catch let error as VarlinkCallError {
                throw QuakedConnection.typed(error)
            }
        }
    }
}

extension QuakedConnection {
    /// Connects, runs `body`, and closes the connection whatever happens (and, over ssh, waits
    /// for the ssh child to end, or ends it).
    public static func with<T: Sendable>(
        _ endpoint: QuakedEndpoint, _ body: (QuakedConnection) async throws -> T
    ) async throws -> T {
        switch endpoint {
        case .socket(let path):
            let connection = try await connect(to: path)
            do {
                let result = try await body(connection)
                await connection.close()
                return result
            } catch {
                await connection.close()
                throw error
            }
        case .ssh(let route):
            return try await route.withConnection(body)
        }
    }
}
