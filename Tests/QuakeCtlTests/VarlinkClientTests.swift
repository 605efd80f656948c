import QuakeClient
import QuakeProtocol
import Varlink
import Foundation
import QuakeCtl
import QuakeTestSupport
import Varlink
import Testing

/// The generic client against a real quaked.
extension ClientEndToEnd {
    @Suite struct VarlinkClientTests {
        @Test func callsStreamsAndTypedErrors() async throws {
            try await withTemporaryDirectory { dir in
                let daemon = try await Quaked(in: dir, feeds: [TestFeeds.day])
                defer { Task { try await daemon.stop() } }
                let connection = try await QuakedConnection.connect(to: daemon.socketPath)
                let client = connection.client

                let info = try await client.call(OrgVarlinkService.GetInfo.self, .init())
                #expect(info.interfaces == ["org.varlink.service", "io.quaked"])

                // A typed error reply; the connection stays usable.
                await #expect(throws: IOQuaked.Failure.noSuchQuake(.init(id: "nope"))) {
                    _ = try await connection.get(id: "nope")
                }
                // The raw form too, for a method no interface file of ours names.
                let raw = try await client.call(VarlinkCall(method: "io.quaked.NoSuchMethod"))
                #expect(raw.error == "org.varlink.service.MethodNotFound")
                #expect(
                    try OrgVarlinkService.MethodNotFound.decode(json: raw.parameters).method == "io.quaked.NoSuchMethod")
                let status = try await connection.status()
                #expect(status.quakeCount == 146)

                // A call with more: pages until the last reply.
                var pages = 0
                var ids: [String] = []
                for try await page in try await connection.snapshot(pageSize: 50) {
                    pages += 1
                    ids += page.quakes.map(\.id)
                }
                #expect(pages == 3)
                #expect(ids.count == 146)
                #expect(ids == ids.sorted())

                // The daemon going away ends a waiting stream with .closed.
                var events = try await connection.subscribe(client: nil, heartbeatSeconds: 60).makeAsyncIterator()
                #expect(try await events.next()?.event == .subscribed)
                try await daemon.stop()
                await #expect(throws: VarlinkConnectionError.closed) { _ = try await events.next() }
                await connection.close()
            }
        }

        @Test func nothingListeningIsUnreachable() async throws {
            try await withTemporaryDirectory { dir in
                let path = dir.appendingPathComponent("none.sock").path
                await #expect { _ = try await QuakedConnection.connect(to: path) } throws: { error in
                    (error as? QuakedConnectionError)?.kind == .unreachable
                }
                // A socket file nobody listens on any more.
                let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
                var address = sockaddr_un()
                address.sun_family = sa_family_t(AF_UNIX)
                withUnsafeMutableBytes(of: &address.sun_path) { raw in
                    raw.copyBytes(from: Array(path.utf8) + [0])
                }
                _ = withUnsafePointer(to: &address) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                        bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
                    }
                }
                close(fd)
                await #expect { _ = try await QuakedConnection.connect(to: path) } throws: { error in
                    (error as? QuakedConnectionError)?.kind == .unreachable
                }
            }
        }
    }
}
