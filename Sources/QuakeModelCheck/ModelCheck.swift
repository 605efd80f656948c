import Foundation
import GRDB
import QuakeFeed
import QuakeStore
import QuakeTestSupport

/// A property that did not hold, at a step of a case.
public struct ModelFailure: Error, Sendable, CustomStringConvertible {
    /// The 0-based step after which it was found.
    public var step: Int
    public var message: String

    public var description: String { "after step \(step + 1): \(message)" }
}

/// A failing case, shrunk.
public struct Counterexample: Sendable, CustomStringConvertible {
    public var caseIndex: Int
    public var caseSeed: UInt64
    public var originalSteps: Int
    public var shrinkRuns: Int
    public var steps: [ModelStep]
    public var failure: ModelFailure
    /// The documents of the shrunk steps, as the feed sent them.
    public var documents: [Int: String]

    public var description: String {
        var lines = [
            "counterexample: case \(caseIndex) (case seed \(caseSeed)), shrunk from \(originalSteps) steps to \(steps.count) in \(shrinkRuns) runs",
            "  failure \(failure)",
            "  steps:",
        ]
        for (i, step) in steps.enumerated() {
            lines.append("    \(i + 1). \(step)")
            if let document = documents[i] { lines.append("      document: \(document)") }
        }
        return lines.joined(separator: "\n")
    }
}

public struct ModelCheckResult: Sendable {
    public var cases = 0
    public var steps = 0
    /// History transactions checked.
    public var transactions = 0
    public var counterexample: Counterexample?
}

/// The model-based check of the store's history. After every step of a case, on a real SQLite
/// store, these hold:
/// 1. The step made at most one transaction; the head is its token (or did not move), and the
///    transaction's change rows turn the rows before the step into exactly the rows after it:
///    an insert adds a quake that was absent, a delete removes one that was present (its
///    tombstone as it was), an update changes exactly its fields from their old values to their
///    new ones, and every quake without a change row is as it was.
/// 2. The transaction's counts, and the import's or delete's report, equal its change rows.
/// 3. Importing the same document again (chunked differently) changes nothing.
/// 4. Replaying the whole history from token 0, as a client does, gives the store's rows.
/// 5. No two stored quakes are one event (neither lists the other's id), and
///    ``QuakeStore/checkIntegrity(limit:)`` finds nothing.
/// Deletes remove exactly the stored ids asked for; retention exactly the expired quakes. After a
/// retention pass, imports run under that retention, as the daemon's do: they report every
/// feature older than it as `expired` and write none of them (no quake older than the retention
/// is inserted or changed).
public enum ModelCheck {
    /// The real feed the documents' other properties come from.
    public static let templateFeed = Fixtures.usgs("lhayesgolding__EarthquakeData__significant_week.geojson")

    /// Runs `cases` cases of `seed`, from case `first`; stops at the first failure, which comes
    /// back shrunk.
    public static func run(
        cases: Int, seed: UInt64, first: Int = 0, shape: ModelShape = ModelShape(),
        progress: (@Sendable (Int) -> Void)? = nil
    ) async throws -> ModelCheckResult {
        // Off the global executor: see OwnThreadExecutor.
        try await runOnOwnThread {
            try await runHere(cases: cases, seed: seed, first: first, shape: shape, progress: progress)
        }
    }

    static func runHere(
        cases: Int, seed: UInt64, first: Int = 0, shape: ModelShape = ModelShape(),
        progress: (@Sendable (Int) -> Void)? = nil
    ) async throws -> ModelCheckResult {
        let writer = try DocumentWriter(feed: templateFeed)
        let generator = ModelGenerator(templates: writer.templateCount, shape: shape)
        var result = ModelCheckResult()
        for index in first..<first + cases {
            let caseSeed = SeededRandom.caseSeed(seed, index)
            var random = SeededRandom(seed: caseSeed)
            let steps = generator.makeCase(&random)
            var stats = CaseStats()
            let failure = try await runCase(steps, writer: writer, stats: &stats)
            result.cases += 1
            result.steps += stats.steps
            result.transactions += stats.transactions
            if let failure {
                result.counterexample = try await shrink(
                    steps, failure: failure, writer: writer, caseIndex: index, caseSeed: caseSeed)
                return result
            }
            progress?(result.cases)
        }
        return result
    }

    struct CaseStats {
        var steps = 0
        var transactions = 0
    }

    /// Runs one case on a new store; returns the first property that failed.
    static func runCase(_ steps: [ModelStep], writer: DocumentWriter, stats: inout CaseStats) async throws
        -> ModelFailure?
    {
        try await withTemporaryDirectory { dir in
            let store = try QuakeStore(directory: dir)
            defer { try? store.close() }
            var rows: [String: FeedFeature] = [:]
            // The retention the imports run under: the latest pass's (cutoffs only move on).
            var expireBefore: Int64?
            for (index, step) in steps.enumerated() {
                do {
                    rows = try await check(
                        step, store: store, rows: rows, expireBefore: expireBefore, writer: writer, stats: &stats)
                    if case .retention(let cutoff) = step { expireBefore = max(expireBefore ?? cutoff, cutoff) }
                    stats.steps += 1
                } catch let message as Problem {
                    return ModelFailure(step: index, message: message.text)
                } catch {
                    return ModelFailure(step: index, message: "the step threw: \(ModelCheck.describe(error))")
                }
            }
            return nil
        }
    }

    struct Problem: Error {
        var text: String
        init(_ text: String) { self.text = text }
    }

    /// An error as a failure message shows it; an SQLite error with its extended code, which
    /// tells which call failed ("disk I/O error" alone does not).
    static func describe(_ error: any Error) -> String {
        if let error = error as? DatabaseError {
            return "\(error) (extended code \(error.extendedResultCode.rawValue))"
        }
        return "\(error)"
    }

    static func require(_ condition: Bool, _ message: @autoclosure () -> String) throws {
        if !condition { throw Problem(message()) }
    }

    static func rows(of store: QuakeStore) throws -> [String: FeedFeature] {
        Dictionary(uniqueKeysWithValues: try store.allQuakes().map { ($0.id, $0) })
    }

    /// Runs one step and checks every property; returns the rows after it.
    static func check(
        _ step: ModelStep, store: QuakeStore, rows before: [String: FeedFeature], expireBefore: Int64? = nil,
        writer: DocumentWriter, stats: inout CaseStats
    ) async throws -> [String: FeedFeature] {
        let headBefore = try store.head()
        var token: HistoryToken?
        var reported: (inserted: Int, updated: Int, deleted: Int, superseded: Int)?
        var expected: [String: FeedFeature]?
        switch step {
        case .importDocument(let elements, let chunks):
            let report = try await importDocument(
                writer.document(elements), chunks: chunks, into: store, expireBefore: expireBefore)
            token = report.token
            reported = (report.inserted, report.updated, -1, report.superseded)
            let old = elements.filter { element in
                if case .feature(let version) = element, let expireBefore { return version.time < expireBefore }
                return false
            }
            try require(
                report.expired == old.count,
                "the import reports \(report.expired) expired features, the document has \(old.count) older than \(expireBefore ?? 0)"
            )
        case .delete(let ids):
            let report = try await store.delete(ids: ids)
            token = report.token
            var remaining = before
            for id in ids { remaining.removeValue(forKey: id) }
            expected = remaining
            let gone = Set(ids).intersection(before.keys)
            try require(Set(report.deleted) == gone, "delete reported \(report.deleted), stored were \(gone.sorted())")
            reported = (0, 0, report.deleted.count, 0)
        case .retention(let cutoff):
            let day: Int64 = 86_400_000
            let now = Date(timeIntervalSince1970: Double(cutoff + day) / 1000)
            token = try await store.applyRetention(maxAge: .seconds(86_400), now: now)
            expected = before.filter { $0.value.time >= cutoff }
        }
        let after = try rows(of: store)
        if let expected {
            try require(after == expected, "\(step): the rows after it are not the rows expected")
        }
        let head = try store.head()
        let page = try store.history(after: headBefore, limit: 10)
        guard let token else {
            try require(head == headBefore, "no token, but the head moved from \(headBefore) to \(head)")
            try require(page.transactions.isEmpty, "no token, but transactions after \(headBefore) exist")
            try require(after == before, "no token, but the rows changed: \(difference(before, after))")
            try checkStore(store, rows: after)
            if case .importDocument(let elements, let chunks) = step {
                try await checkReimport(
                    writer.document(elements), chunks: chunks, store: store, rows: after, expireBefore: expireBefore)
            }
            return after
        }
        try require(head == token, "the head is \(head), the step's token \(token)")
        try require(
            page.transactions.map(\.token) == [token],
            "the step made transactions \(page.transactions.map(\.token)), its token is \(token)")
        let transaction = page.transactions[0]
        stats.transactions += 1
        try checkReplay(transaction, before: before, after: after)
        if case .importDocument = step, let expireBefore {
            for change in transaction.changes where change.kind != .delete {
                let time = after[change.quakeId]?.time ?? .max
                try require(
                    time >= expireBefore,
                    "the import wrote \(change.quakeId) (time \(time)), older than the retention's \(expireBefore)")
            }
        }
        let kinds = transaction.changes.map(\.kind)
        let counted = (
            kinds.filter { $0 == .insert }.count, kinds.filter { $0 == .update }.count,
            kinds.filter { $0 == .delete }.count
        )
        try require(
            (transaction.inserted, transaction.updated, transaction.deleted) == counted,
            "transaction \(token) counts \(transaction.inserted)/\(transaction.updated)/\(transaction.deleted), its changes are \(counted)"
        )
        if let reported {
            let superseded = transaction.changes.filter { $0.reason == .superseded }.count
            try require(
                reported.inserted == counted.0 && reported.updated == counted.1 && reported.superseded == superseded
                    && (reported.deleted < 0 || reported.deleted == counted.2),
                "the report says \(reported), transaction \(token) holds \(counted) and \(superseded) superseded")
        }
        try checkStore(store, rows: after)
        if case .importDocument(let elements, let chunks) = step {
            try await checkReimport(
                writer.document(elements), chunks: chunks, store: store, rows: after, expireBefore: expireBefore)
        }
        return after
    }

    /// Property 1: the change rows turn `before` into `after`.
    static func checkReplay(_ transaction: HistoryTransaction, before: [String: FeedFeature], after: [String: FeedFeature])
        throws
    {
        var changed = Set<String>()
        for change in transaction.changes {
            let id = change.quakeId
            try require(changed.insert(id).inserted, "transaction \(transaction.token) changes \(id) twice")
            let old = before[id]
            let new = after[id]
            switch change.kind {
            case .insert:
                try require(old == nil, "transaction \(transaction.token) inserts \(id), which was stored")
                try require(new != nil, "transaction \(transaction.token) inserts \(id), which is not stored after it")
            case .delete:
                try require(old != nil, "transaction \(transaction.token) deletes \(id), which was not stored")
                try require(new == nil, "transaction \(transaction.token) deletes \(id), which is still stored")
                if let old, let tombstone = change.tombstone {
                    try require(tombstone == Tombstone(of: old), "the tombstone of \(id) is not the row deleted")
                } else {
                    throw Problem("the delete of \(id) has no tombstone")
                }
            case .enter, .leave:
                throw Problem("transaction \(transaction.token) sends an unfiltered reader \(change.kind.rawValue)")
            case .update:
                guard let old, let new else {
                    throw Problem("transaction \(transaction.token) updates \(id), stored before: \(old != nil), after: \(new != nil)")
                }
                let fields = change.fields ?? []
                try require(!fields.isEmpty, "the update of \(id) changes no field")
                let oldValues = Dictionary(uniqueKeysWithValues: old.storedFields.map { ($0.name, $0.value) })
                let newValues = Dictionary(uniqueKeysWithValues: new.storedFields.map { ($0.name, $0.value) })
                let listed = Set(fields.map(\.field))
                for field in fields {
                    try require(
                        oldValues[field.field] == field.old && newValues[field.field] == field.new,
                        "the update of \(id) says \(field.field) went from \(field.old) to \(field.new); it went from \(oldValues[field.field].map(String.init(describing:)) ?? "?") to \(newValues[field.field].map(String.init(describing:)) ?? "?")"
                    )
                }
                for (name, value) in oldValues where !listed.contains(name) {
                    try require(newValues[name] == value, "the update of \(id) leaves out \(name), which changed")
                }
            }
        }
        for (id, row) in before where !changed.contains(id) {
            try require(after[id] == row, "quake \(id) changed without a change row in transaction \(transaction.token)")
        }
        for id in after.keys where before[id] == nil && !changed.contains(id) {
            throw Problem("quake \(id) appeared without a change row in transaction \(transaction.token)")
        }
    }

    /// Properties 4 and 5.
    static func checkStore(_ store: QuakeStore, rows: [String: FeedFeature]) throws {
        var replayed: [String: FeedFeature] = [:]
        var after: HistoryToken = 0
        while true {
            let page = try store.history(after: after, limit: 50)
            for transaction in page.transactions {
                for change in transaction.changes {
                    switch change.kind {
                    case .insert, .update, .enter: replayed[change.quakeId] = change.quake
                    case .delete, .leave: replayed.removeValue(forKey: change.quakeId)
                    }
                }
            }
            after = page.nextAfter
            if !page.hasMore { break }
        }
        try require(replayed == rows, "replaying history from token 0 does not give the rows: \(difference(replayed, rows))")
        for row in rows.values {
            for other in row.otherIDs where rows[other] != nil {
                throw Problem("quakes \(row.id) and \(other) are one event stored twice (\(row.id) lists \(other))")
            }
        }
        let problems = try store.checkIntegrity()
        try require(problems.isEmpty, "the integrity check finds: \(problems.joined(separator: "; "))")
    }

    /// Property 3.
    static func checkReimport(
        _ document: [UInt8], chunks: [Int], store: QuakeStore, rows: [String: FeedFeature], expireBefore: Int64? = nil
    ) async throws {
        let head = try store.head()
        let again = try await importDocument(
            document, chunks: chunks.isEmpty ? [61] : [], into: store, expireBefore: expireBefore)
        try require(
            again.token == nil,
            "importing the same document again made token \(again.token ?? 0) (inserted \(again.inserted), updated \(again.updated), superseded \(again.superseded))"
        )
        try require(try store.head() == head, "importing the same document again moved the head")
        try require(try Self.rows(of: store) == rows, "importing the same document again changed the rows")
    }

    static func importDocument(_ bytes: [UInt8], chunks: [Int], into store: QuakeStore, expireBefore: Int64? = nil)
        async throws -> ImportReport
    {
        let cutoff = expireBefore.map { Date(timeIntervalSince1970: Double($0) / 1000) }
        return try await store.importFeed(source: "model://document", expiringBefore: cutoff) { sink in
            guard !chunks.isEmpty else { return try await sink.send(bytes) }
            var offset = 0
            var i = 0
            while offset < bytes.count {
                let end = min(offset + max(1, chunks[i % chunks.count]), bytes.count)
                try await sink.send(Array(bytes[offset..<end]))
                offset = end
                i += 1
            }
        }
    }

    static func difference(_ a: [String: FeedFeature], _ b: [String: FeedFeature]) -> String {
        let onlyA = Set(a.keys).subtracting(b.keys).sorted()
        let onlyB = Set(b.keys).subtracting(a.keys).sorted()
        let differ = Set(a.keys).intersection(b.keys).filter { a[$0] != b[$0] }.sorted()
        return "only in the first: \(onlyA), only in the second: \(onlyB), different: \(differ)"
    }

    // MARK: Shrinking

    /// Makes a failing case smaller while it still fails: drops steps, drops document elements,
    /// sends documents whole, and simplifies feature versions.
    static func shrink(
        _ steps: [ModelStep], failure: ModelFailure, writer: DocumentWriter, caseIndex: Int, caseSeed: UInt64,
        maxRuns: Int = 2000
    ) async throws -> Counterexample {
        try await shrink(steps, failure: failure, writer: writer, caseIndex: caseIndex, caseSeed: caseSeed, maxRuns: maxRuns) {
            var stats = CaseStats()
            return try await runCase($0, writer: writer, stats: &stats)
        }
    }

    /// Shrinks a failing case of any check that runs steps: `run` runs a candidate and returns its
    /// first failure.
    static func shrink(
        _ steps: [ModelStep], failure: ModelFailure, writer: DocumentWriter, caseIndex: Int, caseSeed: UInt64,
        maxRuns: Int = 2000, run: ([ModelStep]) async throws -> ModelFailure?
    ) async throws -> Counterexample {
        var best = Array(steps.prefix(failure.step + 1))
        var bestFailure = failure
        var runs = 0
        func attempt(_ candidate: [ModelStep]) async throws -> Bool {
            guard runs < maxRuns else { return false }
            runs += 1
            guard let failure = try await run(candidate) else { return false }
            best = Array(candidate.prefix(failure.step + 1))
            bestFailure = failure
            return true
        }
        var progress = true
        while progress && runs < maxRuns {
            progress = false
            var i = best.count - 1
            while i >= 0 {
                var candidate = best
                candidate.remove(at: i)
                if try await attempt(candidate) { progress = true }
                i = min(i, best.count) - 1
            }
            for s in best.indices {
                guard s < best.count, case .importDocument(let elements, let chunks) = best[s] else { continue }
                if !chunks.isEmpty {
                    var candidate = best
                    candidate[s] = .importDocument(elements, chunks: [])
                    if try await attempt(candidate) { progress = true }
                }
                var e = elements.count - 1
                while e >= 0 {
                    guard s < best.count, case .importDocument(var current, let chunks) = best[s], e < current.count
                    else { break }
                    current.remove(at: e)
                    var candidate = best
                    candidate[s] = .importDocument(current, chunks: chunks)
                    if try await attempt(candidate) { progress = true }
                    e -= 1
                }
                guard s < best.count, case .importDocument(let current, let currentChunks) = best[s] else { continue }
                for (e, element) in current.enumerated() {
                    guard case .feature(let version) = element else { continue }
                    for simpler in simplifications(of: version) {
                        guard s < best.count, case .importDocument(var now, _) = best[s], e < now.count else { break }
                        now[e] = .feature(simpler)
                        var candidate = best
                        candidate[s] = .importDocument(now, chunks: currentChunks)
                        if try await attempt(candidate) { progress = true }
                    }
                }
            }
        }
        var documents: [Int: String] = [:]
        for (i, step) in best.enumerated() {
            if case .importDocument(let elements, _) = step {
                documents[i] = String(decoding: writer.document(elements), as: UTF8.self)
            }
        }
        return Counterexample(
            caseIndex: caseIndex, caseSeed: caseSeed, originalSteps: steps.count, shrinkRuns: runs, steps: best,
            failure: bestFailure, documents: documents)
    }

    static func simplifications(of version: FeatureVersion) -> [FeatureVersion] {
        var results: [FeatureVersion] = []
        if !version.nulls.isEmpty {
            var v = version
            v.nulls = []
            results.append(v)
        }
        if version.template != 0 {
            var v = version
            v.template = 0
            results.append(v)
        }
        if !version.overrides.isEmpty {
            var v = version
            v.overrides = [:]
            results.append(v)
        }
        if version.mag != 4.5 {
            var v = version
            v.mag = 4.5
            results.append(v)
        }
        return results
    }
}
