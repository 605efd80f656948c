import Foundation
import Logging
import QuakeAssociation
import NIOConcurrencyHelpers
import QuakeProtocol
import QuakeSources
import QuakeStore
import ServiceLifecycle
import Varlink

/// Runs backfill jobs, one at a time, oldest first, until graceful shutdown.
///
/// Jobs live in the store (``QuakeStore/createBackfillJob(catalog:start:end:minMagnitude:region:span:now:)``):
/// a job found `running` at start-up was interrupted (a restart, kill -9 included) and resumes at
/// its cursor, the start of its next window. Each window is imported with
/// ``QuakeStore/importBackfillWindow(job:windowEnd:span:source:maxBytes:now:expiringBefore:association:produce:)``,
/// which moves the cursor in the import's own transaction. Progress (the window in flight, the
/// rate, the estimate) is kept in memory and published to whoever follows the job.
public final class BackfillRunner: Service, Sendable {
    /// Made from the configuration (``init(_:)``), whose defaults are the only ones.
    struct Settings: Sendable, Equatable {
        var pager: CatalogPager.Settings
        var limits: FeedPuller.Limits
        var defaultCatalog: CatalogService
        var eventRetention: Duration?
        /// The association settings of its windows' imports (``DaemonConfiguration/association``):
        /// in association mode a backfill window is the source `usgs`'s reports.
        var association: AssociationConfiguration
        /// The configured sources (`source =`): a job of one (``BackfillJobRecord/source``) pages it.
        var sources: [SourceConfiguration] = []
    }

    /// What is known of the running job beyond its row.
    private struct Live {
        var windowStart: Int64?
        var windowEnd: Int64?
        /// When this daemon started running the job, and the cursor and count then.
        var startedAt = ContinuousClock.now
        var cursorAtStart: Int64 = 0
        var fetchedAtStart = 0
        var error: String?
    }

    private struct State {
        var live: [Int64: Live] = [:]
        var observers: [Int64: [UUID: AsyncStream<IOQuaked.BackfillJob>.Continuation]] = [:]
        /// The job running now, and the signal that cancels it.
        var current: (id: Int64, cancel: Wakeup)?
    }

    private let store: QuakeStore
    private let clients: FeedHTTPClients
    private let settings: NIOLockedValueBox<Settings>
    private let state = NIOLockedValueBox(State())
    private let wakeup = Wakeup()
    private let logger: Logger
    private let backfillMetrics: BackfillMetrics

    /// Registers its series (``BackfillMetrics``) in `metrics`: windows as they are imported,
    /// jobs by state when scraped.
    init(store: QuakeStore, clients: FeedHTTPClients, settings: Settings, logger: Logger, metrics: QuakedMetrics) {
        self.store = store
        self.clients = clients
        self.settings = NIOLockedValueBox(settings)
        self.logger = logger
        self.backfillMetrics = BackfillMetrics(metrics)
        metrics.onScrape { [backfillMetrics, store] in
            var jobs: [String: Int] = [:]
            for job in try store.unfinishedBackfillJobs() { jobs[job.state.rawValue, default: 0] += 1 }
            backfillMetrics.update(jobs: jobs)
        }
    }

    func apply(_ settings: Settings) {
        self.settings.withLockedValue { $0 = settings }
    }

    var defaultCatalog: CatalogService { settings.withLockedValue { $0.defaultCatalog } }

    public func run() async throws {
        await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                let next: BackfillJobRecord?
                do {
                    next = try self.store.unfinishedBackfillJobs().first
                } catch {
                    self.logger.error("cannot read the backfill jobs", metadata: ["error": "\(error)"])
                    next = nil
                }
                if let next {
                    await self.runJob(next)
                } else {
                    await self.wakeup.wait(until: .now + .seconds(3600))
                }
            }
        }
    }

    /// Wakes the runner for a job just created.
    func enqueued() {
        wakeup.signal()
    }

    /// Cancels a job: marks it cancelled, and stops it if it runs. Returns the job as it is then.
    func cancel(id: Int64) async throws -> BackfillJobRecord? {
        guard try store.backfillJob(id: id) != nil else { return nil }
        try await store.setBackfillState(id: id, .cancelled, error: nil)
        let running = state.withLockedValue { $0.current?.id == id ? $0.current?.cancel : nil }
        running?.signal()
        publish(id)
        return try store.backfillJob(id: id)
    }

    // MARK: Running

    private func runJob(_ job: BackfillJobRecord) async {
        let id = job.id
        let cancel = Wakeup()
        state.withLockedValue {
            $0.current = (id, cancel)
            $0.live[id] = Live(cursorAtStart: job.cursor, fetchedAtStart: job.eventsFetched)
        }
        defer {
            state.withLockedValue {
                $0.current = nil
                $0.live[id] = nil
            }
            publish(id)
        }
        do {
            // Cancelled between being picked and now: nothing to run.
            guard try await store.setBackfillState(id: id, .running) else { return }
        } catch {
            logger.error("cannot start a backfill job", metadata: ["backfill.id": "\(id)", "error": "\(error)"])
            try? await Task.sleep(for: .seconds(5))
            return
        }
        publish(id)
        logger.info(
            "backfill started",
            metadata: [
                "backfill.id": "\(id)", "backfill.catalog": "\(job.catalog)", "backfill.cursor": "\(job.cursor)",
                "backfill.source": "\(job.source ?? "usgs")",
            ])
        // The job runs beside a task that waits for its cancellation: whichever ends first ends both.
        let outcome: Result<Void, any Error> = await withTaskGroup(of: Result<Void, any Error>?.self) { group in
            group.addTask {
                do {
                    try await self.page(job)
                    return .success(())
                } catch {
                    return .failure(error)
                }
            }
            group.addTask {
                await cancel.wait()
                return nil
            }
            let first = await group.next() ?? nil
            group.cancelAll()
            return first ?? .failure(CancellationError())
        }
        switch outcome {
        case .success:
            _ = try? await store.setBackfillState(id: id, .done)
            logger.info("backfill done", metadata: ["backfill.id": "\(id)"])
        case .failure(let error as CatalogPagingError):
            _ = try? await store.setBackfillState(id: id, .failed, error: error.message)
            logger.error("backfill failed", metadata: ["backfill.id": "\(id)", "error": "\(error.message)"])
        case .failure(let error):
            if Task.isCancelled {
                // Graceful shutdown: the job stays running in the store and resumes at the next start.
                logger.info("backfill interrupted by shutdown", metadata: ["backfill.id": "\(id)"])
            } else if (try? store.backfillJob(id: id))?.state == .cancelled {
                logger.info("backfill cancelled", metadata: ["backfill.id": "\(id)"])
            } else {
                _ = try? await store.setBackfillState(id: id, .failed, error: "\(error)")
                logger.error("backfill failed", metadata: ["backfill.id": "\(id)", "error": "\(error)"])
            }
        }
    }

    private func page(_ job: BackfillJobRecord) async throws {
        let settings = settings.withLockedValue { $0 }
        var source: SourceConfiguration?
        if let name = job.source {
            guard let configured = settings.sources.first(where: { $0.name == name }) else {
                throw CatalogPagingError(
                    message:
                        "the job pages the source \(name), which is no longer configured (source = in quaked.conf): configure it again and start a new backfill --source \(name)"
                )
            }
            source = configured
        }
        let service = try source?.service ?? CatalogService(parsing: job.catalog)
        let puller = FeedPuller(clients: clients, limits: settings.limits, userAgent: QuakedVersion.userAgent)
        let pager = CatalogPager(service: service, puller: puller, settings: settings.pager)
        let query = CatalogQuery(
            start: job.startTime, end: job.endTime, minMagnitude: job.minMagnitude, region: job.region)
        var span = job.span
        var limit = CatalogPager.defaultSearchLimit
        if job.windowsDone == 0 {
            // A new job: /count sizes its windows (a day each without it).
            var rest = query
            rest.start = job.cursor
            (span, limit) = try await pager.plan(rest, fallbackSpan: 86_400_000)
            try await store.setBackfillSpan(id: job.id, span: span)
            publish(job.id)
        }
        let store = store
        let expiring = settings.eventRetention.map { Date() - $0.timeInterval }
        let id = job.id
        if let source {
            let name = source.name
            try await pager.run(
                query, from: job.cursor, span: span, searchLimit: limit,
                url: { SourceSync.windowURL(source, window: $0) },
                fetchWindow: { url, windowEnd, span in
                    let answer = try await puller.fetchSourceWindow(url, source: source)
                    let report: SourceImportReport
                    do {
                        report = try await store.importSourceBackfillWindow(
                            job: id, windowEnd: windowEnd, span: span, source: name, items: answer.items,
                            query: url.absoluteString, association: settings.association,
                            expiringBefore: expiring)
                    } catch is CancellationError {
                        throw CancellationError()
                    } catch {
                        throw CatalogFailure.transient(
                            "the store refused the window's reports (\(error)); check the disk and the state directory",
                            retryAfter: nil)
                    }
                    var counts = ImportReport(store: store.storeID, source: url.absoluteString)
                    counts.token = report.token
                    counts.features = answer.items.count + answer.skipped
                    counts.inserted = report.created
                    counts.updated = report.updated
                    counts.deleted = report.deleted - report.superseded
                    counts.superseded = report.superseded
                    counts.unchanged = report.ignored
                    if answer.skipped > 0 { counts.skipped["unreadable"] = answer.skipped }
                    return counts
                },
                events: { event in self.record(event, job: id) })
            return
        }
        try await pager.run(
            query, from: job.cursor, span: span, searchLimit: limit,
            importWindow: { url, windowEnd, span, body in
                try await store.importBackfillWindow(
                    job: id, windowEnd: windowEnd, span: span, source: url.absoluteString,
                    maxBytes: settings.limits.maxBytes, expiringBefore: expiring, association: settings.association,
                    produce: body)
            },
            events: { event in self.record(event, job: id) })
    }

    private func record(_ event: CatalogPager.Event, job id: Int64) {
        state.withLockedValue { state in
            switch event {
            case .requesting(let start, let end):
                state.live[id]?.windowStart = start
                state.live[id]?.windowEnd = end
            case .retrying(_, _, let attempt, let error, let delay):
                state.live[id]?.error = "attempt \(attempt) failed, retrying in \(delay.formatted()): \(error)"
            case .imported:
                state.live[id]?.error = nil
            case .resized:
                break
            }
        }
        switch event {
        case .imported(_, _, let report, _):
            backfillMetrics.recordWindow(events: report.features)
        case .retrying(_, _, let attempt, let error, _):
            logger.warning(
                "backfill window failed; retrying",
                metadata: ["backfill.id": "\(id)", "attempt": "\(attempt)", "error": "\(error)"])
        case .requesting, .resized:
            break
        }
        // The job's row holds the window's counts once its import committed.
        publish(id)
    }

    // MARK: Following

    /// The job as io.quaked describes it: its row and, while it runs, the live progress.
    func describe(_ record: BackfillJobRecord) -> IOQuaked.BackfillJob {
        let live = state.withLockedValue { $0.live[record.id] }
        let running = record.state == .running
        let remaining = max(record.endTime - record.cursor, 0)
        let estimatedLeft = record.state == .done ? 0 : Int((remaining + record.span - 1) / max(record.span, 1))
        var rate: Double?
        var eta: Int?
        if running, let live {
            let elapsed = (ContinuousClock.now - live.startedAt).timeInterval
            let fetched = record.eventsFetched - live.fetchedAtStart
            let covered = record.cursor - live.cursorAtStart
            if elapsed > 0.5 {
                rate = Double(fetched) / elapsed
                if covered > 0 { eta = Int((elapsed * Double(remaining) / Double(covered)).rounded(.up)) }
            }
        }
        let (near, box): (IOQuaked.Near?, IOQuaked.Box?) =
            switch record.region {
            case .near(let lat, let lon, let radiusKm): (IOQuaked.Near(lat: lat, lon: lon, radiusKm: radiusKm), nil)
            case .box(let minLat, let maxLat, let minLon, let maxLon):
                (nil, IOQuaked.Box(minLat: minLat, maxLat: maxLat, minLon: minLon, maxLon: maxLon))
            case nil: (nil, nil)
            }
        return IOQuaked.BackfillJob(
            id: Int(record.id), catalog: record.catalog, start: Int(record.startTime), end: Int(record.endTime),
            minMagnitude: record.minMagnitude, near: near, box: box,
            state: IOQuaked.BackfillState(rawValue: record.state.rawValue) ?? .failed,
            createdAt: Int(record.createdAt), finishedAt: record.finishedAt.map(Int.init),
            windowsDone: record.windowsDone, windowsTotal: record.windowsDone + estimatedLeft,
            eventsFetched: record.eventsFetched, eventsImported: record.eventsImported,
            windowStart: running ? live?.windowStart.map(Int.init) : nil,
            windowEnd: running ? live?.windowEnd.map(Int.init) : nil,
            eventsPerSecond: rate, etaSeconds: eta, lastToken: record.lastToken.map(Int.init),
            error: record.error ?? (running ? live?.error : nil), source: record.source)
    }

    /// The job's descriptions: the current one at once, then one after each change, the newest
    /// only when the reader is slower than the job, until the job ends (the last one ended).
    func updates(of id: Int64) -> AsyncStream<IOQuaked.BackfillJob> {
        let (stream, continuation) = AsyncStream.makeStream(
            of: IOQuaked.BackfillJob.self, bufferingPolicy: .bufferingNewest(1))
        let key = UUID()
        state.withLockedValue { $0.observers[id, default: [:]][key] = continuation }
        continuation.onTermination = { [weak self] _ in
            self?.state.withLockedValue { _ = $0.observers[id]?.removeValue(forKey: key) }
        }
        publish(id, only: continuation)
        return stream
    }

    private func publish(_ id: Int64, only: AsyncStream<IOQuaked.BackfillJob>.Continuation? = nil) {
        let observers = only.map { [$0] } ?? state.withLockedValue { Array(($0.observers[id] ?? [:]).values) }
        guard !observers.isEmpty, let record = try? store.backfillJob(id: id) else { return }
        let job = describe(record)
        // A job that ended is only final once no window is running for it any more.
        let ended = record.state.isFinished && state.withLockedValue { $0.current?.id != id }
        for observer in observers {
            observer.yield(job)
            if ended { observer.finish() }
        }
    }
}

extension Duration {
    /// `1.5s`, `250ms`: for messages.
    func formatted() -> String {
        let ms = Int64(self / .milliseconds(1))
        return ms < 1000 ? "\(ms)ms" : String(format: "%.1fs", Double(ms) / 1000)
    }
}
