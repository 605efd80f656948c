import Foundation
import QuakeClient
import QuakeCtl
import QuakeFeed
import QuakeProtocol
import QuakeStore
import QuakeTestSupport
import Testing

/// `watch --on-change`, `--min-mag-change`, `--min-move-km`: which updates are delivered.
@Suite("Revision rules")
struct RevisionRuleTests {
    static func quake(mag: Double? = 4.5, status: String? = "automatic", lat: Double? = 10, lon: Double? = 20,
        depth: Double? = 10, alert: String? = nil, tsunami: Int? = 0) throws -> IOQuaked.Quake
    {
        var object: [String: Any] = ["id": "q1", "time": 1_700_000_000_000]
        object["mag"] = mag
        object["status"] = status
        object["lat"] = lat
        object["lon"] = lon
        object["depth"] = depth
        object["alert"] = alert
        object["tsunami"] = tsunami
        return try IOQuaked.Quake.decode(json: Array(JSONSerialization.data(withJSONObject: object)))
    }

    static func rules(_ arguments: [String]) throws -> RevisionRules? {
        try RevisionOptions.parse(arguments).rules()
    }

    @Test("--min-mag-change: a move of at least the threshold counts, a smaller one does not")
    func magnitude() throws {
        let rules = try #require(try Self.rules(["--min-mag-change", "0.3"]))
        let before = try Self.quake(mag: 4.5)
        #expect(rules.qualifies(before: before, after: try Self.quake(mag: 4.8)), "exactly 0.3, though 0.29999 in binary")
        #expect(rules.qualifies(before: before, after: try Self.quake(mag: 4.1)))
        #expect(!rules.qualifies(before: before, after: try Self.quake(mag: 4.7)))
        #expect(!rules.qualifies(before: before, after: try Self.quake(mag: 4.5, status: "reviewed")),
            "status is not listed: only the magnitude counts")
        #expect(rules.qualifies(before: before, after: try Self.quake(mag: nil)), "a magnitude gone is a change")
    }

    @Test("--on-change status: automatic to reviewed counts; --min-move-km: the epicentre's move")
    func statusAndLocation() throws {
        let rules = try #require(try Self.rules(["--on-change", "status,location", "--min-move-km", "10"]))
        let before = try Self.quake()
        #expect(rules.qualifies(before: before, after: try Self.quake(status: "reviewed")))
        #expect(!rules.qualifies(before: before, after: try Self.quake(mag: 6)), "mag is not listed")
        // 0.1 degree of latitude is 11.1 km; 0.05 is 5.6 km.
        #expect(rules.qualifies(before: before, after: try Self.quake(lat: 10.1)))
        #expect(!rules.qualifies(before: before, after: try Self.quake(lat: 10.05)))
        #expect(!rules.qualifies(before: before, after: try Self.quake(depth: 50)), "with --min-move-km, depth alone is no move")
    }

    @Test("--on-change without thresholds: any change of a listed field")
    func anyChange() throws {
        let rules = try #require(try Self.rules(["--on-change", "mag, alert ,tsunami"]))
        let before = try Self.quake()
        #expect(rules.qualifies(before: before, after: try Self.quake(mag: 4.6)))
        #expect(rules.qualifies(before: before, after: try Self.quake(alert: "green")))
        #expect(rules.qualifies(before: before, after: try Self.quake(tsunami: 1)))
        #expect(!rules.qualifies(before: before, after: try Self.quake(lat: 11)))
    }

    @Test("an update is judged by its own fields' old and new values")
    func byFields() throws {
        let rules = try #require(try Self.rules(["--min-mag-change", "0.3"]))
        func update(_ fields: String) throws -> IOQuaked.Change {
            try IOQuaked.Change.decode(json: Array(#"{"kind":"update","quakeId":"q1","fields":[\#(fields)]}"#.utf8))
        }
        let before = try Self.quake(mag: 4.5)
        #expect(rules.delivers(try update(#"{"field":"mag","old":{"float":4.5},"new":{"float":4.8}}"#), before: before))
        #expect(!rules.delivers(try update(#"{"field":"mag","old":{"float":4.5},"new":{"float":4.6}}"#), before: before))
        #expect(!rules.delivers(try update(#"{"field":"place","old":{"string":"a"},"new":{"string":"b"}}"#), before: before))
        let moves = try #require(try Self.rules(["--min-move-km", "10"]))
        // Only lat changed: lon comes from the cache's row.
        #expect(moves.delivers(try update(#"{"field":"lat","old":{"float":10},"new":{"float":10.2}}"#), before: try Self.quake()))
        #expect(!moves.delivers(try update(#"{"field":"lat","old":{"float":10},"new":{"float":10.01}}"#), before: try Self.quake()))
    }

    @Test("--on-change mag does not fire when only the contributors and the agency changed")
    func contributorsAloneDoNotCount() throws {
        let rules = try #require(try Self.rules(["--on-change", "mag"]))
        func update(_ fields: String) throws -> IOQuaked.Change {
            try IOQuaked.Change.decode(json: Array(#"{"kind":"update","quakeId":"q1","fields":[\#(fields)]}"#.utf8))
        }
        let emsc = #"{"source":"emsc","agency":"EMSC","id":"e1","time":1,"lat":10,"lon":20,"mag":4.5,"preferred":true}"#
        let ingv = #"{"source":"ingv","agency":"INGV","id":"i1","time":2,"lat":10.1,"lon":20,"mag":4.9,"preferred":false}"#
        // A second agency joins (its magnitude differs, but the event's stays): not delivered.
        let joined = try update(
            #"{"field":"contributors","old":{"contributors":[\#(emsc)]},"new":{"contributors":[\#(emsc),\#(ingv)]}},"#
                + #"{"field":"sources","old":{"string":",emsc,"},"new":{"string":",emsc,ingv,"}}"#)
        #expect(!rules.delivers(joined, before: try Self.quake(mag: 4.5)))
        // The new agency preferred, and the magnitude with it: delivered.
        let preferred = try update(
            #"{"field":"agency","old":{"string":"EMSC"},"new":{"string":"INGV"}},"#
                + #"{"field":"mag","old":{"float":4.5},"new":{"float":4.9}}"#)
        #expect(rules.delivers(preferred, before: try Self.quake(mag: 4.5)))
        // Other fields' rules are not moved by them either.
        let all = try #require(try Self.rules(["--on-change", "mag,status,alert,tsunami,location"]))
        #expect(!all.delivers(joined, before: try Self.quake()))
    }

    @Test("only updates are judged; no flags, no rules")
    func otherKinds() throws {
        #expect(try Self.rules([]) == nil)
        let rules = try #require(try Self.rules(["--min-mag-change", "1"]))
        for kind in ["insert", "enter", "delete"] {
            let change = try IOQuaked.Change.decode(json: Array(#"{"kind":"\#(kind)","quakeId":"q1"}"#.utf8))
            #expect(rules.delivers(change, before: try Self.quake()))
        }
    }

    @Test(
        "bad or overlapping rules are refused naming the flag",
        arguments: [
            (["--on-change", "magnitude"], "--on-change"),
            (["--on-change", "status", "--min-mag-change", "0.3"], "--min-mag-change needs mag"),
            (["--on-change", "mag", "--min-move-km", "5"], "--min-move-km needs location"),
            (["--min-mag-change=-1"], "--min-mag-change"),
            (["--min-move-km", "0"], "--min-move-km"),
        ])
    func refused(arguments: [String], message: String) {
        #expect {
            _ = try Self.rules(arguments)
        } throws: { error in
            "\(error)".contains(message)
        }
    }
}

extension ClientEndToEnd.FilteredWatchTests {
    @Test func revisionRulesChooseTheUpdatesPrintedWhileTheCacheTakesThemAll() async throws {
        try await withQuaked { daemon in
            let cache = daemon.directory.appendingPathComponent("rules.sqlite").path
            let quake = try #require(try daemon.withStore { try $0.allQuakes() }.first { ($0.mag ?? 9) < 3 })
            let watch = try ClientEndToEnd.WatchTests.watch(daemon, cache: cache, ["--min-mag-change", "0.3"])
            defer { watch.signal(SIGKILL) }
            try await Self.waitForCache(watch, daemon, cache: cache, QuakeFilter())
            // 4.0 (from below 3: printed), then 4.1 and 4.3 (0.1 and 0.2 from what the cache
            // held: not printed), 4.6 (0.3: printed), 4.5 (0.1: not).
            for (step, mag) in [4.0, 4.1, 4.3, 4.6, 4.5].enumerated() {
                _ = try await daemon.importOnce(try Self.revision(of: quake.id, mag: mag, revision: step + 1, in: daemon.directory))
                try await Self.waitForCache(watch, daemon, cache: cache, QuakeFilter())
            }
            try await Task.sleep(for: .milliseconds(300))
            let printed = try WatchOutput(watch.stdout).lines.compactMap(\.change).filter { $0.quakeId == quake.id }
            let afterFirst = printed.map { $0.quake?.mag }.drop { $0 != 4.0 }.dropFirst()
            #expect(Array(afterFirst) == [4.6], "printed: \(printed.map { $0.quake?.mag })")
            // waitForCache compared the cache with the store: it holds 4.5, printed or not.
            let held = try QuakeCache(path: cache)
            defer { try? held.close() }
            #expect(try held.allQuakes().first { $0.id == quake.id }?.mag == 4.5)
        }
    }

    /// The rules keep no state: each update is judged by its own old and new values, so a stop
    /// and a start between updates changes nothing. 4.0 → 4.2 (not printed), a restart,
    /// 4.2 → 4.4 (not printed: 0.2, though 0.4 from the last printed), 4.4 → 4.8 (printed).
    @Test func revisionRulesJudgeTheSameAcrossARestart() async throws {
        try await withQuaked { daemon in
            let cache = daemon.directory.appendingPathComponent("rules.sqlite").path
            let quake = try #require(try daemon.withStore { try $0.allQuakes() }.first { ($0.mag ?? 9) < 3 })
            func revise(_ mag: Double, _ step: Int, _ watch: ChildProcess) async throws {
                _ = try await daemon.importOnce(try Self.revision(of: quake.id, mag: mag, revision: step, in: daemon.directory))
                try await Self.waitForCache(watch, daemon, cache: cache, QuakeFilter())
            }
            func printed(_ watch: ChildProcess) throws -> [Double?] {
                try WatchOutput(watch.stdout).lines.compactMap(\.change).filter { $0.quakeId == quake.id }.map { $0.quake?.mag }
            }
            let first = try ClientEndToEnd.WatchTests.watch(daemon, cache: cache, ["--min-mag-change", "0.3"])
            try await Self.waitForCache(first, daemon, cache: cache, QuakeFilter())
            try await revise(4.0, 1, first)
            try await revise(4.2, 2, first)
            first.signal(SIGTERM)
            #expect(try await first.wait() == 0)
            #expect(try printed(first) == [4.0], "before the restart")

            let second = try ClientEndToEnd.WatchTests.watch(daemon, cache: cache, ["--min-mag-change", "0.3"])
            defer { second.signal(SIGKILL) }
            try await Self.waitForCache(second, daemon, cache: cache, QuakeFilter())
            try await revise(4.4, 3, second)
            try await revise(4.8, 4, second)
            try await Task.sleep(for: .milliseconds(300))
            #expect(try printed(second) == [4.8], "after the restart")
        }
    }
}
