import Foundation
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import QuakeAssociation
import QuakeModel
import QuakeSources
import QuakeStore
import QuakeStreams
import ServiceLifecycle
import Varlink

/// One source. The `emsc` kind keeps EMSC's websocket open and catches up through this type's
/// FDSN run (SourceSync+EMSC.swift); the `geonet` kind polls GeoNet's quake API with a
/// conditional GET (SourceSync+GeoNet.swift). The `fdsn` kind (`source = NAME fdsn URL ...`):
/// every `interval`, asks the FDSN event
/// service for the events updated since the last successful run's start less `overlap` (the
/// first run: the last `since`), streams the answer through the format's reader (QuakeML, FDSN
/// text or EMSC GeoJSON), and imports the reports in one transaction with the run's start as the
/// new position (``QuakeStore/importSource(_:items:position:query:association:now:)``): the store
/// associates them with the other sources' and publishes one quake per event. 204 is an answer
/// without events.
///
/// A failed run (no answer, a status other than 200 and 204, a body the reader rejects whole, a
/// body over `max-feed-size`, a store that refuses the write) imports nothing: the error is
/// logged with the source's name and recorded in the store
/// (``QuakeStore/recordSourceFailure(_:error:now:)``), and the run is tried again after
/// ``RetryPolicy``'s backoff (honouring `Retry-After`). It never stops the daemon or another
/// source. Events the reader skips (no origin, bad coordinates) are logged and counted; the rest
/// of the answer is imported.
final class SourceSync: Service, Sendable {
    /// Made from the configuration (``init(_:source:)``).
    struct Settings: Sendable, Equatable {
        var source: SourceConfiguration
        var association: AssociationConfiguration
        var policy: RetryPolicy
        var limits: FeedPuller.Limits
        /// `event-retention`: reports of quakes older than this are left out, as the feed's are.
        var eventRetention: Duration?
        /// The emsc kind's reconnect delays: `retry-initial-delay` and `retry-max-delay`, at most
        /// 1 s and 60 s (a push source reconnects within seconds).
        var backoff: ReconnectBackoff

        init(_ configuration: DaemonConfiguration, source: SourceConfiguration) {
            self.source = source
            association = configuration.association
            eventRetention = configuration.eventRetention
            policy = RetryPolicy(
                interval: source.interval, initialDelay: configuration.retryInitialDelay,
                maxDelay: configuration.retryMaxDelay, retryAfterMax: configuration.retryAfterMax)
            limits = configuration.pullLimits
            backoff = ReconnectBackoff(
                initialDelay: min(configuration.retryInitialDelay, .seconds(1)),
                maxDelay: min(configuration.retryMaxDelay, .seconds(60)))
        }
    }

    /// What one run did.
    enum Outcome: Sendable {
        /// Imported (an empty answer, a 204, too): the store's report, the HTTP status, the
        /// events the reader skipped.
        case imported(SourceImportReport, httpStatus: Int, skipped: Int)
        case failed(QuakedError)

        var isSuccess: Bool {
            if case .imported = self { return true }
            return false
        }
    }

    /// The source's runs as quaked knows them, beside what the store keeps (``SourceState``).
    struct Status: Sendable {
        var lastAttempt: Date?
        var lastSuccess: Date?
        var lastError: String?
        var nextRun: Date?
        var consecutiveFailures = 0
        var lastReport: SourceImportReport?
        /// Events the reader skipped in the last successful run.
        var lastSkipped = 0
        /// The emsc kind: whether the websocket is connected (nil for the other kinds).
        var connected: Bool?
    }

    let name: String
    let store: QuakeStore
    let clients: FeedHTTPClients
    private let settings: NIOLockedValueBox<Settings>
    let state = NIOLockedValueBox(Status())
    let wakeup = Wakeup()
    let logger: Logger
    let metrics: SourceMetrics?
    private let runDone: @Sendable (String, Outcome) -> Void
    /// The emsc kind: one import at a time (catch-ups and the socket's batches), so that the
    /// position each writes is the newest `updated` stored, and a disconnection is recorded
    /// before or after an import, never across one.
    let imports = AsyncLock()
    /// The emsc kind: the connection last connected, 0 before any (set as it connects).
    let connectedNumber = NIOLockedValueBox(0)
    /// The geonet kind: the validators of the last answer imported.
    let validators = NIOLockedValueBox(FeedPuller.Validators())

    init(
        store: QuakeStore, clients: FeedHTTPClients, settings: Settings, logger: Logger, metrics: SourceMetrics? = nil,
        runDone: @escaping @Sendable (String, Outcome) -> Void = { _, _ in }
    ) {
        self.metrics = metrics
        self.name = settings.source.name
        self.store = store
        self.clients = clients
        self.settings = NIOLockedValueBox(settings)
        var logger = logger
        logger[metadataKey: "source.name"] = "\(settings.source.name)"
        self.logger = logger
        self.runDone = runDone
    }

    /// A reload: the next run follows the new settings; a new URL, format or filter runs at once.
    func apply(_ new: Settings) {
        let changed = settings.withLockedValue { old -> Bool in
            defer { old = new }
            return old.source != new.source || old.association != new.association
        }
        if changed { wakeup.signal() }
    }

    var currentSettings: Settings { settings.withLockedValue { $0 } }

    /// The in-memory status of the runs.
    var status: Status { state.withLockedValue { $0 } }

    func run() async throws {
        await cancelWhenGracefulShutdown {
            await self.loop()
        }
    }

    /// Runs until cancelled: at once, then every interval, or after the backoff of a failure
    /// (the emsc kind: the websocket, ``streamLoop()``).
    func loop() async {
        if currentSettings.source.kind == .emsc {
            await streamLoop()
            return
        }
        while !Task.isCancelled {
            let current = currentSettings
            // A signal that came during the run is spent by it.
            wakeup.reset()
            let outcome = await runOnce(current)
            if Task.isCancelled { return }
            let delay: Duration
            switch outcome {
            case .imported:
                delay = current.policy.delayAfterSuccess(freshFor: nil)
            case .failed(let failure):
                let failures = state.withLockedValue { $0.consecutiveFailures }
                let retryAfter = failure.retryAfter.map {
                    Duration.milliseconds(Int64(max(0, $0.timeIntervalSinceNow) * 1000))
                }
                delay = current.policy.delayAfterFailure(failures, retryAfter: retryAfter)
            }
            state.withLockedValue { $0.nextRun = Date() + delay.timeInterval }
            await wakeup.wait(until: .now + delay)
        }
    }

    /// The run in progress, and who waits for its outcome (``runOnce(_:)`` joins it).
    private struct Running {
        var active = false
        var waiters: [CheckedContinuation<Outcome, Never>] = []
        var last: Outcome?
    }

    private let running = NIOLockedValueBox(Running())

    /// One run now (`Refresh(source:)`, `quaked --once`, the loop): joins the run in progress, if
    /// any, and returns its outcome, rather than starting a second.
    @discardableResult
    func runOnce(_ settings: Settings) async -> Outcome {
        let joining = running.withLockedValue { running -> Bool in
            if running.active { return true }
            running.active = true
            return false
        }
        if joining {
            return await withCheckedContinuation { continuation in
                let done = running.withLockedValue { running -> Outcome? in
                    if running.active {
                        running.waiters.append(continuation)
                        return nil
                    }
                    return running.last ?? .failed(QuakedError(kind: .other, message: "the run in progress ended unseen"))
                }
                if let done { continuation.resume(returning: done) }
            }
        }
        let outcome = await performRun(settings)
        let waiters = running.withLockedValue { running in
            defer {
                running.active = false
                running.waiters = []
                running.last = outcome
            }
            return running.waiters
        }
        for waiter in waiters { waiter.resume(returning: outcome) }
        return outcome
    }

    /// Runs now, from outside the loop (``runOnce(_:)`` with the current settings); the loop keeps
    /// its own timing.
    func refresh() async -> Outcome {
        await runOnce(currentSettings)
    }

    /// One run: asks, reads, imports; a failure is logged and recorded. Never throws.
    private func performRun(_ settings: Settings) async -> Outcome {
        let startedAt = Date()
        state.withLockedValue { $0.lastAttempt = startedAt }
        let start = Int64((startedAt.timeIntervalSince1970 * 1000).rounded(.down))
        let source = settings.source
        var url: URL?
        let outcome: Outcome
        do {
            let puller = FeedPuller(clients: clients, limits: settings.limits, userAgent: QuakedVersion.userAgent)
            let queryURL: URL
            var answer: Answer
            var newValidators: FeedPuller.Validators?
            switch source.kind {
            case .fdsn, .emsc:
                let position: Int64?
                do {
                    position = try store.sourcePosition(source.name)
                } catch {
                    throw QuakedError(
                        kind: .storage, message: "cannot read the source's position from the store: \(error)",
                        cause: error)
                }
                let updatedAfter =
                    position.map { $0 - Int64(source.overlap / .milliseconds(1)) }
                    ?? start - Int64(source.since / .milliseconds(1))
                queryURL = Self.queryURL(source, updatedAfter: updatedAfter)
                url = queryURL
                logger.debug("asking the source", metadata: ["source.url": "\(queryURL.absoluteString)"])
                answer = try await Self.fetch(queryURL, source: source, puller: puller)
            case .geonet:
                queryURL = source.endpoint ?? source.service.base
                url = queryURL
                let known = validators.withLockedValue { $0 }
                (answer, newValidators) = try await Self.fetchGeoNet(
                    queryURL, source: source, validators: known, puller: puller)
                answer.items = answer.items.filter(source.admits)
            }
            for problem in answer.problems.prefix(10) {
                logger.warning("event skipped", metadata: ["source.problem": "\(problem)"])
            }
            if answer.skipped > 0 {
                logger.warning(
                    "events of the answer skipped; the rest is imported",
                    metadata: ["source.skipped": "\(answer.skipped)", "source.url": "\(queryURL.absoluteString)"])
            }
            let report: SourceImportReport
            do {
                if source.kind == .emsc {
                    report = try await importReports(
                        answer.items, settings: settings, query: queryURL.absoluteString, now: startedAt)
                } else {
                    report = try await store.importSource(
                        source.name, items: answer.items, position: start, query: queryURL.absoluteString,
                        association: settings.association, now: startedAt,
                        expiringBefore: settings.eventRetention.map { startedAt - $0.timeInterval })
                    observeReportDelays(answer.items, report)
                }
                if let newValidators { validators.withLockedValue { $0 = newValidators } }
            } catch is CancellationError {
                throw CancellationError()
            } catch {
                throw QuakedError(
                    kind: .storage,
                    message:
                        "the store refused the source's reports (\(error)); nothing was imported: check the disk and the state directory",
                    cause: error)
            }
            outcome = .imported(report, httpStatus: answer.httpStatus, skipped: answer.skipped)
        } catch {
            if Task.isCancelled || error is CancellationError {
                return .failed(QuakedError(kind: .cancelled, message: "cancelled: quaked is stopping", cause: error))
            }
            outcome = .failed(Self.describe(error, source: source, url: url))
        }
        await record(outcome, startedAt: startedAt)
        runDone(source.name, outcome)
        return outcome
    }

    /// After an import of `items` committed: `quaked_source_report_delay_seconds`, the time from
    /// each report's `updated` to now, for the reports (not retractions, and not reports without
    /// an `updated`, such as GeoNet's). Nothing when the import changed nothing (`applied` 0: every
    /// item a stale or equal copy); otherwise every report of the batch, since the store does not
    /// say which of them were stale copies.
    func observeReportDelays(_ items: [SourceItem], _ report: SourceImportReport) {
        guard let metrics, report.applied > 0 else { return }
        let updated = items.compactMap { item -> Int64? in
            if case .report(let report) = item { report.updated } else { nil }
        }
        metrics.recordReportDelays(name, updated: updated, committedAt: Date())
    }

    /// Keeps the status, logs the run, records a failure in the store.
    func record(_ outcome: Outcome, startedAt: Date) async {
        switch outcome {
        case .imported(let report, let httpStatus, let skipped):
            metrics?.recordRun(name, success: true, startedAt: startedAt, reports: report.items, skipped: skipped)
            let previous = state.withLockedValue { status -> Int in
                defer {
                    status.lastSuccess = startedAt
                    status.lastError = nil
                    status.consecutiveFailures = 0
                    status.lastReport = report
                    status.lastSkipped = skipped
                }
                return status.consecutiveFailures
            }
            let metadata: Logger.Metadata = [
                "source.items": "\(report.items)", "source.created": "\(report.created)",
                "source.updated": "\(report.updated)", "source.deleted": "\(report.deleted)",
                "source.superseded": "\(report.superseded)", "source.ignored": "\(report.ignored)",
                "http.status": "\(httpStatus)", "history.token": "\(report.token.map { "\($0)" } ?? "none")",
            ]
            logger.log(level: report.token == nil ? .debug : .info, "source imported", metadata: metadata)
            if previous > 0 {
                logger.notice("the source works again", metadata: ["source.failures": "\(previous)"])
            }
        case .failed(let failure):
            metrics?.recordRun(name, success: false, startedAt: startedAt)
            let failures = state.withLockedValue { status -> Int in
                status.lastError = failure.message
                status.consecutiveFailures += 1
                return status.consecutiveFailures
            }
            var metadata = failure.logMetadata
            metadata["source.failures"] = "\(failures)"
            // Logged at warning when the source starts failing; repeats at debug until it recovers.
            logger.log(level: failures == 1 ? .warning : .debug, "source run failed", metadata: metadata)
            do {
                try await store.recordSourceFailure(name, error: failure.message, now: startedAt)
            } catch {
                logger.warning("cannot record the source's failure in the store", metadata: ["error": "\(error)"])
            }
        }
    }

    // MARK: The query

    /// `query?format=...&orderby=time&updatedafter=...[&minmagnitude=...][&region...]&nodata=204`.
    static func queryURL(_ source: SourceConfiguration, updatedAfter: Int64) -> URL {
        var parameters: [(String, String)] = [
            ("format", source.format.parameter), ("orderby", "time"),
            ("updatedafter", CatalogQuery.fdsnTime(updatedAfter)),
        ]
        parameters += CatalogQuery.filterParameters(minMagnitude: source.minMagnitude, region: source.region)
        parameters.append(("nodata", "204"))
        return source.service.queryURL(parameters: parameters)
    }

    /// A backfill window of the source (`quakectl backfill --source`): `query?format=...&orderby=time-asc
    /// &starttime=...&endtime=...[&minmagnitude=...][&region...]&nodata=204`, the window's filters
    /// (the job's, which default to the source's).
    static func windowURL(_ source: SourceConfiguration, window: CatalogQuery) -> URL {
        var parameters: [(String, String)] = [
            ("format", source.format.parameter), ("orderby", "time-asc"),
            ("starttime", CatalogQuery.fdsnTime(window.start)), ("endtime", CatalogQuery.fdsnTime(window.end - 1)),
        ]
        parameters += CatalogQuery.filterParameters(minMagnitude: window.minMagnitude, region: window.region)
        parameters.append(("nodata", "204"))
        return source.service.queryURL(parameters: parameters)
    }

    // MARK: Fetching and reading

    /// An answer read whole: its items, and the events the reader skipped.
    struct Answer: Sendable {
        var httpStatus: Int
        var items: [SourceItem] = []
        var skipped = 0
        var problems: [SourceProblem] = []
    }

    /// GETs `url` (the daemon's clients, proxies and limits) and reads the body with the format's
    /// reader as it streams in. Throws ``QuakedError`` for a status other than 200 and 204, a
    /// transport failure or timeout, a body over the size limit, or a ``SourceError``.
    static func fetch(_ url: URL, source: SourceConfiguration, puller: FeedPuller) async throws -> Answer {
        var headers = HTTPHeaders()
        headers.add(name: "User-Agent", value: puller.userAgent)
        headers.add(name: "Accept", value: accept(source.format))
        headers.add(name: "Accept-Encoding", value: "gzip")
        let limits = puller.limits
        let requestHeaders = headers
        do {
            return try await withTimeout(limits.totalTimeout) {
                let deadline = NIODeadline.now() + .nanoseconds(Int64(limits.totalTimeout / .nanoseconds(1)))
                return try await puller.exchange(url, headers: requestHeaders, deadline: deadline) { response, proxy in
                    try await read(response, url: url, source: source, maxBytes: limits.maxBytes, proxy: proxy)
                }
            }
        } catch is TimedOut {
            throw QuakedError(
                kind: .transport,
                message:
                    "asking \(url.absoluteString) failed: no complete answer within the total timeout of \(limits.totalTimeout) (total-timeout)"
            )
        }
    }

    static func accept(_ format: SourceConfiguration.Format) -> String {
        switch format {
        case .xml: "application/xml, text/xml"
        case .text: "text/plain"
        case .geojson: "application/json, application/geo+json"
        }
    }

    private static func read(
        _ response: FeedPuller.FeedResponse, url: URL, source: SourceConfiguration, maxBytes: Int,
        proxy: ProxyServer?
    ) async throws -> Answer {
        let code = Int(response.status.code)
        if code == 204 { return Answer(httpStatus: 204) }
        guard code == 200 else {
            let body = await firstLine(response)
            var message = "\(url.absoluteString): the service answered \(code) \(response.status.reasonPhrase)"
            if !body.isEmpty { message += ": \(body)" }
            if let proxy { message += " (through the proxy \(proxy) from \(proxy.variable))" }
            switch code {
            case 404:
                message += " (is this an FDSN event service? its URL ends in /fdsnws/event/1/)"
            case 400, 413:
                message += " (the service refused the query: check the source's options)"
            default:
                break
            }
            throw QuakedError(
                kind: .httpStatus, message: message, httpStatus: code,
                retryAfter: FeedPuller.retryAfter(response.headers, now: Date()))
        }
        if let length = response.headers.first(name: "Content-Length").flatMap(Int.init),
            response.headers.first(name: "Content-Encoding") == nil, length > maxBytes
        {
            throw QuakedError(
                kind: .tooLarge,
                message: "\(url.absoluteString): the answer is \(length) bytes, over max-feed-size (\(maxBytes) bytes)",
                httpStatus: 200)
        }
        return try await readBody(response, url: url, source: source, maxBytes: maxBytes, proxy: proxy)
    }

    /// Reads a 200 answer's body with the source's format's reader as it streams in. Throws
    /// ``SourceError`` for a body the reader rejects whole, ``QuakedError`` for one over
    /// `maxBytes` or a transport failure.
    static func readBody(
        _ response: FeedPuller.FeedResponse, url: URL, source: SourceConfiguration, maxBytes: Int, proxy: ProxyServer?
    ) async throws -> Answer {
        let reading = Reading(makeReader(source), maxBytes: maxBytes)
        do {
            try await response.chunks { chunk in try reading.consume(chunk) }
        } catch let error as SourceError {
            throw error
        } catch let error as QuakedError {
            throw error
        } catch {
            throw QuakedError(transport: error, url: url, httpStatus: 200, proxy: proxy)
        }
        return try reading.finish()
    }

    /// The reader of the source's format.
    static func makeReader(_ source: SourceConfiguration) -> any SourceReader {
        if source.kind == .geonet { return GeoNetReader(source: source.name) }
        switch source.format {
        case .xml: return QuakeMLReader(source: source.name)
        case .text: return FDSNTextReader(source: source.name)
        case .geojson: return EMSCGeoJSONReader(source: source.name)
        }
    }

    /// The first line of an error answer's body that is not markup, shortened.
    private static func firstLine(_ response: FeedPuller.FeedResponse) async -> String {
        let collected = NIOLockedValueBox<[UInt8]>([])
        try? await response.chunks { chunk in
            collected.withLockedValue { if $0.count < 4096 { $0 += chunk.prefix(4096 - $0.count) } }
        }
        let text = String(decoding: collected.withLockedValue { $0 }, as: UTF8.self)
        let line =
            text.split(whereSeparator: \.isNewline).map { $0.trimmingCharacters(in: .whitespaces) }
            .first { !$0.isEmpty && !$0.hasPrefix("<") } ?? ""
        return String(line.prefix(300))
    }

    /// A failure in words, with what to do about it.
    static func describe(_ error: any Error, source: SourceConfiguration, url: URL?) -> QuakedError {
        let where_ = url?.absoluteString ?? source.service.description
        switch error {
        case let error as SourceError:
            let remedy: String
            switch error.kind {
            case .htmlPage:
                remedy =
                    "the service answered an HTML page instead of \(source.format.rawValue) (a maintenance or error page?); will try again"
            case .malformedXML, .notQuakeML:
                remedy =
                    "the answer is not QuakeML: check that the URL is an FDSN event service that answers format=xml, or set format=text"
            case .badHeader, .wrongColumns, .lineTooLong:
                remedy =
                    "the answer is not FDSN text: check that the URL is an FDSN event service that answers format=text, or set format=xml"
            case .malformedJSON where source.kind == .geonet, .wrongShape where source.kind == .geonet:
                remedy = "the answer is not GeoNet's quake API GeoJSON: check the URL (https://api.geonet.org.nz/quake?MMI=-1)"
            case .malformedJSON, .wrongShape:
                remedy =
                    "the answer is not EMSC's GeoJSON: check that the service answers format=json, or set format=xml"
            }
            return QuakedError(
                kind: .invalidFeed, message: "\(where_): \(error); \(remedy); nothing was imported", httpStatus: 200,
                cause: error)
        case var error as QuakedError:
            if error.kind != .storage { error.message += "; nothing was imported" }
            return error
        default:
            return QuakedError(kind: .other, message: "\(where_): \(error); nothing was imported", cause: error)
        }
    }

    /// The reader and what it has read so far; the body's chunks come one after another.
    private final class Reading: @unchecked Sendable {
        private let lock = NSLock()
        private var reader: any SourceReader
        private var items: [SourceItem] = []
        private var bytes = 0
        private let maxBytes: Int

        init(_ reader: any SourceReader, maxBytes: Int) {
            self.reader = reader
            self.maxBytes = maxBytes
        }

        func consume(_ chunk: [UInt8]) throws {
            try lock.withLock {
                bytes += chunk.count
                guard bytes <= maxBytes else {
                    throw QuakedError(
                        kind: .tooLarge,
                        message: "the answer is over max-feed-size (\(maxBytes) bytes): ask for less (min-magnitude=, region=, a shorter interval=)",
                        httpStatus: 200)
                }
                try reader.consume(chunk) { items.append($0) }
            }
        }

        func finish() throws -> Answer {
            try lock.withLock {
                try reader.finish { items.append($0) }
                return Answer(httpStatus: 200, items: items, skipped: reader.skippedCount, problems: reader.problems)
            }
        }
    }
}

/// The sources' loops: one ``SourceSync`` per configured source, run together in the daemon's
/// service group. A reload keeps the sources that stay (their new settings applied), starts the
/// new ones and stops the removed ones.
final class SourceSyncs: Service, Sendable {
    private struct State {
        var syncs: [SourceSync] = []
    }

    private let store: QuakeStore
    private let clients: FeedHTTPClients
    private let logger: Logger
    private let metrics: SourceMetrics
    private let state: NIOLockedValueBox<State>
    private let replanned = Wakeup()
    private let runDone: @Sendable (String, SourceSync.Outcome) -> Void

    /// Registers the sources' series (``SourceMetrics``) in `metrics`.
    init(
        store: QuakeStore, clients: FeedHTTPClients, configuration: DaemonConfiguration, logger: Logger,
        metrics: QuakedMetrics, runDone: @escaping @Sendable (String, SourceSync.Outcome) -> Void = { _, _ in }
    ) {
        self.store = store
        self.clients = clients
        self.logger = logger
        self.runDone = runDone
        let sourceMetrics = SourceMetrics(metrics)
        self.metrics = sourceMetrics
        sourceMetrics.configureSources(configuration.sources.map(\.name))
        let associationMetrics = AssociationMetrics(metrics)
        metrics.onScrape { [store] in associationMetrics.update(try store.associationCounts()) }
        let syncs = configuration.sources.map {
            SourceSync(
                store: store, clients: clients, settings: .init(configuration, source: $0), logger: logger,
                metrics: sourceMetrics, runDone: runDone)
        }
        state = NIOLockedValueBox(State(syncs: syncs))
    }

    /// The sources, in configuration order.
    var syncs: [SourceSync] { state.withLockedValue { $0.syncs } }

    /// A reload.
    func apply(_ configuration: DaemonConfiguration) {
        metrics.configureSources(configuration.sources.map(\.name))
        let changedSet = state.withLockedValue { state -> Bool in
            var next: [SourceSync] = []
            for source in configuration.sources {
                let settings = SourceSync.Settings(configuration, source: source)
                // A source whose kind changed is a new source under the old name.
                if let kept = state.syncs.first(where: {
                    $0.name == source.name && $0.currentSettings.source.kind == source.kind
                }) {
                    kept.apply(settings)
                    next.append(kept)
                } else {
                    next.append(
                        SourceSync(
                            store: store, clients: clients, settings: settings, logger: logger, metrics: metrics,
                            runDone: runDone))
                }
            }
            let changed = next.map(ObjectIdentifier.init) != state.syncs.map(ObjectIdentifier.init)
            state.syncs = next
            return changed
        }
        if changedSet { replanned.signal() }
    }

    /// The source named `name`, if configured.
    func sync(named name: String) -> SourceSync? {
        syncs.first { $0.name == name }
    }

    /// Runs every source once, one after another (`quaked --once`).
    func runEachOnce() async -> [(String, SourceSync.Outcome)] {
        var results: [(String, SourceSync.Outcome)] = []
        for sync in syncs {
            results.append((sync.name, await sync.runOnce(sync.currentSettings)))
        }
        return results
    }

    func run() async throws {
        await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                // Reset first: a reload after this is seen by the next wait.
                self.replanned.reset()
                let syncs = self.syncs
                await withTaskGroup(of: Void.self) { group in
                    for sync in syncs {
                        group.addTask { await sync.loop() }
                    }
                    group.addTask { await self.replanned.wait() }
                    await group.next()
                    group.cancelAll()
                }
            }
        }
    }
}
