import Foundation
import QuakeModelCheck
import QuakeProtocol
import QuakeStore
import QuakeTestSupport
import Testing

/// Seeded random backfill schedules against a real daemon and a real FDSN service: random ranges,
/// magnitude floors and search limits, /count present, absent or lying, random transient faults
/// (429, 503, 500, truncated bodies, HTML, invalid JSON) and kill -9 of the daemon mid-job. After
/// each job: every event of the range is stored, none was inserted twice, the job counted exactly
/// the range's events (so its committed windows neither overlap nor leave a gap with events), and
/// the windows answered cover the range. A failing case is shrunk (fewer
/// faults, no kill) and printed with its seed. `QUAKED_BACKFILL_SEED` and `QUAKED_BACKFILL_CASES`
/// run other cases (8 by default).
extension ClientEndToEnd {
    @Suite("Backfill model") struct BackfillModelTests {
        enum FaultKind: String, CaseIterable {
            case tooMany, unavailable, serverError, truncated, html, invalidJSON

            var fault: FDSNTestService.Fault {
                switch self {
                case .tooMany: .tooManyRequests(retryAfter: 0)
                case .unavailable: .serviceUnavailable(retryAfter: nil)
                case .serverError: .response(.status(500, body: "oops\n"))
                case .truncated: .truncated(afterBytes: 400)
                case .html: .html()
                case .invalidJSON: .response(.text(#"{"type":"FeatureCollection","features":[{"id":1,]}"#))
                }
            }
        }

        struct Case: CustomStringConvertible {
            var seed: UInt64
            var startDay: Int
            var days: Int
            var minMagnitude: Double?
            var searchLimit: Int
            var count: String  // "yes", "no", "lies"
            /// Faults for the query requests, in order (nil: a normal answer).
            var faults: [FaultKind?]
            /// Kill the daemon once this many windows are done.
            var killAfterWindows: Int?

            var description: String {
                "seed \(seed): days \(startDay)..<\(startDay + days), min-mag \(minMagnitude.map { "\($0)" } ?? "none"), "
                    + "search limit \(searchLimit), count \(count), kill after \(killAfterWindows.map(String.init) ?? "never"), "
                    + "faults [\(faults.map { $0?.rawValue ?? "-" }.joined(separator: " "))]"
            }

            static func make(seed: UInt64) -> Case {
                var r = SeededRandom(seed: seed)
                let faults: [FaultKind?] = (0..<Int.random(in: 0...12, using: &r)).map { _ in
                    Int.random(in: 0..<3, using: &r) == 0 ? nil : FaultKind.allCases.randomElement(using: &r)!
                }
                return Case(
                    seed: seed, startDay: Int.random(in: 0..<300, using: &r), days: Int.random(in: 3...40, using: &r),
                    minMagnitude: [nil, 1.0, 2.5].randomElement(using: &r)!,
                    searchLimit: [15, 40, 120, 1000].randomElement(using: &r)!,
                    count: ["yes", "no", "lies"].randomElement(using: &r)!, faults: faults,
                    killAfterWindows: Int.random(in: 0..<3, using: &r) == 0 ? Int.random(in: 1...3, using: &r) : nil)
            }
        }

        /// A queued "fault" that answers normally (a slow answer sent in one piece, at once).
        static let normal = FDSNTestService.Fault.slow(chunkSize: 1 << 30, delay: .zero)

        /// What went wrong in a case, or nil.
        static func run(_ c: Case) async throws -> String? {
            try await FDSNTestService.withService(searchLimit: c.searchLimit) { service, _ in
                try service.add(featuresOf: BackfillTests.catalogFixture)
                switch c.count {
                case "no": service.countAvailable = false
                case "lies": service.countLies = { $0 / 7 }
                default: break
                }
                // At most four failures in a row, below backfill-attempts.
                var run = 0
                var faults: [FDSNTestService.Fault] = []
                for kind in c.faults {
                    if let kind, run < 4 {
                        faults.append(kind.fault)
                        run += 1
                    } else {
                        faults.append(Self.normal)
                        run = 0
                    }
                }
                service.enqueueFaults(faults)
                if c.killAfterWindows != nil { service.slowMode = (chunkSize: 32 * 1024, delay: .milliseconds(40)) }
                let first = service.timeRange!.lowerBound
                let start = first + Int64(c.startDay) * 86_400_000
                let end = start + Int64(c.days) * 86_400_000
                var query = FDSNTestService.Query(startTime: start, endTime: end - 1)
                query.minMagnitude = c.minMagnitude
                let expected = Set(service.events(matching: query).map(\.id))
                return try await withTemporaryDirectory { dir in
                    let daemon = try await Quaked(
                        in: dir, feeds: [BackfillTests.feed],
                        ["--config", try BackfillTests.config(in: dir, "backfill-attempts = 6").path])
                    defer { Task { try? await daemon.stop() } }
                    var arguments = [
                        "backfill", "--socket", daemon.socketPath, "--detach", "--start", "\(start)", "--end", "\(end)",
                        "--catalog", service.baseURL,
                    ]
                    if let m = c.minMagnitude { arguments += ["--min-mag", "\(m)"] }
                    let started = try await quakectl(arguments)
                    guard started.status == 0 else { return "quakectl backfill failed: \(started.stderr)" }
                    if let kill = c.killAfterWindows {
                        try await waitUntil(timeout: .seconds(60)) {
                            let job = try daemon.withStore { try $0.backfillJob(id: 1) }
                            return (job?.windowsDone ?? 0) >= kill || job?.state.isFinished == true
                        }
                        daemon.kill()
                        _ = try await daemon.stop()
                        service.slowMode = nil
                        try await daemon.start()
                    }
                    try await waitUntil(timeout: .seconds(120)) {
                        try daemon.withStore { try $0.backfillJob(id: 1)?.state.isFinished } == true
                    }
                    let job = try daemon.withStore { try $0.backfillJob(id: 1) }!
                    guard job.state == .done else { return "the job ended \(job.state): \(job.error ?? "")" }
                    let history = try daemon.withStore {
                        try $0.history(after: 0, limit: 100_000, maxChanges: 1_000_000).transactions
                    }
                    let inserts = history.flatMap { $0.changes.filter { $0.kind == .insert }.map(\.quakeId) }
                    if inserts.count != Set(inserts).count { return "a quake was inserted twice" }
                    let stored = Set(try daemon.withStore { try $0.allQuakes().map(\.id) })
                    let missing = expected.subtracting(stored)
                    if !missing.isEmpty { return "\(missing.count) events of the range are not stored: \(missing.sorted().prefix(3))" }
                    let backfilled = Set(history.filter { $0.author == .backfill }.flatMap { $0.changes.map(\.quakeId) })
                    if backfilled != expected { return "the backfill changed \(backfilled.count) quakes, not the \(expected.count) of the range" }
                    if job.eventsFetched != expected.count {
                        return "the job fetched \(job.eventsFetched) events, the range has \(expected.count)"
                    }
                    // The windows answered whole: 200 without a fault, or with the marker of a normal answer.
                    let windows = service.log.filter { entry in
                        guard entry.endpoint == .query, entry.status == 200 else { return false }
                        switch entry.fault {
                        case nil, .slow?: return true
                        default: return false
                        }
                    }.compactMap { entry -> (Int64, Int64)? in
                        guard let start = entry.query?.startTime, let end = entry.query?.endTime else { return nil }
                        return (start, end)
                    }.sorted { $0.0 < $1.0 }
                    // They cover the range without a gap (a window in flight at a kill is asked again,
                    // so windows may overlap; the counts above show nothing was imported twice).
                    var cursor = start
                    for window in windows {
                        if window.0 > cursor { return "no window answered from \(cursor) (next starts \(window.0))" }
                        cursor = max(cursor, window.1 + 1)
                    }
                    if cursor != end { return "the windows answered end at \(cursor), not \(end)" }
                    if try daemon.withStore({ try $0.checkIntegrity() }) != [] { return "the integrity check failed" }
                    return nil
                }
            }
        }

        /// Smaller cases that still fail: without the kill, then with each fault dropped in turn.
        static func shrink(_ failing: Case, _ problem: String) async throws -> (Case, String) {
            var best = (failing, problem)
            if best.0.killAfterWindows != nil {
                var candidate = best.0
                candidate.killAfterWindows = nil
                if let p = try await run(candidate) { best = (candidate, p) }
            }
            var i = 0
            while i < best.0.faults.count {
                var candidate = best.0
                candidate.faults.remove(at: i)
                if let p = try await run(candidate) { best = (candidate, p) } else { i += 1 }
            }
            return best
        }

        @Test("random ranges, limits, counts, faults and kills: every event once, the windows tiling the range")
        func randomSchedules() async throws {
            let environment = ProcessInfo.processInfo.environment
            let seed = environment["QUAKED_BACKFILL_SEED"].flatMap(UInt64.init) ?? 20_261_126
            let cases = environment["QUAKED_BACKFILL_CASES"].flatMap(Int.init) ?? 8
            for index in 0..<cases {
                let c = Case.make(seed: seed &+ UInt64(index))
                if let problem = try await Self.run(c) {
                    let (small, smallProblem) = try await Self.shrink(c, problem)
                    Issue.record(
                        """
                        backfill case \(index) failed: \(problem)
                          \(c)
                        shrunk to: \(smallProblem)
                          \(small)
                        rerun: QUAKED_BACKFILL_SEED=\(small.seed) QUAKED_BACKFILL_CASES=1 swift test --filter BackfillModelTests
                        """)
                    return
                }
            }
        }
    }
}

