import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import QuakeStore
import QuakeTestSupport
import Testing

@testable import QuakeDaemon

/// ``ChangeBroadcaster/announce(_:)`` publishes one commit at a time: commits that come while the
/// loops offer the one before wait, the newest replacing older ones. Whatever the burst, every
/// subscriber ends at the newest head, each receiving strictly increasing heads.
@Suite("Publications one at a time")
struct BroadcastFlightTests {
    @Test("a burst of commits: every subscriber on every loop ends at the newest head, in order")
    func burst() async throws {
        try await withTemporaryDirectory { dir in
            let store = try QuakeStore(directory: dir)
            defer { try? store.close() }
            let broadcaster = ChangeBroadcaster(store: store)
            let group = MultiThreadedEventLoopGroup(numberOfThreads: 2)
            let loops = Array(group.makeIterator())
            let subscribers = 64
            let received = NIOLockedValueBox([[Int]](repeating: [], count: subscribers))
            let newest: HistoryToken = 2_000
            // One deadline for all: the subscribers wait in turn, innermost first.
            let deadline = ContinuousClock.now + .seconds(30)

            func subscribe(_ index: Int) async throws {
                guard index < subscribers else {
                    // All subscribed: a burst from this task, as fast as it can announce.
                    for token in 1...newest { broadcaster.announce(StoreCommit(token: token, author: .import)) }
                    return
                }
                let sendNow: @Sendable (ByteBuffer) -> Bool = { frame in
                    let text = String(buffer: frame)
                    guard let range = text.range(of: #""headToken":"#) else { return true }
                    let digits = text[range.upperBound...].prefix { $0.isNumber }
                    received.withLockedValue { $0[index].append(Int(digits)!) }
                    return true
                }
                try await broadcaster.withSubscription(
                    heartbeat: .seconds(3600), sendNow: sendNow, eventLoop: loops[index % loops.count]
                ) { subscription in
                    subscription.markReady(announced: 0)
                    try await subscribe(index + 1)
                    // This subscriber is told the newest head, however the burst was coalesced.
                    while subscription.lastSent < newest, ContinuousClock.now < deadline {
                        try await Task.sleep(for: .milliseconds(5))
                    }
                }
            }
            try await subscribe(0)
            try await group.shutdownGracefully()
            let heads = received.withLockedValue { $0 }
            for (index, seen) in heads.enumerated() {
                #expect(seen.last == Int(newest), "subscriber \(index) ended at \(seen.last.map(String.init) ?? "nothing")")
                #expect(zip(seen, seen.dropFirst()).allSatisfy { $0 < $1 }, "subscriber \(index): heads out of order")
            }
        }
    }
}
