import Foundation
import Logging
import QuakeProtocol
import QuakeSystemd
import QuakeStore
import ServiceLifecycle

/// quaked's components composed from a configuration: the one composition root. ``Daemon/run``
/// serves them on the control socket until stopped; `quaked --once` pulls every feed once through
/// them and exits; tests build them in-process the same way.
///
/// Building opens the store and makes every component on one metrics registry (each registers its
/// own series); it binds no socket and starts nothing. ``services`` are what a `ServiceGroup` runs;
/// ``shutdown()`` releases the HTTP clients and closes the store once nothing runs.
public struct QuakedApplication: Sendable {
    public let configuration: DaemonConfiguration
    public let store: QuakeStore
    public let metrics: QuakedMetrics
    public let scheduler: FeedScheduler
    public let broadcaster: ChangeBroadcaster
    public let reloader: Reloader
    /// io.quaked, for the control server.
    public let service: QuakedService
    /// The metrics as scraped (`io.quaked.Metrics`, the HTTP listener).
    public let exporter: MetricsExporter
    let httpClients: FeedHTTPClients
    let maintenance: StoreMaintenance
    let backfills: BackfillRunner
    let catalogSync: CatalogSync
    /// The agencies followed (`source =`), one loop each.
    let sourceSyncs: SourceSyncs
    let historyMetrics: HistoryMetrics

    /// Composes the components. `loader` is what a reload reads again; `notifier` hears of pulls
    /// (`STATUS=`) and reloads.
    public static func build(
        configuration: DaemonConfiguration, loader: ConfigurationLoader, notifier: SystemdNotifier = SystemdNotifier(),
        logger: Logger
    ) throws -> QuakedApplication {
        let store = try QuakeStore(directory: URL(fileURLWithPath: configuration.stateDirectory))
        do {
            return try QuakedApplication(
                configuration: configuration, store: store, loader: loader, notifier: notifier, logger: logger)
        } catch {
            try? store.close()
            throw error
        }
    }

    private init(
        configuration: DaemonConfiguration, store: QuakeStore, loader: ConfigurationLoader, notifier: SystemdNotifier,
        logger: Logger
    ) throws {
        self.configuration = configuration
        self.store = store
        // Each component registers its own series here.
        let metrics = QuakedMetrics()
        self.metrics = metrics
        historyMetrics = try HistoryMetrics(metrics: metrics, store: store, logger: logger)
        let httpClients = FeedHTTPClients(
            configuration: FeedPuller.clientConfiguration(limits: configuration.pullLimits),
            proxies: configuration.proxy)
        self.httpClients = httpClients
        let puller = FeedPuller(
            clients: httpClients, limits: configuration.pullLimits, userAgent: QuakedVersion.userAgent,
            association: configuration.association)
        let broadcaster = ChangeBroadcaster(store: store, metrics: metrics)
        self.broadcaster = broadcaster
        let scheduler = FeedScheduler(
            store: store, puller: puller, plan: FeedScheduler.Plan(configuration), logger: logger, metrics: metrics
        ) { status, result in
            notifier.status(StatusLine.make(store: store, feed: status, result: result))
        }
        self.scheduler = scheduler
        let maintenance = StoreMaintenance(store: store, configuration: configuration, logger: logger, metrics: metrics)
        self.maintenance = maintenance
        let backfills = BackfillRunner(
            store: store, clients: httpClients, settings: .init(configuration), logger: logger, metrics: metrics)
        self.backfills = backfills
        let catalogSync = CatalogSync(
            store: store, clients: httpClients, settings: .init(configuration), logger: logger, metrics: metrics)
        self.catalogSync = catalogSync
        let sourceSyncs = SourceSyncs(
            store: store, clients: httpClients, configuration: configuration, logger: logger, metrics: metrics
        ) { name, outcome in
            notifier.status(StatusLine.make(store: store, source: name, outcome: outcome))
        }
        self.sourceSyncs = sourceSyncs
        reloader = Reloader(loader: loader, configuration: configuration, notifier: notifier, logger: logger) { new in
            scheduler.apply(FeedScheduler.Plan(new), limits: new.pullLimits, association: new.association)
            maintenance.apply(new)
            backfills.apply(.init(new))
            catalogSync.apply(.init(new))
            sourceSyncs.apply(new)
        }
        exporter = MetricsExporter(metrics: metrics, logger: logger)
        service = QuakedService(
            store: store, scheduler: scheduler, reloader: reloader, broadcaster: broadcaster, metrics: exporter,
            backfills: backfills, catalogSync: catalogSync, sources: sourceSyncs, logger: logger)
    }

    /// The long-running services, in the order a `ServiceGroup` starts them: the broadcaster, then
    /// `server` (the daemon's control server, if any), then the scheduler, store maintenance, the
    /// history counter, backfills, the catalog sync and the sources. (The metrics listener, the
    /// signal handlers and systemd's are the daemon's own.)
    public func services(serving server: (any Service)? = nil) -> [any Service] {
        [broadcaster] + (server.map { [$0] } ?? []) + [
            scheduler, maintenance, historyMetrics, backfills, catalogSync, sourceSyncs,
        ]
    }

    /// One source's run as `quaked --once` reports it.
    public struct SourceRun: Sendable {
        public var name: String
        /// The store's report; nil when the run failed.
        public var report: SourceImportReport?
        /// 200 or 204, when imported.
        public var httpStatus: Int?
        /// Events the reader skipped.
        public var skipped: Int
        /// Why the run failed.
        public var failure: QuakedError?
    }

    /// Runs every configured source once, one after another (`quaked --once`): each run is the one
    /// the loops make (its position, log and recorded failure).
    public func runEverySourceOnce() async -> [SourceRun] {
        await sourceSyncs.runEachOnce().map { name, outcome in
            switch outcome {
            case .imported(let report, let httpStatus, let skipped):
                SourceRun(name: name, report: report, httpStatus: httpStatus, skipped: skipped, failure: nil)
            case .failed(let failure):
                SourceRun(name: name, report: nil, httpStatus: failure.httpStatus, skipped: 0, failure: failure)
            }
        }
    }

    /// Pulls every feed once, one after another, through the scheduler (conditional, with the
    /// store's validators; the feed's status, metrics and log as for a scheduled pull), without
    /// its loops: `quaked --once`. A failure saves no backoff.
    public func pullEveryFeedOnce() async -> [(FeedStatus, PullResult)] {
        await scheduler.pullEachOnce()
    }

    /// What `GetStatus` answers now.
    public func status() throws -> IOQuaked.GetStatus.Reply {
        try service.status()
    }

    /// Releases the HTTP clients and closes the store, once nothing runs any more.
    public func shutdown() async throws {
        defer { try? store.close() }
        try await httpClients.shutdown()
    }
}
