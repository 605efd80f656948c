import Foundation
import QuakeClient
import QuakeProtocol
import QuakeStore
import QuakeTestSupport
import Testing

/// One alert per quake, on the first report (issue 29, item 3): a real quaked following EMSC and
/// INGV (two FDSN services), a real `quakectl watch --exec` whose command logs each run, and one
/// quake the two agencies report seconds and kilometres apart. `new` comes with the first
/// agency's report, whichever it is; the other agency's report is an update, judged by the
/// revision rules, never a second `new`, across a quakectl restart between the two too.
extension ClientEndToEnd {
    @Suite("one alert per quake") struct OneAlertPerQuakeTests {
        typealias Agency = TwoAgencies.Agency

        /// The store holds one quake for the two reports, named after the first, both agencies'
        /// reports in it and one insert then one update in its history (no second insert, no
        /// `superseded` delete).
        static func expectOneQuake(_ agencies: TwoAgencies, first: Agency) throws {
            let quake = agencies.quake
            let id = quake.id(first)
            let rows = try agencies.withStore { try $0.allQuakes() }
            #expect(rows.map(\.id) == [id], "one row for both reports, named after the first")
            let reports = try agencies.withStore { try $0.reports(ofEvent: id) }
            #expect(Set(reports.map(\.source)) == ["emsc", "ingv"])
            #expect(try agencies.historyKinds(of: id) == ["insert", "update"])
            let other = quake.id(first.other)
            #expect(try agencies.historyKinds(of: other) == [], "the second report's own id never became a row")
        }

        @Test("two agencies seconds apart: one new on the first report, the second an update", arguments: Agency.allCases)
        func oneNewThenAnUpdate(first: Agency) async throws {
            try await TwoAgencies.with { agencies in
                let quake = agencies.quake
                let hook = try Hook(in: agencies.directory)
                let cache = agencies.directory.appendingPathComponent("watch.sqlite").path
                let watch = try agencies.watch(cache: cache, hook: hook)
                defer { watch.signal(SIGKILL) }
                try await agencies.waitForCacheAtHead(watch, cache: cache)

                try await agencies.report(first)
                try await agencies.waitForCacheAtHead(watch, cache: cache)
                let id = quake.id(first)
                #expect(
                    hook.runs.map { [$0.kind, $0.id, $0.agency, $0.agencies] }
                        == [["insert", id, first.rawValue.uppercased(), first.rawValue.uppercased()]])

                try await agencies.report(first.other)
                try await agencies.waitForCacheAtHead(watch, cache: cache)
                let runs = hook.runs
                // EMSC ranks first (the source order), so it is the quake's agency once both reported.
                #expect(
                    runs.map { [$0.kind, $0.id, $0.agency, $0.agencies] }
                        == [
                            ["insert", id, first.rawValue.uppercased(), first.rawValue.uppercased()],
                            ["update", id, "EMSC", "EMSC+INGV"],
                        ], "\(runs)")
                #expect(runs.first?.mag == "\(quake.mag(first))" && runs.last?.mag == "\(quake.emscMag)")

                // The cache: the one quake, with both agencies; the store: the same.
                let cached = try await TwoAgencies.cached(cache).quakes
                #expect(cached.map(\.id) == [id])
                #expect(cached.first?.net == "emsc" && cached.first?.sources == ",emsc,ingv,", "\(cached)")
                #expect(cached.first?.mag == quake.emscMag)
                let listed = try await TwoAgencies.cached(cache).lines
                #expect(listed.filter { $0.contains(id) }.count == 1, "\(listed)")
                #expect(listed.first { $0.contains(id) }?.contains("EMSC+INGV") == true, "\(listed)")
                // What watch printed: the same two changes.
                let printed = try WatchOutput(watch.stdout).lines.compactMap(\.change).map { "\($0.kind.rawValue) \($0.quakeId)" }
                #expect(printed == ["insert \(id)", "update \(id)"], "\(watch.stdout)")
                try Self.expectOneQuake(agencies, first: first)
                let stored = try #require(try agencies.withStore { try $0.quake(id: id) })
                #expect(stored.sources == cached.first?.sources && stored.mag == cached.first?.mag)
            }
        }

        @Test(
            "the watch stopped after the first report's alert, the second imported meanwhile, started again on the same cache: one new and one update in all",
            arguments: Agency.allCases)
        func acrossAWatchRestart(first: Agency) async throws {
            try await TwoAgencies.with { agencies in
                let quake = agencies.quake
                let id = quake.id(first)
                let hook = try Hook(in: agencies.directory)
                let cache = agencies.directory.appendingPathComponent("watch.sqlite").path
                let watch = try agencies.watch(cache: cache, hook: hook)
                defer { watch.signal(SIGKILL) }
                try await agencies.waitForCacheAtHead(watch, cache: cache)
                try await agencies.report(first)
                try await agencies.waitForCacheAtHead(watch, cache: cache)
                #expect(hook.runs.map(\.kind) == ["insert"])
                try await TwoAgencies.terminate(watch)

                // The other agency reports while no watch runs.
                try await agencies.report(first.other)
                #expect(hook.runs.count == 1)
                #expect(try await TwoAgencies.cached(cache).quakes.first?.sources == ",\(first.rawValue),", "the cache is behind")

                let again = try agencies.watch(cache: cache, hook: hook)
                defer { again.signal(SIGKILL) }
                try await agencies.waitForCacheAtHead(again, cache: cache)
                let runs = hook.runs
                #expect(
                    runs.map { [$0.kind, $0.id, $0.agency, $0.agencies] }
                        == [
                            ["insert", id, first.rawValue.uppercased(), first.rawValue.uppercased()],
                            ["update", id, "EMSC", "EMSC+INGV"],
                        ], "\(runs)")
                #expect(runs.filter { $0.kind == "insert" || $0.kind == "enter" }.count == 1)
                // The restarted watch resumed from its cache: no reset, nothing printed twice.
                #expect(!again.stdout.contains("\"reset\""), "\(again.stdout)")
                let printed = try [watch, again].map { process in
                    try WatchOutput(process.stdout).lines.compactMap(\.change).map { "\($0.kind.rawValue) \($0.quakeId)" }
                }
                #expect(printed == [["insert \(id)"], ["update \(id)"]], "\(printed)")
                let cached = try await TwoAgencies.cached(cache).quakes
                #expect(cached.map(\.id) == [id] && cached.first?.sources == ",emsc,ingv,", "\(cached)")
                try Self.expectOneQuake(agencies, first: first)
            }
        }

        @Test(
            "--on-change mag with --min-mag-change above the second agency's difference: the new alone, the cache holds both agencies"
        )
        func revisionRulesJudgeTheSecondReport() async throws {
            try await TwoAgencies.with { agencies in
                let quake = agencies.quake
                // INGV first (M 4.4); EMSC's report (M 4.6, preferred) moves the magnitude by 0.2
                // and the epicentre by 20 km: only a magnitude change of 0.5 counts here.
                let hook = try Hook(in: agencies.directory)
                let cache = agencies.directory.appendingPathComponent("watch.sqlite").path
                let watch = try agencies.watch(
                    cache: cache, hook: hook, ["--on-change", "mag", "--min-mag-change", "0.5"])
                defer { watch.signal(SIGKILL) }
                try await agencies.waitForCacheAtHead(watch, cache: cache)
                try await agencies.report(.ingv)
                try await agencies.waitForCacheAtHead(watch, cache: cache)
                try await agencies.report(.emsc)
                try await agencies.waitForCacheAtHead(watch, cache: cache)

                let runs = hook.runs
                #expect(
                    runs.map { [$0.kind, $0.id, $0.agency, $0.agencies, $0.mag] }
                        == [["insert", quake.ingvID, "INGV", "INGV", "4.4"]], "\(runs)")
                // Not delivered, but applied: the cache has EMSC's solution and both agencies.
                let cached = try await TwoAgencies.cached(cache).quakes
                #expect(cached.map(\.id) == [quake.ingvID])
                #expect(cached.first?.net == "emsc" && cached.first?.sources == ",emsc,ingv,", "\(cached)")
                #expect(cached.first?.mag == quake.emscMag && cached.first?.lat == 42.5)
                try Self.expectOneQuake(agencies, first: .ingv)
            }
        }

        @Test(
            "--min-mag between the two agencies' magnitudes: the quake enters with the second report, once"
        )
        func enteringWithTheSecondReport() async throws {
            try await TwoAgencies.with { agencies in
                let quake = agencies.quake
                // INGV's M 4.4 is below the filter; EMSC's M 4.6, preferred once it joins, is above.
                let hook = try Hook(in: agencies.directory)
                let cache = agencies.directory.appendingPathComponent("watch.sqlite").path
                let watch = try agencies.watch(cache: cache, hook: hook, ["--min-mag", "4.5"])
                defer { watch.signal(SIGKILL) }
                try await agencies.waitForCacheAtHead(watch, cache: cache)
                try await agencies.report(.ingv)
                try await agencies.waitForCacheAtHead(watch, cache: cache)
                #expect(hook.runs.isEmpty, "\(hook.runs)")
                #expect(try await TwoAgencies.cached(cache).quakes.isEmpty)

                try await agencies.report(.emsc)
                try await agencies.waitForCacheAtHead(watch, cache: cache)
                let runs = hook.runs
                #expect(
                    runs.map { [$0.kind, $0.id, $0.agency, $0.agencies, $0.mag] }
                        == [["enter", quake.ingvID, "EMSC", "EMSC+INGV", "4.6"]], "\(runs)")
                let cached = try await TwoAgencies.cached(cache).quakes
                #expect(cached.map(\.id) == [quake.ingvID])
                #expect(cached.first?.sources == ",emsc,ingv," && cached.first?.mag == quake.emscMag, "\(cached)")
                try Self.expectOneQuake(agencies, first: .ingv)

                // A watch started again on the same cache delivers nothing more.
                try await TwoAgencies.terminate(watch)
                let again = try agencies.watch(cache: cache, hook: hook, ["--min-mag", "4.5"])
                defer { again.signal(SIGKILL) }
                try await agencies.waitForCacheAtHead(again, cache: cache)
                #expect(hook.runs.count == 1, "\(hook.runs)")
            }
        }
    }
}
