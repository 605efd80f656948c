import Foundation
import QuakeAssociation
import QuakeConfigValues
import QuakeFeed
import QuakeModel
import QuakeProtocol
import QuakeStore
import QuakeTestSupport
import Testing

@testable import QuakeDaemon

/// `prefer = AGENCY[,AGENCY...] region=...`: each region kind (a circle, a box, a GeoJSON polygon
/// file), several agencies and lines in order, every error with its place, the environment and
/// flag forms, the round trip through ``DaemonConfiguration/text(for:)``, and what it does to a
/// real store: EMSC configured first and INGV reporting one quake in Italy.
@Suite("prefer configuration")
struct PreferConfigurationTests {
    let defaults = DefaultPaths(environment: [:], isRoot: true)
    static let emsc = "emsc fdsn https://www.seismicportal.eu/fdsnws/event/1/"
    static let ingv = "ingv fdsn https://webservices.ingv.it/fdsnws/event/1/"

    /// A rough outline of mainland Italy and Sicily, [longitude, latitude]; Corsica (42.2, 9.0)
    /// is in its bounding box but outside it.
    static let italy = """
        {"type":"FeatureCollection","features":[{"type":"Feature","properties":{},"geometry":{"type":"Polygon","coordinates":[
          [[7.0,44.0],[7.0,46.5],[13.5,46.5],[13.5,45.5],[12.5,44.0],[16.0,41.5],[18.5,40.5],[18.5,39.5],
           [15.5,38.0],[15.5,36.5],[12.0,37.5],[12.5,38.5],[15.5,40.0],[12.0,41.5],[10.0,43.5],[7.0,44.0]]]}}]}
        """

    /// Writes `text` as `name` in `dir`, returning its path.
    @discardableResult
    static func write(_ text: String, _ name: String, in dir: URL) throws -> String {
        let file = dir.appendingPathComponent(name)
        try text.write(to: file, atomically: true, encoding: .utf8)
        return file.path
    }

    /// Loads `text` as the config file `quaked.conf` in `dir`, with `environment` and `flags`.
    func load(
        _ text: String, in dir: URL, environment: [String: String] = [:],
        flags: [(key: DaemonConfiguration.Key, value: String, flag: String)] = []
    ) throws -> ResolvedConfiguration {
        let file = try Self.write(text, "quaked.conf", in: dir)
        return try ConfigurationLoader(flags: flags, configFile: file, environment: environment, defaults: defaults)
            .resolve()
    }

    /// The error loading `text` gives.
    func error(
        _ text: String, in dir: URL, environment: [String: String] = [:],
        flags: [(key: DaemonConfiguration.Key, value: String, flag: String)] = []
    ) -> ConfigurationError? {
        do {
            _ = try load(text, in: dir, environment: environment, flags: flags)
            return nil
        } catch {
            return error as? ConfigurationError
        }
    }

    @Test("a circle, a box and a polygon file; several agencies; the lines in order, into the association")
    func everyRegionKind() async throws {
        try await withTemporaryDirectory { dir in
            let polygonFile = try Self.write(Self.italy, "italy.geojson", in: dir)
            let resolved = try load(
                """
                feed = none
                source = \(Self.emsc)
                source = \(Self.ingv)
                prefer = INGV region=\(polygonFile)
                prefer = GFZ, emsc  region=35,6,48,19   # a box: MINLAT,MINLON,MAXLAT,MAXLON
                prefer = geonet,NZ region=-41.3,174.8,800
                prefer = ingv region=40,170,50,-170

                """, in: dir)
            let configuration = resolved.configuration
            #expect(configuration.preferences.map(\.agencies) == [["INGV"], ["GFZ", "emsc"], ["geonet", "NZ"], ["ingv"]])
            let polygons = try GeoJSONRegion.parse(Data(Self.italy.utf8))
            #expect(configuration.preferences[0].area == .file(path: polygonFile, polygons: polygons))
            #expect(configuration.preferences[1].area == .shape(.box(minLat: 35, maxLat: 48, minLon: 6, maxLon: 19)))
            #expect(configuration.preferences[2].area == .shape(.near(lat: -41.3, lon: 174.8, radiusKm: 800)))
            #expect(configuration.preferences[3].area == .shape(.box(minLat: 40, maxLat: 50, minLon: 170, maxLon: -170)))
            // What every import gets: the regions as the Associator reads them, in the lines' order.
            let association = configuration.association
            #expect(association.sourceOrder == ["emsc", "ingv"])
            #expect(
                association.regionalPreferences == [
                    RegionalPreference(agencies: ["INGV"], region: .polygon(polygons)),
                    RegionalPreference(agencies: ["GFZ", "emsc"], region: .box(minLat: 35, maxLat: 48, minLon: 6, maxLon: 19)),
                    RegionalPreference(agencies: ["geonet", "NZ"], region: .circle(lat: -41.3, lon: 174.8, radiusKm: 800)),
                    RegionalPreference(agencies: ["ingv"], region: .box(minLat: 40, maxLat: 50, minLon: 170, maxLon: -170)),
                ])
            #expect(association.regionalPreferences[0].region.contains(latitude: 42.35, longitude: 13.4))
            #expect(!association.regionalPreferences[0].region.contains(latitude: 42.2, longitude: 9.0))
            // Printed as read, each line naming its place; the text reads back to the same value.
            let texts = configuration.text(for: .prefer)
            #expect(
                texts == [
                    "INGV region=\(polygonFile)", "GFZ,emsc region=35,6,48,19", "geonet,NZ region=-41.3,174.8,800",
                    "ingv region=40,170,50,-170",
                ])
            #expect(resolved.entries.filter { $0.key == "prefer" }.map { $0.source.split(separator: ":").last! } == ["4", "5", "6", "7"])
            var rebuilt = DaemonConfiguration(defaults: defaults)
            for (index, text) in texts.enumerated() {
                try rebuilt.apply(.prefer, text, source: "test", replaceFeeds: index == 0)
            }
            #expect(rebuilt.preferences == configuration.preferences)
            // Without prefer: none, and no regional preference.
            let plain = try load("feed = none\nsource = \(Self.emsc)\n", in: dir).configuration
            #expect(plain.preferences.isEmpty && plain.association.regionalPreferences.isEmpty)
            #expect(plain.text(for: .prefer) == ["none"])
        }
    }

    @Test("a reload reads the polygon file again: a changed file is a changed configuration")
    func polygonFileIsReadAtEachLoad() async throws {
        try await withTemporaryDirectory { dir in
            let polygonFile = try Self.write(Self.italy, "italy.geojson", in: dir)
            let text = "feed = none\nsource = \(Self.ingv)\nprefer = INGV region=\(polygonFile)\n"
            let first = try load(text, in: dir).configuration
            #expect(try load(text, in: dir).configuration == first)
            try Self.write(
                #"{"type":"Polygon","coordinates":[[[6,35],[19,35],[19,48],[6,48],[6,35]]]}"#, "italy.geojson", in: dir)
            let second = try load(text, in: dir).configuration
            #expect(second != first)
            #expect(second.association != first.association)
            #expect(second.association.regionalPreferences[0].region.contains(latitude: 42.2, longitude: 9.0))
        }
    }

    @Test(
        "every bad prefer line says what is wrong and what to write, naming the line",
        arguments: [
            ("INGV", "prefer INGV: no region: write AGENCY[,AGENCY...] region=REGION"),
            ("region=35,6,48,19", "'region=35,6,48,19' names no agency: write AGENCY[,AGENCY...] region=REGION"),
            (", region=35,6,48,19", "names no agency"),
            ("IN/GV region=35,6,48,19", "'IN/GV' is not an agency: give an agency's code or a source's name"),
            ("INGV,ingv region=35,6,48,19", "prefer INGV,ingv: ingv is named twice (case is ignored): name each agency once"),
            ("INGV region=35,6,48,19 italy", "prefer INGV: 'italy' is not an option: write the agencies, then region=REGION"),
            ("INGV area=35,6,48,19", "prefer INGV: unknown option 'area' (options: region)"),
            ("INGV region=35,6,48,19 region=1,2,3", "prefer INGV: option region: given twice"),
            ("INGV region=", "prefer INGV: option region: a preference needs a region"),
            ("INGV region=none", "prefer INGV: option region: a preference needs a region"),
            ("INGV region=1,2", "prefer INGV: option region: '1,2' is not a region: LAT,LON,KM (a circle) or MINLAT,MINLON,MAXLAT,MAXLON (a box)"),
            ("INGV region=95,0,10", "prefer INGV: option region: '95,0,10': latitude -90 to 90"),
            ("INGV region=48,6,35,19", "prefer INGV: option region: '48,6,35,19': latitudes -90 to 90 with MINLAT <= MAXLAT"),
            ("INGV region=italy.geojson", "prefer INGV: option region: 'italy.geojson' is not a region: give LAT,LON,KM (a circle), MINLAT,MINLON,MAXLAT,MAXLON (a box), or a GeoJSON polygon file by its absolute path (e.g. region=/etc/quaked/italy.geojson)"),
            ("INGV region=/nonexistent/italy.geojson", "prefer INGV: option region: cannot read the polygon file /nonexistent/italy.geojson: No such file or directory"),
        ])
    func badLines(line: String, expected: String) async throws {
        try await withTemporaryDirectory { dir in
            let problem = try #require(error("feed = none\nprefer = \(line)\n", in: dir))
            #expect(problem.key == "prefer")
            #expect(problem.source == dir.appendingPathComponent("quaked.conf").path + ":2", "\(problem)")
            #expect(problem.problem.contains(expected), "\(problem.problem)")
        }
    }

    @Test("a bad polygon file: not JSON, not polygons, an invalid ring, too large; the message names the file and the fault")
    func badPolygonFiles() async throws {
        try await withTemporaryDirectory { dir in
            func problem(_ contents: String) throws -> String {
                let path = try Self.write(contents, "bad.geojson", in: dir)
                let error = try #require(self.error("prefer = INGV region=\(path)\n", in: dir))
                #expect(error.key == "prefer" && error.source.hasSuffix("quaked.conf:1"))
                #expect(error.problem.hasPrefix("prefer INGV: option region: "), "\(error.problem)")
                #expect(error.problem.contains("the polygon file \(path)"), "\(error.problem)")
                return error.problem
            }
            #expect(try problem("<html>Not Found</html>").contains("is not GeoJSON polygons: not JSON"))
            #expect(
                try problem(#"{"type":"Point","coordinates":[13,42]}"#).contains(
                    "the document is a Point, which has no area; give a Polygon or MultiPolygon"))
            #expect(
                try problem(#"{"type":"Polygon","coordinates":[[[6,35],[19,35],[19,48],[6,48]]]}"#).contains(
                    "is not a region: polygon 1, ring 1: the ring is not closed: its last point must repeat its first"))
            #expect(
                try problem(#"{"type":"Polygon","coordinates":[[[0,0],[10,10],[10,0],[0,10],[0,0]]]}"#).contains(
                    "the ring crosses or touches itself"))
            #expect(
                try problem(#"{"type":"Polygon","coordinates":[[[0,0],[200,0],[0,10],[0,0]]]}"#).contains(
                    "is not a latitude,longitude on the globe"))
            let large = String(repeating: " ", count: PreferenceConfiguration.maxFileSize + 1)
            #expect(try problem(large).contains("the file is larger than 16M"))
            // A directory is not a file.
            let directory = try #require(error("prefer = INGV region=\(dir.path)\n", in: dir))
            #expect(directory.problem.contains("cannot read the polygon file \(dir.path): Is a directory"), "\(directory.problem)")
        }
    }

    @Test("QUAKED_PREFER takes several preferences separated by ';'; --prefer is repeatable and replaces the file's and the environment's")
    func environmentAndFlags() async throws {
        try await withTemporaryDirectory { dir in
            let polygonFile = try Self.write(Self.italy, "italy.geojson", in: dir)
            let file = "feed = none\nsource = \(Self.emsc)\nsource = \(Self.ingv)\nprefer = GFZ region=35,6,48,19\n"
            let fromEnvironment = try load(
                file, in: dir, environment: ["QUAKED_PREFER": "INGV region=\(polygonFile) ; EMSC,GFZ region=0,0,10 ;"])
            #expect(fromEnvironment.configuration.preferences.map(\.agencies) == [["INGV"], ["EMSC", "GFZ"]])
            #expect(fromEnvironment.entries.filter { $0.key == "prefer" }.map(\.source) == ["QUAKED_PREFER", "QUAKED_PREFER"])
            let fromFlags = try load(
                file, in: dir, environment: ["QUAKED_PREFER": "INGV region=0,0,10"],
                flags: [
                    (.prefer, "emsc region=1,2,3", "--prefer"),
                    (.prefer, "ingv region=\(polygonFile)", "--prefer"),
                ])
            #expect(fromFlags.configuration.preferences.map(\.description) == ["emsc region=1,2,3", "ingv region=\(polygonFile)"])
            #expect(fromFlags.entries.filter { $0.key == "prefer" }.map(\.source) == ["--prefer", "--prefer"])
            // `none` clears the file's.
            #expect(try load(file, in: dir, environment: ["QUAKED_PREFER": "none"]).configuration.preferences.isEmpty)
            // A bad value names the variable or the option.
            let badVariable = try #require(error(file, in: dir, environment: ["QUAKED_PREFER": "INGV region=0,0,10; EMSC"]))
            #expect(badVariable.key == "prefer" && badVariable.source == "QUAKED_PREFER")
            #expect(badVariable.problem.contains("prefer EMSC: no region"))
            let badFlag = try #require(error(file, in: dir, flags: [(.prefer, "INGV region=relative.geojson", "--prefer")]))
            #expect(badFlag.source == "--prefer" && badFlag.problem.contains("by its absolute path"), "\(badFlag)")
            #expect(badFlag.description.hasPrefix("invalid configuration: prefer (--prefer): prefer INGV: option region:"))
        }
    }

    // MARK: - A real store

    static let now = Date(timeIntervalSince1970: 1_800_000_000)
    static let nowMs: Int64 = 1_800_000_000_000

    /// One source's automatic report (or reviewed, `manual`), an hour ago.
    static func report(
        _ source: String, _ id: String, agency: String, lat: Double, lon: Double, seconds: Int64 = 0,
        manual: Bool = false
    ) -> SourceItem {
        .report(
            SourceReport(
                source: source, id: id, agency: agency, time: nowMs - 3_600_000 + seconds * 1000, latitude: lat,
                longitude: lon, depth: 10, magnitude: 4.1, magnitudeType: "ML", place: "\(agency) place",
                evaluationMode: manual ? .manual : .automatic, updated: nowMs - 60_000))
    }

    /// The configuration's association, loaded from `prefer` lines after EMSC's then INGV's source.
    func association(_ prefer: String, in dir: URL) throws -> AssociationConfiguration {
        try load("feed = none\nsource = \(Self.emsc)\nsource = \(Self.ingv)\n" + prefer, in: dir).configuration.association
    }

    @Test(
        "a store with EMSC configured first: in Italy EMSC's solution is preferred, then with prefer = INGV INGV's (an update), outside the box EMSC's still"
    )
    func storePrefersAsConfigured() async throws {
        try await withTemporaryDirectory { dir in
            let plain = try association("", in: dir)
            let italyBox = try association("prefer = INGV region=35,6,48,19\n", in: dir)
            let italyPolygon = try association(
                "prefer = INGV region=\(try Self.write(Self.italy, "italy.geojson", in: dir))\n", in: dir)
            #expect(plain.sourceOrder == ["emsc", "ingv"] && plain.regionalPreferences.isEmpty)

            // L'Aquila: INGV's solution 3 s after EMSC's, 0.05 degrees south; Athens likewise.
            let emscItaly = Self.report("emsc", "20260615_0000101", agency: "EMSC", lat: 42.40, lon: 13.40)
            let ingvItaly = Self.report("ingv", "44500001", agency: "INGV", lat: 42.35, lon: 13.40, seconds: 3)
            let emscGreece = Self.report("emsc", "20260615_0000202", agency: "EMSC", lat: 38.00, lon: 23.70)
            let ingvGreece = Self.report("ingv", "44500002", agency: "INGV", lat: 37.95, lon: 23.70, seconds: 3)

            func net(_ store: QuakeStore, _ id: String) throws -> String? { try store.quake(id: id)?.net }
            func lat(_ store: QuakeStore, _ id: String) throws -> Double? { try store.quake(id: id)?.lat }

            // Without prefer: EMSC's, the first source's, in Italy and in Greece.
            let storeDirectory = dir.appendingPathComponent("store")
            try FileManager.default.createDirectory(at: storeDirectory, withIntermediateDirectories: true)
            let store = try QuakeStore(directory: storeDirectory)
            _ = try await store.importSource(
                "emsc", items: [emscItaly, emscGreece], position: nil, query: nil, association: plain, now: Self.now)
            _ = try await store.importSource(
                "ingv", items: [ingvItaly, ingvGreece], position: nil, query: nil, association: plain, now: Self.now)
            #expect(try store.allQuakes().map(\.id).sorted() == ["20260615_0000101", "20260615_0000202"])
            #expect(try net(store, "20260615_0000101") == "emsc" && lat(store, "20260615_0000101") == 42.40)
            #expect(try net(store, "20260615_0000202") == "emsc")
            let head = try store.history(after: 0, limit: 10_000).transactions.last?.token ?? 0

            // prefer = INGV region=<a box around Italy>, as after a reload: the next import (an
            // empty run) re-prefers, and the quake in Italy is updated to INGV's solution; the one
            // in Greece, outside the box, stays EMSC's.
            let rerun = try await store.importSource(
                "ingv", items: [], position: nil, query: nil, association: italyBox, now: Self.now)
            #expect(rerun.updated == 1 && rerun.created == 0 && rerun.deleted == 0, "\(rerun)")
            #expect(try net(store, "20260615_0000101") == "ingv" && lat(store, "20260615_0000101") == 42.35)
            #expect(try store.quake(id: "20260615_0000101")?.title == "M 4.1 - INGV place")
            #expect(try net(store, "20260615_0000202") == "emsc" && lat(store, "20260615_0000202") == 38.00)
            let changes = try store.history(after: head, limit: 10_000).transactions.flatMap(\.changes)
            #expect(changes.map(\.quakeId) == ["20260615_0000101"] && changes.map(\.kind) == [.update], "\(changes)")
            #expect(try store.reports(ofEvent: "20260615_0000101").first?.source == "ingv", "the preferred first")
            #expect(try store.checkIntegrity().isEmpty)

            // The same preference again changes nothing; without it, EMSC's again.
            #expect(
                try await store.importSource("ingv", items: [], position: nil, query: nil, association: italyBox, now: Self.now)
                    .updated == 0)
            #expect(
                try await store.importSource("emsc", items: [], position: nil, query: nil, association: plain, now: Self.now)
                    .updated == 1)
            #expect(try net(store, "20260615_0000101") == "emsc")

            // A fresh store under the polygon file's preference, the reports arriving in the
            // other order: INGV's in Italy, EMSC's in Greece.
            let fresh = try QuakeStore(directory: dir)
            _ = try await fresh.importSource(
                "ingv", items: [ingvGreece, ingvItaly], position: nil, query: nil, association: italyPolygon, now: Self.now)
            _ = try await fresh.importSource(
                "emsc", items: [emscGreece, emscItaly], position: nil, query: nil, association: italyPolygon, now: Self.now)
            #expect(try fresh.allQuakes().count == 2)
            #expect(try net(fresh, "44500001") == "ingv" && lat(fresh, "44500001") == 42.35)
            #expect(try net(fresh, "44500002") == "emsc" && lat(fresh, "44500002") == 38.00)

            // Reviewed or manual still beats automatic: EMSC's reviewed solution in Italy wins over
            // the regional authority's automatic one.
            let reviewed = Self.report("emsc", "20260615_0000101", agency: "EMSC", lat: 42.41, lon: 13.40, manual: true)
            let revised = try await fresh.importSource(
                "emsc", items: [reviewed], position: nil, query: nil, association: italyPolygon, now: Self.now)
            #expect(revised.updated == 1)
            #expect(try net(fresh, "44500001") == "emsc" && lat(fresh, "44500001") == 42.41)
        }
    }
}
