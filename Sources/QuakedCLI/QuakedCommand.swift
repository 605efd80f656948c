import ArgumentParser
import AsyncHTTPClient
import Foundation
import QuakeDaemon
import QuakeStore

/// `quaked`: the earthquake feed sync daemon.
public struct QuakedCommand: AsyncParsableCommand {
    public static let configuration = CommandConfiguration(
        commandName: "quaked",
        abstract: "Keep a local SQLite store in step with the USGS real-time earthquake feeds.",
        discussion: """
            quaked pulls the USGS GeoJSON summary feeds, imports them without duplicates into \
            <state-dir>/quakes.sqlite, and records every change in a persistent history with tokens.
            """,
        version: QuakedVersion.string)

    @Flag(help: "Pull each feed once, import it, print a summary and exit.")
    var once = false

    @Option(
        name: .customLong("feed"),
        help: ArgumentHelp(
            "A USGS summary feed name (all_month, 4.5_week, significant_day, ...) or an https, http or file URL. Repeatable.",
            valueName: "url|name"))
    var feeds: [String] = []

    @Option(help: ArgumentHelp("Directory holding quakes.sqlite.", valueName: "dir"))
    var stateDir: String?

    @Flag(help: "With --once: print the result as one JSON object per feed.")
    var json = false

    public init() {}

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

    public func validate() throws {
        for feed in feeds {
            do { _ = try FeedSource(parsing: feed) } catch { throw ValidationError("\(error)") }
        }
    }

    public func run() async throws {
        let sources = try (feeds.isEmpty ? ["all_month"] : feeds).map(FeedSource.init(parsing:))
        let stateDirectory = stateDir ?? DefaultPaths().stateDirectory
        let store: QuakeStore
        do {
            store = try QuakeStore(directory: URL(fileURLWithPath: stateDirectory))
        } catch {
            FileHandle.standardError.write(Data("quaked: cannot open the store in \(stateDirectory): \(error)\n".utf8))
            throw ExitCode(1)
        }
        defer { try? store.close() }
        try await OnceRun(store: store, sources: sources, json: json).run()
    }
}
