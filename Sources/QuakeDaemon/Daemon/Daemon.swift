import AsyncHTTPClient
import Foundation
import Logging
import QuakeSystemd
import QuakeStore
import ServiceLifecycle
import UnixSignals
import Varlink

/// The long-running quaked: opens the store and the control socket, then runs the services
/// (control server, feed scheduler, store maintenance, SIGHUP reload, watchdog) in one
/// `ServiceGroup` until SIGTERM or SIGINT.
///
/// The components are ``QuakedApplication``'s (`quaked --once` builds the same); this adds the
/// sockets, the signals and systemd. `main` and the tests both come through here, so tests run
/// the real wiring.
public enum Daemon {
    /// Runs until a graceful shutdown completes. Throws start-up failures (store, socket); a
    /// socket directory `socketDirectory`'s rule refuses is a ``ConfigurationError``.
    public static func run(
        loader: ConfigurationLoader, configuration: DaemonConfiguration, socketDirectory: ControlSocket.Directory,
        logger: Logger
    ) async throws {
        let notifier = SystemdNotifier()
        raiseFileDescriptorLimit()
        // Signals are trapped first, before the socket exists: a stop or reload asked for while
        // quaked starts (a client may already see the socket) must not meet the default action,
        // ending the process on the spot. They wait until the group runs: SIGTERM and SIGINT then
        // start its graceful shutdown (see below), SIGHUP reloads.
        let stops = await UnixSignalsSequence(trapping: .sigterm, .sigint)
        let hangups = await UnixSignalsSequence(trapping: .sighup)
        // systemd passes the control socket and, with quaked-metrics.socket, the metrics socket
        // (with a socket named http, the catalog's), told apart by FileDescriptorName= (the
        // control socket's is any other name).
        let activated = SocketActivation.listenSockets()
        let httpNames = [MetricsListener.fileDescriptorName, CatalogListener.fileDescriptorName]
        let metricsSocket = activated.first { $0.name == MetricsListener.fileDescriptorName }?.fileDescriptor
        let catalogSocket = activated.first { $0.name == CatalogListener.fileDescriptorName }?.fileDescriptor
        let controlSocket = activated.first { !httpNames.contains($0.name) }?.fileDescriptor
        // The socket's directory first: refused, it is a configuration error, and nothing is made.
        if controlSocket == nil {
            try ControlSocket.prepareDirectory(of: configuration.socketPath, socketDirectory)
        }
        let app = try QuakedApplication.build(
            configuration: configuration, loader: loader, notifier: notifier, logger: logger)
        let store = app.store
        let http: HTTPListeners
        let listener: VarlinkServer.Listener
        let origin: ControlSocket.Origin
        do {
            http = try await HTTPListeners.open(
                configuration: configuration, metricsSocket: metricsSocket, catalogSocket: catalogSocket)
            (listener, origin) = try await ControlSocket.open(
                path: configuration.socketPath, group: configuration.socketGroup, activated: controlSocket,
                limits: configuration.serverLimits, limitReplies: ControlServer.limitReplies, logger: logger)
        } catch {
            try? await app.shutdown()
            throw error
        }
        let server = ControlServer(
            listener: listener, origin: origin, service: app.service, limits: configuration.serverLimits,
            logger: logger, metrics: app.metrics)
        let exporter = app.exporter

        var services: [ServiceGroupConfiguration.ServiceConfiguration] = app.services(serving: server).map {
            .init(service: $0)
        }
        services.append(.init(service: ReloadOnHangup(reloader: app.reloader, signals: hangups)))
        if let metricsListening = http.metrics {
            // A listener that fails is logged and the daemon goes on.
            services.append(
                .init(
                    service: MetricsListener(socket: metricsListening, render: exporter.text, logger: logger),
                    successTerminationBehavior: .ignore, failureTerminationBehavior: .ignore))
        }
        if let catalogListening = http.catalog {
            // The same: logged, and the daemon goes on.
            services.append(
                .init(
                    service: CatalogListener(
                        socket: catalogListening, store: store,
                        metrics: http.catalogServesMetrics ? exporter.text : nil, logger: logger),
                    successTerminationBehavior: .ignore, failureTerminationBehavior: .ignore))
        }
        if let interval = notifier.watchdogInterval {
            services.append(
                .init(service: WatchdogPinger(notifier: notifier, interval: interval, store: store, logger: logger)))
        }
        // Last in the list, so first to hear of the shutdown.
        services.append(.init(service: StoppingNotifier(notifier: notifier)))
        var groupConfiguration = ServiceGroupConfiguration(services: services, logger: logger)
        groupConfiguration.maximumGracefulShutdownDuration = .seconds(8)
        groupConfiguration.maximumCancellationDuration = .seconds(1)
        let group = ServiceGroup(configuration: groupConfiguration)

        logger.info(
            "quaked started",
            metadata: [
                "version": "\(QuakedVersion.string)", "store.path": "\(store.path)", "store.id": "\(store.storeID)",
                "socket": "\(origin)", "feeds": "\(configuration.feeds.map(\.name).joined(separator: ","))",
                "sources": "\(configuration.sources.map(\.name).joined(separator: ","))",
                "proxy": "\(configuration.proxy.summary)",
                "metrics": "\(http.metricsURL ?? "off")",
                "http": "\(http.catalog.map { "http://\($0.localAddress)/" } ?? "off")",
            ])
        if !configuration.proxy.noProxy.ignored.isEmpty {
            logger.warning(
                "no_proxy entries that are no host, domain, address or range are ignored",
                metadata: ["no_proxy.ignored": "\(configuration.proxy.noProxy.ignored.joined(separator: ","))"])
        }
        notifier.ready()
        notifier.status(StatusLine.starting(store: store))
        do {
            try await withThrowingTaskGroup(of: Void.self) { tasks in
                tasks.addTask {
                    // Also before `group.run()` has begun: the group remembers the request.
                    for await signal in stops {
                        logger.info("stopping", metadata: ["signal": "\(signal)"])
                        await group.triggerGracefulShutdown()
                    }
                }
                try await group.run()
                tasks.cancelAll()
            }
        } catch {
            try? await app.shutdown()
            throw error
        }
        try await app.shutdown()
        logger.info("quaked stopped")
    }
}

/// Every client connection is a file descriptor: take the hard limit, not the (often 1024) soft one.
func raiseFileDescriptorLimit() {
    var limit = rlimit()
    guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0, limit.rlim_cur < limit.rlim_max else { return }
    limit.rlim_cur = limit.rlim_max
    setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
}

/// Sends `STOPPING=1` as soon as the graceful shutdown starts.
struct StoppingNotifier: Service {
    let notifier: SystemdNotifier

    func run() async throws {
        try? await gracefulShutdown()
        notifier.stopping()
    }
}

/// The one-line `STATUS=` systemd shows in `systemctl status quaked`.
enum StatusLine {
    static func starting(store: QuakeStore) -> String {
        "starting · \(summary(store))"
    }

    static func make(store: QuakeStore, feed: FeedStatus, result: PullResult) -> String {
        let outcome: String
        switch result {
        case .imported(let report, _):
            outcome =
                report.token == nil
                ? "no changes"
                : "+\(report.inserted) new, \(report.updated) updated, \(report.superseded) superseded"
        case .notModified:
            outcome = "not modified"
        case .failed:
            outcome = "failed (\(feed.consecutiveFailures) in a row)"
        }
        return "\(summary(store)) · last pull \(feed.name): \(outcome)"
    }

    static func make(store: QuakeStore, source: String, outcome: SourceSync.Outcome) -> String {
        let text: String
        switch outcome {
        case .imported(let report, _, _):
            text =
                report.token == nil
                ? "no changes"
                : "+\(report.created) new, \(report.updated) updated, \(report.superseded) superseded"
        case .failed:
            text = "failed"
        }
        return "\(summary(store)) · last run of source \(source): \(text)"
    }

    private static func summary(_ store: QuakeStore) -> String {
        let count = (try? store.count()) ?? 0
        let head = (try? store.head()) ?? 0
        return "\(count) quakes · token \(head)"
    }
}
