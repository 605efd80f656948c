import Foundation
import QuakeProtocol
import QuakeTestSupport
import Testing

/// Subscriptions end with their connections: clients that subscribe and go away (closing at
/// once or after the first reply, while commits flow or while nothing happens) leave nothing
/// behind in the daemon: no subscriber, no task, no memory, no cost to each publication.
extension EndToEnd {
    @Suite("Subscriptions end with their connections")
    struct SubscriptionChurnTests {
        static let feed = Fixtures.usgs("lhayesgolding__EarthquakeData__all_hour.geojson")
        /// Subscribe's parameters: a heartbeat an hour away.
        static let subscribe = IOQuaked.Subscribe.Parameters(heartbeatSeconds: 3600)

        func startDaemon(in dir: URL) async throws -> DaemonHarness {
            let daemon = try await DaemonHarness(
                in: dir, ["--feed", Self.feed.absoluteString, "--interval", "1h", "--log-level", "info"])
            try await waitUntil(timeout: .seconds(20)) { try await daemon.getStatus().headToken == 1 }
            return daemon
        }

        /// `count` clients that subscribe and close: the even ones at once, the odd ones after
        /// reading the first reply.
        static func abandon(_ count: Int, socket: String) async throws {
            try await onBlockingThread {
                for index in 0..<count {
                    let client = try UnixSocketClient(path: socket)
                    try client.callMore(IOQuaked.Subscribe.self, Self.subscribe)
                    if index % 2 == 1 { _ = try client.receive(timeout: .seconds(10)) }
                    // deinit closes the socket
                }
            }
        }

        static func privateKiB(_ pid: Int32) throws -> Int {
            let status = try String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)
            let line = status.split(separator: "\n").first { $0.hasPrefix("RssAnon:") } ?? ""
            return Int(line.split(separator: " ").dropFirst().first ?? "") ?? 0
        }

        static func subscribers(_ daemon: DaemonHarness) async throws -> Int {
            try await daemon.getStatus().subscribers
        }

        /// The median time from a Delete's reply to a live subscriber's `changed` for its token,
        /// over `rounds` deletes (each followed by a Refresh that brings the quake back).
        static func fanOutLatency(_ daemon: DaemonHarness, live: UnixSocketClient, rounds: Int) async throws -> Duration {
            let ids = try daemon.withStore { try $0.allQuakes().map(\.id) }
            let socket = daemon.socketPath
            return try await onBlockingThread {
                let rpc = try UnixSocketClient(path: socket)
                var samples: [Duration] = []
                for round in 0..<rounds {
                    let reply = try rpc.call(IOQuaked.Delete.self, .init(ids: [ids[round % ids.count]]))
                    let sent = ContinuousClock.now
                    let token = reply.token ?? -1
                    while true {
                        guard let event = try live.nextReply(IOQuaked.Subscribe.self, timeout: .seconds(10)) else {
                            throw ChurnFailure(description: "the live subscriber's connection closed")
                        }
                        if event.headToken >= token { break }
                    }
                    samples.append(ContinuousClock.now - sent)
                    _ = try rpc.call(IOQuaked.Refresh.self, .init())
                }
                return samples.sorted()[samples.count / 2]
            }
        }

        /// Runs `body` while commits flow (a delete and the refresh that undoes it, every 20 ms)
        /// and the `live` subscribers read what they are sent; returns how many pairs were
        /// committed. A live subscriber reads: one that stopped for longer than quaked's write
        /// timeout (10 s) once its socket's buffer filled would be disconnected, as quaked means
        /// to, and under AddressSanitizer 4,000 abandoned subscriptions take that long.
        static func withCommitsFlowing(
            _ daemon: DaemonHarness, live: [UnixSocketClient], _ body: () async throws -> Void
        ) async throws -> Int {
            let ids = try daemon.withStore { try $0.allQuakes().map(\.id) }
            let socket = daemon.socketPath
            let stop = LockedFlag()
            let commits = Task {
                try await onBlockingThread {
                    let rpc = try UnixSocketClient(path: socket)
                    var count = 0
                    while !stop.isSet {
                        _ = try rpc.call(IOQuaked.Delete.self, .init(ids: [ids[count % ids.count]]))
                        _ = try rpc.call(IOQuaked.Refresh.self, .init())
                        count += 1
                        usleep(20_000)
                    }
                    return count
                }
            }
            let readers = live.map { client in
                Task {
                    try await onBlockingThread {
                        while !stop.isSet {
                            guard client.hasBufferedMessage || client.isReadable(within: .milliseconds(100)) else { continue }
                            guard try client.receive(timeout: .seconds(10)) != nil else {
                                throw ChurnFailure(description: "a live subscriber's connection closed while commits flowed")
                            }
                        }
                    }
                }
            }
            func finish() async throws -> Int {
                stop.set()
                for reader in readers { try await reader.value }
                return try await commits.value
            }
            do {
                try await body()
            } catch {
                _ = try? await finish()
                throw error
            }
            return try await finish()
        }

        @Test("abandoned subscriptions are removed at once, with no commit to write and no heartbeat due")
        func removedWithoutAWrite() async throws {
            try await withTemporaryDirectory { dir in
                let daemon = try await startDaemon(in: dir)
                let live = try UnixSocketClient(path: daemon.socketPath)
                try live.callMore(IOQuaked.Subscribe.self, Self.subscribe)
                #expect(try live.receive() != nil)
                // The heartbeat is an hour away and nothing commits: only the connection's end can
                // remove these.
                try await Self.abandon(200, socket: daemon.socketPath)
                _ = try? await waitUntil(timeout: .seconds(3)) { try await Self.subscribers(daemon) == 1 }
                #expect(try await Self.subscribers(daemon) == 1, "GetStatus counts subscribers no longer connected")
                #expect(try await daemon.stop() == 0)
            }
        }

        @Test("thousands of abandoned subscriptions while commits flow: subscribers, memory and fan-out latency come back")
        func churnWhileCommitsFlow() async throws {
            try await withTemporaryDirectory { dir in
                let daemon = try await startDaemon(in: dir)
                let live = try (0..<3).map { _ in try UnixSocketClient(path: daemon.socketPath) }
                for client in live {
                    try client.callMore(IOQuaked.Subscribe.self, Self.subscribe)
                    #expect(try client.receive() != nil)
                }
                let socket = daemon.socketPath
                // Warm up (the allocator's arenas, the event loops' buffers), then measure. The
                // warm-up abandons as many as the measured round: on a loaded machine quaked falls
                // behind the closes and holds many of the connections at once, and the heap's
                // high-water mark (which glibc keeps) follows that peak, not a leak; with rounds
                // alike, only what the measured round leaves behind counts.
                let warmCommits = try await Self.withCommitsFlowing(daemon, live: live) {
                    try await Self.abandon(4000, socket: socket)
                    _ = try? await waitUntil(timeout: .seconds(5)) { try await Self.subscribers(daemon) == 3 }
                    #expect(try await Self.subscribers(daemon) == 3, "GetStatus counts subscribers no longer connected")
                }
                // What was sent after the readers stopped.
                for client in live { while (try? client.receive(timeout: .milliseconds(200))) != nil {} }
                let latencyBefore = try await Self.fanOutLatency(daemon, live: live[0], rounds: 30)
                let memoryBefore = try Self.privateKiB(daemon.process.pid)

                let churnCommits = try await Self.withCommitsFlowing(daemon, live: live) {
                    try await Self.abandon(4000, socket: socket)
                    _ = try? await waitUntil(timeout: .seconds(5)) { try await Self.subscribers(daemon) == 3 }
                    #expect(try await Self.subscribers(daemon) == 3, "GetStatus counts subscribers no longer connected")
                }
                // What was sent after the readers stopped.
                for client in live { while (try? client.receive(timeout: .milliseconds(200))) != nil {} }
                let latencyAfter = try await Self.fanOutLatency(daemon, live: live[0], rounds: 30)
                let memoryAfter = try Self.privateKiB(daemon.process.pid)

                #expect(warmCommits > 10 && churnCommits > 10, "commits flowed: \(warmCommits), \(churnCommits)")
                #expect(try await Self.subscribers(daemon) == 3)
                // A leaked subscription costs a few KiB: 4,000 of them would be well over this.
                if !Sanitizer.isActive {
                    #expect(
                        memoryAfter - memoryBefore < 2048,
                        "private memory went from \(memoryBefore) KiB to \(memoryAfter) KiB over 4,000 abandoned subscriptions")
                }
                // Every publication walks the subscribers: with none left over, its cost is as before.
                #expect(
                    latencyAfter < latencyBefore * 3 + .milliseconds(5),
                    "fan-out latency went from \(latencyBefore) to \(latencyAfter)")
                #expect(try await daemon.stop() == 0)
            }
        }
    }
}

struct ChurnFailure: Error, CustomStringConvertible {
    var description: String
}

/// A flag one task sets and a blocking loop reads.
final class LockedFlag: @unchecked Sendable {
    private let lock = NSLock()
    private var value = false
    var isSet: Bool { lock.withLock { value } }
    func set() { lock.withLock { value = true } }
}
