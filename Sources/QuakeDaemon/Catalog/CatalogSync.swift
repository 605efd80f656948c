import Foundation
import Logging
import NIOConcurrencyHelpers
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
/// when the last successful run began, persists in the store (`catalogState`); the first run, with
/// none, asks for every event updated since the oldest one stored.
final class CatalogSync: Service, Sendable {
    struct Settings: Sendable, Equatable {
        var service: CatalogService?
        var interval: Duration = .seconds(900)
        var overlap: Duration = .seconds(600)
        var minMagnitude: Double?
        var region: CatalogRegion?
        var pager = CatalogPager.Settings()
        var limits = FeedPuller.Limits()
        var eventRetention: Duration?
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
    private let finished: @Sendable (_ success: Bool, _ startedAt: Date) -> Void
    private let windowDone: @Sendable (ImportReport) -> Void

    init(
        store: QuakeStore, clients: FeedHTTPClients, settings: Settings, logger: Logger,
        finished: @escaping @Sendable (_ success: Bool, _ startedAt: Date) -> Void = { _, _ in },
        windowDone: @escaping @Sendable (ImportReport) -> Void = { _ in }
    ) {
        self.store = store
        self.clients = clients
        self.settings = NIOLockedValueBox(settings)
        self.logger = logger
        self.finished = finished
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
            let position = try store.catalogPosition(url: url) ?? span.oldest
            let now = Int64(IOQuaked.FeedStatus.milliseconds(startedAt))
            let query = CatalogQuery(
                start: span.oldest, end: max(now + 60_000, span.newest + 1), minMagnitude: settings.minMagnitude,
                region: settings.region,
                updatedAfter: position - Int64(settings.overlap / .milliseconds(1)), includeDeleted: true)
            let puller = FeedPuller(clients: clients, limits: settings.limits, userAgent: QuakedVersion.userAgent)
            let pager = CatalogPager(service: service, puller: puller, settings: settings.pager)
            let (windowSpan, limit) = try await pager.plan(query, fallbackSpan: query.end - query.start)
            let totals = NIOLockedValueBox((inserted: 0, updated: 0, deleted: 0))
            let store = store
            let expiring = settings.eventRetention.map { Date() - $0.timeInterval }
            try await pager.run(
                query, from: query.start, span: windowSpan, searchLimit: limit,
                importWindow: { url, _, _, body in
                    try await store.importCatalogWindow(
                        source: url.absoluteString, maxBytes: settings.limits.maxBytes, expiringBefore: expiring,
                        produce: body)
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
            try await store.recordCatalogSuccess(url: url, startedAt: now)
            let counts = totals.withLockedValue { $0 }
            status.withLockedValue {
                $0.lastError = nil
                $0.lastRun = counts
            }
            finished(true, startedAt)
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
            finished(false, startedAt)
            logger.error("catalog sync failed", metadata: ["catalog": "\(url)", "error": "\(error)"])
        }
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
