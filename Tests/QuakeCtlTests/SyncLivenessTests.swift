import Foundation
import QuakeClient
import QuakePostgres
import QuakeProtocol
import QuakeStore
import QuakeTestSupport
import Testing

/// `quakectl sync` against a PostgreSQL that neither answers nor errors: a stopped server, a
/// network that drops everything, a server that accepts and never answers. The sink must say
/// so, keep retrying, and be in step again soon after the fault lifts, with nothing applied twice.
///
/// The URLs shorten the limits (their defaults are a minute): `statement_timeout=2s` (so a
/// request without a reply is abandoned after 7 s), `connect_timeout=2`, keepalive after 2 s.
extension ClientEndToEnd {
    @Suite struct SyncLivenessTests {
        static let quick =
            "&connect_timeout=2&keepalives_idle=2&keepalives_interval=1&keepalives_count=2"
            + "&options=-c%20statement_timeout%3D2s%20-c%20idle_in_transaction_session_timeout%3D2s"
        /// How soon after the fault lifts the table must be in step again.
        static let recovery: Duration = .seconds(60)

        /// Deletes `count` stored quakes, a transaction each, while the fault lasts.
        static func changes(_ daemon: Quaked, count: Int, from first: Int) async throws {
            let ids = try daemon.withStore { try $0.allQuakes() }.map(\.id).sorted()
            for id in ids.dropFirst(first).prefix(count) {
                let result = try await quakectl(["delete", id, "--socket", daemon.socketPath])
                #expect(result.status == 0, "delete \(id): \(result.stderr)")
            }
        }

        /// After the fault lifts: in step within ``recovery``, every token applied at most once.
        static func expectRecovered(_ sync: ChildProcess, _ daemon: Quaked, url: String) async throws {
            let lifted = ContinuousClock.now
            try await SyncTests.expectInStep(sync, daemon, url: url, timeout: recovery)
            let took = ContinuousClock.now - lifted
            #expect(took < recovery, "in step \(took) after the fault lifted")
            let tokens = try SyncTests.lines(sync).filter { $0.event == "applied" }.compactMap(\.token)
            #expect(Set(tokens).count == tokens.count, "a token was applied twice: \(tokens)")
        }

        @Test func aStoppedServerIsAbandonedAndTheSinkRecoversWhenItContinues() async throws {
            try await SyncTests.withPostgres { pg in
                try await withQuaked { daemon in
                    let url = try SyncTests.database(pg, "stopped") + Self.quick
                    let sync = try SyncTests.sync(daemon, to: url)
                    defer { sync.signal(SIGKILL) }
                    try await SyncTests.expectInStep(sync, daemon, url: url)
                    try pg.pause()
                    do {
                        try await Self.changes(daemon, count: 3, from: 0)
                        // The request in flight is abandoned after 7 s, said once, and retried.
                        try await waitUntil(timeout: .seconds(30)) { sync.stderr.contains("did not answer") }
                        #expect(sync.isRunning)
                    } catch {
                        try? pg.resume()
                        throw error
                    }
                    try pg.resume()
                    try await Self.expectRecovered(sync, daemon, url: url)
                    #expect(sync.stderr.contains("PostgreSQL works again"))
                }
            }
        }

        @Test func aBlackHoledNetworkIsAbandonedAndTheSinkRecoversWhenItForwardsAgain() async throws {
            try await SyncTests.withPostgres { pg in
                try await withQuaked { daemon in
                    let direct = try SyncTests.database(pg, "blackhole")
                    let proxy = try await ForwardingProxy.startTCP(to: "127.0.0.1", port: pg.port)
                    defer { Task { try? await proxy.shutdown() } }
                    let routed = direct.replacingOccurrences(of: ":\(pg.port)/", with: ":\(proxy.port)/") + Self.quick
                    let sync = try SyncTests.sync(daemon, to: routed)
                    defer { sync.signal(SIGKILL) }
                    try await SyncTests.expectInStep(sync, daemon, url: direct)
                    proxy.blackHole()
                    try await Self.changes(daemon, count: 3, from: 0)
                    try await waitUntil(timeout: .seconds(30)) { sync.stderr.contains("did not answer") }
                    #expect(sync.isRunning)
                    // What the sink sent before it gave up (perhaps a COMMIT) arrives now.
                    proxy.resume()
                    try await Self.expectRecovered(sync, daemon, url: direct)
                }
            }
        }

        @Test func aServerThatAcceptsAndNeverAnswersTimesOutAndTheSinkConnectsWhenOneAnswers() async throws {
            try await SyncTests.withPostgres { pg in
                try await withQuaked { daemon in
                    let direct = try SyncTests.database(pg, "silent")
                    // A listening socket that never accepts: the kernel completes the handshake and
                    // keeps what the client sends; nothing ever answers.
                    let silent = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
                    #expect(silent >= 0)
                    var on: Int32 = 1
                    setsockopt(silent, SOL_SOCKET, SO_REUSEADDR, &on, socklen_t(MemoryLayout<Int32>.size))
                    var address = sockaddr_in()
                    address.sin_family = sa_family_t(AF_INET)
                    address.sin_addr.s_addr = inet_addr("127.0.0.1")
                    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
                    let listening = withUnsafeMutablePointer(to: &address) {
                        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                            bind(silent, $0, length) == 0 && listen(silent, 64) == 0 && getsockname(silent, $0, &length) == 0
                        }
                    }
                    try #require(listening)
                    let port = Int(UInt16(bigEndian: address.sin_port))
                    let routed = direct.replacingOccurrences(of: ":\(pg.port)/", with: ":\(port)/") + Self.quick
                    let sync = try SyncTests.sync(daemon, to: routed)
                    defer { sync.signal(SIGKILL) }
                    try await waitUntil(timeout: .seconds(20)) { sync.stderr.contains("cannot connect to PostgreSQL") }
                    #expect(sync.stderr.contains("no answer within 2 s"), "\(sync.stderr)")
                    try await Task.sleep(for: .seconds(3))
                    #expect(sync.isRunning)
                    // The fault lifts: PostgreSQL answers on that port.
                    close(silent)
                    let proxy = try await ForwardingProxy.startTCP(to: "127.0.0.1", port: pg.port, listenPort: port)
                    defer { Task { try? await proxy.shutdown() } }
                    try await Self.expectRecovered(sync, daemon, url: direct)
                }
            }
        }
    }
}
