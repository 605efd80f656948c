import Foundation
import QuakeAssociation
import QuakeProtocol
import QuakeStore
import QuakeTestSupport
import Testing

@testable import QuakeDaemon

/// `source`, `associate-time`, `associate-distance` and `feed = none`: parsing, every error, the
/// round trip through ``DaemonConfiguration/text(for:)``, sources beside a feed (a source
/// named `usgs` refused), the source order, and the environment and flag forms.
@Suite("source configuration")
struct SourceConfigurationTests {
    let defaults = DefaultPaths(environment: [:], isRoot: true)
    static let emsc = "https://www.seismicportal.eu/fdsnws/event/1/"

    /// Loads `text` as a config file, with `environment` and `flags`.
    func load(
        _ text: String, environment: [String: String] = [:],
        flags: [(key: DaemonConfiguration.Key, value: String, flag: String)] = []
    ) throws -> ResolvedConfiguration {
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let file = dir.appendingPathComponent("quaked.conf")
        try text.write(to: file, atomically: true, encoding: .utf8)
        return try ConfigurationLoader(
            flags: flags, configFile: file.path, environment: environment, defaults: defaults
        ).resolve()
    }

    /// The error loading `text` gives.
    func error(_ text: String, environment: [String: String] = [:]) -> ConfigurationError? {
        do {
            _ = try load(text, environment: environment)
            return nil
        } catch {
            return error as? ConfigurationError
        }
    }

    @Test("a source line with every option, and one with the defaults")
    func parsesEveryOption() throws {
        let full = try SourceConfiguration(
            parsing:
                "ingv fdsn https://webservices.ingv.it/fdsnws/event/1/query format=text interval=2m since=3d overlap=5m min-magnitude=2.5 region=35,6,48,19"
        )
        #expect(full.name == "ingv" && full.kind == .fdsn)
        #expect(full.service.description == "https://webservices.ingv.it/fdsnws/event/1/")
        #expect(full.format == .text && full.format.parameter == "text")
        #expect(full.interval == .seconds(120) && full.since == .seconds(3 * 86_400) && full.overlap == .seconds(300))
        #expect(full.minMagnitude == 2.5)
        #expect(full.region == .box(minLat: 35, maxLat: 48, minLon: 6, maxLon: 19))
        #expect(
            full.description
                == "ingv fdsn https://webservices.ingv.it/fdsnws/event/1/ format=text interval=120s since=3d overlap=5m min-magnitude=2.5 region=35,6,48,19"
        )
        #expect(try SourceConfiguration(parsing: full.description) == full)

        let plain = try SourceConfiguration(parsing: "emsc  fdsn \(Self.emsc)")
        #expect(plain.format == .xml && plain.interval == .seconds(60) && plain.since == .seconds(86_400))
        #expect(plain.overlap == .seconds(600) && plain.minMagnitude == nil && plain.region == nil)
        #expect(plain.description == "emsc fdsn \(Self.emsc) format=xml interval=60s since=1d overlap=10m")
        #expect(try SourceConfiguration(parsing: "e fdsn \(Self.emsc) format=geojson").format.parameter == "json")
        let circle = try SourceConfiguration(parsing: "e fdsn \(Self.emsc) region=42.5,13.25,300")
        #expect(circle.region == .near(lat: 42.5, lon: 13.25, radiusKm: 300))
    }

    @Test(
        "every malformed source says what is wrong, naming the option and the line",
        arguments: [
            ("emsc", "is not a source: write NAME KIND URL"),
            ("Emsc fdsn \(emsc)", "is not a source name"),
            ("emsc.eu fdsn \(emsc)", "is not a source name"),
            ("\(String(repeating: "a", count: 33)) fdsn \(emsc)", "is not a source name"),
            ("emsc websocket \(emsc)", "'websocket' is not a source kind: use fdsn"),
            ("us usgs https://earthquake.usgs.gov/", "source us: the usgs source kind is not supported yet: follow the USGS's FDSN event service with source = us fdsn https://earthquake.usgs.gov/fdsnws/event/1/"),
            ("emsc emsc wss://www.seismicportal.eu/standing_order/websocket", "source emsc: an emsc source needs catch-up=, the FDSN event service that brings what was published while the websocket was down: add catch-up=https://www.seismicportal.eu/fdsnws/event/1/"),
            ("nz geonet ftp://api.geonet.org.nz/quake", "source nz: 'ftp://api.geonet.org.nz/quake' is not GeoNet's quake API URL: use a https:// or http:// URL with a host"),
            ("emsc fdsn ftp://example.org/", "source emsc: 'ftp://example.org/' is not an FDSN event service URL"),
            ("emsc fdsn \(emsc)query?format=xml", "is not an FDSN event service URL"),
            ("emsc fdsn \(emsc) text", "source emsc: 'text' is not an option: write KEY=VALUE"),
            ("emsc fdsn \(emsc) colour=red", "source emsc: unknown option 'colour' (options: format, interval, since, overlap, min-magnitude, region)"),
            ("emsc fdsn \(emsc) interval=2m interval=3m", "source emsc: option interval: given twice"),
            ("emsc fdsn \(emsc) format=json", "source emsc: option format: 'json' is not a format: use xml (QuakeML, the default), text or geojson"),
            ("emsc fdsn \(emsc) interval=5s", "source emsc: option interval: '5s' is shorter than the minimum of"),
            ("emsc fdsn \(emsc) interval=soon", "source emsc: option interval: 'soon' is not a duration"),
            ("emsc fdsn \(emsc) since=-1d", "source emsc: option since:"),
            ("emsc fdsn \(emsc) overlap=x", "source emsc: option overlap:"),
            ("emsc fdsn \(emsc) min-magnitude=11", "source emsc: option min-magnitude: '11' is not a magnitude"),
            ("emsc fdsn \(emsc) region=1,2", "source emsc: option region: '1,2' is not a region"),
            ("emsc fdsn \(emsc) region=95,0,10", "source emsc: option region:"),
        ])
    func malformedSources(line: String, expected: String) throws {
        let problem = try #require(error("feed = none\nsource = \(line)\n"))
        #expect(problem.key == "source")
        #expect(problem.source.hasSuffix("quaked.conf:2"), "\(problem)")
        #expect(problem.problem.contains(expected), "\(problem.problem)")
    }

    @Test("names are unique, across lines and within QUAKED_SOURCE")
    func uniqueNames() throws {
        let problem = try #require(
            error("feed = none\nsource = emsc fdsn \(Self.emsc)\nsource = emsc fdsn https://example.org/fdsnws/event/1/\n"))
        #expect(problem.source.hasSuffix("quaked.conf:3"))
        #expect(problem.problem.contains("source emsc: the name is already used by another source"))
        let inEnvironment = try #require(
            error("feed = none\n", environment: ["QUAKED_SOURCE": "a fdsn \(Self.emsc); a fdsn \(Self.emsc)"]))
        #expect(inEnvironment.source == "QUAKED_SOURCE")
    }

    @Test("sources run beside a summary feed and a catalog; a source named usgs is refused, saying why")
    func besideTheFeed() throws {
        // The default feed, and a catalog, with sources: accepted.
        let withDefaultFeed = try load("source = emsc fdsn \(Self.emsc)\n").configuration
        #expect(withDefaultFeed.feeds.map(\.name) == ["all_month"] && withDefaultFeed.sources.map(\.name) == ["emsc"])
        let withCatalog = try load(
            "feed = none\ncatalog = https://earthquake.usgs.gov/fdsnws/event/1/\nsource = emsc fdsn \(Self.emsc)\n"
        ).configuration
        #expect(withCatalog.catalog != nil && withCatalog.sources.map(\.name) == ["emsc"])
        #expect(
            try load("feed = all_day\ncatalog = https://earthquake.usgs.gov/fdsnws/event/1/\nsource = emsc fdsn \(Self.emsc)\n")
                .configuration.sources.count == 1)

        // `usgs` is the summary feed's, the catalog's and backfill jobs' own source in the store.
        let named = try #require(error("source = usgs fdsn https://earthquake.usgs.gov/fdsnws/event/1/\n"))
        #expect(named.key == "source" && named.source.hasSuffix("quaked.conf:1"))
        #expect(
            named.problem.contains(
                "source usgs: the name usgs is the store's own source for the USGS summary feed, the catalog sync and backfill jobs"))
        #expect(named.problem.contains("(feed = all_month)"))
        #expect(
            named.problem.contains("choose another name, e.g. source = comcat fdsn https://earthquake.usgs.gov/fdsnws/event/1/"),
            "\(named.problem)")
        let namedBesideCatalog = try #require(
            error(
                "feed = none\ncatalog = https://earthquake.usgs.gov/fdsnws/event/1/\nsource = emsc fdsn \(Self.emsc)\nsource = usgs fdsn \(Self.emsc)\n"
            ))
        #expect(namedBesideCatalog.problem.contains("(catalog = https://earthquake.usgs.gov/fdsnws/event/1/)"))
        #expect(namedBesideCatalog.problem.contains("choose another name"))
        // Without a feed or catalog too: a backfill job would import as `usgs` beside it.
        let alone = try #require(error("feed = none\nsource = usgs fdsn https://earthquake.usgs.gov/fdsnws/event/1/\n"))
        #expect(alone.problem.contains("backfill jobs: choose another name"), "\(alone.problem)")
        // With feed = none, sources load, and the order is theirs.
        #expect(try load("feed = none\nsource = emsc fdsn \(Self.emsc)\n").configuration.association.sourceOrder == ["emsc"])
        let loaded = try load("feed = none\nsource = emsc fdsn \(Self.emsc)\n").configuration
        #expect(loaded.feeds.isEmpty && loaded.sources.map(\.name) == ["emsc"])
        // Without sources, the feed and the catalog are as before.
        #expect(try load("catalog = https://earthquake.usgs.gov/fdsnws/event/1/\n").configuration.sources.isEmpty)
    }

    @Test("the source order: usgs first when a feed or a catalog is configured, then the sources in configuration order")
    func sourceOrder() throws {
        let ingv = "ingv fdsn https://webservices.ingv.it/fdsnws/event/1/"
        let withFeed = try load("source = \(ingv)\nsource = emsc fdsn \(Self.emsc)\n").configuration
        #expect(withFeed.association.sourceOrder == ["usgs", "ingv", "emsc"])
        let withCatalog = try load(
            "feed = none\ncatalog = https://earthquake.usgs.gov/fdsnws/event/1/\nsource = emsc fdsn \(Self.emsc)\nsource = \(ingv)\n"
        ).configuration
        #expect(withCatalog.association.sourceOrder == ["usgs", "emsc", "ingv"])
        let sourcesOnly = try load("feed = none\nsource = emsc fdsn \(Self.emsc)\nsource = \(ingv)\n").configuration
        #expect(sourcesOnly.association.sourceOrder == ["emsc", "ingv"])
        #expect(try load("feed = none\n").configuration.association.sourceOrder.isEmpty)
        #expect(try load("").configuration.association.sourceOrder == ["usgs"])
    }

    @Test("feed = none or empty is no feed; it prints as none and reads back")
    func noFeed() throws {
        for text in ["feed = none\n", "feed =\n"] {
            let configuration = try load(text).configuration
            #expect(configuration.feeds.isEmpty, "\(text)")
            #expect(configuration.text(for: .feed) == ["none"])
        }
        #expect(try load("", environment: ["QUAKED_FEED": "none"]).configuration.feeds.isEmpty)
        #expect(try load("", environment: ["QUAKED_FEED": ""]).configuration.feeds.isEmpty)
        // A later line adds to none.
        #expect(try load("feed = none\nfeed = all_day\n").configuration.feeds.map(\.name) == ["all_day"])
    }

    @Test("associate-time and associate-distance: defaults, forms, limits, and the AssociationConfiguration")
    func associationKeys() throws {
        let initial = DaemonConfiguration(defaults: defaults)
        #expect(initial.text(for: .associateTime) == ["16s"])
        #expect(initial.text(for: .associateDistance) == ["100km"])
        #expect(initial.association == AssociationConfiguration(sourceOrder: ["usgs"]), "the default feed is the source usgs")
        var configuration = initial
        try configuration.apply(.associateTime, "20s", source: "test")
        try configuration.apply(.associateDistance, "150", source: "test")
        #expect(configuration.associateDistanceKm == 150)
        try configuration.apply(.associateDistance, "62.5km", source: "test")
        try configuration.apply(.source, "b fdsn \(Self.emsc); a fdsn \(Self.emsc)", source: "test")
        #expect(configuration.text(for: .associateDistance) == ["62.5km"])
        let association = configuration.association
        #expect(association.associateTimeMilliseconds == 20_000 && association.associateDistanceKm == 62.5)
        #expect(association.sourceOrder == ["usgs", "b", "a"], "the feed first, then the configuration's order")
        for bad in ["0", "-5km", "far", "3000km", "nan"] {
            #expect(throws: ConfigurationError.self, "\(bad)") {
                try configuration.apply(.associateDistance, bad, source: "test")
            }
        }
        for bad in ["0s", "500ms", "11m", "x"] {
            #expect(throws: ConfigurationError.self, "\(bad)") {
                try configuration.apply(.associateTime, bad, source: "test")
            }
        }
    }

    @Test("QUAKED_SOURCE takes several sources separated by ';'; --source is repeatable and replaces the file's and the environment's")
    func environmentAndFlags() throws {
        let file = "feed = none\nsource = gfz fdsn https://geofon.gfz-potsdam.de/fdsnws/event/1/\n"
        let fromEnvironment = try load(
            file,
            environment: [
                "QUAKED_SOURCE": "emsc fdsn \(Self.emsc) format=text ; ingv fdsn https://webservices.ingv.it/fdsnws/event/1/;"
            ])
        #expect(fromEnvironment.configuration.sources.map(\.name) == ["emsc", "ingv"])
        #expect(fromEnvironment.configuration.sources[0].format == .text)
        #expect(fromEnvironment.entries.filter { $0.key == "source" }.map(\.source) == ["QUAKED_SOURCE", "QUAKED_SOURCE"])
        let fromFlags = try load(
            file, environment: ["QUAKED_SOURCE": "emsc fdsn \(Self.emsc)"],
            flags: [
                (.source, "a fdsn \(Self.emsc) interval=30s", "--source"),
                (.source, "b fdsn \(Self.emsc)", "--source"),
            ])
        #expect(fromFlags.configuration.sources.map(\.name) == ["a", "b"])
        #expect(fromFlags.configuration.sources[0].interval == .seconds(30))
        #expect(fromFlags.entries.filter { $0.key == "source" }.map(\.source) == ["--source", "--source"])
        // The file's own lines accumulate, each entry naming its line.
        let twoLines = try load(file + "source = emsc fdsn \(Self.emsc)\n")
        #expect(twoLines.entries.filter { $0.key == "source" }.map { $0.source.split(separator: ":").last! } == ["2", "3"])
        // `none` clears the file's sources.
        #expect(try load(file, environment: ["QUAKED_SOURCE": "none"]).configuration.sources.isEmpty)
    }

    @Test("a configuration with sources prints every key, and the text reads back to the same configuration")
    func roundTrip() throws {
        let original = try load(
            """
            feed = none
            source = emsc fdsn \(Self.emsc) format=geojson interval=2m since=12h overlap=0s
            source = ingv fdsn https://webservices.ingv.it/fdsnws/event/1/ format=text min-magnitude=-0.5 region=42.5,13.25,300
            associate-time = 1m
            associate-distance = 42.5km
            """
        ).configuration
        var rebuilt = DaemonConfiguration(defaults: defaults)
        for key in DaemonConfiguration.Key.allCases {
            let texts = original.text(for: key)
            #expect(!texts.isEmpty, "\(key.rawValue) prints no value")
            for (index, text) in texts.enumerated() {
                try rebuilt.apply(key, text, source: "test", replaceFeeds: index == 0)
            }
            #expect(rebuilt.text(for: key) == texts, "\(key.rawValue) does not read back")
        }
        #expect(rebuilt == original)
        #expect(original.text(for: .source).count == 2)
        #expect(original.sources[1].minMagnitude == -0.5)
        try rebuilt.validate()
    }

    @Test("quaked --check-config prints the sources, beside a feed too; a source named usgs beside a feed exits 78")
    func checkConfigProcess() async throws {
        try await withTemporaryDirectory { dir in
            let file = dir.appendingPathComponent("quaked.conf")
            try "feed = none\nsource = emsc fdsn \(Self.emsc) format=text\n".write(
                to: file, atomically: true, encoding: .utf8)
            let ok = try await ChildProcess.run(BuiltProducts.path("quaked"), ["--check-config", "--config", file.path])
            #expect(ok.status == 0, "\(ok.stderr)")
            #expect(ok.stdout.contains("feed = none"))
            #expect(ok.stdout.contains("source = emsc fdsn \(Self.emsc) format=text interval=60s since=1d overlap=10m"))
            #expect(ok.stdout.contains("associate-time = 16s") && ok.stdout.contains("associate-distance = 100km"))
            let beside = try await ChildProcess.run(
                BuiltProducts.path("quaked"),
                ["--check-config", "--config", file.path, "--feed", "all_day", "--source", "x fdsn \(Self.emsc)"])
            #expect(beside.status == 0, "\(beside.stderr)")
            #expect(beside.stdout.contains("feed = all_day") && beside.stdout.contains("source = x fdsn \(Self.emsc)"))
            let refused = try await ChildProcess.run(
                BuiltProducts.path("quaked"),
                ["--check-config", "--config", file.path, "--feed", "all_day", "--source", "usgs fdsn \(Self.emsc)"])
            #expect(refused.status == 78)
            #expect(refused.stderr.contains("source (--source)"), "\(refused.stderr)")
            #expect(refused.stderr.contains("choose another name"), "\(refused.stderr)")
        }
    }
}
