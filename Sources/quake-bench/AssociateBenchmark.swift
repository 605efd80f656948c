import ArgumentParser
import Foundation
import QuakeAssociation
import QuakeModel
import QuakeModelCheck

/// `quake-bench associate`: the association engine's speed. Synthetic, seeded reports of one month
/// of quakes from three agencies (each quake reported by every agency, seconds and tens of
/// kilometres apart, arriving in the order the agencies publish them) are fed to an `Associator`
/// one item at a time; beside it, the same reports given as one source only (each its own event:
/// the same time index and neighbour lookups, no merging) — the single-source pass. Prints reports
/// per second of each and the ratio (goal: at least 0.5x), and checks the three-agency run found
/// one event per quake, each named after one of its reports (the own id of the report that founds
/// it: the first published, `emsc0`...). Then the store's open: the three-agency state's snapshot
/// (reports, events with members, tombstones) restored into a new associator, which must emit no
/// changes and give the same snapshot.
struct AssociateBenchmark: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "associate",
        abstract: "Association benchmark: three agencies against a single-source pass over the same reports.")

    @Option(help: "Reports in the synthetic set (a third each from three agencies).")
    var reports = 100_000

    @Option(help: "Days the quakes are spread over.")
    var days = 30.0

    @Option(help: "The seed of the synthetic set.")
    var seed: UInt64 = 42

    @Option(help: "Rounds: each runs the three agencies and the single source once; the best round of each counts.")
    var runs = 3

    func validate() throws {
        guard runs >= 1 else { throw ValidationError("--runs must be at least 1") }
        guard reports >= 3 else { throw ValidationError("--reports must be at least 3") }
        guard days > 0 else { throw ValidationError("--days must be positive") }
    }

    func run() throws {
        let items = Self.synthetic(reports: reports, days: days, seed: seed)
        let single = items.map { item -> SourceItem in
            guard case .report(var report) = item else { return item }
            report.id = "\(report.source)-\(report.id)"
            report.source = "one"
            return .report(report)
        }
        let quakes = (reports + 2) / 3
        print("associate: \(items.count) reports of \(quakes) quakes from 3 agencies over \(days) days (seed \(seed))")
        var best = (agencies: Double.infinity, single: Double.infinity, restore: Double.infinity)
        for round in 1...runs {
            let (agencySeconds, agencies) = Self.time(items)
            let (singleSeconds, singleSource) = Self.time(single)
            guard agencies.eventCount == quakes else {
                print("associate: the three agencies made \(agencies.eventCount) events of \(quakes) quakes")
                throw ExitCode(1)
            }
            guard singleSource.eventCount == items.count else {
                print("associate: the single source made \(singleSource.eventCount) events of \(items.count) reports")
                throw ExitCode(1)
            }
            // One source: every event's id is its report's id. Three: each quake's event is named
            // after one of its reports (the first published, emsc's).
            guard singleSource.events.allSatisfy({ $0.reports == [ReportKey(source: "one", id: $0.id)] }),
                agencies.events.allSatisfy({ event in event.reports.contains { $0.id == event.id } })
            else {
                print("associate: an event is not named after its founding report")
                throw ExitCode(1)
            }
            let snapshot = agencies.snapshot
            let restoreStarted = ContinuousClock.now
            let (restored, changes) = Associator.restore(snapshot, configuration: agencies.configuration)
            let restoreSeconds = Double((ContinuousClock.now - restoreStarted) / .microseconds(1)) / 1e6
            guard changes.isEmpty, restored.snapshot == snapshot else {
                print("associate: restoring the snapshot changed \(changes.count) events")
                throw ExitCode(1)
            }
            print(
                "round \(round) of \(runs): 3 agencies \(Self.rate(items.count, agencySeconds)), single source \(Self.rate(items.count, singleSeconds)), restore \(Self.rate(items.count, restoreSeconds))"
            )
            best = (min(best.agencies, agencySeconds), min(best.single, singleSeconds), min(best.restore, restoreSeconds))
        }
        let ratio = best.single / best.agencies
        print(
            """
            associate (best of \(runs)):
              3 agencies:     \(Self.rate(items.count, best.agencies)) (\(quakes) events)
              single source:  \(Self.rate(items.count, best.single)) (\(items.count) events)
              ratio:          \(String(format: "%.2f", ratio))x (goal: at least 0.5x) \(ratio >= 0.5 ? "met" : "NOT met")
              restore:        \(Self.rate(items.count, best.restore)) (the 3 agencies' snapshot, \(quakes) events, no changes)
            """)
    }

    static func rate(_ count: Int, _ seconds: Double) -> String {
        String(format: "%.0f reports/s (%.2f s)", Double(count) / seconds, seconds)
    }

    /// Feeds the items one at a time to a new associator: seconds taken and the associator.
    static func time(_ items: [SourceItem]) -> (Double, Associator) {
        var associator = Associator(configuration: AssociationConfiguration(sourceOrder: ["usgs", "emsc", "gfz"]))
        var changes = 0
        let started = ContinuousClock.now
        for item in items { changes &+= associator.apply(item).count }
        let elapsed = ContinuousClock.now - started
        precondition(changes > 0)
        return (Double(elapsed / .microseconds(1)) / 1e6, associator)
    }

    /// Quakes at random times over `days` and random places between 60°S and 60°N, each reported
    /// by usgs, emsc and gfz with their own offsets (up to 3 s and 20 km) and magnitudes (±0.3),
    /// published 2, 5 and 10 minutes (± a minute) after the origin, in publication order.
    /// Quakes closer than the windows would be ambiguous, so a quake is placed again until it is
    /// at least a minute or 500 km from every other.
    static func synthetic(reports: Int, days: Double, seed: UInt64) -> [SourceItem] {
        var random = SeededRandom(seed: seed)
        let quakes = (reports + 2) / 3
        let span = Int64(days * 86_400_000)
        let start: Int64 = 1_767_225_600_000
        var times = (0..<quakes).map { _ in start + Int64.random(in: 0..<span, using: &random) }
        times.sort()
        var published: [(at: Int64, report: SourceReport)] = []
        var recent: [(time: Int64, latitude: Double, longitude: Double)] = []
        for (index, time) in times.enumerated() {
            var latitude: Double
            var longitude: Double
            repeat {
                latitude = Double.random(in: -60...60, using: &random)
                longitude = Double.random(in: -180..<180, using: &random)
                recent.removeAll { time - $0.time >= 60_000 }
            } while recent.contains { Association.distanceKm($0.latitude, $0.longitude, latitude, longitude) < 500 }
            recent.append((time, latitude, longitude))
            let magnitude = Double.random(in: 2.5...7, using: &random)
            for (agency, delayMinutes) in [("usgs", 5.0), ("emsc", 2.0), ("gfz", 10.0)] {
                if published.count == reports { break }
                let kmNorth = Double.random(in: -14...14, using: &random)
                let kmEast = Double.random(in: -14...14, using: &random)
                var reportLongitude = longitude + kmEast / (111.195 * cos(latitude * .pi / 180))
                if reportLongitude >= 180 { reportLongitude -= 360 }
                if reportLongitude < -180 { reportLongitude += 360 }
                let report = SourceReport(
                    source: agency, id: "\(agency)\(index)", agency: agency.uppercased(),
                    time: time + Int64.random(in: -3000...3000, using: &random), latitude: latitude + kmNorth / 111.195,
                    longitude: reportLongitude, depth: Double.random(in: 0...100, using: &random),
                    magnitude: ((magnitude + Double.random(in: -0.3...0.3, using: &random)) * 10).rounded() / 10,
                    magnitudeType: "ml", place: "somewhere", eventType: "earthquake", evaluationMode: .automatic,
                    updated: time + Int64(delayMinutes * 60_000))
                let at = time + Int64((delayMinutes + Double.random(in: -1...1, using: &random)) * 60_000)
                published.append((at, report))
            }
        }
        published.sort { ($0.at, $0.report.source) < ($1.at, $1.report.source) }
        return published.map { .report($0.report) }
    }
}

