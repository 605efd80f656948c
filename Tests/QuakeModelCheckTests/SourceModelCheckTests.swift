import Foundation
import QuakeModelCheck
import Testing

/// The source model check on real store files: several agencies, association, restarts, clients
/// following history. `QUAKED_SOURCE_MODEL_SEED` and `QUAKED_SOURCE_MODEL_CASES` run other cases;
/// the default is fixed so that a failure in CI is reproduced by running the same test;
/// `QUAKED_SOURCE_MODEL_EXPIRY=0` leaves retention passes out.
@Suite struct SourceModelCheckTests {
    @Test("seeded runs of several sources keep clients, grouping and history right after every step")
    func randomCases() async throws {
        let environment = ProcessInfo.processInfo.environment
        let seed = environment["QUAKED_SOURCE_MODEL_SEED"].flatMap { UInt64($0) } ?? 20_261_127
        let cases = environment["QUAKED_SOURCE_MODEL_CASES"].flatMap { Int($0) } ?? 60
        let started = Date()
        let expiry = environment["QUAKED_SOURCE_MODEL_EXPIRY"] != "0"
        let result = try await SourceModelCheck.run(cases: cases, seed: seed, shape: SourceShape(expiry: expiry))
        print(
            "source model: seed \(seed): \(result.cases) cases, \(result.steps) steps, \(result.imports) imports, \(result.restarts) restarts, \(result.transactions) transactions (\(result.superseded) superseded, \(result.deletedUpstream) deleted upstream, \(result.expired) expired, \(result.deletedByUser) deleted by a user; \(result.multiSourceEvents) multi-source and \(result.linkedTwins) linked-twin events over the steps) in \(String(format: "%.1f", Date().timeIntervalSince(started))) s"
        )
        if let counterexample = result.counterexample {
            Issue.record("\(counterexample)")
        } else {
            #expect(result.cases == cases)
            #expect(result.transactions > cases * 3, "the cases hardly changed the store: the generator is off")
            #expect(result.restarts > 0)
            #expect(result.superseded > 0 && result.deletedUpstream > 0, "merges and retractions")
            #expect(result.multiSourceEvents > cases, "association across sources")
            #expect(!expiry || result.expired > 0, "retention passes that expire events")
            #expect(result.deletedByUser > 0, "deletes of events")
        }
    }

    @Test func aCaseSeedGivesBackTheSameCase() {
        let a = SourceModelCheck.makeCase(seed: 42)
        #expect(a == SourceModelCheck.makeCase(seed: 42))
        #expect(a.steps.count == SourceShape().steps)
        #expect(a != SourceModelCheck.makeCase(seed: 43), "another case seed")
        #expect((2...4).contains(a.sources.count))
        // Each run is one source's.
        for step in a.steps {
            if case .importRun(let source, let items) = step {
                for item in items {
                    switch item {
                    case .report(let report): #expect(report.source == source)
                    case .retraction(let itemSource, _, _): #expect(itemSource == source)
                    }
                }
            }
        }
    }

    @Test("the check fails, shrunk, when its clients drop every update")
    func theCheckCanFail() async throws {
        let result = try await SourceModelCheck.run(cases: 10, seed: 20_261_127, mutation: .clientsDropUpdates)
        let counterexample = try #require(result.counterexample, "a client that drops updates went unnoticed")
        print(counterexample)
        #expect(counterexample.failure.message.contains("differs from the store"))
        #expect(counterexample.steps.count <= counterexample.originalSteps)
        #expect(counterexample.steps.count <= 4, "shrunk to a few steps")
    }
}
