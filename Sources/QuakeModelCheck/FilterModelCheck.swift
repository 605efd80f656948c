import Foundation
import QuakeFeed
import QuakeStore
import QuakeTestSupport

/// The model-based check of filtered history (enter and leave). A case is a random sequence of
/// steps, as for ``ModelCheck`` (imports whose versions cross every threshold a filter has, move
/// between places, change type, status and alert, aliases, deletes, retention), and a few random
/// filters. For each filter, clients follow the filtered history from token 0, and after every
/// step a new one starts from a filtered snapshot and follows from there. Clients catch up after
/// every step, or (lagging) only after every second, third or fourth step and after the last, so
/// that they read changes that later transactions overtook. After each catch-up:
/// 1. its cache equals the filter applied to the store, quake for quake;
/// 2. every change it was sent made sense to it: an insert or enter of a quake it did not hold,
///    an update, leave or delete of one it held.
public enum FilterModelCheck {
    /// Runs `cases` cases of `seed`, from case `first`; stops at the first failure, shrunk.
    public static func run(
        cases: Int, seed: UInt64, first: Int = 0, shape: ModelShape = ModelShape(), filters: Int = 3,
        progress: (@Sendable (Int) -> Void)? = nil
    ) async throws -> ModelCheckResult {
        // Off the global executor: see OwnThreadExecutor.
        try await runOnOwnThread {
            try await runHere(cases: cases, seed: seed, first: first, shape: shape, filters: filters, progress: progress)
        }
    }

    static func runHere(
        cases: Int, seed: UInt64, first: Int = 0, shape: ModelShape = ModelShape(), filters: Int = 3,
        progress: (@Sendable (Int) -> Void)? = nil
    ) async throws -> ModelCheckResult {
        let writer = try DocumentWriter(feed: ModelCheck.templateFeed)
        let generator = ModelGenerator(templates: writer.templateCount, shape: shape)
        var result = ModelCheckResult()
        for index in first..<first + cases {
            let caseSeed = SeededRandom.caseSeed(seed ^ 0xF117_E125, index)
            var random = SeededRandom(seed: caseSeed)
            let steps = generator.makeCase(&random)
            let chosen = (0..<filters).map { _ in makeFilter(&random, writer: writer) }
            var transactions = 0
            let failure = try await runCase(steps, filters: chosen, writer: writer, transactions: &transactions)
            result.cases += 1
            result.steps += steps.count
            result.transactions += transactions
            if let failure {
                var shrunk = try await ModelCheck.shrink(
                    steps, failure: failure, writer: writer, caseIndex: index, caseSeed: caseSeed
                ) { candidate in
                    var ignored = 0
                    return try await runCase(candidate, filters: chosen, writer: writer, transactions: &ignored)
                }
                shrunk.failure.message += "\n  filters: \(chosen.map(describe).joined(separator: "; "))"
                result.counterexample = shrunk
                return result
            }
            progress?(result.cases)
        }
        return result
    }

    /// A client's view: what it holds and where it is.
    struct Client {
        var filter: Int
        var token: HistoryToken
        var cache: [String: FeedFeature]
        var origin: String
        /// Quakes the client was told of without their row (an insert or update whose quake a later
        /// transaction removed): a later change in the same catch-up must remove them.
        var unseen = Set<String>()
        /// Catches up only after every `lag`-th step (and after the last).
        var lag = 1
    }

    static func runCase(
        _ steps: [ModelStep], filters: [QuakeFilter], writer: DocumentWriter, transactions: inout Int
    ) async throws -> ModelFailure? {
        try await withTemporaryDirectory { dir in
            let store = try QuakeStore(directory: dir)
            defer { try? store.close() }
            var clients = filters.indices.flatMap { f in
                (1...4).map { lag in Client(filter: f, token: 0, cache: [:], origin: "token 0 (lag \(lag))", lag: lag) }
            }
            for (index, step) in steps.enumerated() {
                do {
                    let before = try store.head()
                    try await apply(step, to: store, writer: writer)
                    if try store.head() != before { transactions += 1 }
                    let rows = try ModelCheck.rows(of: store)
                    for c in clients.indices where (index + 1) % clients[c].lag == 0 || index == steps.count - 1 {
                        try catchUp(&clients[c], store: store, filter: filters[clients[c].filter])
                        try check(clients[c], rows: rows, filter: filters[clients[c].filter])
                    }
                    // One snapshot for every filter's new client, closed after (each is a connection).
                    let snapshot = try store.snapshot()
                    defer { snapshot.close() }
                    for f in filters.indices {
                        var client = try snapshotClient(snapshot, filter: filters[f], index: f)
                        client.origin = "a snapshot after step \(index + 1)"
                        client.lag = 1 + (index + f) % 3
                        try check(client, rows: rows, filter: filters[f])
                        clients.append(client)
                    }
                } catch let problem as ModelCheck.Problem {
                    return ModelFailure(step: index, message: problem.text)
                } catch {
                    return ModelFailure(step: index, message: "the step threw: \(ModelCheck.describe(error))")
                }
            }
            return nil
        }
    }

    static func apply(_ step: ModelStep, to store: QuakeStore, writer: DocumentWriter) async throws {
        switch step {
        case .importDocument(let elements, let chunks):
            _ = try await ModelCheck.importDocument(writer.document(elements), chunks: chunks, into: store)
        case .delete(let ids):
            _ = try await store.delete(ids: ids)
        case .retention(let cutoff):
            // applyRetention counts back from now: a now that puts the cutoff where the step says.
            let maxAge = Duration.seconds(86_400)
            let now = Date(timeIntervalSince1970: Double(cutoff + 86_400_000) / 1000)
            try await store.applyRetention(maxAge: maxAge, now: now)
        }
    }

    /// Follows the filtered history to the head, applying each change as a client does.
    static func catchUp(_ client: inout Client, store: QuakeStore, filter: QuakeFilter) throws {
        while true {
            let page = try store.history(after: client.token, limit: 3, maxChanges: 5, filter: filter)
            for transaction in page.transactions {
                try ModelCheck.require(
                    !transaction.changes.isEmpty, "a filtered page holds transaction \(transaction.token) with no changes")
                for change in transaction.changes {
                    let held = client.cache[change.quakeId] != nil || client.unseen.contains(change.quakeId)
                    let what = "\(change.kind.rawValue) of \(change.quakeId) at token \(transaction.token)"
                    switch change.kind {
                    case .insert, .enter:
                        try ModelCheck.require(!held, "\(client.origin) client of \(describe(filter)) was sent an \(what), which it already held")
                        client.hold(change.quakeId, change.quake)
                    case .update:
                        try ModelCheck.require(held, "\(client.origin) client of \(describe(filter)) was sent an \(what), which it did not hold")
                        client.hold(change.quakeId, change.quake)
                    case .delete, .leave:
                        try ModelCheck.require(held, "\(client.origin) client of \(describe(filter)) was sent a \(what), which it did not hold")
                        client.cache[change.quakeId] = nil
                        client.unseen.remove(change.quakeId)
                    }
                }
            }
            client.token = page.nextAfter
            if !page.hasMore { break }
        }
        try ModelCheck.require(
            client.unseen.isEmpty,
            "\(client.origin) client of \(describe(filter)) caught up, but still holds \(client.unseen.sorted()) without rows")
    }

    static func snapshotClient(_ snapshot: QuakeSnapshot, filter: QuakeFilter, index: Int) throws -> Client {
        var cache: [String: FeedFeature] = [:]
        var after: String?
        while true {
            let page = try snapshot.page(after: after, limit: 2, filter: filter)
            for quake in page { cache[quake.id] = quake }
            guard let last = page.last else { break }
            after = last.id
        }
        return Client(filter: index, token: snapshot.token, cache: cache, origin: "snapshot")
    }

    static func check(_ client: Client, rows: [String: FeedFeature], filter: QuakeFilter) throws {
        let expected = rows.filter { filter.matches($0.value) }
        try ModelCheck.require(
            client.cache == expected,
            "the cache of a client of \(describe(filter)) from \(client.origin) differs from the filtered store: "
                + ModelCheck.difference(client.cache, expected))
    }

    // MARK: Filters

    /// A random filter whose thresholds sit between the values the generator uses, and whose
    /// regions take some template places in and leave others out.
    static func makeFilter(_ r: inout SeededRandom, writer: DocumentWriter) -> QuakeFilter {
        var filter = QuakeFilter()
        func maybe(_ oneIn: Int = 3) -> Bool { Int.random(in: 0..<oneIn, using: &r) == 0 }
        if maybe(2) { filter.minMagnitude = [3.9, 4.0, 4.45].randomElement(using: &r)! }
        if maybe(5) { filter.maxMagnitude = [4.4, 4.5].randomElement(using: &r)! }
        if let min = filter.minMagnitude, let max = filter.maxMagnitude, max < min { filter.maxMagnitude = nil }
        if maybe(2) {
            let places = writer.places
            let (lat, lon) = places.randomElement(using: &r)!
            switch Int.random(in: 0..<5, using: &r) {
            case 0:
                filter.region = .circle(lat: lat, lon: lon, radiusKm: [5, 12, 600, 3000].randomElement(using: &r)!)
            case 1:
                filter.region = .box(minLat: lat - 1, maxLat: lat + 1, minLon: lon - 1, maxLon: lon + 1)
            case 3:
                // A triangle with a template place on its edge (inside) and the next place in or out.
                filter.region = .polygons(
                    PolygonRegion(polygons: [[[
                        .init(lat: lat, lon: lon - 2), .init(lat: lat, lon: lon + 2),
                        .init(lat: lat + [1.0, 3.0].randomElement(using: &r)!, lon: lon), .init(lat: lat, lon: lon - 2),
                    ]]]))
            case 4:
                // Across the antimeridian, with a hole round one place: a Pacific ring written
                // with longitudes that jump from 140 to -117.
                let (holeLat, holeLon) = places.randomElement(using: &r)!
                filter.region = .polygons(
                    PolygonRegion(polygons: [[
                        [
                            .init(lat: -60, lon: 140), .init(lat: -60, lon: -117), .init(lat: 60, lon: -100),
                            .init(lat: 60, lon: 130), .init(lat: -60, lon: 140),
                        ],
                        [
                            .init(lat: holeLat - 0.5, lon: holeLon - 0.5), .init(lat: holeLat - 0.5, lon: holeLon + 0.5),
                            .init(lat: holeLat + 0.5, lon: holeLon + 0.5), .init(lat: holeLat + 0.5, lon: holeLon - 0.5),
                            .init(lat: holeLat - 0.5, lon: holeLon - 0.5),
                        ],
                    ]]))
            default:
                // Across the antimeridian: from east of the western Pacific to west of the Americas.
                filter.region = .box(
                    minLat: -60, maxLat: 60, minLon: [130.0, 140.2].randomElement(using: &r)!,
                    maxLon: [-100.0, -117.0].randomElement(using: &r)!)
            }
        }
        if maybe(5) { filter.types = [["earthquake"], ["quarry blast", "explosion"]].randomElement(using: &r)! }
        if maybe(5) { filter.minAlert = [.yellow, .orange].randomElement(using: &r)! }
        if maybe(6) { filter.tsunami = Bool.random(using: &r) }
        if maybe(5) { filter.reviewedOnly = true }
        if maybe(6) { filter.minSignificance = [640, 660].randomElement(using: &r)! }
        // The templates' sources (,pt,at,us, ,ci,us, ,us,) differ, and each version takes a
        // template: a version that changes them makes an agency filter's enter or leave.
        if maybe(4) { filter.agencies = [["ci"], ["PT", "ak"], ["at", "CI"]].randomElement(using: &r)! }
        if maybe(5) { filter.minAgencies = [2, 3].randomElement(using: &r)! }
        if maybe(5) {
            filter.since = ModelGenerator.baseTime + Int64.random(in: 1...4, using: &r) * 86_400_000
        }
        return filter
    }

    static func describe(_ filter: QuakeFilter) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        let data = (try? encoder.encode(filter)) ?? Data()
        return String(decoding: data, as: UTF8.self)
    }
}

extension FilterModelCheck.Client {
    /// A change carrying the quake as stored now, or none when a later transaction removed it.
    mutating func hold(_ id: String, _ quake: FeedFeature?) {
        cache[id] = quake
        if quake == nil { unseen.insert(id) } else { unseen.remove(id) }
    }
}

extension DocumentWriter {
    /// The templates' places (lat, lon).
    var places: [(Double, Double)] {
        templates.compactMap { template in
            guard let geometry = template.geometry as? [String: Any],
                let coordinates = geometry["coordinates"] as? [Double], coordinates.count >= 2
            else { return nil }
            return (coordinates[1], coordinates[0])
        }
    }
}
