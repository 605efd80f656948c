import ArgumentParser
import Foundation
import QuakeDaemon
import QuakeTestSupport
import Testing

@testable import QuakedCLI

/// quaked's command line in process: what its flags become, and the combinations it refuses. The
/// binary itself is run by QuakeDaemonTests (OnceTests, CheckConfigTests, the daemon suites).
@Suite struct QuakedCommandTests {
    /// The loader of `arguments`, reading no environment and the given file only.
    static func resolve(_ arguments: [String], configFile: String) throws -> ResolvedConfiguration {
        var loader = try QuakedCommand.parse(arguments).loader
        loader.environment = [:]
        loader.configFile = configFile
        return try loader.resolve()
    }

    @Test func flagsAreTheFirstSourceAndRelativePathsAreMadeAbsolute() async throws {
        try await withTemporaryDirectory { dir in
            let file = dir.appendingPathComponent("quaked.conf").path
            try "interval = 10m\nlog-level = warning\nfeed = all_day\n".write(toFile: file, atomically: true, encoding: .utf8)
            let resolved = try Self.resolve(
                ["--feed", "significant_week", "--feed", "4.5_day", "--interval", "5m", "--state-directory", "rel/store",
                 "--socket", "/run/q.sock"],
                configFile: file)
            let configuration = resolved.configuration
            #expect(configuration.feeds.map(\.name) == ["significant_week", "4.5_day"], "the flags replace the file's feed")
            #expect(configuration.interval == .seconds(300))
            #expect(configuration.logLevel == .warning, "what no flag sets comes from the file")
            #expect(configuration.stateDirectory == FileManager.default.currentDirectoryPath + "/rel/store")
            #expect(configuration.socketPath == "/run/q.sock")
            #expect(resolved.sources[.interval] == ["--interval"])
            #expect(resolved.sources[.feed] == ["--feed", "--feed"])
            #expect(resolved.sources[.logLevel] == ["\(file):2"])
        }
    }

    @Test func theOldNameOfStateDirectoryStillWorks() async throws {
        try await withTemporaryDirectory { dir in
            let file = dir.appendingPathComponent("empty.conf").path
            try "".write(toFile: file, atomically: true, encoding: .utf8)
            let resolved = try Self.resolve(["--state-dir", "/var/lib/elsewhere"], configFile: file)
            #expect(resolved.configuration.stateDirectory == "/var/lib/elsewhere")
            #expect(resolved.sources[.stateDirectory] == ["--state-dir"])
        }
    }

    @Test(arguments: [
        (["--once", "--check"], "--once and --check cannot be combined"),
        (["--check", "--check-config"], "--check and --check-config cannot be combined"),
        (["--once", "--check", "--check-config"], "--once and --check and --check-config cannot be combined"),
        (["--state-dir", "/a", "--state-directory", "/b"], "--state-dir is the old name of --state-directory"),
    ])
    func refusedCombinations(_ arguments: [String], _ message: String) {
        #expect {
            _ = try QuakedCommand.parse(arguments)
        } throws: { error in
            QuakedCommand.message(for: error).contains(message)
        }
    }

    @Test func theHelpGivesTheConfigurationsDefaults() {
        let help = QuakedCommand.helpMessage(columns: 400)
        let defaults = DaemonConfiguration()
        #expect(help.contains("Default: \(defaults.text(for: .interval).joined(separator: " "))."))
        #expect(help.contains("Default: \(defaults.text(for: .feed).joined(separator: " "))."))
        #expect(help.contains("Default: \(defaults.text(for: .logLevel).joined(separator: " "))."))
    }
}
