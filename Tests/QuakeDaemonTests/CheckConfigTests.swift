import Foundation
import QuakeConfigValues
import QuakeDaemon
import QuakeProtocol
import QuakeTestSupport
import Testing

/// `quaked --check-config`, the sources it reports, the config-file syntax of every value, and
/// one name per setting (`--<key>` for every option that sets a key).
@Suite("check-config")
struct CheckConfigTests {
    let defaults = DefaultPaths(environment: [:], isRoot: false, home: "/home/ann")

    // MARK: - Values in config-file syntax

    @Test("durations and sizes print as the config file writes them")
    func valueText() {
        #expect(ConfigValue.text(duration: .seconds(60)) == "60s")
        #expect(ConfigValue.text(duration: .seconds(120)) == "120s")
        #expect(ConfigValue.text(duration: .seconds(121)) == "121s")
        #expect(ConfigValue.text(duration: .seconds(180)) == "3m")
        #expect(ConfigValue.text(duration: .seconds(15 * 60)) == "15m")
        #expect(ConfigValue.text(duration: .seconds(3 * 3600)) == "3h")
        #expect(ConfigValue.text(duration: .seconds(7 * 86_400)) == "7d")
        #expect(ConfigValue.text(duration: .milliseconds(1500)) == "1500ms")
        #expect(ConfigValue.text(size: 256 << 20) == "256M")
        #expect(ConfigValue.text(size: 1 << 30) == "1G")
        #expect(ConfigValue.text(size: 1500) == "1500")
        #expect(ConfigValue.text(of: Optional<Duration>.none as Any) == "none")
        #expect(ConfigValue.text(of: Optional<Duration>.some(.seconds(7200)) as Any) == "2h")
    }

    /// For every key (those added later included): the printed value, applied to a fresh
    /// configuration, gives the value back.
    @Test("every key's printed value reads back to the same value")
    func everyKeyRoundTrips() async throws {
        try await withTemporaryDirectory { dir in
            let file = dir.appendingPathComponent("quaked.conf")
            // Not one default: each key's own spelling is exercised, not only its default's.
            try """
            feed = 4.5_week, file:///srv/feeds/local.geojson
            feed = significant_day
            interval = 90
            state-directory = /srv/quakes
            socket = /srv/run/q.sock
            socket-group = none
            admin-group = wheel
            history-max-age = 36h
            history-hard-max-age = 0.5w
            event-retention = 365d
            log-level = DEBUG
            connect-timeout = 1500ms
            total-timeout = 300
            max-feed-size = 1536K
            retry-initial-delay = 2s
            retry-max-delay = 1h
            max-connections = 12
            message-timeout = 2.5s
            write-timeout = 1m
            """.write(to: file, atomically: true, encoding: .utf8)
            let configured = try ConfigurationLoader(configFile: file.path, environment: [:], defaults: defaults)
                .load()
            #expect(configured.text(for: .feed) == ["4.5_week", "file:///srv/feeds/local.geojson", "significant_day"])
            #expect(configured.text(for: .historyHardMaxAge) == ["84h"])
            #expect(configured.text(for: .maxFeedSize) == ["1536K"])
            #expect(configured.text(for: .socketGroup) == ["none"])
            #expect(configured.text(for: .logLevel) == ["debug"])
            for original in [DaemonConfiguration(defaults: defaults), configured] {
                var rebuilt = DaemonConfiguration(defaults: DefaultPaths(environment: [:], isRoot: true))
                for key in DaemonConfiguration.Key.allCases {
                    let texts = original.text(for: key)
                    #expect(!texts.isEmpty, "\(key.rawValue) prints no value")
                    for (index, text) in texts.enumerated() {
                        try rebuilt.apply(key, text, source: "test", replaceFeeds: index == 0)
                    }
                    #expect(rebuilt.text(for: key) == texts, "\(key.rawValue) does not read back")
                }
                #expect(rebuilt == original)
            }
        }
    }

    // MARK: - Sources

    @Test("each value names its source: flag, environment, file line or default")
    func sources() async throws {
        try await withTemporaryDirectory { dir in
            let file = dir.appendingPathComponent("quaked.conf")
            try """
            # two feeds on two lines
            feed = 4.5_week
            feed = significant_day all_hour
            interval = 5m
            log-level = debug
            """.write(to: file, atomically: true, encoding: .utf8)
            let loader = ConfigurationLoader(
                flags: [(.logLevel, "error", "--log-level")], configFile: file.path,
                environment: ["QUAKED_INTERVAL": "2m", "QUAKED_MAX_CONNECTIONS": "9"], defaults: defaults)
            let resolved = try loader.resolve()
            #expect(resolved.file == file.path)
            let all = resolved.entries
            func entries(_ key: String) -> [ResolvedConfiguration.Entry] { all.filter { $0.key == key } }
            #expect(
                entries("feed").map(\.source) == ["\(file.path):2", "\(file.path):3", "\(file.path):3"])
            #expect(entries("feed").map(\.value) == ["4.5_week", "significant_day", "all_hour"])
            #expect(entries("interval").map(\.source) == ["QUAKED_INTERVAL"])
            #expect(entries("interval").map(\.value) == ["120s"])
            #expect(entries("log-level").map(\.source) == ["--log-level"])
            #expect(entries("max-connections").map(\.value) == ["9"])
            #expect(entries("retry-max-delay").map(\.source) == ["default"])
            #expect(entries("state-directory").map(\.source) == ["default (no $XDG_STATE_HOME)"])
            #expect(entries("socket").map(\.source) == ["default (no $XDG_RUNTIME_DIR)"])
            // Every key, in Key order, each once (feed once per feed).
            var keys: [String] = []
            for entry in all where keys.last != entry.key { keys.append(entry.key) }
            #expect(keys == DaemonConfiguration.Key.allCases.map(\.rawValue))

            let service = ConfigurationLoader(
                configFile: file.path,
                environment: ["RUNTIME_DIRECTORY": "/run/quaked", "STATE_DIRECTORY": "/var/lib/q"])
            let serviceEntries = try service.resolve().entries
            #expect(serviceEntries.first { $0.key == "socket" }?.source == "default ($RUNTIME_DIRECTORY)")
            #expect(serviceEntries.first { $0.key == "state-directory" }?.source == "default ($STATE_DIRECTORY)")
        }
    }

    @Test("a rule between two keys names the source of the value found wrong")
    func relationErrorNamesTheSource() async throws {
        try await withTemporaryDirectory { dir in
            let file = dir.appendingPathComponent("quaked.conf")
            try "history-max-age = 2d\nhistory-hard-max-age = 1d\n".write(to: file, atomically: true, encoding: .utf8)
            let error = try #require(throws: ConfigurationError.self) {
                try ConfigurationLoader(configFile: file.path, environment: [:], defaults: defaults).resolve()
            }
            #expect(error.key == "history-hard-max-age")
            #expect(error.source == "\(file.path):2")
        }
    }

    // MARK: - quaked --check-config, a real process

    @Test("--check-config prints every key with its source, and the output reads back as a config file")
    func checkConfigText() async throws {
        try await withTemporaryDirectory { dir in
            let file = dir.appendingPathComponent("quaked.conf")
            try "# a comment\ninterval = 5m\nevent-retention = 30d\nfeed = 4.5_week\n".write(
                to: file, atomically: true, encoding: .utf8)
            let state = dir.appendingPathComponent("state")
            let socket = dir.appendingPathComponent("run/q.sock")
            let result = try await ChildProcess.run(
                BuiltProducts.path("quaked"),
                [
                    "--check-config", "--config", file.path, "--state-directory", state.path, "--socket", socket.path,
                    "--feed", "all_day", "--feed", "significant_week",
                ],
                environment: ["QUAKED_LOG_LEVEL": "warning", "QUAKED_MAX_FEED_SIZE": "1048576"])
            #expect(result.status == 0, "\(result.stderr)")
            #expect(result.stderr.isEmpty, "\(result.stderr)")
            let lines = result.stdout.split(separator: "\n").map(String.init)
            #expect(lines.first == "# configuration file: \(file.path)")
            // The lines of `key`, with the padding before the source's `#` made one space.
            func line(_ key: String) -> [String] {
                lines.filter { $0.hasPrefix("\(key) = ") }.map {
                    $0.replacingOccurrences(of: #" +#"#, with: " #", options: .regularExpression)
                }
            }
            #expect(line("feed") == ["feed = all_day # --feed", "feed = significant_week # --feed"])
            #expect(line("interval") == ["interval = 5m # \(file.path):2"])
            #expect(line("event-retention") == ["event-retention = 30d # \(file.path):3"])
            #expect(line("log-level") == ["log-level = warning # QUAKED_LOG_LEVEL"])
            #expect(line("max-feed-size") == ["max-feed-size = 1M # QUAKED_MAX_FEED_SIZE"])
            #expect(line("state-directory") == ["state-directory = \(state.path) # --state-directory"])
            #expect(line("socket") == ["socket = \(socket.path) # --socket"])
            #expect(line("retry-max-delay") == ["retry-max-delay = 15m # default"])
            #expect(line("socket-group") == ["socket-group = quake # default"])
            for key in DaemonConfiguration.Key.allCases {
                #expect(!line(key.rawValue).isEmpty, "no line for \(key.rawValue)")
            }
            // It checked; it made nothing.
            #expect(!FileManager.default.fileExists(atPath: state.path))
            #expect(!FileManager.default.fileExists(atPath: socket.deletingLastPathComponent().path))

            // Pasted back as the config file, with no flags and a clean environment of its own,
            // it gives the same values.
            let pasted = dir.appendingPathComponent("pasted.conf")
            try result.stdout.write(to: pasted, atomically: true, encoding: .utf8)
            let again = try await ChildProcess.run(
                BuiltProducts.path("quaked"), ["--check-config", "--config", pasted.path])
            #expect(again.status == 0, "\(again.stderr)")
            func values(_ output: String) -> [String] {
                output.split(separator: "\n").filter { !$0.hasPrefix("#") }.map {
                    String($0.split(separator: "#", maxSplits: 1)[0]).trimmingCharacters(in: .whitespaces)
                }
            }
            #expect(values(again.stdout) == values(result.stdout))
        }
    }

    @Test("--check-config --json: every key in order, with value and source")
    func checkConfigJSON() async throws {
        try await withTemporaryDirectory { dir in
            let file = dir.appendingPathComponent("quaked.conf")
            try "interval = 15m\n".write(to: file, atomically: true, encoding: .utf8)
            let result = try await ChildProcess.run(
                BuiltProducts.path("quaked"),
                ["--check-config", "--json", "--config", file.path, "--socket", "/x/q.sock"])
            #expect(result.status == 0, "\(result.stderr)")
            #expect(result.stdout.split(separator: "\n").count == 1)
            let object = try #require(
                try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any])
            #expect(object["configFile"] as? String == file.path)
            let settings = try #require(object["settings"] as? [[String: String]])
            #expect(settings.map { $0["key"] ?? "" } == DaemonConfiguration.Key.allCases.map(\.rawValue))
            #expect(
                settings.first { $0["key"] == "interval" } == [
                    "key": "interval", "value": "15m", "source": "\(file.path):1",
                ])
            #expect(
                settings.first { $0["key"] == "socket" } == [
                    "key": "socket", "value": "/x/q.sock", "source": "--socket",
                ])
            #expect(
                settings.first { $0["key"] == "feed" } == ["key": "feed", "value": "all_month", "source": "default"])
        }
    }

    @Test("--check-config on an invalid value: 78, the key and its source on stderr, nothing on stdout")
    func checkConfigError() async throws {
        try await withTemporaryDirectory { dir in
            let file = dir.appendingPathComponent("quaked.conf")
            try "feed = all_week\nretry-max-delay = soon\n".write(to: file, atomically: true, encoding: .utf8)
            let result = try await ChildProcess.run(
                BuiltProducts.path("quaked"), ["--check-config", "--config", file.path])
            #expect(result.status == 78)
            #expect(result.stdout.isEmpty)
            #expect(
                result.stderr.contains("invalid configuration: retry-max-delay (\(file.path):2)"), "\(result.stderr)")

            let flag = try await ChildProcess.run(
                BuiltProducts.path("quaked"), ["--check-config", "--json", "--config", "/dev/null", "--interval", "0"])
            #expect(flag.status == 78)
            #expect(flag.stdout.isEmpty)
            #expect(flag.stderr.contains("interval (--interval)"), "\(flag.stderr)")

            let environment = try await ChildProcess.run(
                BuiltProducts.path("quaked"), ["--check-config", "--config", "/dev/null"],
                environment: ["QUAKED_SOCKET": "relative.sock"])
            #expect(environment.status == 78)
            #expect(environment.stderr.contains("socket (QUAKED_SOCKET)"), "\(environment.stderr)")

            let missing = try await ChildProcess.run(
                BuiltProducts.path("quaked"), ["--check-config", "--config", dir.appendingPathComponent("none").path])
            #expect(missing.status == 78)
            #expect(missing.stderr.contains("config ("), "\(missing.stderr)")
        }
    }

    @Test("--check-config goes with neither --once nor --check")
    func checkConfigAlone() async throws {
        for other in ["--once", "--check"] {
            let result = try await ChildProcess.run(
                BuiltProducts.path("quaked"), ["--check-config", other, "--config", "/dev/null"])
            #expect(result.status == 64, "\(other): \(result.stderr)")
            #expect(result.stderr.contains("cannot be combined"), "\(result.stderr)")
        }
    }

    // MARK: - One name per setting

    /// Every option of quaked, as ArgumentParser describes them (`--experimental-dump-help`).
    struct Option {
        var names: [String]
        var displayed: Bool
        var takesValue: Bool
    }

    static func quakedOptions() async throws -> [Option] {
        let dump = try await ChildProcess.run(BuiltProducts.path("quaked"), ["--experimental-dump-help"])
        #expect(dump.status == 0, "\(dump.stderr)")
        let root = try #require(try JSONSerialization.jsonObject(with: Data(dump.stdout.utf8)) as? [String: Any])
        let command = try #require(root["command"] as? [String: Any])
        let arguments = try #require(command["arguments"] as? [[String: Any]])
        return arguments.compactMap { argument in
            let names = (argument["names"] as? [[String: Any]] ?? []).compactMap { name -> String? in
                guard name["kind"] as? String == "long", let text = name["name"] as? String else { return nil }
                return "--" + text
            }
            guard !names.isEmpty else { return nil }
            return Option(
                names: names, displayed: argument["shouldDisplay"] as? Bool ?? true,
                takesValue: argument["kind"] as? String == "option")
        }
    }

    /// Which key an option sets, asked of quaked itself: the key whose source is the option, or
    /// the key an error names with the option as its source. Nil for options that set no key.
    static func keySet(by option: String) async throws -> String? {
        // A value some keys reject and others take; either way quaked says which key it was.
        let result = try await ChildProcess.run(
            BuiltProducts.path("quaked"), ["--check-config", "--json", "--config", "/dev/null", option, "zz-not-valid"])
        if result.status == 0 {
            let object = try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any]
            let settings = object?["settings"] as? [[String: String]] ?? []
            return settings.first { $0["source"] == option }?["key"]
        }
        let pattern = "invalid configuration: ([a-z-]+) \\(\(option)\\)"
        guard let match = result.stderr.range(of: pattern, options: .regularExpression) else { return nil }
        return String(result.stderr[match].dropFirst("invalid configuration: ".count).split(separator: " ")[0])
    }

    @Test("every option that sets a key is spelled --<key>; the only others are hidden aliases")
    func optionNamesAreKeys() async throws {
        let options = try await Self.quakedOptions()
        #expect(options.contains { $0.names == ["--interval"] }, "cannot read quaked's options")
        let keys = Set(DaemonConfiguration.Key.allCases.map(\.rawValue))
        var setters: [String: [Option]] = [:]
        for option in options where option.takesValue {
            for name in option.names {
                guard let key = try await Self.keySet(by: name) else { continue }
                #expect(keys.contains(key), "\(name) sets \(key), which is not a key")
                setters[key, default: []].append(option)
            }
        }
        #expect(setters.keys.contains("state-directory") && setters.keys.contains("socket"))
        for (key, options) in setters {
            let shown = options.filter(\.displayed)
            #expect(
                shown.count == 1 && shown[0].names == ["--\(key)"],
                "the option for \(key) is not --\(key) alone: \(shown.map(\.names))")
            for alias in options where !alias.displayed {
                #expect(alias.names != ["--\(key)"])
            }
        }
        // And --config, which names the file, sets no key.
        #expect(try await Self.keySet(by: "--config") == nil)
    }

    @Test("--state-dir still works, as a hidden alias of --state-directory")
    func stateDirAlias() async throws {
        try await withTemporaryDirectory { dir in
            let help = try await ChildProcess.run(BuiltProducts.path("quaked"), ["--help"])
            #expect(help.stdout.contains("--state-directory <dir>"))
            #expect(!help.stdout.contains("--state-dir "))
            let alias = try await ChildProcess.run(
                BuiltProducts.path("quaked"), ["--check-config", "--config", "/dev/null", "--state-dir", dir.path])
            #expect(alias.status == 0, "\(alias.stderr)")
            #expect(alias.stdout.contains("state-directory = \(dir.path)"))
            #expect(alias.stdout.contains("# --state-dir\n"))
            let both = try await ChildProcess.run(
                BuiltProducts.path("quaked"),
                ["--check-config", "--config", "/dev/null", "--state-dir", dir.path, "--state-directory", dir.path])
            #expect(both.status == 64)
            #expect(both.stderr.contains("--state-dir is the old name of --state-directory"))
        }
    }
}
