import Foundation
import NIOCore
import NIOPosix
import QuakeVarlink

/// One connection to quaked, with a typed method per io.quaked call.
///
/// Connection failures become ``QuakectlError``s with exit code 69 (nothing there) or 77 (not
/// allowed); error replies are thrown as `VarlinkCallError` for the caller to handle or map.
public struct QuakedConnection: Sendable {
    public let client: VarlinkClient
    public let socketPath: String

    public static func connect(to path: String) async throws -> QuakedConnection {
        do {
            let client = try await VarlinkClient.connect(
                unixDomainSocketPath: path,
                bootstrap: ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton).connectTimeout(.seconds(10)))
            return QuakedConnection(client: client, socketPath: path)
        } catch let error as IOError {
            switch error.errnoCode {
            case EACCES, EPERM:
                throw QuakectlError(
                    QuakectlError.permissionDenied,
                    "permission denied opening \(path); ask an administrator to add you to quaked's socket group (quake by default)."
                )
            case ENOENT: throw QuakectlError.unreachable(path, "no such socket")
            case ECONNREFUSED: throw QuakectlError.unreachable(path, "nothing is listening")
            default: throw QuakectlError.unreachable(path, String(cString: strerror(error.errnoCode)))
            }
        } catch let error as QuakectlError {
            throw error
        } catch {
            throw QuakectlError.unreachable(path, "\(error)")
        }
    }

    public func close() async {
        await client.close()
    }

    public func status() async throws -> QuakedAPI.Status {
        try await client.call("io.quaked.GetStatus", QuakedAPI.Empty())
    }

    public func refresh(feed: String?) async throws -> QuakedAPI.RefreshReply {
        try await client.call("io.quaked.Refresh", QuakedAPI.RefreshParameters(feed: feed))
    }

    public func reload() async throws {
        _ = try await client.call("io.quaked.Reload", QuakedAPI.Empty(), returning: QuakedAPI.Empty.self)
    }

    public func subscribe(client name: String?, heartbeatSeconds: Int?) async throws
        -> VarlinkReplies<QuakedAPI.SubscribeEvent>
    {
        try await client.callMore(
            "io.quaked.Subscribe", QuakedAPI.SubscribeParameters(client: name, heartbeatSeconds: heartbeatSeconds))
    }

    public func fetchHistory(
        storeId: String?, after: Int64, limit: Int? = nil, maxChanges: Int? = nil, client name: String? = nil
    ) async throws -> QuakedAPI.HistoryPage {
        try await client.call(
            "io.quaked.FetchHistory",
            QuakedAPI.FetchHistoryParameters(
                storeId: storeId, after: after, limit: limit, maxChanges: maxChanges, client: name))
    }

    public func acknowledge(client name: String, token: Int64) async throws {
        _ = try await client.call(
            "io.quaked.Acknowledge", QuakedAPI.AcknowledgeParameters(client: name, token: token),
            returning: QuakedAPI.Empty.self)
    }

    public func snapshot(pageSize: Int?) async throws -> VarlinkReplies<QuakedAPI.SnapshotPage> {
        try await client.callMore("io.quaked.Snapshot", QuakedAPI.SnapshotParameters(pageSize: pageSize))
    }

    public func query(_ parameters: QuakedAPI.QueryParameters) async throws -> QuakedAPI.QueryReply {
        try await client.call("io.quaked.Query", parameters)
    }

    public func get(id: String) async throws -> QuakedAPI.Quake {
        let reply: QuakedAPI.GetReply = try await client.call("io.quaked.Get", QuakedAPI.GetParameters(id: id))
        return reply.quake
    }

    public func delete(ids: [String]) async throws -> QuakedAPI.DeleteReply {
        try await client.call("io.quaked.Delete", QuakedAPI.DeleteParameters(ids: ids))
    }
}

extension QuakedConnection {
    /// Connects, runs `body`, and closes the connection whatever happens.
    public static func with<T: Sendable>(
        _ path: String, _ body: (QuakedConnection) async throws -> T
    ) async throws -> T {
        let connection = try await connect(to: path)
        do {
            let result = try await body(connection)
            await connection.close()
            return result
        } catch {
            await connection.close()
            throw error
        }
    }
}
