import ArgumentParser
import Foundation
import QuakeClient
import QuakeFeed
import QuakeProtocol
import QuakeStore
import QuakeTestSupport
import Testing

@testable import QuakeCtl

/// `--tz` and `--units`: how times and distances read in text, and what the flags accept.
@Suite struct DisplayFormattingTests {
    static func zone(_ name: String) throws -> TimeZone { try #require(TimeZone(identifier: name)) }

    /// 2025-11-22T02:57:00Z.
    static let instant = 1_763_780_220_000

    @Test func absoluteTimesCarryTheZonesOffset() throws {
        #expect(Formatting.absolute(Self.instant, timeZone: try Self.zone("UTC")) == "2025-11-22 02:57:00 UTC")
        #expect(Formatting.absolute(Self.instant, timeZone: try Self.zone("Etc/UTC")) == "2025-11-22 02:57:00 UTC")
        #expect(Formatting.absolute(Self.instant, timeZone: try Self.zone("Asia/Tokyo")) == "2025-11-22 11:57:00 +09:00")
        // Across the date line backwards, and a half-hour offset (Newfoundland: -03:30, -02:30 in summer).
        #expect(
            Formatting.absolute(Self.instant, timeZone: try Self.zone("America/St_Johns")) == "2025-11-21 23:27:00 -03:30")
        #expect(
            Formatting.absolute(1_751_371_200_000, timeZone: try Self.zone("America/St_Johns"))
                == "2025-07-01 09:30:00 -02:30")
        #expect(
            Formatting.absolute(Self.instant, timeZone: try Self.zone("America/Los_Angeles"))
                == "2025-11-21 18:57:00 -08:00")
        // A zone at UTC+0 that is not UTC says so by its offset.
        #expect(Formatting.absolute(Self.instant, timeZone: try Self.zone("Europe/London")) == "2025-11-22 02:57:00 +00:00")
    }

    /// Berlin moves to CEST at 2026-03-29T01:00Z (02:00 local becomes 03:00) and back at
    /// 2026-10-25T01:00Z (03:00 local becomes 02:00 again).
    @Test func daylightSavingTimeChangesTheOffset() throws {
        let berlin = try Self.zone("Europe/Berlin")
        #expect(Formatting.absolute(1_774_745_999_500, timeZone: berlin) == "2026-03-29 01:59:59 +01:00")
        #expect(Formatting.absolute(1_774_746_000_000, timeZone: berlin) == "2026-03-29 03:00:00 +02:00")
        #expect(Formatting.absolute(1_792_889_999_000, timeZone: berlin) == "2026-10-25 02:59:59 +02:00")
        #expect(Formatting.absolute(1_792_890_000_000, timeZone: berlin) == "2026-10-25 02:00:00 +01:00")
        #expect(Formatting.iso8601Local(1_774_746_000_000, timeZone: berlin) == "2026-03-29T03:00:00.000+02:00")
    }

    @Test func localISO8601IsTheSameInstantWithTheOffset() throws {
        let tokyo = try Self.zone("Asia/Tokyo")
        #expect(Formatting.iso8601Local(Self.instant + 123, timeZone: tokyo) == "2025-11-22T11:57:00.123+09:00")
        #expect(Formatting.iso8601Local(Self.instant, timeZone: try Self.zone("UTC")) == "2025-11-22T02:57:00.000+00:00")
        #expect(
            Formatting.iso8601Local(Self.instant + 5, timeZone: try Self.zone("America/St_Johns"))
                == "2025-11-21T23:27:00.005-03:30")
        // Before 1970: milliseconds round down, not towards zero.
        #expect(Formatting.iso8601Local(-1, timeZone: try Self.zone("UTC")) == "1969-12-31T23:59:59.999+00:00")
        // Foundation's own formatter reads it back as the same instant.
        let text = Formatting.iso8601Local(Self.instant + 123, timeZone: tokyo)
        let parsed = try Date(text, strategy: Date.ISO8601FormatStyle(includingFractionalSeconds: true))
        #expect(Int((parsed.timeIntervalSince1970 * 1000).rounded()) == Self.instant + 123)
    }

    @Test func kilometresBecomeMiles() {
        #expect(DistanceUnit.mi.value(kilometres: 1.609344) == 1)
        #expect(Formatting.distance(kilometres: 1.609344, .mi) == "1 mi")
        #expect(Formatting.distance(kilometres: 10, .mi) == "6.21 mi")
        #expect(Formatting.distance(kilometres: 4.3, .mi, decimals: 3) == "2.672 mi")
        #expect(Formatting.distance(kilometres: 10.5, .km) == "10.5 km")
        #expect(Formatting.distance(kilometres: 0, .mi) == "0 mi")
        #expect(Formatting.distance(kilometres: -0.001, .km) == "0 km")
    }

    @Test func aPlacesLeadingDistanceFollowsTheUnit() {
        #expect(Formatting.place("8km W of Templeton, California", .mi) == "5 mi W of Templeton, California")
        #expect(Formatting.place("12 km NE of Ridgecrest, CA", .mi) == "7 mi NE of Ridgecrest, CA")
        #expect(Formatting.place("110km NNW of Talkeetna, Alaska", .mi) == "68 mi NNW of Talkeetna, Alaska")
        #expect(Formatting.place("8km W of Templeton, California", .km) == "8km W of Templeton, California")
        #expect(Formatting.place("Central Mid-Atlantic Ridge", .mi) == "Central Mid-Atlantic Ridge")
        #expect(Formatting.place("12 kmh", .mi) == "12 kmh")
    }

    @Test func listRowsAndChangeSummariesUseTheZoneAndTheUnit() throws {
        let style = OutputStyle(absoluteTimes: true, timeZone: try Self.zone("Asia/Tokyo"), units: .mi)
        let row = Formatting.row(
            mag: 4.5, place: "8km W of Templeton, California", time: Self.instant, id: "nc1", placeWidth: 32, style)
        #expect(row == "M 4.5   5 mi W of Templeton, California   2025-11-22 11:57:00 +09:00  nc1")
        let fields = [
            IOQuaked.FieldChange(field: "depth", old: .init(float: 10), new: .init(float: 16.09344)),
            IOQuaked.FieldChange(field: "time", old: .init(int: Self.instant), new: .init(int: Self.instant + 60_000)),
            IOQuaked.FieldChange(field: "place", old: .init(string: "8km W of A"), new: .init(string: "9km W of A")),
        ]
        #expect(
            ChangeText.fieldSummary(fields, style)
                == "depth 6.21 mi→10 mi, time 2025-11-22 11:57:00 +09:00→2025-11-22 11:58:00 +09:00, "
                + "place 5 mi W of A→6 mi W of A")
        let km = OutputStyle(timeZone: try Self.zone("UTC"))
        #expect(ChangeText.fieldSummary([fields[0]], km) == "depth 10 km→16.09 km")
    }

    /// What Foundation on Linux takes, and what `--tz` takes of it: IANA names only.
    @Test(
        arguments: [
            ("Asia/Tokyo", 32_400), ("America/St_Johns", -12_600), ("America/Los_Angeles", -28_800),
            ("Europe/Berlin", 3600), ("Etc/GMT-9", 32_400), ("UTC", 0), ("GMT", 0),
        ] as [(String, Int)])
    func ianaNamesAreAccepted(name: String, offset: Int) throws {
        let zone = try #require(TimeZoneArgument.parse(name))
        #expect(zone.secondsFromGMT(for: Date(timeIntervalSince1970: Double(Self.instant) / 1000)) == offset)
    }

    @Test(arguments: ["Mars/Olympus", "GMT+5", "GMT+05:00", "+09:00", "JST", "PST", "asia/tokyo", "utc", "", "Asia/", "Tokyo"])
    func otherNamesAreRefusedNamingTheFlag(name: String) {
        #expect(TimeZoneArgument.parse(name) == nil)
        #expect(throws: ValidationError.self) { try TimeZoneArgument.validated(name) }
        do {
            _ = try TimeZoneArgument.validated(name)
        } catch {
            let message = "\(error)"
            #expect(message.contains("--tz"), "\(message)")
            #expect(message.contains("is not an IANA time zone name"), "\(message)")
        }
    }

    @Test func aWrongCaseGetsASuggestion() {
        #expect(throws: ValidationError.self) { try TimeZoneArgument.validated("asia/tokyo") }
        do {
            _ = try TimeZoneArgument.validated("asia/tokyo")
        } catch {
            #expect("\(error)".contains("Did you mean Asia/Tokyo?"))
        }
    }

    @Test func theOptionsSetTheStyle() throws {
        let display = try DisplayOptions.parse(["--tz", "America/St_Johns", "--units", "mi"])
        let style = try display.apply(to: OutputStyle())
        #expect(style.timeZone.identifier == "America/St_Johns")
        #expect(style.absoluteTimes, "--tz implies --absolute")
        #expect(style.units == .mi)

        let defaults = try DisplayOptions.parse([]).apply(to: OutputStyle())
        #expect(defaults.timeZone == TimeZone.current)
        #expect(!defaults.absoluteTimes)
        #expect(defaults.units == .km)

        #expect(throws: (any Error).self) { try DisplayOptions.parse(["--units", "furlong"]) }
        do {
            _ = try DisplayOptions.parse(["--units", "miles"])
        } catch {
            #expect(DisplayOptions.message(for: error) == "--units takes km or mi, not \"miles\".")
        }
        #expect(throws: (any Error).self) { try TimeZoneOptions.parse(["--tz", "Mars/Olympus"]) }
        let status = try TimeZoneOptions.parse(["--tz", "UTC"]).apply(to: OutputStyle())
        #expect(status.timeZone.secondsFromGMT() == 0 && status.absoluteTimes)
    }
}

/// The flags through the real binaries: quakectl against a real quaked.
extension ClientEndToEnd {
    @Suite struct DisplayEndToEnd {
        /// The newest quake of the day feed: nc72199065, `8km W of Templeton, California`, at
        /// 2014-04-14T11:29:11.100Z, 4.3 km deep.
        static let newest = (id: "nc72199065", place: "8km W of Templeton, California", tokyo: "2014-04-14 20:29:11 +09:00")

        @Test func listShowsLocalTimesAndMiles() async throws {
            try await withQuaked { daemon in
                let socket = ["--socket", daemon.socketPath]
                let local = try await quakectl(["list", "--limit", "1", "--tz", "Asia/Tokyo", "--units", "mi"] + socket)
                #expect(local.status == 0, "\(local.stderr)")
                let line = try #require(local.stdout.split(separator: "\n").first.map(String.init))
                #expect(line.contains("5 mi W of Templeton"), "\(line)")
                #expect(line.contains(Self.newest.tokyo), "\(line)")
                #expect(line.hasSuffix(Self.newest.id))
                #expect(!local.stdout.contains("km"))

                // The defaults: kilometres as the feed says, and $TZ for absolute times.
                let plain = try await quakectl(
                    ["list", "--limit", "1", "--absolute"] + socket, environment: ["TZ": "America/St_Johns"])
                #expect(plain.stdout.contains(Self.newest.place), "\(plain.stdout)")
                #expect(plain.stdout.contains("2014-04-14 08:59:11 -02:30"), "\(plain.stdout)")
                let utc = try await quakectl(["list", "--limit", "1", "--tz", "UTC"] + socket)
                #expect(utc.stdout.contains("2014-04-14 11:29:11 UTC"), "\(utc.stdout)")

                let shown = try await quakectl(["show", Self.newest.id, "--tz", "Asia/Tokyo", "--units", "mi"] + socket)
                #expect(shown.status == 0, "\(shown.stderr)")
                let depth = shown.stdout.split(separator: "\n").first { $0.contains("depth") }
                #expect(depth?.hasSuffix("2.672 mi") == true, "\(shown.stdout)")
                #expect(
                    shown.stdout.split(separator: "\n").contains {
                        $0.hasPrefix("  time ") && $0.contains("\(Self.newest.tokyo) (")
                    }, "\(shown.stdout)")
                let shownKm = try await quakectl(["show", Self.newest.id] + socket)
                #expect(shownKm.stdout.split(separator: "\n").contains { $0.contains("depth") && $0.hasSuffix("4.3 km") })

                let status = try await quakectl(["status", "--tz", "Asia/Tokyo"] + socket)
                #expect(status.status == 0, "\(status.stderr)")
                #expect(status.stdout.contains("+09:00"), "\(status.stdout)")
            }
        }

        @Test func jsonIsUTCAndKilometresWhateverTheFlagsSay() async throws {
            try await withQuaked { daemon in
                let socket = ["--socket", daemon.socketPath]
                let display = ["--tz", "Asia/Tokyo", "--units", "mi"]
                for command in [["list", "--json"], ["show", Self.newest.id, "--json"], ["history", "--json", "--limit", "2"]] {
                    let plain = try await quakectl(command + socket)
                    let flagged = try await quakectl(command + display + socket)
                    #expect(plain.status == 0 && flagged.status == 0, "\(command): \(flagged.stderr)")
                    #expect(!plain.stdout.isEmpty)
                    #expect(flagged.stdout == plain.stdout, "\(command)")
                }
                let json = try await quakectl(["show", Self.newest.id, "--json"] + display + socket)
                let quake = try JSONDecoder().decode(IOQuaked.Quake.self, from: Data(json.stdout.utf8))
                #expect(quake.depth == 4.3)
                #expect(quake.time == 1_397_474_951_100)
                #expect(quake.place == Self.newest.place)
                // export writes only machine formats: it has no such flags.
                #expect(try await quakectl(["export", "--format", "csv", "--tz", "Asia/Tokyo"] + socket).status == 64)
            }
        }

        @Test func watchPrintsLocalTimesAndTheHookGetsBothTimes() async throws {
            try await withQuaked { daemon in
                let log = daemon.directory.appendingPathComponent("times.log")
                let hook = daemon.directory.appendingPathComponent("times.sh")
                try """
                #!/bin/sh
                cat > /dev/null
                printf '%s|%s|%s|%s\\n' "$QUAKE_ID" "$QUAKE_TIME" "$QUAKE_TIME_LOCAL" "$QUAKE_DEPTH" >> '\(log.path)'
                """.write(to: hook, atomically: true, encoding: .utf8)
                chmod(hook.path, 0o755)
                let cache = daemon.directory.appendingPathComponent("tz.sqlite").path
                // --tz wins over $TZ.
                let watch = try startQuakectl(
                    [
                        "watch", "--heartbeat", "1", "--socket", daemon.socketPath, "--cache", cache, "--tz",
                        "Asia/Tokyo", "--units", "mi", "--exec", hook.path,
                    ], environment: ["TZ": "America/St_Johns"])
                defer { watch.signal(SIGKILL) }
                try await FilteredWatchTests.waitForCache(watch, daemon, cache: cache, QuakeFilter())
                _ = try await daemon.importOnce(
                    try FilteredWatchTests.revision(of: Self.newest.id, mag: 4.6, revision: 1, in: daemon.directory))
                try await waitUntil(timeout: .seconds(20)) {
                    ((try? String(contentsOf: log, encoding: .utf8)) ?? "").hasSuffix("\n")
                }
                let run = try String(contentsOf: log, encoding: .utf8).trimmingCharacters(in: .newlines)
                    .split(separator: "|", omittingEmptySubsequences: false).map(String.init)
                #expect(run == [Self.newest.id, "2014-04-14T11:29:11.100Z", "2014-04-14T20:29:11.100+09:00", "4.3"])
                // The two are one instant, as Foundation reads them.
                let iso = Date.ISO8601FormatStyle(includingFractionalSeconds: true)
                if run.count == 4 { #expect(try Date(run[1], strategy: iso) == (try Date(run[2], strategy: iso))) }

                try await waitUntil(timeout: .seconds(10)) { watch.stdout.contains("updated") }
                let line = try #require(watch.stdout.split(separator: "\n").first { $0.hasPrefix("updated") })
                #expect(line.contains("5 mi W of Templeton"), "\(line)")
                #expect(line.contains(Self.newest.tokyo), "\(line)")
                #expect(line.contains("→4.6"), "\(line)")
            }
        }

        @Test func badZonesAndUnitsExit64NamingTheFlag() async throws {
            for arguments in [
                ["list", "--tz", "Mars/Olympus"], ["show", "x", "--tz", "Mars/Olympus"],
                ["watch", "--tz", "Mars/Olympus"], ["history", "--tz", "GMT+5"], ["status", "--tz", "JST"],
            ] {
                let result = try await quakectl(arguments + ["--socket", "/nonexistent/q.sock"])
                #expect(result.status == 64, "\(arguments): \(result.stderr)")
                #expect(result.stderr.contains("--tz"), "\(result.stderr)")
                #expect(result.stderr.contains("is not an IANA time zone name"), "\(result.stderr)")
                #expect(result.stdout.isEmpty)
            }
            for arguments in [["list", "--units", "furlong"], ["watch", "--units", "miles"], ["show", "x", "--units", "KM"]] {
                let result = try await quakectl(arguments + ["--socket", "/nonexistent/q.sock"])
                #expect(result.status == 64, "\(arguments): \(result.stderr)")
                #expect(result.stderr.contains("--units takes km or mi"), "\(result.stderr)")
            }
            let suggestion = try await quakectl(["list", "--tz", "asia/tokyo"])
            #expect(suggestion.status == 64)
            #expect(suggestion.stderr.contains("Did you mean Asia/Tokyo?"), "\(suggestion.stderr)")
        }
    }
}
