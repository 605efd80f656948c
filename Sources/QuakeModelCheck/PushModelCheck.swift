import Foundation
import QuakeAssociation
import QuakeFeed
import QuakeModel
import QuakeSources
import QuakeStore

/// Push cases of the source model check (``SourceShape/push``): EMSC's push kind (`emsc`,
/// Sources/QuakeDaemon/Sources/SourceSync+EMSC.swift) among one to three polled sources, its
/// reports arriving by push and by catch-up in every order, run by ``SourceModelCheck``'s
/// runner with the same properties after every step.
///
/// What a case holds, besides the other sources' polls (``SourceModelCheck``'s runs: revisions,
/// stale copies, id links, retractions), restarts as kill -9, another writer, a reconfiguration,
/// deletes and retention passes:
/// - the agency publishing new versions of its events (a newer `lastupdate`; the time, place
///   and magnitude revised, sometimes across the association windows), most of them pushed at
///   once, some never pushed (lost while the socket was down: only a catch-up brings them);
/// - pushes (``SourceStep/push(source:reports:)``): a batch of one message (as a streaming
///   socket hands them over) or a few (what was buffered during a catch-up), each the newest
///   version just published, a duplicate of a message pushed before, or an older version of an
///   event (out of order, stale);
/// - catch-ups, split in their query (``SourceStep/catchUpAsk(source:catalog:overlap:format:)``:
///   the service's newest versions, updated after the stored position less an overlap of 0 s to
///   2 min, read from the store then) and their import (``SourceStep/catchUpImport``): pushes and
///   polls imported in between make the answer older than what is stored (a push of a newer
///   version came first) or newer (a version never pushed), and the overlap re-delivers what was
///   pushed; a restart between them loses the answer.
///
/// The pushed messages are EMSC websocket JSON read by `EMSCMessageReader`, the catch-up answers
/// QuakeML (`QuakeMLWriter`, read by `QuakeMLReader`) or EMSC's GeoJSON (read by
/// `EMSCGeoJSONReader`): the daemon's readers. Each batch and answer is imported as the daemon's
/// `importReports` does: one `importSource` with the position the newest `updated` stored or in
/// the items (that three-line rule is repeated in ``position(_:_:_:)``: SourceSync is internal to
/// QuakeDaemon).
///
/// Push properties, besides ``SourceModelCheck``'s: the source's stored position is the newest
/// `updated` it was ever delivered (so it never goes backwards); a stored report of it is the
/// newest version delivered since the store last forgot it (a stale push or an older catch-up
/// copy never overwrites a newer one); what the readers read is what was sent.
public enum PushModelCheck {
    /// The push source's name (and kind).
    public static let source = "emsc"

    /// Runs `cases` push cases of `seed` from case `first`; stops at the first failure, shrunk.
    public static func run(
        cases: Int, seed: UInt64, first: Int = 0, shape: SourceShape = SourceShape(steps: 24, push: true),
        mutation: SourceModelCheck.Mutation = .none, progress: (@Sendable (Int) -> Void)? = nil
    ) async throws -> SourceModelCheckResult {
        var shape = shape
        shape.push = true
        return try await SourceModelCheck.run(
            cases: cases, seed: seed, first: first, shape: shape, mutation: mutation, progress: progress)
    }

    // MARK: Generating

    /// The push case of a case seed.
    static func makeCase(seed: UInt64, shape: SourceShape) -> SourceCase {
        var r = SeededRandom(seed: seed)
        var base = SourceModelCheck.Generator(shape: shape, random: &r)
        let polled = Array(
            SourceModelCheck.allSources.filter { $0 != source }.shuffled(using: &r).prefix(Int.random(in: 1...3, using: &r))
        )
        // Half the cases also poll the USGS feed (and then delete nothing: a user's delete of a
        // usgs report is the feed import's business, which this check does not model).
        let usgs = Bool.random(using: &r)
        base.sources = ([source] + polled + (usgs ? [QuakeStore.usgsSource] : [])).shuffled(using: &r)
        var generator = Generator(base: base, format: CatchUpFormat.allCases.randomElement(using: &r)!, usgs: usgs)
        var steps: [SourceStep] = []
        while steps.count < shape.steps {
            if let step = generator.makeStep(&r, polled: polled) { steps.append(step) }
        }
        var sourceCase = SourceCase(sources: base.sources, steps: steps, shuffleSeed: r.next())
        sourceCase.sliceItems = SourceModelCheck.sliceItems(&r)
        return sourceCase
    }

    struct Generator {
        var base: SourceModelCheck.Generator
        let format: CatchUpFormat
        /// The agency's versions of each event, oldest first.
        var versions: [String: [SourceReport]] = [:]
        /// Every message pushed so far.
        var pushed: [SourceReport] = []
        /// Catch-up answers asked for and not yet imported (as the runner will hold them).
        var waiting = 0

        /// Whether the case polls the USGS feed, and its versions of each quake, oldest first.
        let usgs: Bool
        var usgsVersions: [String: [SourceReport]] = [:]

        init(base: SourceModelCheck.Generator, format: CatchUpFormat, usgs: Bool) {
            self.base = base
            self.format = format
            self.usgs = usgs
        }

        /// A step, or nil when the roll only published a version that is not pushed.
        mutating func makeStep(_ r: inout SeededRandom, polled: [String]) -> SourceStep? {
            let roll = Int.random(in: 0..<100, using: &r)
            if roll < 6 {
                waiting = 0
                return .restart
            }
            if roll < 8 { return .switchWriter }
            if roll < 9 {
                waiting = 0
                let windows: [(Int64, Double)] = [(16, 100), (10, 60), (25, 150)]
                let (seconds, km) = windows.randomElement(using: &r)!
                return .reconfigure(sources: base.sources.shuffled(using: &r), seconds: seconds, km: km)
            }
            if roll < 10 {
                if usgs { return nil }
                return .delete(["\(base.sources.randomElement(using: &r)!)\(Int.random(in: 0..<base.quakes.count, using: &r))"])
            }
            if base.shape.expiry, roll < 13 {
                let quake = base.quakes.randomElement(using: &r)!
                return .expire(before: quake.time + Int64.random(in: -20_000...20_000, using: &r))
            }
            if roll < 30 {
                if usgs, Bool.random(using: &r) {
                    // The feed holds the newest version of each of its quakes; often a new one.
                    if usgsVersions.isEmpty || Int.random(in: 0..<5, using: &r) < 3 { publishUsgs(&r) }
                    return .feedPoll(usgsVersions.values.compactMap(\.last).sorted { $0.id < $1.id })
                }
                let other = polled.randomElement(using: &r)!
                let count = Int.random(in: 1...max(1, base.shape.runSize), using: &r)
                return .importRun(source: other, items: (0..<count).map { _ in base.makeItem(other, &r) })
            }
            if roll < 38 {
                // Published while the socket was down: only a catch-up brings it.
                _ = publish(&r)
                return nil
            }
            if roll < 68 {
                let count = Int.random(in: 0..<4, using: &r) == 0 ? Int.random(in: 2...4, using: &r) : 1
                let batch = (0..<count).map { _ in pushItem(&r) }
                pushed += batch
                return .push(source: PushModelCheck.source, reports: batch)
            }
            if roll < 84 || waiting == 0 {
                waiting += 1
                // The service's newest version of each event, in time order (orderby=time).
                let catalog = versions.values.compactMap(\.last).sorted { ($0.time, $0.id) < ($1.time, $1.id) }
                let overlaps: [Int64] = [0, 2_000, 10_000, 120_000]
                return .catchUpAsk(
                    source: PushModelCheck.source, catalog: catalog, overlap: overlaps.randomElement(using: &r)!,
                    format: format)
            }
            waiting -= 1
            return .catchUpImport
        }

        /// A pushed message: mostly a version just published, sometimes one pushed before again
        /// (a duplicate), or an older version of an event (stale, out of order).
        mutating func pushItem(_ r: inout SeededRandom) -> SourceReport {
            let kind = Int.random(in: 0..<10, using: &r)
            if kind == 7, let again = pushed.randomElement(using: &r) { return again }
            if kind >= 8 {
                let revised = versions.values.filter { $0.count > 1 }.sorted { $0[0].id < $1[0].id }
                if let event = revised.randomElement(using: &r) {
                    return event[Int.random(in: 0..<(event.count - 1), using: &r)]
                }
            }
            return publish(&r)
        }

        /// A new version of one of the USGS feed's quakes.
        mutating func publishUsgs(_ r: inout SeededRandom) {
            let q = Int.random(in: 0..<base.quakes.count, using: &r)
            let quake = base.quakes[q]
            let key = ReportKey(source: QuakeStore.usgsSource, id: "us700\(q)")
            let (lat, lon) = SourceModelCheck.move(
                quake.latitude, quake.longitude, km: Double.random(in: 0...30, using: &r),
                bearing: Double.random(in: 0..<360, using: &r))
            usgsVersions[key.id, default: []].append(
                SourceReport(
                    source: QuakeStore.usgsSource, id: key.id, agency: "US",
                    time: quake.time + Int64.random(in: -6_000...6_000, using: &r), latitude: lat, longitude: lon,
                    depth: Double(Int.random(in: 2...30, using: &r)),
                    magnitude: SourceModelCheck.round(quake.magnitude + Double(Int.random(in: -3...3, using: &r)) / 10, 1),
                    magnitudeType: "mb", place: "REGION \(q)", eventType: "earthquake", evaluationMode: .automatic,
                    updated: base.nextUpdated(key, &r)))
        }

        /// A new version of one of the agency's events (the first, or a revision).
        mutating func publish(_ r: inout SeededRandom) -> SourceReport {
            let q = Int.random(in: 0..<base.quakes.count, using: &r)
            let quake = base.quakes[q]
            let key = ReportKey(source: PushModelCheck.source, id: "\(PushModelCheck.source)\(q)")
            var (time, lat, lon) = SourceModelCheck.solution(of: quake, &r)
            if Int.random(in: 0..<8, using: &r) == 0 {
                SourceModelCheck.reviseAcrossTheWindows(quake, time: &time, lat: &lat, lon: &lon, &r)
            }
            let report = SourceReport(
                source: PushModelCheck.source, id: key.id, agency: "EMSC", time: time, latitude: lat, longitude: lon,
                depth: Double(Int.random(in: 2...30, using: &r)),
                magnitude: SourceModelCheck.round(quake.magnitude + Double(Int.random(in: -3...3, using: &r)) / 10, 1),
                magnitudeType: Bool.random(using: &r) ? "ml" : "mb", place: "REGION \(q)", eventType: "earthquake",
                updated: base.nextUpdated(key, &r))
            versions[key.id, default: []].append(report)
            return report
        }
    }

    // MARK: The agency's side

    /// One text message of EMSC's websocket carrying `report` (`create` or `update`).
    static func message(_ report: SourceReport, action: String) -> [UInt8] {
        Array(#"{"action":"\#(action)","data":\#(feature(report))}"#.utf8)
    }

    /// A catch-up answer of `page` in `format`.
    static func answer(_ page: [SourceReport], format: CatchUpFormat) -> [UInt8] {
        switch format {
        case .quakeML:
            return QuakeMLWriter(authority: "eu.emsc-csem").document(reports: page)
        case .emscJSON:
            let features = page.map(feature).joined(separator: ",")
            return Array(
                #"{"type":"FeatureCollection","metadata":{"totalCount":\#(page.count)},"features":[\#(features)]}"#
                    .utf8)
        }
    }

    /// EMSC's GeoJSON feature of a report, as the socket and the FDSN service write it (the
    /// report is what `EMSCFeature` reads back: agency `auth`, evtype `ke`, no status, no links).
    static func feature(_ r: SourceReport) -> String {
        func number(_ value: Double?) -> String { value.map { "\($0)" } ?? "null" }
        func text(_ value: String?) -> String { value.map { "\"\($0)\"" } ?? "null" }
        let depth = r.depth.map { -$0 + 0 }
        return """
            {"type":"Feature","geometry":{"type":"Point","coordinates":[\(r.longitude),\(r.latitude),\(number(depth))]},\
            "id":"\(r.id)","properties":{"source_id":"1778654","source_catalog":"EMSC-RTS",\
            "lastupdate":\(text(r.updated.map { QuakeTime.iso8601($0) })),"time":"\(QuakeTime.iso8601(r.time))",\
            "flynn_region":\(text(r.place)),"lat":\(r.latitude),"lon":\(r.longitude),"depth":\(number(r.depth)),\
            "evtype":"ke","auth":\(text(r.agency)),"mag":\(number(r.magnitude)),"magtype":\(text(r.magnitudeType)),\
            "unid":"\(r.id)"}}
            """
    }

    /// A USGS summary feed (GeoJSON) of the features, as the feed writes them.
    static func feed(_ features: [SourceReport]) -> [UInt8] {
        var writer = SummaryGeoJSON(generated: SourceModelCheck.nowMs, url: "", title: "")
        var out: [UInt8] = []
        writer.appendHeader(count: features.count, to: &out)
        for f in features {
            var q = FeedFeature(id: f.id, time: f.time)
            q.mag = f.magnitude
            q.place = f.place ?? ""
            q.updated = f.updated
            q.url = ""
            q.detail = ""
            q.status = "automatic"
            q.tsunami = 0
            q.sig = 100
            q.net = "us"
            q.code = String(f.id.dropFirst(2))
            q.ids = ",\(f.id),"
            q.sources = ",us,"
            q.types = ",origin,"
            q.rms = 0.5
            q.magType = f.magnitudeType ?? "mb"
            q.type = "earthquake"
            q.title = "M - \(f.place ?? "")"
            q.lon = f.longitude
            q.lat = f.latitude
            q.depth = f.depth ?? 10
            writer.append(q, to: &out)
        }
        writer.appendFooter(to: &out)
        return out
    }

    // MARK: The daemon's side

    /// A catch-up answer read by the format's reader, in two chunks.
    static func read(_ body: [UInt8], format: CatchUpFormat, source: String) throws -> [SourceItem] {
        var items: [SourceItem] = []
        let cut = body.count / 3
        let chunks = [Array(body[..<cut]), Array(body[cut...])]
        let skipped: Int
        switch format {
        case .quakeML:
            let reader = QuakeMLReader(source: source)
            for chunk in chunks { try reader.consume(chunk) { items.append($0) } }
            try reader.finish { items.append($0) }
            skipped = reader.skippedCount
        case .emscJSON:
            var reader = EMSCGeoJSONReader(source: source)
            for chunk in chunks { try reader.consume(chunk) { items.append($0) } }
            try reader.finish { items.append($0) }
            skipped = reader.skippedCount
        }
        if skipped > 0 { throw ModelCheck.Problem("the \(format.rawValue) reader skipped \(skipped) events of a catch-up answer") }
        return items
    }

    /// The position a push batch or a catch-up answer is imported with: the newest `updated`
    /// stored or in the items (SourceSync's `importReports`).
    static func position(
        _ store: QuakeStore, _ source: String, _ items: [SourceItem], mutation: SourceModelCheck.Mutation = .none
    ) throws -> Int64? {
        if case .positionFromBatchOnly = mutation { return newestUpdated(items) }
        return [try store.sourcePosition(source), newestUpdated(items)].compactMap { $0 }.max()
    }

    /// The newest `updated` of the items (reports' and retractions').
    static func newestUpdated(_ items: [SourceItem]) -> Int64? {
        items.compactMap { item -> Int64? in
            switch item {
            case .report(let report): report.updated
            case .retraction(_, _, let updated): updated
            }
        }.max()
    }
}
