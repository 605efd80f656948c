import Foundation
import QuakeClient
import QuakeCtl
import QuakeFeed
import QuakeModelCheck
import QuakeProtocol
import QuakeStore
import QuakeTestSupport
import Testing
import Varlink

/// Filters end to end: a real daemon, real quakectl processes, real caches and feed documents that
/// revise one quake across a filter's threshold.
extension ClientEndToEnd {
    @Suite struct FilteredWatchTests {
        /// A one-feature document: `id` from the day feed with its magnitude set and `updated`
        /// moved on by `revision` seconds (so each revision is newer than the last).
        static func revision(of id: String, mag: Double, revision: Int, in dir: URL) throws -> URL {
            let object = try JSONSerialization.jsonObject(with: Data(contentsOf: TestFeeds.day)) as! [String: Any]
            var feature = (object["features"] as! [[String: Any]]).first { $0["id"] as? String == id }!
            var properties = feature["properties"] as! [String: Any]
            properties["mag"] = mag
            properties["updated"] = (properties["updated"] as! Int) + revision * 1000
            feature["properties"] = properties
            let document: [String: Any] = ["type": "FeatureCollection", "metadata": [:], "features": [feature]]
            let url = dir.appendingPathComponent("revision-\(revision).geojson")
            try JSONSerialization.data(withJSONObject: document).write(to: url)
            return url
        }

        /// What `filter` selects from the store.
        static func filtered(_ daemon: Quaked, _ filter: QuakeFilter) throws -> [String: IOQuaked.Quake] {
            byID(try daemon.withStore { try $0.allQuakes() }.filter(filter.matches).map(wire))
        }

        static func waitForCache(
            _ watch: ChildProcess, _ daemon: Quaked, cache path: String, _ filter: QuakeFilter
        ) async throws {
            let head = try daemon.withStore { try $0.head() }
            try await waitUntil(timeout: .seconds(30)) {
                guard watch.isRunning else { throw TestFailure("watch exited: \(watch.stderr)") }
                let cache = try QuakeCache(path: path)
                defer { try? cache.close() }
                // At the head, and kept with this filter (not still the last watch's).
                let position = try cache.position()
                return position?.token == Int(head) && position?.filter == IOQuaked.Filter(filter).key
            }
            let cache = try QuakeCache(path: path)
            defer { try? cache.close() }
            #expect(byID(try cache.allQuakes()) == (try Self.filtered(daemon, filter)))
        }

        @Test func aRevisionAcrossTheThresholdEntersAndLeaves() async throws {
            try await withQuaked { daemon in
                let cache = daemon.directory.appendingPathComponent("filtered.sqlite").path
                let filter = QuakeFilter(minMagnitude: 4)
                let small = try #require(try daemon.withStore { try $0.allQuakes() }.first { ($0.mag ?? 9) < 3 })
                let strong = try Self.filtered(daemon, filter)
                let watch = try WatchTests.watch(daemon, cache: cache, ["--min-mag", "4", "--last", "2"])
                defer { watch.signal(SIGKILL) }
                try await Self.waitForCache(watch, daemon, cache: cache, filter)

                // 2.x → 4.5: it enters; → 3.9: it leaves; → 4.4: it enters again; → 2.0: it leaves;
                // → 2.1: nothing (out to out).
                var expected: [String] = []
                for (step, mag) in [4.5, 3.9, 4.4, 2.0, 2.1].enumerated() {
                    let feed = try Self.revision(of: small.id, mag: mag, revision: step + 1, in: daemon.directory)
                    _ = try await daemon.importOnce(feed)
                    try await Self.waitForCache(watch, daemon, cache: cache, filter)
                    if step < 4 { expected.append(mag >= 4 ? "enter" : "leave") }
                }
                try await Task.sleep(for: .milliseconds(300))
                let output = try WatchOutput(watch.stdout)
                #expect(output.resets.count == 1)
                #expect(output.resets.first?.quakes == strong.count, "the snapshot holds only the matching quakes")
                let kinds = output.lines.compactMap { $0.change }.filter { $0.quakeId == small.id }.map(\.kind.rawValue)
                #expect(kinds == expected)
                // The leave says what changed; the enter carries the whole quake.
                let leave = output.lines.compactMap(\.change).first { $0.kind == .leave }
                #expect(leave?.tombstone?.mag == 3.9)
                #expect(leave?.fields?.contains { $0.field == "mag" } == true)
                let enter = output.lines.compactMap(\.change).first { $0.kind == .enter }
                #expect(enter?.quake?.id == small.id)
                // --last 2: the two newest matching quakes, printed after the reset.
                let recent = output.lines.filter { $0.event == "quake" }.compactMap(\.quake)
                let newest = strong.values.sorted { ($0.time, $0.id) > ($1.time, $1.id) }.prefix(2).reversed()
                #expect(recent.map(\.id) == newest.map(\.id))

                // The same cache with another filter starts over, and says so.
                watch.signal(SIGTERM)
                #expect(try await watch.wait() == 0)
                let other = try WatchTests.watch(daemon, cache: cache, ["--min-mag", "2"])
                defer { other.signal(SIGKILL) }
                try await Self.waitForCache(other, daemon, cache: cache, QuakeFilter(minMagnitude: 2))
                let reset = try WatchOutput(other.stdout).resets.first
                #expect(reset?.reason?.contains("another filter") == true)
            }
        }

        /// Seeded: watchers stopped with SIGTERM, SIGINT or SIGHUP at random moments while
        /// transactions arrive print every change exactly once across their runs.
        @Test func stoppedWatchesPrintEveryChangeExactlyOnce() async throws {
            let seed = ProcessInfo.processInfo.environment["QUAKED_TEST_SEED"].flatMap(UInt64.init) ?? 2_026_112_3
            var random = SeededRandom(seed: seed)
            try await withQuaked { daemon in
                let cache = daemon.directory.appendingPathComponent("stops.sqlite").path
                let ids = try daemon.withStore { try $0.allQuakes() }.map(\.id)
                let first = try WatchTests.watch(daemon, cache: cache, ["--name", "stops"])
                try await Self.waitForCache(first, daemon, cache: cache, QuakeFilter())
                let start = try daemon.withStore { try $0.head() }
                first.signal(SIGTERM)
                #expect(try await first.wait() == 0)

                var printed: [ChangeKey] = []
                var revision = 0
                for round in 0..<6 {
                    let watch = try WatchTests.watch(daemon, cache: cache, ["--name", "stops"])
                    // Transactions while it runs, one by one, a random while apart.
                    for step in 0..<4 {
                        revision += 1
                        let id = ids[(round * 4 + step) % ids.count]
                        let feed = try Self.revision(
                            of: id, mag: Double(random.next() % 60) / 10, revision: revision, in: daemon.directory)
                        _ = try await daemon.importOnce(feed)
                        try await Task.sleep(for: .milliseconds(Int(random.next() % 150)))
                    }
                    let signal = [SIGTERM, SIGINT, SIGHUP][Int(random.next() % 3)]
                    watch.signal(signal)
                    let status = try await watch.wait(timeout: .seconds(30))
                    #expect(status == 0, "watch exited \(status) on signal \(signal) (seed \(seed)): \(watch.stderr)")
                    printed += try WatchOutput(watch.stdout).changes
                }
                // A last run catches up with whatever the stopped ones left.
                let last = try WatchTests.watch(daemon, cache: cache, ["--name", "stops"])
                try await Self.waitForCache(last, daemon, cache: cache, QuakeFilter())
                try await Task.sleep(for: .milliseconds(300))
                last.signal(SIGTERM)
                _ = try await last.wait()
                printed += try WatchOutput(last.stdout).changes

                let expected = try daemon.historyChanges(after: Int(start))
                #expect(expected.count >= 20)
                #expect(printed.count == Set(printed).count, "a change was printed twice (seed \(seed))")
                #expect(printed.sorted() == expected.sorted(), "printed changes differ from history (seed \(seed))")
            }
        }

        @Test func subscribeWithAFilterWakesOnlyForItsChanges() async throws {
            try await withQuaked { daemon in
                let quakes = try daemon.withStore { try $0.allQuakes() }
                let small = try #require(quakes.first { ($0.mag ?? 9) < 3 })
                let client = try UnixSocketClient(path: daemon.socketPath)
                try client.send(
                    #"{"method":"io.quaked.Subscribe","parameters":{"heartbeatSeconds":1,"filter":{"minMagnitude":8.5}},"more":true}"#
                )
                let subscribed = try #require(try client.receive())
                #expect(subscribed.contains("\"subscribed\""))

                // A small quake revised, still small: heartbeats only.
                _ = try await daemon.importOnce(
                    try Self.revision(of: small.id, mag: 2.2, revision: 1, in: daemon.directory))
                let deadline = ContinuousClock.now + .seconds(3)
                while ContinuousClock.now < deadline {
                    let reply = try #require(try client.receive(timeout: .seconds(5)))
                    #expect(!reply.contains("\"changed\""), "woken for a change the filter does not send: \(reply)")
                }
                // Revised to M 8.9: it enters, and the subscriber is woken.
                _ = try await daemon.importOnce(
                    try Self.revision(of: small.id, mag: 8.9, revision: 2, in: daemon.directory))
                var woken = false
                let until = ContinuousClock.now + .seconds(10)
                while !woken && ContinuousClock.now < until {
                    woken = try client.receive(timeout: .seconds(5))?.contains("\"changed\"") ?? false
                }
                #expect(woken)
            }
        }

        @Test func malformedFiltersAreRefusedNamingTheField() async throws {
            try await withQuaked { daemon in
                let client = try UnixSocketClient(path: daemon.socketPath)
                let cases: [(String, String)] = [
                    (#"{"minMagnitude":5,"maxMagnitude":4}"#, "filter.maxMagnitude"),
                    (#"{"box":{"minLat":10,"maxLat":0,"minLon":0,"maxLon":1}}"#, "filter.box.maxLat"),
                    (#"{"near":{"lat":91,"lon":0,"radiusKm":10}}"#, "filter.near.lat"),
                    (#"{"near":{"lat":0,"lon":0,"radiusKm":-1}}"#, "filter.near.radiusKm"),
                    (#"{"near":{"lat":0,"lon":0,"radiusKm":1},"box":{"minLat":0,"maxLat":1,"minLon":0,"maxLon":1}}"#, "filter.box"),
                    (#"{"types":[]}"#, "filter.types"),
                    (#"{"minSignificance":-3}"#, "filter.minSignificance"),
                    // An unclosed ring, and a bow tie (crosses itself), and two regions.
                    (#"{"polygons":[{"rings":[{"points":[{"lat":0,"lon":0},{"lat":0,"lon":1},{"lat":1,"lon":1},{"lat":1,"lon":0}]}]}]}"#,
                     "filter.polygons[0].rings[0]"),
                    (#"{"polygons":[{"rings":[{"points":[{"lat":0,"lon":0},{"lat":1,"lon":1},{"lat":1,"lon":0},{"lat":0,"lon":1},{"lat":0,"lon":0}]}]}]}"#,
                     "filter.polygons[0].rings[0]"),
                    (#"{"box":{"minLat":0,"maxLat":1,"minLon":0,"maxLon":1},"polygons":[]}"#, "filter.polygons"),
                ]
                for (filter, field) in cases {
                    for method in ["FetchHistory", "Query"] {
                        let parameters = method == "FetchHistory" ? #"{"after":0,"filter":\#(filter)}"# : #"{"filter":\#(filter)}"#
                        try client.send(#"{"method":"io.quaked.\#(method)","parameters":\#(parameters)}"#)
                        let reply = try #require(try client.receive())
                        #expect(reply.contains("org.varlink.service.InvalidParameter"), "\(method) \(filter): \(reply)")
                        #expect(reply.contains(#""parameter":"\#(field)""#), "\(method) \(filter): \(reply)")
                    }
                }
                // quakectl says which flag, and exits 64.
                let result = try await quakectl(["list", "--min-mag", "5", "--max-mag", "4", "--socket", daemon.socketPath])
                #expect(result.status == 64)
                #expect(result.stderr.contains("--max-mag"))
                let box = try await quakectl(["list", "--box", "10,0,0", "--socket", daemon.socketPath])
                #expect(box.status == 64 && box.stderr.contains("--box"))
            }
        }

        @Test func listTakesAPolygonRegionFromAGeoJSONFile() async throws {
            try await withQuaked(feeds: [TestFeeds.week]) { daemon in
                // The Aleutian arc, a ring that crosses the antimeridian (172 E to 160 W).
                let geojson = #"""
                {"type": "FeatureCollection", "features": [{"type": "Feature", "properties": {"name": "Aleutians"},
                  "geometry": {"type": "Polygon", "coordinates": [[[172, 50], [-160, 52], [-160, 56], [172, 54], [172, 50]]]}}]}
                """#
                let file = daemon.directory.appendingPathComponent("aleutians.geojson")
                try geojson.write(to: file, atomically: true, encoding: .utf8)
                let region = try GeoJSONRegion.parse(Data(geojson.utf8))
                let expected = try Self.filtered(daemon, QuakeFilter(region: .polygons(region)))
                #expect(!expected.isEmpty, "the fixture has no quake in the Aleutians")
                for argument in [file.path, geojson] {
                    let list = try await quakectl(
                        ["list", "--json", "--limit", "100000", "--region", argument, "--socket", daemon.socketPath])
                    #expect(list.status == 0, "\(list.stderr)")
                    let reply = try IOQuaked.Query.Reply.decode(json: Array(list.stdout.utf8))
                    #expect(byID(reply.quakes) == expected)
                }
                // Bad input names the flag and the file, and says what is wrong.
                let point = daemon.directory.appendingPathComponent("point.geojson")
                try #"{"type": "Point", "coordinates": [0, 0]}"#.write(to: point, atomically: true, encoding: .utf8)
                let refused = try await quakectl(["list", "--region", point.path, "--socket", daemon.socketPath])
                #expect(refused.status == 64)
                #expect(refused.stderr.contains("--region \(point.path)") && refused.stderr.contains("no area"), "\(refused.stderr)")
                let missing = try await quakectl(["list", "--region", "/nonexistent.geojson", "--socket", daemon.socketPath])
                #expect(missing.status == 64 && missing.stderr.contains("cannot read"), "\(missing.stderr)")
                let open = try await quakectl(
                    ["list", "--region", #"{"type":"Polygon","coordinates":[[[0,0],[1,0],[1,1],[0,1]]]}"#, "--socket", daemon.socketPath])
                #expect(open.status == 64 && open.stderr.contains("not closed"), "\(open.stderr)")
                let both = try await quakectl(["list", "--region", file.path, "--box", "0,0,1,1", "--socket", daemon.socketPath])
                #expect(both.status == 64 && both.stderr.contains("--region cannot be combined"), "\(both.stderr)")
            }
        }

        @Test func listAndExportApplyTheFilterInTheDaemon() async throws {
            try await withQuaked(feeds: [TestFeeds.week]) { daemon in
                // Across the antimeridian: the western Pacific and Alaska's Aleutians, not the Americas' west coast.
                let filter = QuakeFilter(minMagnitude: 2, region: .box(minLat: 40, maxLat: 70, minLon: 160, maxLon: -150))
                let expected = try Self.filtered(daemon, filter)
                #expect(!expected.isEmpty, "the fixture has no quake in the box")
                let list = try await quakectl(
                    ["list", "--json", "--limit", "100000", "--min-mag", "2", "--box", "40,160,70,-150", "--socket", daemon.socketPath])
                #expect(list.status == 0)
                let reply = try IOQuaked.Query.Reply.decode(json: Array(list.stdout.utf8))
                #expect(byID(reply.quakes) == expected)
                #expect(reply.total == expected.count)

                let export = try await quakectl(
                    ["export", "--format", "ndjson", "--min-mag", "2", "--box", "40,160,70,-150", "--socket", daemon.socketPath])
                #expect(export.status == 0)
                let exported = export.stdout.split(separator: "\n").count
                #expect(exported == expected.count)
            }
        }
    }
}

