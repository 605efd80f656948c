import QuakeProtocol
import Foundation
import Varlink
import QuakeConfigValues
import QuakeDaemon
import QuakeTestSupport
import Testing

@Suite("configuration")
struct ConfigurationTests {
    let defaults = DefaultPaths(environment: [:], isRoot: false, home: "/home/ann")

    @Test("flags beat the environment, which beats the file, which beats the defaults")
    func precedence() async throws {
        try await withTemporaryDirectory { dir in
            let file = dir.appendingPathComponent("quaked.conf")
            try """
            # every source sets interval; only the file sets the log level
            interval = 5m
            log-level = debug
            feed = 4.5_week
            feed = significant_day
            max-feed-size = 64M
            """.write(to: file, atomically: true, encoding: .utf8)
            let environment = ["QUAKED_INTERVAL": "2m", "QUAKED_STATE_DIRECTORY": "/srv/quakes"]
            var loader = ConfigurationLoader(configFile: file.path, environment: environment, defaults: defaults)
            var configuration = try loader.load()
            #expect(configuration.interval == .seconds(120))
            #expect(configuration.logLevel == .debug)
            #expect(configuration.feeds.map(\.name) == ["4.5_week", "significant_day"])
            #expect(configuration.stateDirectory == "/srv/quakes")
            #expect(configuration.maxFeedSize == 64 << 20)
            #expect(configuration.socketPath == "/tmp/quaked-\(getuid())/quaked.sock")

            loader.flags = [
                (.interval, "90s", "--interval"), (.feed, "all_day", "--feed"), (.feed, "all_hour", "--feed"),
            ]
            configuration = try loader.load()
            #expect(configuration.interval == .seconds(90))
            #expect(configuration.feeds.map(\.name) == ["all_day", "all_hour"])
            #expect(
                configuration.feeds[0].url.absoluteString
                    == "https://earthquake.usgs.gov/earthquakes/feed/v1.0/summary/all_day.geojson")
        }
    }

    @Test("defaults: all_month, 60 s, XDG state and runtime directories, systemd's directories first")
    func defaultPaths() throws {
        let configuration = try ConfigurationLoader(environment: [:], defaults: defaults).load()
        #expect(configuration.feeds.map(\.name) == ["all_month"])
        #expect(configuration.interval == .seconds(60))
        #expect(configuration.stateDirectory == "/home/ann/.local/state/quaked")
        #expect(
            DefaultPaths(
                environment: ["XDG_STATE_HOME": "/x", "XDG_RUNTIME_DIR": "/run/user/7"], isRoot: false, home: "/h"
            ).socketPath == "/run/user/7/quaked/quaked.sock")
        #expect(
            DefaultPaths(environment: ["XDG_STATE_HOME": "/x"], isRoot: false, home: "/h").stateDirectory == "/x/quaked"
        )
        #expect(
            DefaultPaths(environment: ["XDG_STATE_HOME": "relative"], isRoot: false, home: "/h").stateDirectory
                == "/h/.local/state/quaked")
        let service = DefaultPaths(
            environment: ["STATE_DIRECTORY": "/var/lib/quaked", "RUNTIME_DIRECTORY": "/run/quaked"], isRoot: false,
            home: "/h")
        #expect(service.stateDirectory == "/var/lib/quaked")
        #expect(service.socketPath == "/run/quaked/quaked.sock")
        let root = DefaultPaths(environment: [:], isRoot: true, home: "/root")
        #expect(root.stateDirectory == "/var/lib/quaked")
        #expect(root.socketPath == "/run/quaked/quaked.sock")
    }

    @Test(
        "invalid values name the key and where they came from",
        arguments: [
            ("interval = banana", "interval", ":1"),
            ("interval = 0", "interval", "minimum"),
            ("feed = ftp://x/y", "feed", "not a feed"),
            ("max-feed-size = lots", "max-feed-size", "not a size"),
            ("log-level = loud", "log-level", "not a log level"),
            ("colour = blue", "colour", "unknown key"),
            ("just words", "just words", "expected 'key = value'"),
            ("state-directory = relative/path", "state-directory", "absolute"),
            ("history-max-age = 2d\nhistory-hard-max-age = 1d", "history-hard-max-age", "history-max-age"),
        ])
    func invalidValues(line: String, key: String, problem: String) async throws {
        try await withTemporaryDirectory { dir in
            let file = dir.appendingPathComponent("bad.conf")
            try line.write(to: file, atomically: true, encoding: .utf8)
            let error = try #require(throws: ConfigurationError.self) {
                try ConfigurationLoader(configFile: file.path, environment: [:], defaults: defaults).load()
            }
            #expect(error.key == key)
            #expect(error.description.contains(problem), "\(error)")
        }
    }

    @Test("an invalid environment variable is named")
    func invalidEnvironment() throws {
        let error = try #require(throws: ConfigurationError.self) {
            try ConfigurationLoader(environment: ["QUAKED_TOTAL_TIMEOUT": "soon"], defaults: defaults).load()
        }
        #expect(error.source == "QUAKED_TOTAL_TIMEOUT")
        #expect(error.key == "total-timeout")
    }

    @Test("durations and sizes")
    func valueParsers() throws {
        #expect(try ConfigValue.duration("90") == .seconds(90))
        #expect(try ConfigValue.duration("1500ms") == .milliseconds(1500))
        #expect(try ConfigValue.duration("7d") == .seconds(7 * 86_400))
        #expect(try ConfigValue.duration("0.5m") == .seconds(30))
        #expect(throws: ConfigValue.Problem.self) { try ConfigValue.duration("-1s") }
        #expect(throws: ConfigValue.Problem.self) { try ConfigValue.duration("5 parsecs") }
        #expect(try ConfigValue.size("256M") == 256 << 20)
        #expect(try ConfigValue.size("1g") == 1 << 30)
        #expect(try ConfigValue.size("1000") == 1000)
        #expect(throws: ConfigValue.Problem.self) { try ConfigValue.size("0") }
    }

    @Test("quaked exits 78 (EX_CONFIG) on an invalid configuration, naming the key")
    func exitCode78() async throws {
        let result = try await ChildProcess.run(
            BuiltProducts.path("quaked"), ["--interval", "banana", "--state-directory", "/nonexistent"])
        #expect(result.status == 78)
        #expect(result.stderr.contains("interval (--interval)"))
        let environment = try await ChildProcess.run(
            BuiltProducts.path("quaked"), ["--state-directory", "/nonexistent"], environment: ["QUAKED_LOG_LEVEL": "loud"])
        #expect(environment.status == 78)
        #expect(environment.stderr.contains("QUAKED_LOG_LEVEL"))
    }
}
