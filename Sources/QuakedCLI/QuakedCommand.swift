import ArgumentParser
import Foundation
import Varlink
import Logging
import QuakeDaemon
import QuakeStore

/// `quaked`: the earthquake feed sync daemon.
public struct QuakedCommand: AsyncParsableCommand {
    public static let configuration = CommandConfiguration(
        commandName: "quaked",
        abstract: "Keep a local SQLite store in step with the USGS real-time earthquake feeds.",
        discussion: """
            quaked pulls the USGS GeoJSON summary feeds on a schedule, imports them without \
            duplicates into <state-directory>/quakes.sqlite, records every change in a persistent history \
            with tokens, and tells clients on its Unix socket (Varlink interface io.quaked) what \
            changed. Settings come from flags, then QUAKED_* environment variables, then the config \
            file, then built-in defaults; see quaked.conf(5). SIGHUP reloads the configuration; \
            --check-config shows what it would be.
            """,
        version: QuakedVersion.string)

    /// A key's default as the configuration writes it, for the help: the defaults live in
    /// ``DaemonConfiguration`` only.
    static func defaultText(_ key: DaemonConfiguration.Key) -> String {
        DaemonConfiguration().text(for: key).joined(separator: " ")
    }

    @Option(
        name: .customLong("feed"),
        help: ArgumentHelp(
            "A USGS summary feed name (all_month, 4.5_week, significant_day, ...) or an https, http or file URL. Repeatable. Default: \(Self.defaultText(.feed)).",
            valueName: "url|name"))
    var feeds: [String] = []

    @Option(
        name: .customLong("source"),
        help: ArgumentHelp(
            "An agency to follow: 'NAME KIND URL [KEY=VALUE ...]', KIND fdsn, emsc or geonet (see quaked.conf(5)). Repeatable; runs beside the summary feed and the catalog.",
            valueName: "source"))
    var sources: [String] = []

    @Option(
        name: .customLong("prefer"),
        help: ArgumentHelp(
            "A regional authority: 'AGENCY[,AGENCY...] region=REGION' (see quaked.conf(5)). Repeatable; an earlier one ranks first.",
            valueName: "preference"))
    var preferences: [String] = []

    @Option(help: ArgumentHelp("Pull interval, e.g. 60s or 5m. Default: \(Self.defaultText(.interval)).", valueName: "duration"))
    var interval: String?

    @Option(help: ArgumentHelp("Directory holding quakes.sqlite.", valueName: "dir"))
    var stateDirectory: String?

    /// The old name of `--state-directory`, still accepted; hidden, so that each setting has one
    /// name, its configuration key.
    @Option(name: .customLong("state-dir"), help: .hidden)
    var stateDirAlias: String?

    @Option(help: ArgumentHelp("Path of the control socket (Varlink).", valueName: "path"))
    var socket: String?

    @Option(
        help: ArgumentHelp(
            "Serve the merged catalog over HTTP (USGS summary feeds, FDSN event service; /metrics too unless metrics-listen is another address) on ADDRESS:PORT, or off. Default: \(Self.defaultText(.httpListen)).",
            valueName: "address:port"))
    var httpListen: String?

    @Option(
        help: ArgumentHelp(
            "Configuration file. Default: \(ConfigurationLoader.defaultFile) when it exists.", valueName: "path"))
    var config: String?

    @Option(
        help: ArgumentHelp(
            "trace, debug, info, notice, warning, error or critical. Default: \(Self.defaultText(.logLevel)).",
            valueName: "level"))
    var logLevel: String?

    @Flag(help: "Pull each feed once, import it, print a summary and exit.")
    var once = false

    @Flag(
        help: "With --once: print the result as one JSON object per feed. With --check-config: print one JSON object."
    )
    var json = false

    @Flag(
        help: """
            Check the store's integrity and exit: the SQLite file, history against the rows (it \
            replays), and the alias index. Prints ok, or one problem per line and exits 1.
            """)
    var check = false

    @Flag(
        help: """
            Check the configuration (options, QUAKED_* environment, config file, defaults) and exit: \
            prints every key's effective value, in config-file syntax, and where it came from. \
            Exits 78 on an error. Starts nothing and creates nothing.
            """)
    var checkConfig = false

    public init() {}

    public func validate() throws {
        let modes = [("--once", once), ("--check", check), ("--check-config", checkConfig)].filter(\.1).map(\.0)
        if modes.count > 1 {
            throw ValidationError("\(modes.joined(separator: " and ")) cannot be combined")
        }
        if stateDirectory != nil, stateDirAlias != nil {
            throw ValidationError("--state-dir is the old name of --state-directory: give one of them")
        }
    }

    /// The entry point. Declared here so that `main.swift` gets the async path rather than
    /// ParsableCommand's synchronous `main()`, which refuses async commands outside `@main`.
    public static func runAsRoot() async {
        do {
            var command = try parseAsRoot()
            if var asyncCommand = command as? any AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
        } catch {
            exit(withError: error)
        }
    }

    /// The configuration sources these flags describe.
    var loader: ConfigurationLoader {
        var flags: [(key: DaemonConfiguration.Key, value: String, flag: String)] = feeds.map { (.feed, $0, "--feed") }
        flags += sources.map { (.source, $0, "--source") }
        flags += preferences.map { (.prefer, $0, "--prefer") }
        if let interval { flags.append((.interval, interval, "--interval")) }
        if let stateDirectory {
            flags.append((.stateDirectory, Self.absolute(stateDirectory), "--state-directory"))
        }
        if let stateDirAlias {
            flags.append((.stateDirectory, Self.absolute(stateDirAlias), "--state-dir"))
        }
        if let socket { flags.append((.socket, Self.absolute(socket), "--socket")) }
        if let logLevel { flags.append((.logLevel, logLevel, "--log-level")) }
        if let httpListen { flags.append((.httpListen, httpListen, "--http-listen")) }
        return ConfigurationLoader(flags: flags, configFile: config)
    }

    public func run() async throws {
        let loader = self.loader
        let resolved: ResolvedConfiguration
        do {
            resolved = try loader.resolve()
        } catch {
            Self.fail("\(error)", exitCode: 78)  // EX_CONFIG: systemd does not restart on it
        }
        let configuration = resolved.configuration
        if checkConfig {
            print(json ? CheckConfig.json(resolved) : CheckConfig.text(resolved), terminator: "")
            return
        }
        if check {
            try Self.checkStore(configuration)
            return
        }
        if once {
            try await OnceRun(configuration: configuration, loader: loader, json: json).run()
            return
        }
        QuakedLogging.bootstrap(level: configuration.logLevel, identifier: "quaked")
        let logger = Logger(label: "quaked")
        do {
            try await Daemon.run(
                loader: loader, configuration: configuration, socketDirectory: ControlSocket.Directory(resolved),
                logger: logger)
        } catch let error as ConfigurationError {
            Self.fail("\(error)", exitCode: 78)  // as for one found while loading
        } catch let error as MetricsListener.StartupError {
            logger.critical("quaked cannot run", metadata: ["error": "\(error)"])
            Self.fail("\(error)", exitCode: 78)  // a setting that cannot work, like a bad one
        } catch {
            logger.critical("quaked cannot run", metadata: ["error": "\(error)"])
            Self.fail("\(error)", exitCode: 1)
        }
    }

    static func openStore(_ configuration: DaemonConfiguration) throws -> QuakeStore {
        do {
            return try QuakeStore(directory: URL(fileURLWithPath: configuration.stateDirectory))
        } catch {
            fail("cannot open the store in \(configuration.stateDirectory): \(error)", exitCode: 1)
        }
    }

    /// `--check`: like SQLite's `PRAGMA integrity_check`, on a store that exists (never creates
    /// one). Safe beside a running daemon: one read transaction.
    static func checkStore(_ configuration: DaemonConfiguration) throws {
        let path = URL(fileURLWithPath: configuration.stateDirectory).appendingPathComponent(QuakeStore.fileName).path
        guard FileManager.default.fileExists(atPath: path) else {
            fail("no store to check: \(path) does not exist", exitCode: 1)
        }
        let store = try openStore(configuration)
        defer { try? store.close() }
        let problems: [String]
        do {
            problems = try store.checkIntegrity()
        } catch {
            fail("cannot check the store in \(configuration.stateDirectory): \(error)", exitCode: 1)
        }
        if problems.isEmpty {
            print("ok")
            return
        }
        for problem in problems { print(problem) }
        throw ExitCode(1)
    }

    static func fail(_ message: String, exitCode: Int32) -> Never {
        FileHandle.standardError.write(Data("quaked: \(message)\n".utf8))
        Foundation.exit(exitCode)
    }

    private static func absolute(_ path: String) -> String {
        path.hasPrefix("/") ? path : FileManager.default.currentDirectoryPath + "/" + path
    }
}
