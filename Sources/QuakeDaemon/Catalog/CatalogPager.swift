import Foundation
import QuakeFeed
import QuakeStore

/// Pages one catalog query through time windows, oldest first: what backfill jobs and the
/// incremental catalog sync share.
///
/// One request is in flight at a time, with ``Settings/pause`` between requests. The window
/// length follows the density of events: `/count`, where the service offers it, sizes the first
/// window; a window the service refuses as over its search limit is split (by the ratio the
/// refusal names, else in half) and asked again; one holding more than ``target`` events makes
/// the next shorter, one holding under a quarter of it makes the next twice as long (sparse
/// windows merge). A failure worth retrying (429, 5xx, a transport error, a truncated or invalid
/// body, a timeout) is retried after the backoff or the service's Retry-After (at most
/// `retry-after-max`); after ``Settings/attempts`` failures of one window in a row, or a failure
/// not worth retrying, paging stops with ``CatalogPagingError``. Every window imported before
/// then stays imported.
struct CatalogPager: Sendable {
    /// Made from the configuration (``init(_:)``), whose defaults are the only ones.
    struct Settings: Sendable, Equatable {
        /// Between two requests.
        var pause: Duration
        /// Failures of one window in a row before paging gives up.
        var attempts: Int
        var retry: RetryPolicy
        /// The shortest window: a service that refuses even this is lying about its limit.
        var minSpan: Int64 = 1000
    }

    /// What paging did, as it happened.
    enum Event: Sendable {
        /// A request for this window is about to go out.
        case requesting(start: Int64, end: Int64)
        /// A request failed and will be retried after `delay`.
        case retrying(start: Int64, end: Int64, attempt: Int, error: String, delay: Duration)
        /// The window was imported; the next starts at `end` with `nextSpan`.
        case imported(start: Int64, end: Int64, report: ImportReport, nextSpan: Int64)
        /// The window length changed without an import (the service refused a window as too large).
        case resized(span: Int64)
    }

    let service: CatalogService
    let puller: FeedPuller
    let settings: Settings

    /// The search limit assumed until the service names its own (the USGS's).
    static let defaultSearchLimit = 20_000

    /// Asks `/count` how many events `query` matches and sizes windows for them: the window
    /// length that holds about half the service's search limit, and that limit. Without `/count`
    /// (or when it fails), `fallbackSpan` and the USGS's limit.
    func plan(_ query: CatalogQuery, fallbackSpan: Int64) async throws -> (span: Int64, searchLimit: Int) {
        let whole = max(query.end - query.start, 1)
        let counted: (count: Int, maxAllowed: Int?)?
        do {
            counted = try await puller.fetchCount(service.countURL(query))
        } catch is CancellationError {
            throw CancellationError()
        } catch {
            counted = nil  // the windows will find out
        }
        guard let counted else { return (min(fallbackSpan, whole), Self.defaultSearchLimit) }
        let limit = max(counted.maxAllowed ?? Self.defaultSearchLimit, 2)
        let target = limit / 2
        let windows = max(1, (counted.count + target - 1) / target)
        return (max(whole / Int64(windows), settings.minSpan), limit)
    }

    /// Imports windows of `query`'s parameters from `cursor` to `query.end`, starting with windows
    /// of `span`; `importWindow` imports one (its query URL, its window's end, the span it used,
    /// and the body). Returns when the last window is imported. Cancellation abandons the window
    /// in flight (its import rolls back).
    func run(
        _ query: CatalogQuery, from cursor: Int64, span: Int64, searchLimit: Int,
        importWindow: @escaping @Sendable (_ url: URL, _ windowEnd: Int64, _ span: Int64, _ body: @escaping @Sendable (FeedSink) async throws -> Void) async throws -> ImportReport,
        events: @Sendable (Event) -> Void
    ) async throws {
        let puller = puller
        try await run(
            query, from: cursor, span: span, searchLimit: searchLimit, url: service.queryURL,
            fetchWindow: { url, windowEnd, span in
                try await puller.fetchCatalog(url) { body in try await importWindow(url, windowEnd, span, body) }
            }, events: events)
    }

    /// ``run(_:from:span:searchLimit:importWindow:events:)`` with the window's URL made by `url`
    /// and fetched and imported by `fetchWindow` (its URL, its window's end, the span it used),
    /// which throws ``CatalogFailure`` as ``FeedPuller/fetchCatalog(_:importBody:)`` does: the
    /// windows of an fdsn source's backfill, in the source's format.
    func run(
        _ query: CatalogQuery, from cursor: Int64, span: Int64, searchLimit: Int, url makeURL: (CatalogQuery) -> URL,
        fetchWindow: @escaping @Sendable (_ url: URL, _ windowEnd: Int64, _ span: Int64) async throws -> ImportReport,
        events: @Sendable (Event) -> Void
    ) async throws {
        var cursor = cursor
        var span = max(span, settings.minSpan)
        var limit = searchLimit
        var failures = 0
        var first = true
        while cursor < query.end {
            if !first { try await Task.sleep(for: settings.pause) }
            first = false
            var window = query
            window.start = cursor
            window.end = min(cursor + span, query.end)
            let url = makeURL(window)
            events(.requesting(start: window.start, end: window.end))
            do {
                let report = try await fetchWindow(url, window.end, span)
                failures = 0
                let target = max(limit / 2, 1)
                if report.features > target {
                    span = max(settings.minSpan, span * Int64(target) / Int64(report.features))
                } else if report.features < target / 4 && window.end < query.end {
                    span = min(span * 2, max(query.end - query.start, settings.minSpan))
                }
                cursor = window.end
                events(.imported(start: window.start, end: window.end, report: report, nextSpan: span))
            } catch let failure as CatalogFailure {
                switch failure {
                case .overLimit(let matching, let named):
                    // The service answered, for a window that is no more: the next is a new one.
                    failures = 0
                    if let named, named > 0 { limit = named }
                    let windowSpan = window.end - window.start
                    guard windowSpan > settings.minSpan else {
                        throw CatalogPagingError(
                            message:
                                "\(url.absoluteString): the catalog refuses even a window of \(windowSpan) ms as over its search limit"
                                + (named.map { " of \($0)" } ?? "") + "; it is not answering as an FDSN service should")
                    }
                    let target = Int64(max(limit / 2, 1))
                    let smaller = matching.map { windowSpan * target / Int64(max($0, 1)) } ?? windowSpan / 2
                    span = max(settings.minSpan, min(smaller, windowSpan / 2))
                    events(.resized(span: span))
                case .permanent(let message):
                    throw CatalogPagingError(message: message)
                case .transient(let message, let retryAfter):
                    failures += 1
                    guard failures < settings.attempts else {
                        throw CatalogPagingError(
                            message: "\(message) (failed \(failures) times in a row; giving up)")
                    }
                    let delay = settings.retry.delayAfterFailure(
                        failures, retryAfter: retryAfter.map { .seconds(max(0, $0.timeIntervalSinceNow)) })
                    events(.retrying(start: window.start, end: window.end, attempt: failures, error: message, delay: delay))
                    try await Task.sleep(for: delay)
                }
            }
        }
    }
}

/// Paging stopped: the service refused the query, or a window kept failing.
struct CatalogPagingError: Error, Sendable, CustomStringConvertible {
    var message: String
    var description: String { message }
}

extension CatalogPager.Settings {
    init(_ configuration: DaemonConfiguration) {
        self.init(
            pause: configuration.backfillPause, attempts: configuration.backfillAttempts,
            retry: RetryPolicy(
                interval: configuration.interval, initialDelay: configuration.retryInitialDelay,
                maxDelay: configuration.retryMaxDelay, retryAfterMax: configuration.retryAfterMax))
    }
}

extension BackfillRunner.Settings {
    init(_ configuration: DaemonConfiguration) {
        self.init(
            pager: .init(configuration), limits: configuration.pullLimits,
            defaultCatalog: configuration.catalog ?? .usgs, eventRetention: configuration.eventRetention,
            association: configuration.association, sources: configuration.sources)
    }
}

extension CatalogSync.Settings {
    init(_ configuration: DaemonConfiguration) {
        self.init(
            service: configuration.catalog, interval: configuration.catalogInterval,
            overlap: configuration.catalogOverlap, since: configuration.catalogSince, minMagnitude: configuration.catalogMinMagnitude,
            region: configuration.catalogRegion, pager: .init(configuration), limits: configuration.pullLimits,
            eventRetention: configuration.eventRetention, association: configuration.association)
    }
}
