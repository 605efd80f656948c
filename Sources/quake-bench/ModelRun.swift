import ArgumentParser
import Foundation
import QuakeModelCheck

/// `quake-bench model`: the model-based history checker at any size. Not a benchmark: it prints
/// the cases run and any counterexample, shrunk, and exits 1 when it finds one.
struct ModelRun: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "model",
        abstract: "Check the store's history against its model on seeded random cases.",
        discussion: """
            Each case is a random sequence of feed documents built from a real feed (aliases in both \
            directions and chains, newer, older and as-old versions, upstream deletions (status \
            deleted), nulls, junk, duplicates, random chunking), deletes and retention passes, run on \
            a new SQLite store. After every step: the \
            step's transaction turns the rows before it into the rows after it; its counts and the \
            report equal its change rows; importing the same document again changes nothing; \
            replaying history from token 0 gives the rows; no event is stored twice; the integrity \
            check passes. The first failure is shrunk and printed with its documents. Case I of seed \
            S is the same on every machine.

            With --filtered, the same cases check filtered history instead: random filters \
            (magnitude, circles, boxes and polygons with holes, across the antimeridian too, types, alert, tsunami, \
            status, significance, time), one client per filter following history from token 0 and \
            one starting from a filtered snapshot after every step; after every step each client's \
            cache equals the filter applied to the store, and every change it was sent made sense.

            With --push, EMSC's push source instead (SourceModelCheck's push cases): pushed \
            messages (duplicates, stale revisions out of order) and catch-up answers (asked, then \
            imported with pushes in between) interleaved with other agencies' polls, the USGS feed's \
            polls, restarts and retention passes, against a reference associator; after every step \
            clients replaying history hold the store, each report is stored once as the newest \
            version delivered, and the source's position is the newest update delivered.
            """)

    @Flag(help: "Check filtered history (enter and leave) instead.") var filtered = false
    @Flag(help: "Check EMSC's push source: pushes, catch-ups and polls interleaved.") var push = false

    @Option(help: "Cases to run.") var cases = 1000
    @Option(help: "The first case to run (case I of a seed is the same on every machine).") var first = 0
    @Option(help: "The run's seed (default: random, printed).") var seed: UInt64?
    @Option(help: "Steps per case (default 10; with --push, 24).") var steps: Int?
    @Option(help: "Events per case (each with up to three ids; default 6; with --push, true quakes, default 4).")
    var events: Int?

    func run() async throws {
        let seed = seed ?? UInt64.random(in: 1...UInt64(UInt32.max))
        if push { return try await runPush(seed: seed, steps: self.steps ?? 24, quakes: self.events ?? 4) }
        let steps = self.steps ?? 10
        let events = self.events ?? 6
        print("model: seed \(seed), \(cases) cases of \(steps) steps over \(events) events")
        let started = ContinuousClock.now
        let progress: @Sendable (Int) -> Void = { done in
            if done % 500 == 0 { print("model: \(done) cases passed") }
        }
        let shape = ModelShape(steps: steps, events: events)
        let result =
            filtered
            ? try await FilterModelCheck.run(cases: cases, seed: seed, first: first, shape: shape, progress: progress)
            : try await ModelCheck.run(cases: cases, seed: seed, first: first, shape: shape, progress: progress)
        let seconds = Double((ContinuousClock.now - started) / .milliseconds(1)) / 1000
        print(
            "model: \(result.cases) cases, \(result.steps) steps, \(result.transactions) transactions checked in \(String(format: "%.1f", seconds)) s"
        )
        if let counterexample = result.counterexample {
            print(counterexample)
            print(
                "model: FAILED (rerun: quake-bench model\(filtered ? " --filtered" : "") --seed \(seed) --first \(counterexample.caseIndex) --cases 1 --steps \(steps) --events \(events))"
            )
            throw ExitCode(1)
        }
        print("model: no counterexample")
    }

    /// `--push`: PushModelCheck's cases (`--steps` per case, `--events` true quakes).
    private func runPush(seed: UInt64, steps: Int, quakes: Int) async throws {
        let shape = SourceShape(steps: steps, quakes: quakes, push: true)
        print("model: push cases, seed \(seed), \(cases) cases of \(steps) steps over \(quakes) quakes")
        let started = ContinuousClock.now
        let result = try await PushModelCheck.run(
            cases: cases, seed: seed, first: first, shape: shape,
            progress: { done in if done % 100 == 0 { print("model: \(done) cases passed") } })
        let seconds = Double((ContinuousClock.now - started) / .milliseconds(1)) / 1000
        print(
            "model: \(result.cases) cases, \(result.steps) steps, \(result.pushes) pushes, \(result.catchUps) catch-ups, \(result.feedPolls) feed polls, \(result.staleDeliveries) stale deliveries, \(result.transactions) transactions checked in \(String(format: "%.1f", seconds)) s"
        )
        if let counterexample = result.counterexample {
            print(counterexample)
            print(
                "model: FAILED (rerun: quake-bench model --push --seed \(seed) --first \(counterexample.caseIndex) --cases 1 --steps \(steps) --events \(quakes))"
            )
            throw ExitCode(1)
        }
        print("model: no counterexample")
    }
}
