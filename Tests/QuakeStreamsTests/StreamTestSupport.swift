import Foundation
import QuakeModel
import QuakeStreams
import Synchronization

/// What the stream did, in the order it did it: the caller's catch-ups and delivered items, and
/// the stream's events.
final class Recorder: Sendable {
    enum Entry: Sendable, Hashable, CustomStringConvertible {
        case catchUp(connection: Int, attempt: Int)
        case item(String)

        var description: String {
            switch self {
            case .catchUp(let c, let a): "catch-up(\(c)#\(a))"
            case .item(let id): id
            }
        }
    }

    private struct State {
        var log: [Entry] = []
        var events: [EMSCStream.Event] = []
        var items: [SourceItem] = []
    }

    private let state = Mutex(State())

    var log: [Entry] { state.withLock { $0.log } }
    var events: [EMSCStream.Event] { state.withLock { $0.events } }
    /// The delivered items, in order.
    var items: [SourceItem] { state.withLock { $0.items } }
    var deliveredIDs: [String] {
        log.compactMap { if case .item(let id) = $0 { id } else { nil } }
    }
    var catchUps: [Entry] {
        log.filter { if case .catchUp = $0 { true } else { false } }
    }
    var badMessages: [EMSCStream.BadMessage] {
        events.compactMap { if case .badMessage(let bad) = $0 { bad } else { nil } }
    }
    /// The `.waiting` events' attempts and delays.
    var waits: [(attempt: Int, delay: Duration)] {
        events.compactMap { if case .waiting(let attempt, let delay) = $0 { (attempt, delay) } else { nil } }
    }

    func record(_ entry: Entry) { state.withLock { $0.log.append(entry) } }
    func record(_ item: SourceItem) {
        state.withLock {
            $0.items.append(item)
            switch item {
            case .report(let report): $0.log.append(.item(report.id))
            case .retraction(_, let id, _): $0.log.append(.item("retraction \(id)"))
            }
        }
    }
    func record(_ event: EMSCStream.Event) { state.withLock { $0.events.append(event) } }
}

/// Settings for the tests: short delays, and pings rare enough that a loaded machine's late pong
/// does not end a connection (the ping test sets its own interval).
func testConfiguration(
    _ url: String, pingInterval: Duration = .seconds(1),
    backoff: ReconnectBackoff = ReconnectBackoff(initialDelay: .milliseconds(20), maxDelay: .milliseconds(200)),
    maxMessageBytes: Int = 1 << 20, maxPendingItems: Int = 100_000
) -> EMSCStream.Configuration {
    EMSCStream.Configuration(
        url: url, source: "emsc", pingInterval: pingInterval, backoff: backoff, healthyAfter: .seconds(600),
        maxMessageBytes: maxMessageBytes, maxPendingItems: maxPendingItems, closeTimeout: .seconds(1))
}

/// Runs an EMSCStream beside `body`, recording into a Recorder; the stream is cancelled when
/// `body` returns or throws. `catchUp` and `deliver` run after the recording of each call.
func withStream(
    _ configuration: EMSCStream.Configuration,
    catchUp: @escaping @Sendable (EMSCStream.CatchUp, EMSCStream) async throws -> Void = { _, _ in },
    deliver: @escaping @Sendable ([SourceItem]) async throws -> Void = { _ in },
    _ body: (EMSCStream, Recorder) async throws -> Void
) async throws {
    let recorder = Recorder()
    let stream = EMSCStream(configuration, onEvent: { recorder.record($0) })
    try await withThrowingTaskGroup(of: Void.self) { group in
        group.addTask {
            await stream.run(
                catchUp: { request in
                    recorder.record(.catchUp(connection: request.connection, attempt: request.attempt))
                    try await catchUp(request, stream)
                },
                deliver: { items in
                    try await deliver(items)
                    for item in items { recorder.record(item) }
                })
        }
        do {
            try await body(stream, recorder)
        } catch {
            group.cancelAll()
            throw error
        }
        group.cancelAll()
    }
}

/// A real fixture message with its event id (`unid` and the feature's `id`) replaced.
func message(_ fixture: String, id: String) -> String {
    let original = fixture.contains("20210502_0000100") ? "20210502_0000100" : fixture.contains("20201229_0000078") ? "20201229_0000078" : "20201230_0000082"
    return fixture.replacingOccurrences(of: original, with: id)
}

/// A real fixture message with one property's text (`"lat":-30.07`) replaced.
func message(_ fixture: String, replacing old: String, with new: String) -> String {
    precondition(fixture.contains(old), "the fixture has no \(old)")
    return fixture.replacingOccurrences(of: old, with: new)
}

/// A count shared with a @Sendable closure.
final class Counter: Sendable {
    private let count = Mutex(0)

    var value: Int { count.withLock { $0 } }

    /// Adds one; returns the new count.
    func increment() -> Int {
        count.withLock {
            $0 += 1
            return $0
        }
    }
}
