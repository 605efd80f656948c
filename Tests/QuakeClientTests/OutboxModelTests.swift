import Foundation
import NIOConcurrencyHelpers
import QuakeClient
import QuakeModelCheck
import QuakeProtocol
import QuakeTestSupport
import Testing

/// `watch --exec --batch/--quiet-hours`: seeded random schedules of transactions, clock moves
/// across quiet hours and batch windows (in several zones, across DST), command runs that succeed,
/// are stopped, or succeed and then crash before the outbox is told, and restarts. The real cache
/// (a SQLite file), plan and dispatcher; the command is a closure that records what it got.
///
/// After every step:
/// - the delivery position never passes an undelivered change: every change queued at or before
///   it has been delivered (and the position never moves back);
/// - nothing is lost: every queued change is delivered or still queued;
/// - held changes are delivered only outside quiet hours, a batch only once its window passed;
/// - a change is delivered twice only after a crash between its run and its removal.
/// At the end, with time moved on and every run succeeding, everything has been delivered.
///
/// `QUAKECTL_OUTBOX_SEED` and `QUAKECTL_OUTBOX_CASES` run other cases. A failure prints the seed,
/// the case, its plan and the schedule, shrunk to the fewest steps that still fail.
@Suite struct OutboxModelTests {
    enum Outcome: String, Hashable { case success, stopped, crashAfterRun }

    enum Step: Hashable, CustomStringConvertible {
        /// A transaction with a change per magnitude.
        case commit([Double?])
        case advance(seconds: Int)
        case deliver(Outcome)
        case restart

        var description: String {
            switch self {
            case .commit(let mags): "commit \(mags.map { $0.map { String($0) } ?? "nil" })"
            case .advance(let seconds): "advance \(seconds) s"
            case .deliver(let outcome): "deliver (\(outcome.rawValue))"
            case .restart: "restart"
            }
        }
    }

    struct Case: CustomStringConvertible {
        var plan: OutboxPlan
        var start: Int64
        var steps: [Step]

        var description: String {
            let batch = plan.batchMilliseconds.map { "\($0 / 1000) s" } ?? "none"
            return """
                plan: batch \(batch), quiet hours \(plan.quietHours.map(\.description) ?? "none"), \
                quiet-min-mag \(plan.quietMinMagnitude.map { String($0) } ?? "none"), zone \(plan.timeZone.identifier), \
                start \(Date(timeIntervalSince1970: Double(start) / 1000))
                \(steps.enumerated().map { "  \($0.offset): \($0.element)" }.joined(separator: "\n"))
                """
        }
    }

    static func generate(_ random: inout SeededRandom) -> Case {
        let zones = ["UTC", "Asia/Tokyo", "America/St_Johns", "Europe/Berlin", "Pacific/Auckland"]
        var plan = OutboxPlan(timeZone: TimeZone(identifier: zones.randomElement(using: &random)!)!)
        if Bool.random(using: &random) { plan.batchMilliseconds = Int64.random(in: 1...30, using: &random) * 60_000 }
        if Int.random(in: 0..<4, using: &random) > 0 {
            let start = Int.random(in: 0..<96, using: &random) * 15
            var end = Int.random(in: 0..<96, using: &random) * 15
            if end == start { end = (start + 15) % 1440 }
            plan.quietHours = QuietHours(start: start, end: end)
            if Bool.random(using: &random) { plan.quietMinMagnitude = 5 }
        }
        // Somewhere in 2026, DST changes included.
        let start = 1_767_225_600_000 + Int64.random(in: 0..<365 * 86_400, using: &random) * 1000
        var steps: [Step] = []
        for _ in 0..<Int.random(in: 10...60, using: &random) {
            switch Int.random(in: 0..<10, using: &random) {
            case 0..<3:
                steps.append(
                    .commit(
                        (0..<Int.random(in: 0...3, using: &random)).map { _ in
                            Int.random(in: 0..<8, using: &random) == 0 ? nil : Double(Int.random(in: 20...75, using: &random)) / 10
                        }))
            case 3..<5:
                let minutes = [1, 5, 20, 60, 240, 600].randomElement(using: &random)!
                steps.append(.advance(seconds: Int.random(in: 1...minutes * 60, using: &random)))
            case 5..<9:
                let outcome: Outcome =
                    switch Int.random(in: 0..<8, using: &random) {
                    case 0: .stopped
                    case 1: .crashAfterRun
                    default: .success
                    }
                steps.append(.deliver(outcome))
            default:
                steps.append(.restart)
            }
        }
        return Case(plan: plan, start: start, steps: steps)
    }

    struct Failure: Error, CustomStringConvertible {
        var step: Int
        var message: String
        var description: String { "after step \(step): \(message)" }
    }

    struct Crash: Error {}

    /// A delivery the command got.
    struct Run: Sendable {
        var kind: OutboxPlan.Kind
        var keys: [String]
        var now: Int64
    }

    /// Plays a case on a fresh cache; throws ``Failure`` at the first broken property.
    static func play(_ testCase: Case) async throws {
        try await withTemporaryDirectory { try await play(testCase, in: $0) }
    }

    static func play(_ testCase: Case, in directory: URL) async throws {
        let clockFile = directory.appendingPathComponent("clock").path
        var now = testCase.start
        func setClock() throws { try String(now).write(toFile: clockFile, atomically: true, encoding: .utf8) }
        try setClock()
        let clock = try DeliveryClock.fromEnvironment(["QUAKECTL_CLOCK_FILE": clockFile])
        let path = directory.appendingPathComponent("cache.sqlite").path
        var cache = try QuakeCache(path: path)
        try cache.finishReset(storeId: "store", token: 0)
        let plan = testCase.plan

        var token = 0
        var queued: [String: OutboxEntry] = [:]  // every change ever queued, by key
        var runs: [Run] = []
        var mayRepeat: Set<String> = []  // keys of a run whose removal a crash prevented
        var lastPosition = 0

        func check(_ index: Int) throws {
            func fail(_ message: String) -> Failure { Failure(step: index, message: message) }
            let position = try cache.deliveryPosition() ?? -1
            if position < lastPosition { throw fail("the delivery position moved back from \(lastPosition) to \(position)") }
            lastPosition = position
            var delivered: [String: Int] = [:]
            for run in runs { for key in run.keys { delivered[key, default: 0] += 1 } }
            for (key, entry) in queued where entry.token <= position && delivered[key] == nil {
                throw fail("position \(position) passed \(key) (token \(entry.token)), which was never delivered")
            }
            let pending = Set(try cache.outbox().map { $0.environment["KEY"]! })
            for key in queued.keys where delivered[key] == nil && !pending.contains(key) {
                throw fail("\(key) was queued, never delivered, and is no longer queued")
            }
            for (key, count) in delivered where count > 1 && !mayRepeat.contains(key) {
                throw fail("\(key) was delivered \(count) times without a crash after a run")
            }
        }

        for (index, step) in testCase.steps.enumerated() {
            switch step {
            case .commit(let mags):
                token += 1
                let transaction = IOQuaked.Transaction(
                    token: token, author: .import, timestamp: Int(now), inserted: 0, updated: 0, deleted: mags.count,
                    changes: mags.indices.map { IOQuaked.Change(quakeId: "q\(token)-\($0)", kind: .delete) })
                let entries = mags.enumerated().map { offset, mag in
                    OutboxEntry(
                        storeId: "store", token: token, queuedAt: now, held: plan.holds(magnitude: mag, at: now), mag: mag,
                        line: "{\"key\":\"\(token)-\(offset)\"}", environment: ["KEY": "\(token)-\(offset)"])
                }
                try cache.apply(transaction, storeId: "store", outbox: entries)
                for entry in entries { queued[entry.environment["KEY"]!] = entry }
            case .advance(let seconds):
                now += Int64(seconds) * 1000
                try setClock()
            case .deliver(let outcome):
                let dispatcher = OutboxDispatcher(cache: cache, plan: plan, clock: clock)
                let got = RunLog()
                let at = now
                do {
                    _ = try await dispatcher.step { delivery in
                        switch outcome {
                        case .stopped: throw CancellationError()
                        case .success, .crashAfterRun:
                            got.append(Run(kind: delivery.kind, keys: delivery.entries.map { $0.environment["KEY"]! }, now: at))
                            if outcome == .crashAfterRun { throw Crash() }
                        }
                    }
                } catch is CancellationError {
                } catch is Crash {
                    for run in got.value { mayRepeat.formUnion(run.keys) }
                    try cache.close()
                    cache = try QuakeCache(path: path)
                }
                for run in got.value {
                    try checkTiming(run, plan: plan, queued: queued, step: index)
                    runs.append(run)
                }
            case .restart:
                try cache.close()
                cache = try QuakeCache(path: path)
            }
            try check(index)
        }

        // Liveness: with every run succeeding and the clock moved to each instant the plan says
        // to look again, the outbox empties.
        let dispatcher = OutboxDispatcher(cache: cache, plan: plan, clock: clock)
        for _ in 0...(2 * queued.count + 2) {
            let final = RunLog()
            let at = now
            let result = try await dispatcher.step { delivery in
                final.append(Run(kind: delivery.kind, keys: delivery.entries.map { $0.environment["KEY"]! }, now: at))
            }
            for run in final.value {
                try checkTiming(run, plan: plan, queued: queued, step: testCase.steps.count)
                runs.append(run)
            }
            if result.delivered != nil { continue }
            guard let wait = result.wait else { break }
            if wait <= now {
                throw Failure(step: testCase.steps.count, message: "told to wait until \(wait), which is not after now (\(now))")
            }
            now = wait
            try setClock()
        }
        try check(testCase.steps.count)
        let remaining = try cache.outboxCount()
        let position = try cache.deliveryPosition()
        if remaining != 0 || position != token {
            throw Failure(
                step: testCase.steps.count,
                message: "with every run succeeding and the clock moved on, \(remaining) changes are still queued (position \(position ?? -1), token \(token))")
        }
        try cache.close()
    }

    /// When a run may happen: held changes only outside quiet hours, a batch only once its oldest
    /// change waited the window, a change alone only without --batch, changes in queue order.
    static func checkTiming(_ run: Run, plan: OutboxPlan, queued: [String: OutboxEntry], step: Int) throws {
        let entries = run.keys.map { queued[$0]! }
        let quiet = plan.quietHours?.contains(run.now, in: plan.timeZone) ?? false
        func fail(_ message: String) -> Failure { Failure(step: step, message: "\(run.kind.rawValue) \(run.keys): \(message)") }
        if entries.contains(where: \.held), quiet { throw fail("a held change was delivered during quiet hours") }
        if entries.map(\.token) != entries.map(\.token).sorted() { throw fail("changes out of order") }
        switch run.kind {
        case .batch:
            guard let window = plan.batchMilliseconds else { throw fail("a batch without --batch") }
            if run.now < entries[0].queuedAt + window { throw fail("the batch ran before its window passed") }
            if entries.contains(where: \.held) { throw fail("a held change in a batch, not the digest") }
        case .change:
            if plan.batchMilliseconds != nil { throw fail("a change alone under --batch") }
            if entries.count != 1 || entries[0].held { throw fail("not one change ready") }
        case .digest:
            if !entries.contains(where: \.held) { throw fail("a digest with nothing held") }
        }
    }

    /// Drops steps while the case still fails: the smallest schedule that shows the failure.
    static func shrink(_ testCase: Case) async -> (Case, Failure) {
        func failure(_ candidate: Case) async -> Failure? {
            do {
                try await play(candidate)
                return nil
            } catch let failure as Failure {
                return failure
            } catch {
                return Failure(step: -1, message: "\(error)")
            }
        }
        var smallest = testCase
        var last = await failure(testCase) ?? Failure(step: -1, message: "does not fail again")
        var chunk = max(1, smallest.steps.count / 2)
        while chunk >= 1 {
            var removed = false
            var start = 0
            while start < smallest.steps.count {
                var candidate = smallest
                candidate.steps.removeSubrange(start..<min(start + chunk, candidate.steps.count))
                if let failed = await failure(candidate) {
                    smallest = candidate
                    last = failed
                    removed = true
                } else {
                    start += chunk
                }
            }
            if !removed { chunk /= 2 }
        }
        return (smallest, last)
    }

    @Test("the delivery position never passes an undelivered batch, and nothing queued is lost")
    func randomSchedules() async throws {
        let environment = ProcessInfo.processInfo.environment
        let seed = environment["QUAKECTL_OUTBOX_SEED"].flatMap { UInt64($0) } ?? 20_261_125
        let cases = environment["QUAKECTL_OUTBOX_CASES"].flatMap { Int($0) } ?? 150
        var steps = 0
        var deliveries = 0
        for index in 0..<cases {
            var random = SeededRandom(seed: SeededRandom.caseSeed(seed, index))
            let testCase = Self.generate(&random)
            steps += testCase.steps.count
            deliveries += testCase.steps.filter { if case .deliver = $0 { true } else { false } }.count
            do {
                try await Self.play(testCase)
            } catch {
                let (smallest, failure) = await Self.shrink(testCase)
                Issue.record(
                    """
                    outbox model: seed \(seed), case \(index) (QUAKECTL_OUTBOX_SEED=\(seed)): \(error)
                    shrunk to \(smallest.steps.count) of \(testCase.steps.count) steps, failing \(failure):
                    \(smallest)
                    """)
                return
            }
        }
        print("outbox model: seed \(seed): \(cases) cases, \(steps) steps, \(deliveries) delivery attempts")
        #expect(deliveries > cases, "the generator hardly delivered anything")
    }

    @Test("the delivery position waits before a held change, and is the cache's token once nothing is queued")
    func thePositionWaitsBeforeAHeldChange() async throws {
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let cache = try QuakeCache(path: directory.appendingPathComponent("cache.sqlite").path)
        try cache.finishReset(storeId: "store", token: 0)
        let plan = OutboxPlan(quietHours: QuietHours(start: 0, end: 1439), timeZone: TimeZone(identifier: "UTC")!)
        let noon: Int64 = 1_767_268_800_000  // 2026-01-01 12:00 UTC
        let entry = OutboxEntry(
            storeId: "store", token: 1, queuedAt: noon, held: plan.holds(magnitude: 3, at: noon), mag: 3, line: "{}",
            environment: ["KEY": "1-0"])
        #expect(entry.held)
        try cache.apply(
            IOQuaked.Transaction(
                token: 1, author: .import, timestamp: 0, inserted: 0, updated: 0, deleted: 1,
                changes: [IOQuaked.Change(quakeId: "q", kind: .delete)]), storeId: "store", outbox: [entry])
        #expect(try cache.deliveryPosition() == 0, "the position waits before the held change")
        #expect(plan.decide(try cache.outbox(), now: noon) == .wait(until: noon + 43_140_000), "held until 23:59")
        try cache.removeFromOutbox(try cache.outbox())
        #expect(try cache.deliveryPosition() == 1, "with the queue emptied the position is the cache's token")
    }
}

/// The runs a `@Sendable` command closure records.
final class RunLog: Sendable {
    private let runs = NIOLockedValueBox<[OutboxModelTests.Run]>([])
    var value: [OutboxModelTests.Run] { runs.withLockedValue { $0 } }
    func append(_ run: OutboxModelTests.Run) { runs.withLockedValue { $0.append(run) } }
}
