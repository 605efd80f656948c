import Foundation
import Logging
import QuakeAssociation
import NIOConcurrencyHelpers
import QuakeModel
import QuakeProtocol
import QuakeStore
import ServiceLifecycle
import Varlink

/// The incremental catalog sync (`catalog = URL`): every `catalog-interval`, asks the FDSN service
/// for the events updated since the last successful run, less `catalog-overlap`, with
/// `includedeleted=true`, over the event times the store covers (oldest stored event to now),
/// within `catalog-min-magnitude` and `catalog-region` when they are set. Updated events apply as
/// updates, new ones as inserts, and deleted ones remove their event (reason
/// `deleted-upstream`). Each window is one history transaction (author `catalog`). The position,
/// when the last successful run began, persists in the store (`catalogState`).
///
/// The first run of a catalog, with no position, asks for what changed in the last
/// `catalog-since` (`updatedafter` = its start less that), except over the event times a backfill
/// job of the same service fetched: a job's windows were each fetched after the job was created,
/// so for those times it asks for what changed since then, less the overlap, when that is earlier
/// (an update made upstream after a window was fetched is never skipped). See ``firstRunPieces``.
final class CatalogSync: Service, Sendable {
    /// Made from the configuration (``init(_:)``), whose defaults are the only ones.
    struct Settings: Sendable, Equatable {
        var service: CatalogService?
        var interval: Duration
        var overlap: Duration
        /// How far back the first run (no position yet) asks for updates, outside backfilled times.
        var since: Duration
        var minMagnitude: Double?
        var region: CatalogRegion?
        var pager: CatalogPager.Settings
        var limits: FeedPuller.Limits
        var eventRetention: Duration?
        /// The association settings of its imports (``DaemonConfiguration/association``): in
        /// association mode the catalog's imports are the source `usgs`.
        var association: AssociationConfiguration
    }

    private struct Status {
        var lastAttempt: Date?
        var lastError: String?
        var nextRun: Date?
        var lastRun: (inserted: Int, updated: Int, deleted: Int)?
    }

    private let store: QuakeStore
    private let clients: FeedHTTPClients
    private let settings: NIOLockedValueBox<Settings>
    private let status = NIOLockedValueBox(Status())
    private let wakeup = Wakeup()
    private let logger: Logger
    private let catalogMetrics: CatalogMetrics
    private let windowDone: @Sendable (ImportReport) -> Void

    /// Registers its series (``CatalogMetrics``) in `metrics`: each run as it ends.
    init(
        store: QuakeStore, clients: FeedHTTPClients, settings: Settings, logger: Logger, metrics: QuakedMetrics,
        windowDone: @escaping @Sendable (ImportReport) -> Void = { _ in }
    ) {
        self.store = store
        self.clients = clients
        self.settings = NIOLockedValueBox(settings)
        self.logger = logger
        self.catalogMetrics = CatalogMetrics(metrics)
        self.windowDone = windowDone
    }

    /// A reload: the next run follows the new settings (a new URL starts at once).
    func apply(_ new: Settings) {
        let changed = settings.withLockedValue { old -> Bool in
            defer { old = new }
            return old.service != new.service
        }
        if changed { wakeup.signal() }
    }

    func run() async throws {
        await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                let current = self.settings.withLockedValue { $0 }
                guard current.service != nil else {
                    self.status.withLockedValue { $0.nextRun = nil }
                    await self.wakeup.wait(until: .now + .seconds(3600))
                    continue
                }
                let ran = await self.runOnce(current)
                // An empty store (the first feed pull has not come yet) is looked at again soon.
                let wait = ran ? current.interval : min(current.interval, Self.emptyStoreRetry)
                self.status.withLockedValue { $0.nextRun = Date() + wait.timeInterval }
                await self.wakeup.wait(until: .now + wait)
            }
        }
    }

    /// How soon a run that found the store empty is tried again.
    static let emptyStoreRetry = Duration.seconds(30)

    /// One run; errors are logged and kept for GetStatus. Returns false when the store was empty
    /// (nothing to check yet).
    @discardableResult
    func runOnce(_ settings: Settings) async -> Bool {
        guard let service = settings.service else { return true }
        let startedAt = Date()
        status.withLockedValue { $0.lastAttempt = startedAt }
        let url = service.base.absoluteString
        do {
            guard let span = try store.eventTimeSpan() else {
                status.withLockedValue { $0.lastError = "the store holds no quakes yet: nothing to check" }
                return false
            }
            let now = Int64(IOQuaked.FeedStatus.milliseconds(startedAt))
            let end = max(now + 60_000, span.newest + 1)
            let overlap = Int64(settings.overlap / .milliseconds(1))
            let pieces: [Piece]
            if let position = try store.catalogPosition(url: url) {
                pieces = [Piece(start: span.oldest, end: end, updatedAfter: position - overlap)]
            } else {
                let coverage = try store.backfillJobs(limit: Int.max).compactMap { job -> Coverage? in
                    guard job.cursor > job.startTime, Self.sameService(job.catalog, url),
                        Self.covers(job, minMagnitude: settings.minMagnitude, region: settings.region)
                    else { return nil }
                    return Coverage(start: job.startTime, end: job.cursor, updatedAfter: job.createdAt - overlap)
                }
                pieces = Self.firstRunPieces(
                    from: span.oldest, to: end, since: now - Int64(settings.since / .milliseconds(1)),
                    coverage: coverage)
            }
            let puller = FeedPuller(clients: clients, limits: settings.limits, userAgent: QuakedVersion.userAgent)
            let pager = CatalogPager(service: service, puller: puller, settings: settings.pager)
            let totals = NIOLockedValueBox((inserted: 0, updated: 0, deleted: 0))
            let store = store
            let expiring = settings.eventRetention.map { Date() - $0.timeInterval }
            for (index, piece) in pieces.enumerated() {
                if index > 0 { try await Task.sleep(for: settings.pager.pause) }
                let query = CatalogQuery(
                    start: piece.start, end: piece.end, minMagnitude: settings.minMagnitude, region: settings.region,
                    updatedAfter: piece.updatedAfter, includeDeleted: true)
                let (windowSpan, limit) = try await pager.plan(query, fallbackSpan: query.end - query.start)
                try await pager.run(
                    query, from: query.start, span: windowSpan, searchLimit: limit,
                    importWindow: { url, _, _, body in
                        try await store.importCatalogWindow(
                            source: url.absoluteString, maxBytes: settings.limits.maxBytes, expiringBefore: expiring,
                            association: settings.association, produce: body)
                    },
                    events: { event in
                        if case .imported(_, _, let report, _) = event {
                            totals.withLockedValue {
                                $0.inserted += report.inserted
                                $0.updated += report.updated
                                $0.deleted += report.deleted
                            }
                            self.windowDone(report)
                        }
                    })
            }
            try await store.recordCatalogSuccess(url: url, startedAt: now)
            let counts = totals.withLockedValue { $0 }
            status.withLockedValue {
                $0.lastError = nil
                $0.lastRun = counts
            }
            catalogMetrics.recordRun(success: true, startedAt: startedAt)
            logger.info(
                "catalog sync done",
                metadata: [
                    "catalog": "\(url)", "catalog.inserted": "\(counts.inserted)", "catalog.updated": "\(counts.updated)",
                    "catalog.deleted": "\(counts.deleted)",
                ])
            return true
        } catch is CancellationError {
            return true
        } catch {
            if Task.isCancelled { return true }
            status.withLockedValue { $0.lastError = "\(error)" }
            catalogMetrics.recordRun(success: false, startedAt: startedAt)
            logger.error("catalog sync failed", metadata: ["catalog": "\(url)", "error": "\(error)"])
        }
        return true
    }

    /// One query of a run: event times from `start` (inclusive) to `end` (exclusive), updated at or
    /// after `updatedAfter` (ms).
    struct Piece: Sendable, Equatable {
        var start: Int64
        var end: Int64
        var updatedAfter: Int64
    }

    /// Event times a backfill job fetched (`start` to `end`, its cursor), and the earliest
    /// `updatedafter` that is safe for them: the job's creation, less the overlap, since every
    /// window was fetched after it.
    struct Coverage: Sendable, Equatable {
        var start: Int64
        var end: Int64
        var updatedAfter: Int64
    }

    /// The queries of a catalog's first run (no position yet) over event times `start` to `end`.
    /// Times no backfill job covers are asked from `since` (now less `catalog-since`). Times a job
    /// covers are asked from the newest job's bound when that is earlier than `since` (what
    /// changed upstream after its windows were fetched), else from `since` too (a little more
    /// than needed, in the same query). Neighbouring times with the same bound are one query: after
    /// a recent backfill the whole run is one query.
    static func firstRunPieces(from start: Int64, to end: Int64, since: Int64, coverage: [Coverage]) -> [Piece] {
        guard start < end else { return [] }
        let inside = coverage.filter { $0.start < end && $0.end > start && $0.start < $0.end }
        var edges = Set([start, end])
        for covered in inside {
            if covered.start > start { edges.insert(covered.start) }
            if covered.end < end { edges.insert(covered.end) }
        }
        let sorted = edges.sorted()
        var pieces: [Piece] = []
        for (a, b) in zip(sorted, sorted.dropFirst()) {
            let bounds = inside.filter { $0.start <= a && b <= $0.end }.map(\.updatedAfter)
            let bound = bounds.max().map { min($0, since) } ?? since
            if let last = pieces.last, last.updatedAfter == bound, last.end == a {
                pieces[pieces.count - 1].end = b
            } else {
                pieces.append(Piece(start: a, end: b, updatedAfter: bound))
            }
        }
        return pieces
    }

    /// Whether a job's catalog is the sync's (compared as parsed base URLs).
    static func sameService(_ catalog: String, _ url: String) -> Bool {
        (try? CatalogService(parsing: catalog).base.absoluteString) == url
    }

    /// Whether a job fetched every event the sync asks for in its times: no magnitude floor above
    /// the sync's, and no region, or the sync's own.
    static func covers(_ job: BackfillJobRecord, minMagnitude: Double?, region: CatalogRegion?) -> Bool {
        if let floor = job.minMagnitude {
            guard let minMagnitude, floor <= minMagnitude else { return false }
        }
        if let jobRegion = job.region, jobRegion != region { return false }
        return true
    }

    /// What GetStatus shows, when a catalog is configured.
    func describe() -> IOQuaked.CatalogStatus? {
        let settings = settings.withLockedValue { $0 }
        guard let service = settings.service else { return nil }
        let status = status.withLockedValue { $0 }
        let position = try? store.catalogPosition(url: service.base.absoluteString)
        return IOQuaked.CatalogStatus(
            url: service.base.absoluteString, intervalSeconds: Int(settings.interval / .seconds(1)),
            lastSuccess: position.map(Int.init), lastAttempt: status.lastAttempt.map(IOQuaked.FeedStatus.milliseconds),
            lastError: status.lastError, nextRun: status.nextRun.map(IOQuaked.FeedStatus.milliseconds),
            lastUpdated: status.lastRun?.updated, lastDeleted: status.lastRun?.deleted,
            lastInserted: status.lastRun?.inserted)
    }
}
