import QuakeProtocol
import Foundation
import QuakeDaemon
import QuakedCLI
import QuakeTestSupport
import Varlink
import Testing

/// The man pages in `man/` and the files in `packaging/` against the code, so they cannot drift:
/// every option `--help` prints has its own item in the right page (and for quakectl, under the
/// right command) and no item documents a gone option; every configuration key and its
/// environment variable is in quaked.conf(5) and in the shipped default config; the paths and
/// groups of the units are the code's.
@Suite struct ManPageTests {
    static let manDirectory = Fixtures.packageRoot.appendingPathComponent("man")
    static let packagingDirectory = Fixtures.packageRoot.appendingPathComponent("packaging")
    static let pages = ["quaked.8", "quakectl.1", "quaked.conf.5"]

    // MARK: - quaked(8)

    @Test func everyQuakedOptionIsInQuaked8() async throws {
        let help = try await Self.help(BuiltProducts.path("quaked"), [])
        let options = HelpText.options(in: help)
        #expect(options.contains("--feed") && options.contains("--help"), "cannot read the options of: \(help)")
        let page = try Self.page("quaked.8")
        let items = Mdoc.itemFlags(in: Mdoc.section("OPTIONS", of: page))
        for option in options {
            #expect(items.contains(option), "quaked.8 OPTIONS has no item `.It Fl \(option.dropFirst())`")
        }
        // And the other way round: nothing documented that quaked no longer takes.
        for flag in items {
            #expect(options.contains(flag), "quaked.8 documents \(flag), which quaked --help does not list")
        }
    }

    @Test func quaked8PointsAtTheInterfaceAndStatesTheSecurityModel() throws {
        let page = try Self.page("quaked.8")
        let protocolSection = Mdoc.section("PROTOCOL", of: page)
        #expect(protocolSection.contains("io.quaked.varlink"))
        #expect(protocolSection.contains("GetInterfaceDescription"))
        let interface = Fixtures.packageRoot.appendingPathComponent("Sources/QuakeProtocol/io.quaked.varlink")
        #expect(FileManager.default.fileExists(atPath: interface.path))
        // Every method of the interface is named.
        let methods = try String(contentsOf: interface, encoding: .utf8)
            .split(separator: "\n").filter { $0.hasPrefix("method ") }
            .compactMap { $0.dropFirst("method ".count).split(separator: "(").first.map(String.init) }
        #expect(!methods.isEmpty)
        for method in methods {
            #expect(protocolSection.contains("Sy \(method)"), "quaked.8 PROTOCOL does not name the method \(method)")
        }
        let security = Mdoc.section("SECURITY", of: page)
        let configuration = DaemonConfiguration()
        for fact in [
            "0660", "Sy Delete", "Sy Reload", "SO_PEERCRED", configuration.socketGroup, configuration.adminGroup,
        ] {
            let fact = try #require(fact)
            #expect(security.contains(fact), "quaked.8 SECURITY does not mention \(fact)")
        }
    }

    // MARK: - quakectl(1)

    @Test func everyQuakectlCommandAndOptionIsInQuakectl1() async throws {
        let quakectl = BuiltProducts.path("quakectl")
        let rootHelp = try await Self.help(quakectl, [])
        let commands = HelpText.subcommands(in: rootHelp)
        #expect(commands.contains("watch") && commands.contains("reload"), "cannot read the commands of: \(rootHelp)")

        let page = try Self.page("quakectl.1")
        let entries = Mdoc.commandEntries(in: Mdoc.section("COMMANDS", of: page))
        let commonItems = Mdoc.itemFlags(in: Mdoc.section("OPTIONS", of: page))

        var optionsByCommand: [String: [String]] = [:]
        var filterFlags = Set<String>()
        var displayFlags = Set<String>()
        for command in commands {
            let help = try await Self.help(quakectl, [command])
            optionsByCommand[command] = HelpText.options(in: help)
            filterFlags.formUnion(HelpText.options(in: help, section: "FILTERS"))
            displayFlags.formUnion(HelpText.options(in: help, section: "DISPLAY"))
        }
        // The filter flags, shared by list, export and watch, are documented once, under FILTERS.
        #expect(filterFlags.contains("--min-mag") && filterFlags.contains("--box"))
        let filterItems = Mdoc.itemFlags(in: Mdoc.section("FILTERS", of: page))
        for flag in filterFlags.sorted() {
            #expect(filterItems.contains(flag), "quakectl.1 FILTERS has no item `.It Fl \(flag.dropFirst())`")
        }
        for flag in filterItems {
            #expect(filterFlags.contains(flag), "quakectl.1 FILTERS documents \(flag), which no command takes")
        }
        // So are the display flags (--tz, --units) of list, show, watch, history and status, under DISPLAY.
        #expect(displayFlags.contains("--tz") && displayFlags.contains("--units"))
        let displayItems = Mdoc.itemFlags(in: Mdoc.section("DISPLAY", of: page))
        for flag in displayFlags.sorted() {
            #expect(displayItems.contains(flag), "quakectl.1 DISPLAY has no item `.It Fl \(flag.dropFirst())`")
        }
        for flag in displayItems {
            #expect(displayFlags.contains(flag), "quakectl.1 DISPLAY documents \(flag), which no command takes")
        }
        // Options every command takes (--socket, --json, ...) are documented once, under OPTIONS;
        // `bridge`, which only carries bytes, takes --socket alone and documents it under itself.
        let clients = optionsByCommand.filter { $0.key != "bridge" }.values.map(Set.init)
        let common = clients.reduce(Set(optionsByCommand[commands[0]] ?? [])) { $0.intersection($1) }
        #expect(common.contains("--host"))
        #expect(common.contains("--socket"))
        for option in common.union(HelpText.options(in: rootHelp)).sorted() {
            #expect(commonItems.contains(option), "quakectl.1 OPTIONS has no item `.It Fl \(option.dropFirst())`")
        }
        for command in commands {
            let entry = try #require(entries[command], "quakectl.1 COMMANDS has no entry `.It Cm \(command)`")
            let items = Mdoc.itemFlags(in: entry)
            for option in optionsByCommand[command, default: []] where !common.contains(option) {
                #expect(
                    items.contains(option), "quakectl.1 has no item `.It Fl \(option.dropFirst())` under \(command)")
            }
            for flag in items {
                #expect(
                    optionsByCommand[command, default: []].contains(flag),
                    "quakectl.1 documents \(flag) under \(command), which `quakectl \(command) --help` does not list")
            }
        }
        for documented in entries.keys where documented != "help" {
            #expect(commands.contains(documented), "quakectl.1 documents a command \(documented) that quakectl lacks")
        }
    }

    // MARK: - quaked.conf(5) and the default configuration file

    @Test func everyConfigurationKeyIsInQuakedConf5() throws {
        let keys = Mdoc.section("KEYS", of: try Self.page("quaked.conf.5"))
        var documented: Set<String> = []
        for line in keys.split(separator: "\n") where line.hasPrefix(".It Cm ") {
            documented.insert(String(line.split(separator: " ")[2]))
        }
        for key in DaemonConfiguration.Key.allCases {
            #expect(documented.contains(key.rawValue), "quaked.conf.5 KEYS has no `.It Cm \(key.rawValue)`")
            #expect(keys.contains("Ev \(key.environmentName)"), "quaked.conf.5 does not name \(key.environmentName)")
        }
        let known = Set(DaemonConfiguration.Key.allCases.map(\.rawValue))
        #expect(documented.subtracting(known).isEmpty, "quaked.conf.5 documents unknown keys")
    }

    /// quaked.conf(5) gives each key's default by value, as the configuration writes it: the
    /// defaults live in ``DaemonConfiguration`` only. Keys whose default is a rule (the paths)
    /// rather than one `.Li` value are left out.
    @Test func quakedConf5GivesEveryDefaultByValue() throws {
        let keys = Mdoc.section("KEYS", of: try Self.page("quaked.conf.5")).split(separator: "\n").map(String.init)
        let defaults = DaemonConfiguration(defaults: DefaultPaths(environment: [:], isRoot: true))
        var checked = 0
        var key: DaemonConfiguration.Key?
        for (i, line) in keys.enumerated() {
            if line.hasPrefix(".It Cm ") { key = DaemonConfiguration.Key(rawValue: String(line.split(separator: " ")[2])) }
            guard let key, line == "Default:", i + 1 < keys.count, keys[i + 1].hasPrefix(".Li ") else { continue }
            let documented = keys[i + 1].dropFirst(4).split(separator: " ").filter { $0 != "." && $0 != "," }
            // Read as the configuration reads it (metrics-listen's `off` is its `none`).
            var read = defaults
            try read.apply(key, documented.joined(separator: " "), source: "quaked.conf.5")
            #expect(read == defaults, "quaked.conf.5: \(key.rawValue) default \(documented)")
            checked += 1
        }
        #expect(checked >= DaemonConfiguration.Key.allCases.count - 2)
    }

    /// `quaked --help` gives the defaults of the configuration.
    @Test func quakedHelpGivesTheConfigurationsDefaults() {
        let help = QuakedCommand.helpMessage(columns: 1000)
        let defaults = DaemonConfiguration()
        for key in [DaemonConfiguration.Key.feed, .interval, .logLevel] {
            #expect(help.contains("Default: \(defaults.text(for: key).joined(separator: " "))."), "\(key.rawValue)")
        }
    }

    @Test func theDefaultConfigFileShowsEveryKeyCommentedOut() throws {
        let file = Self.packagingDirectory.appendingPathComponent("etc/quaked.conf")
        let lines = try String(contentsOf: file, encoding: .utf8).split(separator: "\n")
        // By value: each key's commented-out value, read as the configuration reads it, is its
        // default as root has it.
        let defaults = DaemonConfiguration(defaults: DefaultPaths(environment: [:], isRoot: true))
        for key in DaemonConfiguration.Key.allCases {
            let line = lines.first { $0.hasPrefix("#\(key.rawValue) = ") }
            #expect(line != nil, "etc/quaked.conf lacks `#\(key.rawValue) = `")
            guard let line else { continue }
            var read = defaults
            try read.apply(key, String(line.dropFirst(key.rawValue.count + 4)), source: "etc/quaked.conf")
            #expect(read == defaults, "etc/quaked.conf: \(line)")
        }
        // Nothing is set: the file changes no default (and so always loads).
        #expect(!lines.contains { !$0.hasPrefix("#") && !$0.trimmingCharacters(in: .whitespaces).isEmpty })
        let loader = ConfigurationLoader(configFile: file.path, environment: [:])
        #expect(try loader.load() == DaemonConfiguration(defaults: loader.defaults))
    }

    // MARK: - The units agree with the code

    @Test func theUnitsUseTheCodesPathsAndGroups() throws {
        func read(_ path: String) throws -> String {
            try String(contentsOf: Self.packagingDirectory.appendingPathComponent(path), encoding: .utf8)
        }
        func value(_ key: String, in unit: String) -> String? {
            unit.split(separator: "\n").first { $0.hasPrefix("\(key)=") }.map { String($0.dropFirst(key.count + 1)) }
        }
        let service = try read("systemd/quaked.service")
        let socket = try read("systemd/quaked.socket")
        let defaults = DaemonConfiguration()
        // With RuntimeDirectory=quaked the daemon binds where the socket unit listens.
        let runtime = try #require(value("RuntimeDirectory", in: service))
        let underSystemd = DefaultPaths(environment: ["RUNTIME_DIRECTORY": "/run/\(runtime)"], isRoot: false)
        #expect(value("ListenStream", in: socket) == underSystemd.socketPath)
        #expect(value("ListenStream", in: socket) == DefaultPaths(environment: [:], isRoot: true).socketPath)
        #expect(value("SocketGroup", in: socket) == defaults.socketGroup)
        #expect(value("SocketMode", in: socket) == "0660")
        #expect(value("Group", in: service) == defaults.socketGroup)
        #expect(value("ExecStart", in: service) == "/usr/bin/quaked")
        #expect(value("ExecReload", in: service) == "/usr/bin/quakectl reload")
        #expect(value("RestartPreventExitStatus", in: service) == "78")
        #expect(
            value("StateDirectory", in: service).map { "/var/lib/\($0)" }
                == DefaultPaths(environment: [:], isRoot: true).stateDirectory)
        #expect(value("PrivateUsers", in: service) == nil, "PrivateUsers= hides peer credentials (SO_PEERCRED)")

        let sysusers = try read("sysusers.d/quaked.conf")
        for group in [defaults.socketGroup, defaults.adminGroup] {
            let group = try #require(group)
            #expect(
                sysusers.split(separator: "\n").contains {
                    Array($0.split(separator: " ").prefix(2)) == ["g", Substring(group)]
                },
                "sysusers.d/quaked.conf does not create the group \(group)")
        }
        #expect(value("RuntimeDirectoryPreserve", in: service) == "yes", "a stop would delete quaked.socket's socket")
    }

    // MARK: - mandoc

    static let mandoc = ["/usr/bin/mandoc", "/usr/local/bin/mandoc"].first {
        FileManager.default.isExecutableFile(atPath: $0)
    }

    @Test(.enabled(if: mandoc != nil, "mandoc is not installed (apt-get install mandoc; scripts/check-packaging does)"))
    func mandocFindsNoWarnings() async throws {
        let paths = Self.pages.map { Self.manDirectory.appendingPathComponent($0).path }
        let result = try await ChildProcess.run(try #require(Self.mandoc), ["-Tlint", "-W", "warning"] + paths)
        #expect(result.status == 0, "mandoc -Tlint -W warning:\n\(result.stdout)\(result.stderr)")
        #expect(result.stdout.isEmpty && result.stderr.isEmpty, "\(result.stdout)\(result.stderr)")
    }

    // MARK: - Helpers

    static func page(_ name: String) throws -> String {
        try String(contentsOf: manDirectory.appendingPathComponent(name), encoding: .utf8)
    }

    static func help(_ executable: String, _ arguments: [String]) async throws -> String {
        let result = try await ChildProcess.run(executable, arguments + ["--help"], environment: ["COLUMNS": "80"])
        #expect(result.status == 0, "\(executable) \(arguments) --help: \(result.stderr)")
        return result.stdout
    }
}

/// Reads swift-argument-parser's `--help` layout.
enum HelpText {
    /// The lines of one section (`OPTIONS:`, `SUBCOMMANDS:`), up to the next heading.
    static func section(_ heading: String, in help: String) -> [Substring] {
        var lines: [Substring] = []
        var inside = false
        for line in help.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasSuffix(":"), let first = line.first, first.isUppercase {
                inside = line == "\(heading):"
            } else if inside {
                lines.append(line)
            }
        }
        return lines
    }

    /// The flags defined in OPTIONS: `  -o, --output <file>   Write ...` gives `-o` and `--output`.
    static func options(in help: String) -> [String] {
        options(in: help, section: "OPTIONS")
    }

    /// The flags of one section of a help text (`FILTERS`: the filter flags of list, export and
    /// watch).
    static func options(in help: String, section heading: String) -> [String] {
        var options: [String] = []
        for line in section(heading, in: help) where line.hasPrefix("  -") {
            let synopsis = line.dropFirst(2).components(separatedBy: "  ").first ?? ""
            for part in synopsis.components(separatedBy: ", ") {
                let flag = part.split(separator: " ").first.map(String.init) ?? ""
                if flag.hasPrefix("-") { options.append(flag) }
            }
        }
        return options
    }

    /// Command names in SUBCOMMANDS: `  watch                   Print ...`.
    static func subcommands(in help: String) -> [String] {
        // A command's line is its name, two or more spaces and its abstract; the closing
        // "See 'quakectl help <subcommand>' ..." has single spaces only.
        section("SUBCOMMANDS", in: help).compactMap { line in
            guard line.hasPrefix("  "), !line.hasPrefix("   ") else { return nil }
            let columns = line.dropFirst(2).components(separatedBy: "  ")
            guard columns.count > 1, let name = columns.first, !name.contains(" ") else { return nil }
            return name
        }
    }
}

/// Reads the mdoc source of the man pages.
enum Mdoc {
    /// The text of `.Sh NAME` up to the next `.Sh`.
    static func section(_ name: String, of page: String) -> String {
        var lines: [Substring] = []
        var inside = false
        for line in page.split(separator: "\n") {
            if line.hasPrefix(".Sh ") {
                inside = line.dropFirst(4).trimmingCharacters(in: CharacterSet(charactersIn: "\" ")) == name
            } else if inside {
                lines.append(line)
            }
        }
        return lines.joined(separator: "\n")
    }

    /// The entries of a command list, by command: from `.It Cm watch ...` to the next `.It Cm`.
    static func commandEntries(in section: String) -> [String: String] {
        var entries: [String: String] = [:]
        var current: String?
        for line in section.split(separator: "\n") {
            if line.hasPrefix(".It Cm ") {
                current = String(line.split(separator: " ")[2])
            }
            if let current { entries[current, default: ""] += line + "\n" }
        }
        return entries
    }

    /// The flags a list documents as items, as the page prints them: `.It Fl -feed Ar url` gives
    /// `--feed`; `.It Fl o Ar file , Fl -output Ar file` gives `-o` and `--output`.
    static func itemFlags(in text: String) -> [String] {
        var flags: [String] = []
        for line in text.split(separator: "\n") where line.hasPrefix(".It Fl ") {
            let words = line.split(separator: " ")
            for (index, word) in words.enumerated() where word == "Fl" && index + 1 < words.count {
                flags.append("-" + words[index + 1])
            }
        }
        return flags
    }
}
