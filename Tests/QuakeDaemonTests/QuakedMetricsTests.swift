import Foundation
import QuakeDaemon
import QuakeProtocol
import QuakeStore
import QuakeTestSupport
import Testing
import Varlink

/// The metrics' registry in-process (one per test: no global state), the shipped monitoring
/// examples, the socket unit and the docs against the series quaked exports.
@Suite struct QuakedMetricsTests {
    static let packaging = Fixtures.packageRoot.appendingPathComponent("packaging")

    /// The registry and the series each component registers in it (in the daemon, the scheduler,
    /// store maintenance, the history counter, the broadcaster, the control server, the backfill
    /// runner, the catalog sync and the sources make these).
    struct Registry {
        let metrics: QuakedMetrics
        let pulls: PullMetrics
        let store: StoreMetrics
        let history: HistoryCounters
        let broadcast: BroadcastMetrics
        let calls: CallMetrics
        let backfill: BackfillMetrics
        let catalog: CatalogMetrics
        let sources: SourceMetrics

        init(version: String) {
            metrics = QuakedMetrics(version: version)
            pulls = PullMetrics(metrics)
            store = StoreMetrics(metrics)
            history = HistoryCounters(metrics)
            broadcast = BroadcastMetrics(metrics)
            calls = CallMetrics(metrics)
            backfill = BackfillMetrics(metrics)
            catalog = CatalogMetrics(metrics)
            sources = SourceMetrics(metrics)
        }

        func text() -> String { metrics.text() }
    }

    /// A registry with every series present: a feed pulled, a client, a call, a notification.
    static func populated(clients: [ClientPosition] = [Self.client("watch")]) throws -> Registry {
        let metrics = Registry(version: "9.9.9")
        let feed = try FeedSource(parsing: "all_month")
        metrics.pulls.configureFeeds([feed.name])
        var report = ImportReport(store: "s", source: feed.url.absoluteString)
        report.bytes = 1234
        report.durationMs = 250
        metrics.pulls.record(feed: feed.name, result: .imported(report, httpStatus: 200), duration: .milliseconds(600))
        metrics.pulls.record(
            feed: feed.name, result: .failed(QuakedError(kind: .transport, message: "boom")), duration: .milliseconds(40))
        metrics.history.record([
            TransactionSummary(token: 1, author: .import, inserted: 10, updated: 2, deleted: 1),
            TransactionSummary(token: 2, author: .delete, inserted: 0, updated: 0, deleted: 3),
        ])
        metrics.calls.record(.init(method: IOQuaked.GetStatus.name, error: nil))
        metrics.calls.record(.init(method: nil, error: OrgVarlinkService.MethodNotFound.name))
        metrics.broadcast.recordNotification(latency: .microseconds(1500))
        metrics.backfill.recordWindow(events: 250)
        metrics.backfill.recordWindow(events: 120)
        metrics.catalog.recordRun(success: false, startedAt: Date(timeIntervalSince1970: 1_699_999_000))
        metrics.catalog.recordRun(success: true, startedAt: Date(timeIntervalSince1970: 1_699_999_900))
        metrics.sources.configureSources(["emsc"])
        metrics.sources.recordRun("emsc", success: false, startedAt: Date(timeIntervalSince1970: 1_699_999_000))
        metrics.sources.recordRun(
            "emsc", success: true, startedAt: Date(timeIntervalSince1970: 1_699_999_950), reports: 7, skipped: 1)
        var status = FeedStatus(feed: feed)
        status.lastSuccess = Date(timeIntervalSince1970: 1_700_000_000)
        status.consecutiveFailures = 1
        metrics.pulls.update([status])
        metrics.store.update(
            head: 2, oldest: 0, quakes: 9, databaseBytes: 4096, namedClients: clients.count, clients: clients,
            now: Date(timeIntervalSince1970: 1_700_000_100))
        metrics.broadcast.update(subscribers: 3)
        metrics.backfill.update(jobs: ["running": 1])
        return metrics
    }

    static func client(_ name: String, behind: Int = 2) -> ClientPosition {
        ClientPosition(
            name: name, token: 0, lastSeen: 1_700_000_050_000, transactionsBehind: behind,
            oldestUnacknowledged: behind > 0 ? 1_700_000_040_000 : nil)
    }

    /// Every family quaked exports (names as in `# TYPE`).
    static func families() throws -> [String: String] {
        try Exposition(try populated().text()).types
    }

    @Test func everySeriesHasItsValueAndHelp() throws {
        let text = try Self.populated().text()
        let metrics = try Exposition(text)
        let feed = "all_month"
        #expect(metrics.value("quaked_build_info", ["version": "9.9.9"]) == 1)
        #expect(metrics.value("quaked_pulls_total", ["feed": feed, "result": "imported"]) == 1)
        #expect(metrics.value("quaked_pulls_total", ["feed": feed, "result": "not_modified"]) == 0)
        #expect(metrics.value("quaked_pulls_total", ["feed": feed, "result": "failed"]) == 1)
        #expect(metrics.value("quaked_pull_duration_seconds_sum", ["feed": feed]) == 0.64)
        #expect(metrics.value("quaked_pull_duration_seconds_bucket", ["feed": feed, "le": "0.5"]) == 1)
        #expect(metrics.value("quaked_pull_duration_seconds_bucket", ["feed": feed, "le": "1.0"]) == 2)
        #expect(metrics.value("quaked_import_duration_seconds_sum", ["feed": feed]) == 0.25)
        #expect(metrics.value("quaked_pull_bytes_total", ["feed": feed]) == 1234)
        #expect(metrics.value("quaked_feed_last_success_timestamp_seconds", ["feed": feed]) == 1_700_000_000)
        #expect(metrics.value("quaked_feed_consecutive_failures", ["feed": feed]) == 1)
        #expect(metrics.value("quaked_history_changes_total", ["kind": "insert"]) == 10)
        #expect(metrics.value("quaked_history_changes_total", ["kind": "update"]) == 2)
        #expect(metrics.value("quaked_history_changes_total", ["kind": "delete"]) == 4)
        #expect(metrics.value("quaked_history_transactions_total", ["author": "import"]) == 1)
        #expect(metrics.value("quaked_history_transactions_total", ["author": "delete"]) == 1)
        #expect(metrics.value("quaked_history_head_token") == 2)
        #expect(metrics.value("quaked_quakes") == 9)
        #expect(metrics.value("quaked_database_bytes") == 4096)
        #expect(metrics.value("quaked_subscribers") == 3)
        #expect(metrics.value("quaked_named_clients") == 1)
        #expect(metrics.value("quaked_client_lag_transactions", ["client": "watch"]) == 2)
        #expect(metrics.value("quaked_client_lag_seconds", ["client": "watch"]) == 60)
        #expect(metrics.value("quaked_client_last_seen_timestamp_seconds", ["client": "watch"]) == 1_700_000_050)
        #expect(metrics.value("quaked_varlink_calls_total", ["method": IOQuaked.GetStatus.name, "error": "none"]) == 1)
        let methodNotFound = OrgVarlinkService.MethodNotFound.name
        #expect(metrics.value("quaked_varlink_calls_total", ["method": "unknown", "error": methodNotFound]) == 1)
        #expect(metrics.value("quaked_notification_latency_seconds_count") == 1)
        #expect(metrics.value("quaked_notification_latency_seconds_bucket", ["le": "0.0025"]) == 1)
        #expect(metrics.value("quaked_notification_latency_seconds_bucket", ["le": "0.001"]) == 0)
        #expect(metrics.value("quaked_backfill_windows_total") == 2)
        #expect(metrics.value("quaked_backfill_events_total") == 370)
        #expect(metrics.value("quaked_backfill_jobs", ["state": "running"]) == 1)
        #expect(metrics.value("quaked_backfill_jobs", ["state": "queued"]) == 0)
        #expect(metrics.value("quaked_catalog_runs_total", ["result": "success"]) == 1)
        #expect(metrics.value("quaked_catalog_runs_total", ["result": "failed"]) == 1)
        #expect(metrics.value("quaked_catalog_last_success_timestamp_seconds") == 1_699_999_900)
        #expect(metrics.value("quaked_source_runs_total", ["source": "emsc", "result": "success"]) == 1)
        #expect(metrics.value("quaked_source_runs_total", ["source": "emsc", "result": "failed"]) == 1)
        #expect(metrics.value("quaked_source_reports_total", ["source": "emsc"]) == 7)
        #expect(metrics.value("quaked_source_skipped_events_total", ["source": "emsc"]) == 1)
        #expect(metrics.value("quaked_source_last_success_timestamp_seconds", ["source": "emsc"]) == 1_699_999_950)
        // Every family has HELP and TYPE, once, and the families come sorted.
        let helps = text.split(separator: "\n").filter { $0.hasPrefix("# HELP ") }.map { $0.split(separator: " ")[2] }
        #expect(helps.count == metrics.types.count && Set(helps) == Set(metrics.types.keys.map { Substring($0) }))
        #expect(helps == helps.sorted())
    }

    @Test func promtoolAcceptsTheTextEvenWithAwkwardClientNames() async throws {
        try #require(Promtool.isInstalled, "promtool is not installed: run scripts/install-deps")
        let text = try Self.populated(clients: [Self.client(#"a "quoted" \ name"#), Self.client("ünïcode"), Self.client("b", behind: 0)]).text()
        let metrics = try Exposition(text)
        #expect(metrics.value("quaked_client_lag_transactions", ["client": #"a "quoted" \ name"#]) == 2)
        #expect(metrics.value("quaked_client_lag_seconds", ["client": "b"]) == 0)
        let check = try await Promtool.checkMetrics(text)
        #expect(check.status == 0, "\(check.output)\n\(text)")
        // And promtool does fail on what it must: a counter without HELP.
        let bad = try await Promtool.checkMetrics("# TYPE x_total counter\nx_total 1\n")
        #expect(bad.status != 0)
    }

    @Test func clientSeriesAreCappedAndGoWithTheirClient() throws {
        let many = (0..<(StoreMetrics.maxClientSeries + 20)).map { Self.client("c\($0)") }
        let metrics = try Self.populated(clients: many)
        var exposition = try Exposition(metrics.text())
        #expect(exposition.samples("quaked_client_lag_seconds").count == StoreMetrics.maxClientSeries)
        #expect(exposition.value("quaked_client_lag_seconds", ["client": "c0"]) != nil, "the first ones, as given")
        metrics.store.update(
            head: 2, oldest: 0, quakes: 9, databaseBytes: 1, namedClients: 1, clients: [Self.client("c5")])
        exposition = try Exposition(metrics.text())
        #expect(exposition.samples("quaked_client_lag_seconds").map { $0.labels["client"] } == ["c5"])
        #expect(exposition.samples("quaked_client_lag_transactions").count == 1)
        #expect(exposition.samples("quaked_client_last_seen_timestamp_seconds").count == 1)
        metrics.store.update(head: 2, oldest: 0, quakes: 9, databaseBytes: 1, namedClients: 0, clients: [])
        exposition = try Exposition(metrics.text())
        #expect(exposition.types["quaked_client_lag_seconds"] == nil, "no family without series")
    }

    @Test func aFeedRemovedByAReloadLosesItsGauges() throws {
        let metrics = try Self.populated()
        metrics.pulls.configureFeeds(["4.5_week"])
        let exposition = try Exposition(metrics.text())
        #expect(exposition.value("quaked_feed_consecutive_failures", ["feed": "4.5_week"]) == 0)
        #expect(exposition.value("quaked_feed_consecutive_failures", ["feed": "all_month"]) == nil)
        #expect(exposition.value("quaked_feed_last_success_timestamp_seconds", ["feed": "all_month"]) == nil)
        #expect(exposition.value("quaked_pulls_total", ["feed": "all_month", "result": "imported"]) == 1, "counters stay")
        #expect(exposition.value("quaked_pulls_total", ["feed": "4.5_week", "result": "failed"]) == 0)
    }

    @Test(arguments: [
        ("127.0.0.1:9464", "127.0.0.1:9464"), ("[::1]:9464", "[::1]:9464"), ("0.0.0.0:0", "0.0.0.0:0"),
        ("[::]:80", "[::]:80"),
    ])
    func metricsListenParses(text: String, expected: String) throws {
        var configuration = DaemonConfiguration()
        #expect(configuration.metricsListen == nil, "off by default")
        try configuration.apply(.metricsListen, text, source: "test")
        #expect(configuration.metricsListen?.description == expected)
        try configuration.apply(.metricsListen, "off", source: "test")
        #expect(configuration.metricsListen == nil)
    }

    @Test(arguments: ["localhost:9464", "127.0.0.1", ":9464", "127.0.0.1:", "127.0.0.1:-1", "[::1]9464", "[x]:1", "1.2.3.4.5:1"])
    func metricsListenRejects(text: String) throws {
        var configuration = DaemonConfiguration()
        #expect {
            try configuration.apply(.metricsListen, text, source: "quaked.conf:3")
        } throws: { error in
            "\(error)".hasPrefix("invalid configuration: metrics-listen (quaked.conf:3): '\(text)'")
        }
    }

    // MARK: - The shipped examples and the docs

    @Test func theAlertRulesPassPromtoolAndNameOnlyExportedSeries() async throws {
        let file = Self.packaging.appendingPathComponent("prometheus/quaked-alerts.yml")
        let rules = try String(contentsOf: file, encoding: .utf8)
        let names = Self.metricNames(in: rules)
        #expect(names.contains("quaked_feed_last_success_timestamp_seconds"))
        #expect(names.contains("quaked_client_lag_seconds"))
        #expect(names.contains("quaked_feed_consecutive_failures"))
        // With a push source's stream too (QuakedSourceSilent reads quaked_source_connected).
        let registry = try Self.populated()
        registry.sources.recordStream("emsc", connected: true)
        let families = try Exposition(registry.text()).types
        #expect(families["quaked_source_connected"] != nil)
        for name in names { #expect(families[Self.family(name, in: families)] != nil, "\(name) is not exported") }
        try #require(Promtool.isInstalled, "promtool is not installed: run scripts/install-deps")
        let check = try await Promtool.checkRules(file.path)
        #expect(check.status == 0, "\(check.output)")
        #expect(check.output.contains("6 rules found"), "\(check.output)")
    }

    /// `promtool test rules` on the rules' unit tests (quaked-alerts.test.yml): QuakedSourceSilent
    /// fires for a polled source 15 minutes after its last success and not before, not for a
    /// connected push source whose catch-up is old, and for one disconnected 5 minutes.
    @Test func theAlertRulesPassTheirPromtoolUnitTests() async throws {
        let rules = try String(
            contentsOf: Self.packaging.appendingPathComponent("prometheus/quaked-alerts.yml"), encoding: .utf8)
        #expect(Self.metricNames(in: rules).contains("quaked_source_connected"))
        #expect(Self.metricNames(in: rules).contains("quaked_source_last_success_timestamp_seconds"))
        let tests = Self.packaging.appendingPathComponent("prometheus/quaked-alerts.test.yml")
        let text = try String(contentsOf: tests, encoding: .utf8)
        #expect(text.contains("alertname: QuakedSourceSilent"))
        try #require(Promtool.isInstalled, "promtool is not installed: run scripts/install-deps")
        let result = try await ChildProcess.run(
            "/bin/sh", ["-c", "cd \"$(dirname \"$1\")\" && exec \"$0\" test rules \"$1\"", Promtool.path, tests.path])
        let output = result.stdout + result.stderr
        #expect(result.status == 0, "\(output)")
        #expect(output.contains("SUCCESS"), "\(output)")
        #expect(!output.contains("FAILED"), "\(output)")
    }

    /// quaked_source_report_delay_seconds: one observation per report (not per retraction, not
    /// for a report without `updated`), from its `updated` to the commit, made with the first.
    @Test func theReportDelayHistogramObservesEachReport() throws {
        let registry = Registry(version: "9.9.9")
        registry.sources.configureSources(["emsc"])
        #expect(!registry.text().contains("quaked_source_report_delay_seconds"))
        let committed = Date(timeIntervalSince1970: 1_700_000_000)
        let now: Int64 = 1_700_000_000_000
        registry.sources.recordReportDelays(
            "emsc", updated: [now - 300, now - 4_000, now - 7_200_000, now + 5_000], committedAt: committed)
        let metrics = try Exposition(registry.text())
        let source = ["source": "emsc"]
        #expect(metrics.value("quaked_source_report_delay_seconds_count", source) == 4)
        #expect(metrics.value("quaked_source_report_delay_seconds_sum", source) == 7_204.3)
        func bucket(_ le: String) -> Double? {
            metrics.value("quaked_source_report_delay_seconds_bucket", source.merging(["le": le]) { $1 })
        }
        #expect(bucket("0.5") == 2)
        #expect(bucket("5.0") == 3)
        #expect(bucket("3600.0") == 3)
        #expect(bucket("+Inf") == 4)

        // quaked(8) and the operations guide list it, and the alert on a silent source.
        let page = Mdoc.section("METRICS", of: try ManPageTests.page("quaked.8"))
        let guide = try String(
            contentsOf: Fixtures.packageRoot.appendingPathComponent("docs/operations.md"), encoding: .utf8)
        for text in [page, guide] {
            #expect(text.contains("quaked_source_report_delay_seconds"))
            #expect(text.contains("QuakedSourceSilent"))
        }
    }

    @Test func theGrafanaDashboardIsJSONAndNamesOnlyExportedSeries() throws {
        let data = try Data(contentsOf: Self.packaging.appendingPathComponent("grafana/quaked-dashboard.json"))
        let dashboard = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        #expect(dashboard["title"] as? String == "quaked")
        var expressions: [String] = []
        func collect(_ value: Any) {
            if let object = value as? [String: Any] {
                for (key, inner) in object {
                    if key == "expr" || key == "definition", let text = inner as? String { expressions.append(text) }
                    collect(inner)
                }
            } else if let array = value as? [Any] {
                array.forEach(collect)
            }
        }
        collect(dashboard)
        #expect(expressions.count >= 15)
        // With the series made later too: a push source's stream, report delays, the association.
        let registry = try Self.populated()
        registry.sources.recordStream("emsc", connected: true, lastMessage: 1_700_000_000_000)
        registry.sources.recordReportDelays(
            "emsc", updated: [1_699_999_990_000], committedAt: Date(timeIntervalSince1970: 1_700_000_000))
        AssociationMetrics(registry.metrics).update(AssociationCounts(joined: 3, created: 5, merged: 1, split: 1))
        let families = try Exposition(registry.text()).types
        for family in [
            "quaked_source_messages_total", "quaked_source_bad_messages_total", "quaked_source_reconnects_total",
            "quaked_source_catch_ups_total", "quaked_source_connected", "quaked_source_last_message_timestamp_seconds",
            "quaked_source_report_delay_seconds", "quaked_association_joined_reports_total",
            "quaked_association_events_total",
        ] {
            #expect(families[family] != nil, "\(family) is not exported")
        }
        var named: Set<String> = []
        for expression in expressions {
            let names = Self.metricNames(in: expression)
            #expect(!names.isEmpty, "\(expression) names no quaked series")
            for name in names {
                named.insert(Self.family(name, in: families))
                #expect(families[Self.family(name, in: families)] != nil, "\(name) in \(expression) is not exported")
            }
        }
        // The dashboard shows every family.
        #expect(named == Set(families.keys), "not on the dashboard: \(Set(families.keys).subtracting(named).sorted())")
    }

    @Test func quaked8AndTheOperationsGuideListEverySeries() throws {
        let page = Mdoc.section("METRICS", of: try ManPageTests.page("quaked.8"))
        let guide = try String(
            contentsOf: Fixtures.packageRoot.appendingPathComponent("docs/operations.md"), encoding: .utf8)
        for family in try Self.families().keys {
            #expect(page.contains(family), "quaked.8 METRICS does not list \(family)")
            #expect(guide.contains(family), "docs/operations.md does not list \(family)")
        }
        #expect(page.contains("quaked-metrics.socket"))
        #expect(page.contains("promtool"))
    }

    @Test func theMetricsSocketUnitPassesItsSocketByTheNameQuakedLooksFor() throws {
        let unit = try String(
            contentsOf: Self.packaging.appendingPathComponent("systemd/quaked-metrics.socket"), encoding: .utf8)
        func value(_ key: String) -> String? {
            unit.split(separator: "\n").first { $0.hasPrefix("\(key)=") }.map { String($0.dropFirst(key.count + 1)) }
        }
        #expect(value("FileDescriptorName") == MetricsListener.fileDescriptorName)
        #expect(value("Service") == "quaked.service")
        let listen = try #require(value("ListenStream"))
        #expect(throws: Never.self) { try MetricsAddress(parsing: listen) }
        let debian = Self.packaging.appendingPathComponent("debian/quaked.quaked-metrics.socket")
        #expect(try FileManager.default.destinationOfSymbolicLink(atPath: debian.path) == "../systemd/quaked-metrics.socket")
    }

    /// `quaked_...` names in a text (PromQL, templates).
    static func metricNames(in text: String) -> Set<String> {
        var names: Set<String> = []
        var rest = Substring(text)
        while let range = rest.range(of: "quaked_") {
            let name = rest[range.lowerBound...].prefix { $0.isLetter || $0.isNumber || $0 == "_" }
            names.insert(String(name))
            rest = rest[name.endIndex...]
        }
        return names
    }

    /// The family a sample name belongs to (`x_bucket` of the histogram `x`).
    static func family(_ name: String, in families: [String: String]) -> String {
        for suffix in ["_bucket", "_sum", "_count"] where name.hasSuffix(suffix) {
            let base = String(name.dropLast(suffix.count))
            if families[base] == "histogram" { return base }
        }
        return name
    }
}
