import Foundation
import QuakeAssociation
import QuakeFeed
import QuakeModel
// The agencies' readers (a dependency of QuakeTestSupport's, so built before this module): the
// push checks read pushed messages and catch-up pages with the daemon's own readers.
import QuakeSources
import QuakeStore
import QuakeTestSupport

/// One step of a source case.
public enum SourceStep: Hashable, Sendable, CustomStringConvertible {
    /// One run of source `source`: its items, in this order, in one `importSource`.
    case importRun(source: String, items: [SourceItem])
    /// "kill -9": the store value is dropped without closing and a new one opened on the same
    /// file, so the associator kept in memory is lost and the next import restores it.
    case restart
    /// An event-retention pass (`applyRetention`) expiring quakes whose time is before this.
    case expire(before: Int64)
    /// A restart with another configuration: this source order and these windows. The next
    /// import regroups the stored reports under it (`Associator.restore`) and publishes that.
    case reconfigure(sources: [String], seconds: Int64, km: Double)
    /// Another store value on the same file becomes the writer (the first time, a new one); the
    /// one that was writing stays open, its associator in memory now behind the tables, and
    /// becomes the writer again at the next switch (another process writing in between).
    case switchWriter
    /// `quakectl delete` of these ids (events or not): each event goes with its reports, which
    /// leave retraction tombstones at their `updated`.
    case delete([String])
    /// Pushed (PushModelCheck): one batch of EMSC websocket messages, one per report (`create`
    /// the first time, `update` after), each read by `EMSCMessageReader` as the stream reads it,
    /// and imported as the daemon delivers a batch: one `importSource` whose position is the
    /// newest `updated` stored or in the batch (SourceSync+EMSC.swift's `importReports`).
    case push(source: String, reports: [SourceReport])
    /// A catch-up's query (PushModelCheck): the agency's FDSN service answers with the newest
    /// version of each of its events (`catalog`) updated after the source's position as stored
    /// now less `overlap` (no position: all of them). The answer waits for its import
    /// (``catchUpImport``); pushes may be imported in between.
    case catchUpAsk(source: String, catalog: [SourceReport], overlap: Int64, format: CatchUpFormat)
    /// The oldest catch-up answer waiting: written in its format, read by the format's reader,
    /// imported as a catch-up (position as a push's). Nothing when none waits (a restart drops them).
    case catchUpImport
    /// The USGS summary feed polled (PushModelCheck): a GeoJSON document with these features
    /// (source `usgs`, the newest version of each of its quakes), imported by `importFeed` under
    /// the case's association; in association mode its changes become `usgs` reports associated
    /// with the sources'. Nothing while the store is in plain mode (before the first source import).
    case feedPoll([SourceReport])

    public var description: String {
        switch self {
        case .importRun(let source, let items):
            return "import \(source) (\(items.count) items):\n"
                + items.map { "      - \(SourceModelCheck.describe($0))" }.joined(separator: "\n")
        case .restart:
            return "restart (drop the store value, open the file again)"
        case .expire(let before):
            return "expire quakes with time < T0\(SourceModelCheck.relative(before))"
        case .reconfigure(let sources, let seconds, let km):
            return "restart with sources \(sources.joined(separator: ", ")), windows \(seconds) s and \(km) km"
        case .switchWriter:
            return "switch to the other store value on the file"
        case .delete(let ids):
            return "delete \(ids.joined(separator: " "))"
        case .push(let source, let reports):
            return "push to \(source) (\(reports.count) messages):\n"
                + reports.map { "      - \(SourceModelCheck.describe(.report($0)))" }.joined(separator: "\n")
        case .catchUpAsk(let source, let catalog, let overlap, let format):
            return
                "catch-up of \(source) asks (\(format.rawValue), overlap \(overlap) ms); the service's newest versions:\n"
                + catalog.map { "      - \(SourceModelCheck.describe(.report($0)))" }.joined(separator: "\n")
        case .catchUpImport:
            return "the oldest catch-up answer waiting is imported"
        case .feedPoll(let features):
            return "the USGS feed is polled (\(features.count) features):\n"
                + features.map { "      - \(SourceModelCheck.describe(.report($0)))" }.joined(separator: "\n")
        }
    }
}

/// The format of a catch-up answer (the emsc kind's `catch-up=` service's `format=`).
public enum CatchUpFormat: String, Hashable, Sendable, CaseIterable {
    /// QuakeML 1.2 (`QuakeMLWriter`, read by `QuakeMLReader`).
    case quakeML = "QuakeML"
    /// EMSC's `format=json` FeatureCollection (read by `EMSCGeoJSONReader`).
    case emscJSON = "EMSC GeoJSON"
}

/// A generated case: the sources in configuration order (the first preferred), and the steps.
public struct SourceCase: Hashable, Sendable {
    public var sources: [String]
    public var steps: [SourceStep]
    /// Seeds the shuffles of the order-independence check.
    public var shuffleSeed: UInt64
    /// How many items the store applies at a time within a run's transaction
    /// (`QuakeStore.sourceImportSliceItems`): small in most cases, so runs cross slices.
    public var sliceItems = QuakeStore.defaultSourceImportSliceItems

    public var configuration: AssociationConfiguration { AssociationConfiguration(sourceOrder: sources) }
}

/// How source cases are generated.
public struct SourceShape: Sendable {
    /// Steps per case.
    public var steps = 18
    /// True quakes per case (mainshocks, aftershocks and independent ones).
    public var quakes = 4
    /// Items per run, at most.
    public var runSize = 5
    /// Whether cases hold retention passes: an expired event goes with its reports (no
    /// tombstones), and later imports run under the retention (reports older than it left out).
    public var expiry = true
    /// Push cases (PushModelCheck): one source is EMSC's push kind (`emsc`), whose reports come
    /// as pushed messages and catch-up answers, between the other sources' polls.
    public var push = false

    public init(steps: Int = 18, quakes: Int = 4, runSize: Int = 5, expiry: Bool = true, push: Bool = false) {
        self.steps = steps
        self.quakes = quakes
        self.runSize = runSize
        self.expiry = expiry
        self.push = push
    }
}

/// A failing source case, shrunk.
public struct SourceCounterexample: Sendable, CustomStringConvertible {
    public var caseIndex: Int
    public var caseSeed: UInt64
    public var sources: [String]
    public var sliceItems: Int
    public var originalSteps: Int
    public var shrinkRuns: Int
    public var steps: [SourceStep]
    public var failure: ModelFailure

    public var description: String {
        var lines = [
            "counterexample: source case \(caseIndex) (case seed \(caseSeed)), shrunk from \(originalSteps) steps to \(steps.count) in \(shrinkRuns) runs",
            "  sources (preferred first): \(sources.joined(separator: ", ")); T0 = \(SourceModelCheck.t0) ms, now = \(SourceModelCheck.nowMs) ms",
            "  items applied \(sliceItems) at a time within a run's transaction",
            "  failure \(failure)",
            "  steps:",
        ]
        for (i, step) in steps.enumerated() { lines.append("    \(i + 1). \(step)") }
        return lines.joined(separator: "\n")
    }
}

public struct SourceModelCheckResult: Sendable {
    public var cases = 0
    public var steps = 0
    /// Steps that made a history transaction.
    public var transactions = 0
    public var imports = 0
    public var restarts = 0
    /// Deletes superseded by a merge, and deletes of events whose reports were all retracted, that
    /// the clients from token 0 were sent.
    public var superseded = 0
    public var deletedUpstream = 0
    /// Deletes of expired quakes the clients from token 0 were sent.
    public var expired = 0
    /// Quakes the delete steps removed.
    public var deletedByUser = 0
    /// Events of two or more sources, summed over the steps (how much association the cases did).
    public var multiSourceEvents = 0
    /// Events holding two reports of one source (through an id link), summed over the steps.
    public var linkedTwins = 0
    /// Push cases: batches of pushed messages, and messages in them.
    public var pushes = 0
    public var pushedMessages = 0
    /// Push cases: catch-up answers imported, and reports in them.
    public var catchUps = 0
    public var caughtUp = 0
    /// Pushed or caught-up reports older than the report stored (a stale revision, ignored).
    public var staleDeliveries = 0
    /// Pushes imported while a catch-up answer was waiting (between its query and its import).
    public var pushesDuringCatchUp = 0
    /// Push cases: polls of the USGS feed imported in association mode.
    public var feedPolls = 0
    public var counterexample: SourceCounterexample?
}

extension SourceModelCheckResult {
    mutating func add(_ stats: SourceModelCheck.Stats) {
        pushes += stats.pushes
        pushedMessages += stats.pushedMessages
        catchUps += stats.catchUps
        caughtUp += stats.caughtUp
        staleDeliveries += stats.staleDeliveries
        pushesDuringCatchUp += stats.pushesDuringCatchUp
        feedPolls += stats.feedPolls
    }
}

/// The model-based check of source imports: several agencies reporting shared quakes, on a real
/// store file. A case is a random sequence of runs (one source each, several items in random
/// order: reports a few seconds and tens of kilometres apart across agencies, aftershocks and a
/// source's second event within the windows, revisions across the windows and back, stale
/// copies, id links, retractions and reports coming back newer), restarts (also under another
/// configuration), a second store value writing in turns, and retention passes. After every step:
/// 1. Clients equal the store: clients following the history from token 0 (catching up after
///    every step, or every second or third), and clients that started from a snapshot after an
///    earlier step, hold exactly the `quakes` rows.
/// 2. Each current report is in exactly one event (`reports(ofEvent:)` over every quake id),
///    the reports are the ones a reference `Associator` fed the same runs keeps, each event's
///    quake row exists and every row is an event; the store's events are the reference's (ids,
///    members and preferred report), and `checkIntegrity` finds nothing.
/// 3. No event holds two reports of one source unless an id link joins them.
/// 4. The grouping is a fixpoint independent of order: a fresh `Associator` fed the store's
///    reports one by one in a shuffled order groups them the same (as sets of keys).
/// 5. History replays: a client is sent an insert only of a quake it does not hold, an update
///    or delete only of one it holds, and a delete with reason `superseded` names a quake that
///    exists after the transaction.
public enum SourceModelCheck {
    /// The `now` every import runs at (tombstones are recent against it).
    public static let nowMs: Int64 = 1_800_000_000_000
    public static let now = Date(timeIntervalSince1970: Double(nowMs) / 1000)
    /// The first quake's origin time: two hours before `now`.
    public static let t0: Int64 = nowMs - 7_200_000
    static let allSources = ["ingv", "emsc", "gfz", "geonet"]

    /// Deliberate faults of the checker's clients, to show that the check can fail.
    public enum Mutation: Sendable {
        case none
        /// The clients following history ignore every update.
        case clientsDropUpdates
        /// Push cases: a pushed batch or catch-up answer is imported with its own newest
        /// `updated` as the position, not the newest stored or in it (`importReports` without its max).
        case positionFromBatchOnly
    }

    /// Runs `cases` cases of `seed` from case `first`; stops at the first failure, shrunk.
    public static func run(
        cases: Int, seed: UInt64, first: Int = 0, shape: SourceShape = SourceShape(), mutation: Mutation = .none,
        progress: (@Sendable (Int) -> Void)? = nil
    ) async throws -> SourceModelCheckResult {
        // Off the global executor: see OwnThreadExecutor.
        try await runOnOwnThread {
            try await runHere(cases: cases, seed: seed, first: first, shape: shape, mutation: mutation, progress: progress)
        }
    }

    static func runHere(
        cases: Int, seed: UInt64, first: Int = 0, shape: SourceShape = SourceShape(), mutation: Mutation = .none,
        progress: (@Sendable (Int) -> Void)? = nil
    ) async throws -> SourceModelCheckResult {
        var result = SourceModelCheckResult()
        for index in first..<first + cases {
            let caseSeed = SeededRandom.caseSeed(seed ^ (shape.push ? 0x9A_5E_0CE5 : 0x50_0CE5), index)
            let sourceCase = makeCase(seed: caseSeed, shape: shape)
            var stats = Stats()
            let failure = try await runCase(sourceCase, mutation: mutation, stats: &stats)
            result.cases += 1
            result.steps += stats.steps
            result.transactions += stats.transactions
            result.imports += stats.imports
            result.restarts += stats.restarts
            result.superseded += stats.superseded
            result.deletedUpstream += stats.deletedUpstream
            result.expired += stats.expired
            result.deletedByUser += stats.deletedByUser
            result.multiSourceEvents += stats.multiSourceEvents
            result.linkedTwins += stats.linkedTwins
            result.add(stats)
            if let failure {
                result.counterexample = try await shrink(
                    sourceCase, failure: failure, mutation: mutation, caseIndex: index, caseSeed: caseSeed)
                return result
            }
            progress?(result.cases)
        }
        return result
    }

    struct Stats {
        var steps = 0
        var transactions = 0
        var imports = 0
        var restarts = 0
        var superseded = 0
        var deletedUpstream = 0
        var expired = 0
        var deletedByUser = 0
        var multiSourceEvents = 0
        var linkedTwins = 0
        var pushes = 0
        var pushedMessages = 0
        var catchUps = 0
        var caughtUp = 0
        var staleDeliveries = 0
        var pushesDuringCatchUp = 0
        var feedPolls = 0
    }

    // MARK: Generating

    /// The case of a case seed (the same seed, the same case).
    public static func makeCase(seed: UInt64, shape: SourceShape = SourceShape()) -> SourceCase {
        if shape.push { return PushModelCheck.makeCase(seed: seed, shape: shape) }
        var r = SeededRandom(seed: seed)
        var generator = Generator(shape: shape, random: &r)
        let steps = (0..<shape.steps).map { _ in generator.makeStep(&r) }
        var sourceCase = SourceCase(sources: generator.sources, steps: steps, shuffleSeed: r.next())
        sourceCase.sliceItems = SourceModelCheck.sliceItems(&r)
        return sourceCase
    }

    /// A case's slice size (drawn after everything else, so a seed's steps stay as they were):
    /// 1 to 4 items in three cases of four, the default otherwise.
    static func sliceItems(_ r: inout SeededRandom) -> Int {
        let size = Int.random(in: 1...5, using: &r)
        return size == 5 ? QuakeStore.defaultSourceImportSliceItems : size
    }

    struct TrueQuake {
        var time: Int64
        var latitude: Double
        var longitude: Double
        var magnitude: Double
    }

    struct Generator {
        let shape: SourceShape
        var sources: [String]
        var quakes: [TrueQuake] = []
        /// The newest `updated` given to each key (the agency's clock), and a global counter.
        var lastUpdated: [ReportKey: Int64] = [:]
        var clock: Int64 = SourceModelCheck.nowMs - 86_400_000
        /// Second events of a source near its first: key of the first -> (quake, id).
        var extraIDs: [ReportKey: String] = [:]

        init(shape: SourceShape, random r: inout SeededRandom) {
            self.shape = shape
            sources = Array(SourceModelCheck.allSources.shuffled(using: &r).prefix(Int.random(in: 2...4, using: &r)))
            // One case in four is a swarm: independent quakes 20 s apart and within 80 km, so
            // that the windows chain them into one component regrouped whole.
            let swarm = Int.random(in: 0..<4, using: &r) == 0
            let centre = (
                SourceModelCheck.round(Double.random(in: 30...50, using: &r)),
                SourceModelCheck.round(Double.random(in: 0...40, using: &r))
            )
            for q in 0..<max(1, shape.quakes) {
                let magnitude = Double(Int.random(in: 30...60, using: &r)) / 10
                if q > 0, Int.random(in: 0..<3, using: &r) == 0 {
                    // An aftershock of an earlier quake: 5–14 s later, 10–40 km away.
                    let main = quakes.randomElement(using: &r)!
                    let (lat, lon) = SourceModelCheck.move(
                        main.latitude, main.longitude, km: Double.random(in: 10...40, using: &r),
                        bearing: Double.random(in: 0..<360, using: &r))
                    quakes.append(
                        TrueQuake(
                            time: main.time + Int64.random(in: 5_000...14_000, using: &r), latitude: lat,
                            longitude: lon, magnitude: max(2.5, main.magnitude - 1)))
                } else {
                    let (lat, lon) =
                        swarm
                        ? SourceModelCheck.move(
                            centre.0, centre.1, km: Double.random(in: 0...40, using: &r),
                            bearing: Double.random(in: 0..<360, using: &r))
                        : (
                            SourceModelCheck.round(Double.random(in: 30...50, using: &r)),
                            SourceModelCheck.round(Double.random(in: 0...40, using: &r))
                        )
                    quakes.append(
                        TrueQuake(
                            time: SourceModelCheck.t0 + Int64(q) * (swarm ? 20_000 : 600_000), latitude: lat,
                            longitude: lon, magnitude: magnitude))
                }
            }
        }

        mutating func makeStep(_ r: inout SeededRandom) -> SourceStep {
            let roll = Int.random(in: 0..<100, using: &r)
            if roll < 8 { return .restart }
            if roll < 11 { return .switchWriter }
            if roll < 13 {
                let windows: [(Int64, Double)] = [(16, 100), (16, 100), (10, 60), (25, 150)]
                let (seconds, km) = windows.randomElement(using: &r)!
                return .reconfigure(sources: sources.shuffled(using: &r), seconds: seconds, km: km)
            }
            if roll < 15 {
                let ids = (0..<Int.random(in: 1...2, using: &r)).map { _ in
                    "\(sources.randomElement(using: &r)!)\(Int.random(in: 0..<quakes.count, using: &r))"
                }
                return .delete(ids)
            }
            if shape.expiry, roll < 20 {
                let quake = quakes.randomElement(using: &r)!
                return .expire(before: quake.time + Int64.random(in: -20_000...20_000, using: &r))
            }
            let source = sources.randomElement(using: &r)!
            let count = Int.random(in: 1...max(1, shape.runSize), using: &r)
            return .importRun(source: source, items: (0..<count).map { _ in makeItem(source, &r) })
        }

        mutating func nextUpdated(_ key: ReportKey, _ r: inout SeededRandom) -> Int64 {
            clock += Int64.random(in: 1...5, using: &r) * 1000
            lastUpdated[key] = clock
            return clock
        }

        mutating func makeItem(_ source: String, _ r: inout SeededRandom) -> SourceItem {
            let q = Int.random(in: 0..<quakes.count, using: &r)
            var key = ReportKey(source: source, id: "\(source)\(q)")
            let quake = quakes[q]
            var (time, lat, lon) = SourceModelCheck.solution(of: quake, &r)
            let magnitude = SourceModelCheck.round(quake.magnitude + Double(Int.random(in: -3...3, using: &r)) / 10, 1)
            var links: [String] = []
            var updated: Int64?
            switch Int.random(in: 0..<20, using: &r) {
            case 9, 10:
                SourceModelCheck.reviseAcrossTheWindows(quake, time: &time, lat: &lat, lon: &lon, &r)
            case 11, 12:
                // A stale copy: older than the newest the agency gave.
                if let last = lastUpdated[key] {
                    updated = last - Int64.random(in: 1...6, using: &r) * 1000
                }
            case 13, 14:
                // An id link to another source's report of this quake (or, rarely, of another).
                let other = sources.filter { $0 != source }.randomElement(using: &r) ?? source
                let linked = Int.random(in: 0..<5, using: &r) == 0 ? Int.random(in: 0..<quakes.count, using: &r) : q
                links = ["\(other)\(linked)"]
            case 15, 16:
                let stamp: Int64? = Int.random(in: 0..<4, using: &r) == 0 ? nil : nextUpdated(key, &r)
                return .retraction(source: source, id: key.id, updated: stamp)
            case 17:
                // A stale retraction.
                let last = lastUpdated[key] ?? clock
                return .retraction(
                    source: source, id: key.id, updated: last - Int64.random(in: 1...6, using: &r) * 1000)
            case 18, 19:
                // The source's second event near the first: 3–10 s later, 10–40 km away.
                key = ReportKey(source: source, id: "\(source)\(q)b")
                time = quake.time + Int64.random(in: 3_000...10_000, using: &r)
                (lat, lon) = SourceModelCheck.move(
                    quake.latitude, quake.longitude, km: Double.random(in: 10...40, using: &r),
                    bearing: Double.random(in: 0..<360, using: &r))
            default:
                break
            }
            let reviewed = Int.random(in: 0..<4, using: &r) == 0
            return .report(
                SourceReport(
                    source: source, id: key.id, agency: source.uppercased(), time: time, latitude: lat,
                    longitude: lon, depth: 10, magnitude: magnitude, magnitudeType: "ML", place: "REGION \(q)",
                    evaluationStatus: reviewed ? .reviewed : .preliminary, updated: updated ?? nextUpdated(key, &r),
                    links: links))
        }
    }

    static func round(_ value: Double, _ digits: Int = 3) -> Double {
        let scale = pow(10, Double(digits))
        return (value * scale).rounded() / scale
    }

    /// The point `km` away from (lat, lon) on `bearing` (degrees), rounded to 0.001°.
    /// An agency's solution of `quake`, offset from the truth as real ones are: mostly within 6 s
    /// and 30 km (two agencies 12 s and 60 km apart at most), sometimes twice that.
    static func solution(of quake: TrueQuake, _ r: inout SeededRandom) -> (time: Int64, lat: Double, lon: Double) {
        let wide = Int.random(in: 0..<3, using: &r) == 0
        let time = quake.time + Int64.random(in: wide ? -12_000...12_000 : -6_000...6_000, using: &r)
        let (lat, lon) = move(
            quake.latitude, quake.longitude, km: Double.random(in: 0...(wide ? 60 : 30), using: &r),
            bearing: Double.random(in: 0..<360, using: &r))
        return (time, lat, lon)
    }

    /// A revision of a solution of `quake` across the association windows: beyond 16 s, or
    /// beyond 100 km.
    static func reviseAcrossTheWindows(
        _ quake: TrueQuake, time: inout Int64, lat: inout Double, lon: inout Double, _ r: inout SeededRandom
    ) {
        if Bool.random(using: &r) {
            time += Int64.random(in: 20_000...40_000, using: &r) * (Bool.random(using: &r) ? 1 : -1)
        } else {
            (lat, lon) = move(
                quake.latitude, quake.longitude, km: Double.random(in: 120...220, using: &r),
                bearing: Double.random(in: 0..<360, using: &r))
        }
    }

    static func move(_ lat: Double, _ lon: Double, km: Double, bearing: Double) -> (Double, Double) {
        let b = bearing * .pi / 180
        let dLat = km * cos(b) / 111.2
        let dLon = km * sin(b) / (111.2 * max(0.1, cos(lat * .pi / 180)))
        return (round(lat + dLat), round(lon + dLon))
    }

    static func relative(_ time: Int64) -> String {
        let d = time - t0
        return (d >= 0 ? "+" : "-") + String(format: "%.3fs", Double(abs(d)) / 1000)
    }

    static func describe(_ item: SourceItem) -> String {
        switch item {
        case .report(let r):
            var parts = [
                "report \(r.source):\(r.id)", "t=T0\(relative(r.time))", "lat=\(r.latitude)", "lon=\(r.longitude)",
                "M\(r.magnitude.map { "\($0)" } ?? "?")", "updated=now\(r.updated.map { "-\(nowMs - $0)" } ?? " none")",
            ]
            if r.isReviewed { parts.append("reviewed") }
            if !r.links.isEmpty { parts.append("links=\(r.links.joined(separator: ","))") }
            return parts.joined(separator: " ")
        case .retraction(let source, let id, let updated):
            return "retract \(source):\(id) updated=now\(updated.map { "-\(nowMs - $0)" } ?? " none")"
        }
    }

    // MARK: Running

    typealias Problem = ModelCheck.Problem

    static func require(_ condition: Bool, _ message: @autoclosure () -> String) throws {
        if !condition { throw Problem(message()) }
    }

    /// A client following the store's history.
    struct Client {
        var token: HistoryToken
        var cache: [String: FeedFeature]
        var origin: String
        /// Catches up only after every `lag`-th step (and after the last).
        var lag = 1
        /// Quakes an insert or update named whose row a later transaction removed.
        var unseen = Set<String>()

        func holds(_ id: String) -> Bool { cache[id] != nil || unseen.contains(id) }

        mutating func hold(_ id: String, _ quake: FeedFeature?) {
            cache[id] = quake
            if quake == nil { unseen.insert(id) } else { unseen.remove(id) }
        }
    }

    /// Runs one case on a new store file; returns the first property that failed.
    static func runCase(_ sourceCase: SourceCase, mutation: Mutation = .none, stats: inout Stats) async throws
        -> ModelFailure?
    {
        var configuration = sourceCase.configuration
        let steps = sourceCase.steps
        return try await withTemporaryDirectory { dir in
            var store = try QuakeStore(directory: dir)
            var other: QuakeStore?
            var reference = Associator(configuration: configuration)
            // The retention the imports run under after a pass (the latest cutoff), as the daemon's.
            var expireBefore: Int64?
            var shuffler = SeededRandom(seed: sourceCase.shuffleSeed)
            var clients = (1...3).map { lag in Client(token: 0, cache: [:], origin: "token 0 (lag \(lag))", lag: lag) }
            defer {
                try? store.close()
                try? other?.close()
            }
            // Push cases: the catch-up answers waiting for their import (the page as the service
            // made it, the body it sent, its format); the position each push source must have
            // stored (the newest `updated` it was ever delivered); and, per pushed or caught-up
            // report, the newest version delivered since the store last forgot the report, with
            // every copy of that version delivered (the same version pushed and caught up).
            var waiting: [(source: String, page: [SourceReport], body: [UInt8], format: CatchUpFormat)] = []
            var positions: [String: Int64] = [:]
            var newest: [ReportKey: (updated: Int64?, copies: [SourceReport])] = [:]
            for (index, step) in steps.enumerated() {
                do {
                    let headBefore = try store.head()
                    // The source import the step makes: its source, its items, the position it
                    // writes (nil: kept), and whether its reports were delivered by a push source.
                    var run: (source: String, items: [SourceItem], position: Int64?, delivered: Bool)?
                    switch step {
                    case .importRun(let source, let items):
                        run = (source, items, nil, false)
                    case .push(let source, let reports):
                        // The stream's reader, one message at a time, as it reads the socket.
                        var reader = EMSCMessageReader(source: source)
                        var items: [SourceItem] = []
                        for report in reports {
                            let message = PushModelCheck.message(
                                report, action: newest[ReportKey(report)] == nil ? "create" : "update")
                            guard let item = try reader.read(message) else {
                                throw Problem(
                                    "EMSCMessageReader skipped the message \(String(decoding: message, as: UTF8.self)): \(reader.problems)"
                                )
                            }
                            try require(
                                item == .report(report),
                                "EMSCMessageReader read \(describe(item)) from the message of \(describe(.report(report)))")
                            items.append(item)
                        }
                        stats.pushes += 1
                        stats.pushedMessages += items.count
                        if !waiting.isEmpty { stats.pushesDuringCatchUp += 1 }
                        run = (source, items, try PushModelCheck.position(store, source, items, mutation: mutation), true)
                    case .catchUpAsk(let source, let catalog, let overlap, let format):
                        // updatedafter = the position stored now less the overlap (SourceSync.performRun).
                        let position = try store.sourcePosition(source)
                        let page = catalog.filter { report in
                            guard let position else { return true }
                            return (report.updated ?? .max) > position - overlap
                        }
                        waiting.append((source, page, PushModelCheck.answer(page, format: format), format))
                    case .catchUpImport:
                        guard !waiting.isEmpty else { break }
                        let answer = waiting.removeFirst()
                        let items = try PushModelCheck.read(answer.body, format: answer.format, source: answer.source)
                        try require(
                            items == answer.page.map(SourceItem.report),
                            "the \(answer.format.rawValue) reader read \(items.map(describe)) from the answer of \(answer.page.map { describe(.report($0)) })"
                        )
                        stats.catchUps += 1
                        stats.caughtUp += items.count
                        run = (
                            answer.source, items,
                            try PushModelCheck.position(store, answer.source, items, mutation: mutation), true
                        )
                    case .feedPoll(let features):
                        guard try store.isAssociationMode() else { break }
                        let bytes = PushModelCheck.feed(features)
                        _ = try await store.importFeed(
                            source: "model://usgs", now: now,
                            expiringBefore: expireBefore.map { Date(timeIntervalSince1970: Double($0) / 1000) },
                            association: configuration
                        ) { sink in try await sink.send(bytes) }
                        if reference.configuration != configuration {
                            reference = Associator.restore(reference.snapshot, configuration: configuration).associator
                        }
                        // The `usgs` reports the store made of the rows (QuakeStore.usgsReport(from:),
                        // internal) are read back, each checked against the feature it came from, and
                        // those that changed are given to the reference associator.
                        var held: [ReportKey: SourceReport] = [:]
                        for r in reference.reports where r.source == QuakeStore.usgsSource { held[ReportKey(r)] = r }
                        var changed: [SourceItem] = []
                        for id in try ModelCheck.rows(of: store).keys.sorted() {
                            for r in try store.reports(ofEvent: id) where r.source == QuakeStore.usgsSource {
                                // (A shrunk case's poll may lack a feature an earlier one had.)
                                if let sent = features.first(where: { $0.id == r.id }),
                                    expireBefore.map({ sent.time >= $0 }) ?? true
                                {
                                    try require(
                                        r.time == sent.time && r.latitude == sent.latitude && r.longitude == sent.longitude
                                            && r.magnitude == sent.magnitude && r.updated == sent.updated,
                                        "usgs report \(r.id) is stored as \(describe(.report(r))), the feed's is \(describe(.report(sent)))"
                                    )
                                }
                                if held[ReportKey(r)] != r { changed.append(.report(r)) }
                            }
                        }
                        _ = reference.apply(changed)
                        stats.feedPolls += 1
                    case .restart:
                        // Dropped, not closed: the process is gone, and the catch-ups it was running.
                        store = try QuakeStore(directory: dir)
                        waiting.removeAll()
                        stats.restarts += 1
                    case .reconfigure(let sources, let seconds, let km):
                        store = try QuakeStore(directory: dir)
                        waiting.removeAll()
                        configuration = AssociationConfiguration(
                            associateTimeMilliseconds: seconds * 1000, associateDistanceKm: km, sourceOrder: sources)
                        stats.restarts += 1
                    case .switchWriter:
                        let next = try other ?? QuakeStore(directory: dir)
                        other = store
                        store = next
                    case .delete(let ids):
                        let report = try await store.delete(ids: ids, now: now)
                        var deleted: [String] = []
                        for id in ids where !deleted.contains(id) {
                            guard let event = reference.event(id: id) else { continue }
                            deleted.append(id)
                            _ = reference.apply(
                                event.reports.map { key in
                                    SourceItem.retraction(
                                        source: key.source, id: key.id, updated: reference.report(key)?.updated ?? nowMs
                                    )
                                })
                        }
                        stats.deletedByUser += report.deleted.count
                        try require(
                            report.deleted == deleted, "delete reported \(report.deleted), the events were \(deleted)")
                    case .expire(let before):
                        let day: Int64 = 86_400_000
                        _ = try await store.applyRetention(
                            maxAge: .seconds(86_400), now: Date(timeIntervalSince1970: Double(before + day) / 1000))
                        expireBefore = max(expireBefore ?? before, before)
                        // An expired event goes with its reports, leaving no retraction tombstone.
                        for event in reference.events where event.preferred.time < before {
                            _ = reference.apply(
                                event.reports.map { SourceItem.retraction(source: $0.source, id: $0.id, updated: nil) })
                            // The store forgets them whole: an older copy delivered later is taken.
                            for key in event.reports { newest[key] = nil }
                        }
                    }
                    if let (source, items, position, delivered) = run {
                        store.sourceImportSliceItems = sourceCase.sliceItems
                        let report = try await store.importSource(
                            source, items: items, position: position, query: nil, association: configuration,
                            now: now, expiringBefore: expireBefore.map { Date(timeIntervalSince1970: Double($0) / 1000) })
                        if reference.configuration != configuration {
                            // The store regroups what it kept under the new configuration first.
                            reference = Associator.restore(reference.snapshot, configuration: configuration).associator
                        }
                        // Reports older than the retention are left out.
                        let admitted = items.filter { item in
                            if case .report(let r) = item, let expireBefore { return r.time >= expireBefore }
                            return true
                        }
                        // As the store applies them: a slice at a time (event ids follow the slices).
                        var start = 0
                        while start < admitted.count {
                            let end = min(admitted.count, start + sourceCase.sliceItems)
                            _ = reference.apply(admitted[start..<end])
                            start = end
                        }
                        stats.imports += 1
                        try require(
                            report.items == items.count && report.applied + report.ignored == items.count,
                            "the import of \(items.count) items reports \(report.items) items, \(report.applied) applied and \(report.ignored) ignored"
                        )
                        let head = try store.head()
                        try require(
                            report.token == (head == headBefore ? nil : head),
                            "the import reports token \(report.token.map(String.init) ?? "none"), the head went from \(headBefore) to \(head)"
                        )
                        if delivered {
                            if let newestUpdated = PushModelCheck.newestUpdated(items) {
                                positions[source] = max(positions[source] ?? newestUpdated, newestUpdated)
                            }
                            for case .report(let r) in admitted {
                                let key = ReportKey(r)
                                if let kept = newest[key], let old = kept.updated, let new = r.updated, new <= old {
                                    if new == old {
                                        newest[key]!.copies.append(r)
                                    } else {
                                        stats.staleDeliveries += 1
                                    }
                                } else {
                                    newest[key] = (r.updated, [r])
                                }
                            }
                        }
                    }
                    if try store.head() != headBefore { stats.transactions += 1 }
                    let rows = try ModelCheck.rows(of: store)
                    // Push properties: each push source's position is the newest `updated` it was
                    // delivered (so it never goes backwards, whatever the order), and a stored
                    // report of it is the newest version delivered (a stale push or an older
                    // catch-up copy never overwrites a newer report).
                    for (source, expected) in positions.sorted(by: { $0.key < $1.key }) {
                        let stored = try store.sourcePosition(source)
                        try require(
                            stored == expected,
                            "source \(source)'s position is \(stored.map { "now-\(nowMs - $0)" } ?? "none"), the newest updated delivered now-\(nowMs - expected)"
                        )
                    }
                    if !newest.isEmpty {
                        for id in rows.keys.sorted() {
                            for stored in try store.reports(ofEvent: id) {
                                guard let kept = newest[ReportKey(stored)] else { continue }
                                try require(
                                    stored.updated == kept.updated && kept.copies.contains(stored),
                                    "report \(ReportKey(stored)) is stored as \(describe(.report(stored))), the newest version delivered is \(kept.copies.map { describe(.report($0)) })"
                                )
                            }
                        }
                    }
                    for c in clients.indices where (index + 1) % clients[c].lag == 0 || index == steps.count - 1 {
                        let counts = try catchUp(&clients[c], store: store, mutation: mutation)
                        if c == 0 {
                            stats.superseded += counts.superseded
                            stats.deletedUpstream += counts.deletedUpstream
                            stats.expired += counts.expired
                        }
                        try require(
                            clients[c].cache == rows,
                            "the client from \(clients[c].origin) differs from the store: \(ModelCheck.difference(clients[c].cache, rows))"
                        )
                    }
                    let snapshot = try store.snapshot()
                    var client = Client(
                        token: snapshot.token, cache: [:], origin: "a snapshot after step \(index + 1)",
                        lag: 1 + index % 3)
                    var after: String?
                    while true {
                        let page = try snapshot.page(after: after, limit: 2)
                        for quake in page { client.cache[quake.id] = quake }
                        guard let last = page.last else { break }
                        after = last.id
                    }
                    snapshot.close()
                    try require(
                        client.cache == rows,
                        "the snapshot client differs from the store: \(ModelCheck.difference(client.cache, rows))")
                    clients.append(client)
                    try checkStore(store, rows: rows, reference: reference, shuffler: &shuffler, stats: &stats)
                    stats.steps += 1
                } catch let problem as Problem {
                    return ModelFailure(step: index, message: problem.text)
                } catch {
                    return ModelFailure(step: index, message: "the step threw: \(ModelCheck.describe(error))")
                }
            }
            return nil
        }
    }

    /// Property 1's catch-up, checking property 5 on the way.
    @discardableResult
    static func catchUp(_ client: inout Client, store: QuakeStore, mutation: Mutation) throws
        -> (superseded: Int, deletedUpstream: Int, expired: Int)
    {
        var counts = (superseded: 0, deletedUpstream: 0, expired: 0)
        while true {
            let page = try store.history(after: client.token, limit: 2, maxChanges: 4)
            for transaction in page.transactions {
                var superseded: [(String, String?)] = []
                for change in transaction.changes {
                    let what = "\(change.kind.rawValue) of \(change.quakeId) at token \(transaction.token)"
                    let held = client.holds(change.quakeId)
                    switch change.kind {
                    case .insert:
                        try require(!held, "the client from \(client.origin) was sent an \(what), which it held")
                        client.hold(change.quakeId, change.quake)
                    case .update:
                        try require(held, "the client from \(client.origin) was sent an \(what), which it did not hold")
                        if case .clientsDropUpdates = mutation { continue }
                        client.hold(change.quakeId, change.quake)
                    case .delete:
                        try require(held, "the client from \(client.origin) was sent a \(what), which it did not hold")
                        client.cache[change.quakeId] = nil
                        client.unseen.remove(change.quakeId)
                        if change.reason == .superseded {
                            superseded.append((change.quakeId, change.supersededBy))
                            counts.superseded += 1
                        } else if change.reason == .deletedUpstream {
                            counts.deletedUpstream += 1
                        } else if change.reason == .expired {
                            counts.expired += 1
                        }
                    case .enter, .leave:
                        throw Problem("an unfiltered client was sent an \(what)")
                    }
                }
                for (id, survivor) in superseded {
                    guard let survivor else {
                        throw Problem("the delete of \(id) at token \(transaction.token) is superseded by nothing")
                    }
                    try require(
                        survivor != id && client.holds(survivor),
                        "the delete of \(id) at token \(transaction.token) is superseded by \(survivor), which does not exist after the transaction"
                    )
                }
            }
            client.token = page.nextAfter
            if !page.hasMore { break }
        }
        try require(
            client.unseen.isEmpty,
            "the client from \(client.origin) caught up, but holds \(client.unseen.sorted()) without rows")
        return counts
    }

    /// Properties 2, 3 and 4.
    static func checkStore(
        _ store: QuakeStore, rows: [String: FeedFeature], reference: Associator, shuffler: inout SeededRandom,
        stats: inout Stats
    ) throws {
        let events = Dictionary(uniqueKeysWithValues: reference.events.map { ($0.id, $0) })
        let missing = Set(events.keys).subtracting(rows.keys).sorted()
        let extra = Set(rows.keys).subtracting(events.keys).sorted()
        try require(
            missing.isEmpty && extra.isEmpty,
            "the quake rows are not the events: events without a row \(missing), rows of no event \(extra)")

        // Every report, in exactly one event.
        var eventOf: [ReportKey: String] = [:]
        var stored: [ReportKey: SourceReport] = [:]
        var groups: [String: Set<ReportKey>] = [:]
        for id in rows.keys.sorted() {
            let reports = try store.reports(ofEvent: id)
            try require(!reports.isEmpty, "quake \(id) has no reports")
            for report in reports {
                let key = ReportKey(report)
                if let other = eventOf[key] {
                    throw Problem("report \(key) is in two events, \(other) and \(id)")
                }
                eventOf[key] = id
                stored[key] = report
                groups[id, default: []].insert(key)
            }
            if let event = events[id] {
                try require(
                    ReportKey(reports[0]) == event.preferredKey,
                    "quake \(id)'s preferred report is \(ReportKey(reports[0])), the associator's \(event.preferredKey)"
                )
                let row = rows[id]!
                try require(
                    row.time == event.preferred.time && row.lat == event.preferred.latitude
                        && row.lon == event.preferred.longitude && row.mag == event.preferred.magnitude,
                    "quake \(id)'s row is not its preferred report \(event.preferredKey)")
            }
        }
        let current = Dictionary(uniqueKeysWithValues: reference.reports.map { (ReportKey($0), $0) })
        let lost = Set(current.keys).subtracting(stored.keys).sorted()
        let kept = Set(stored.keys).subtracting(current.keys).sorted()
        try require(
            lost.isEmpty && kept.isEmpty,
            "the store's reports are not the current ones: missing \(lost), retracted or never sent but stored \(kept)")
        for (key, report) in stored {
            try require(current[key] == report, "report \(key) as stored is not its current version")
        }
        for (id, event) in events {
            try require(
                groups[id] == Set(event.reports),
                "event \(id) holds \(groups[id]?.sorted() ?? []), the reference associator's \(event.reports.sorted())")
        }

        // Property 3: one source twice only through an id link.
        var parent = Dictionary(uniqueKeysWithValues: stored.keys.map { ($0, $0) })
        func find(_ key: ReportKey) -> ReportKey {
            var k = key
            while parent[k]! != k { k = parent[k]! }
            return k
        }
        var withID: [String: [ReportKey]] = [:]
        for key in stored.keys where !key.id.isEmpty { withID[key.id, default: []].append(key) }
        for (key, report) in stored {
            for id in [key.id] + report.links where !id.isEmpty {
                for other in withID[id] ?? [] { parent[find(other)] = find(key) }
            }
        }
        for (id, members) in groups {
            let bySource = Dictionary(grouping: members, by: \.source)
            if bySource.count > 1 { stats.multiSourceEvents += 1 }
            if bySource.values.contains(where: { $0.count > 1 }) { stats.linkedTwins += 1 }
            for (source, keys) in bySource where keys.count > 1 {
                try require(
                    Set(keys.map(find)).count == 1,
                    "event \(id) holds \(keys.sorted()) of source \(source), not joined by an id link")
            }
        }

        // Property 4: a fresh associator, the reports one by one in a shuffled order.
        var fresh = Associator(configuration: reference.configuration)
        for report in stored.values.sorted(by: { ReportKey($0) < ReportKey($1) }).shuffled(using: &shuffler) {
            _ = fresh.apply(.report(report))
        }
        let freshGroups = Set(fresh.events.map { Set($0.reports) })
        let storeGroups = Set(groups.values)
        if freshGroups != storeGroups {
            let only = storeGroups.subtracting(freshGroups).map { $0.sorted().map(\.description) }
            let other = freshGroups.subtracting(storeGroups).map { $0.sorted().map(\.description) }
            throw Problem(
                "a fresh associator fed the store's reports in a shuffled order groups them otherwise: the store's \(only), the fresh one's \(other)"
            )
        }

        let problems = try store.checkIntegrity()
        try require(problems.isEmpty, "the integrity check finds: \(problems.joined(separator: "; "))")
    }

    // MARK: Shrinking

    /// The items of a step that has some to drop: a run's, a push's messages, a catalog's events.
    static func itemCount(_ step: SourceStep) -> Int? {
        switch step {
        case .importRun(_, let items): items.count
        case .push(_, let reports): reports.count
        case .catchUpAsk(_, let catalog, _, _): catalog.count
        default: nil
        }
    }

    /// `step` without its item `e`.
    static func removingItem(_ e: Int, of step: SourceStep) -> SourceStep {
        switch step {
        case .importRun(let source, var items):
            items.remove(at: e)
            return .importRun(source: source, items: items)
        case .push(let source, var reports):
            reports.remove(at: e)
            return .push(source: source, reports: reports)
        case .catchUpAsk(let source, var catalog, let overlap, let format):
            catalog.remove(at: e)
            return .catchUpAsk(source: source, catalog: catalog, overlap: overlap, format: format)
        default:
            return step
        }
    }

    /// Drops steps, then items of runs, while the case still fails.
    static func shrink(
        _ sourceCase: SourceCase, failure: ModelFailure, mutation: Mutation, caseIndex: Int, caseSeed: UInt64,
        maxRuns: Int = 600
    ) async throws -> SourceCounterexample {
        var best = sourceCase
        best.steps = Array(sourceCase.steps.prefix(failure.step + 1))
        var bestFailure = failure
        var runs = 0
        func attempt(_ steps: [SourceStep]) async throws -> Bool {
            guard runs < maxRuns else { return false }
            runs += 1
            var candidate = best
            candidate.steps = steps
            var stats = Stats()
            guard let failure = try await runCase(candidate, mutation: mutation, stats: &stats) else { return false }
            best.steps = Array(steps.prefix(failure.step + 1))
            bestFailure = failure
            return true
        }
        var progress = true
        while progress && runs < maxRuns {
            progress = false
            var i = best.steps.count - 1
            while i >= 0 {
                var candidate = best.steps
                candidate.remove(at: i)
                if try await attempt(candidate) { progress = true }
                i = min(i, best.steps.count) - 1
            }
            for s in best.steps.indices {
                var e = Int.max
                while true {
                    guard s < best.steps.count, let count = itemCount(best.steps[s]), count > 1 else { break }
                    e = min(e, count) - 1
                    if e < 0 { break }
                    var candidate = best.steps
                    candidate[s] = removingItem(e, of: best.steps[s])
                    if try await attempt(candidate) { progress = true }
                }
            }
        }
        return SourceCounterexample(
            caseIndex: caseIndex, caseSeed: caseSeed, sources: best.sources, sliceItems: best.sliceItems,
            originalSteps: sourceCase.steps.count,
            shrinkRuns: runs, steps: best.steps, failure: bestFailure)
    }
}
