import Foundation
import QuakeFeed
import QuakeTestSupport
import Testing

@testable import QuakeModelCheck
@testable import QuakeStore

@Suite("Model-based history checks")
struct ModelTests {
    /// `QUAKED_MODEL_SEED` and `QUAKED_MODEL_CASES` run other cases; the default is fixed so that
    /// a failure in CI is reproduced by running the same test.
    @Test("seeded random documents, deletes and retention keep every property of history")
    func randomCases() async throws {
        try await Self.check("model", defaultCases: 200) { try await ModelCheck.run(cases: $0, seed: $1) }
    }

    @Test("a filtered client, from token 0 or from a filtered snapshot, holds the filter applied to the store")
    func filteredCases() async throws {
        try await Self.check("filtered model", defaultCases: 100) { try await FilterModelCheck.run(cases: $0, seed: $1) }
    }

    /// Runs a model check with the environment's seed and cases, or the fixed defaults.
    static func check(
        _ name: String, defaultCases: Int, _ run: (Int, UInt64) async throws -> ModelCheckResult
    ) async throws {
        let environment = ProcessInfo.processInfo.environment
        let seed = environment["QUAKED_MODEL_SEED"].flatMap { UInt64($0) } ?? 20_261_123
        let cases = environment["QUAKED_MODEL_CASES"].flatMap { Int($0) } ?? defaultCases
        let result = try await run(cases, seed)
        print("\(name): seed \(seed): \(result.cases) cases, \(result.steps) steps, \(result.transactions) transactions")
        #expect(result.transactions > cases, "the cases hardly changed the store: the generator is off")
        if let counterexample = result.counterexample {
            Issue.record("\(counterexample)")
        }
    }

    @Test("the filtered check catches a client sent a change it should not get")
    func filteredCheckFails() throws {
        var client = FilterModelCheck.Client(filter: 0, token: 0, cache: [:], origin: "test")
        let filter = QuakeFilter(minMagnitude: 4)
        var big = FeedFeature(id: "us1", time: 1)
        big.mag = 4.5
        // A stored quake the client does not hold: a mismatch.
        #expect(throws: ModelCheck.Problem.self) {
            try FilterModelCheck.check(client, rows: ["us1": big], filter: filter)
        }
        client.cache["us1"] = big
        try FilterModelCheck.check(client, rows: ["us1": big], filter: filter)
        var small = big
        small.mag = 3
        // Held, but no longer matching: the client should have been sent a leave.
        #expect(throws: ModelCheck.Problem.self) {
            try FilterModelCheck.check(client, rows: ["us1": small], filter: filter)
        }
    }

    @Test("the replay check catches a transaction that lost a delete, or moved a row without a change")
    func replayCheckFails() throws {
        let x = FeedFeature(id: "us1", time: 1)
        var y = FeedFeature(id: "ci2", time: 1)
        y.ids = ",ci2,us1,"
        let lostDelete = HistoryTransaction(
            token: 2, author: .import, timestamp: 0, source: nil, inserted: 1, updated: 0, deleted: 0,
            changes: [HistoryChange(quakeId: "ci2", kind: .insert, quake: y)])
        #expect(throws: ModelCheck.Problem.self) {
            try ModelCheck.checkReplay(lostDelete, before: ["us1": x], after: ["ci2": y])
        }
        var moved = x
        moved.mag = 5
        let silent = HistoryTransaction(
            token: 2, author: .import, timestamp: 0, source: nil, inserted: 0, updated: 0, deleted: 0, changes: [])
        #expect(throws: ModelCheck.Problem.self) {
            try ModelCheck.checkReplay(silent, before: ["us1": x], after: ["us1": moved])
        }
        let right = HistoryTransaction(
            token: 2, author: .import, timestamp: 0, source: nil, inserted: 1, updated: 0, deleted: 1,
            changes: [
                HistoryChange(quakeId: "ci2", kind: .insert, quake: y),
                HistoryChange(
                    quakeId: "us1", kind: .delete,
                    tombstone: Tombstone(id: "us1", code: nil, mag: nil, place: nil, time: 1), reason: .superseded,
                    supersededBy: "ci2"),
            ])
        try ModelCheck.checkReplay(right, before: ["us1": x], after: ["ci2": y])
    }

    @Test("the same seed makes the same cases")
    func casesAreSeeded() throws {
        let generator = ModelGenerator(templates: 8, shape: ModelShape())
        var a = SeededRandom(seed: SeededRandom.caseSeed(7, 3))
        var b = SeededRandom(seed: SeededRandom.caseSeed(7, 3))
        var c = SeededRandom(seed: SeededRandom.caseSeed(7, 4))
        let first = generator.makeCase(&a)
        #expect(first == generator.makeCase(&b))
        #expect(first != generator.makeCase(&c))
    }
}
