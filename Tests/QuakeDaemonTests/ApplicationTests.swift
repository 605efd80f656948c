import Foundation
import Logging
import QuakeDaemon
import QuakeProtocol
import QuakeStore
import QuakeTestSupport
import Testing

/// quaked's components built in-process by the function `main` (the daemon and `--once`) uses.
@Suite struct ApplicationTests {
    /// A loader of exactly these flags: no config file, no QUAKED_ environment.
    static func loader(_ flags: [(DaemonConfiguration.Key, String)], in dir: URL) -> ConfigurationLoader {
        ConfigurationLoader(
            flags: flags.map { (key: $0.0, value: $0.1, flag: "--\($0.0.rawValue)") }, configFile: "/dev/null",
            environment: [:], defaults: DefaultPaths(environment: ["HOME": dir.path]))
    }

    @Test("the built components pull every feed once and export every family their series make")
    func buildPullAndExport() async throws {
        try await withTemporaryDirectory { dir in
            let fixture = Fixtures.usgs("rodu__quakemap__all_day.geojson")
            let loader = Self.loader([(.feed, fixture.absoluteString), (.stateDirectory, dir.path)], in: dir)
            let configuration = try loader.load()
            let app = try QuakedApplication.build(
                configuration: configuration, loader: loader, logger: Logger(label: "test") { _ in SwiftLogNoOpLogHandler() })
            let results = await app.pullEveryFeedOnce()
            #expect(results.count == 1)
            let (status, result) = try #require(results.first)
            guard case .imported(let report, _) = result else {
                Issue.record("the file feed was not imported: \(result)")
                return
            }
            let expected = try FeedDocument(contentsOf: fixture).ids.count
            #expect(report.inserted == expected)
            #expect(status.lastResult == .imported && status.consecutiveFailures == 0 && status.failure == nil)
            #expect(try app.store.count() == expected)
            #expect(try app.status().feeds.first?.lastImport?.inserted == expected, "GetStatus shows the pull")

            // Every family a populated registry has, but those made on first use (a successful
            // catalog run, a named client, a call of the daemon's control server) or per configured
            // source (none here).
            let families = try Exposition(app.exporter.text()).types
            let lazy: Set = [
                "quaked_catalog_last_success_timestamp_seconds", "quaked_client_lag_transactions",
                "quaked_client_lag_seconds", "quaked_client_last_seen_timestamp_seconds", "quaked_varlink_calls_total",
                "quaked_source_runs_total", "quaked_source_reports_total", "quaked_source_skipped_events_total",
                "quaked_source_last_success_timestamp_seconds",
            ]
            let all = try QuakedMetricsTests.families()
            #expect(Set(families.keys) == Set(all.keys).subtracting(lazy))
            #expect(families == all.filter { !lazy.contains($0.key) }, "each family has the same type")
            let exposition = try Exposition(app.exporter.text())
            #expect(exposition.value("quaked_pulls_total", ["feed": fixture.absoluteString, "result": "imported"]) == 1)
            #expect(exposition.value("quaked_quakes") == Double(expected))
            try await app.shutdown()
        }
    }
}
