import Foundation
import QuakeStore

/// Reply shapes of io.quaked (see io.quaked.varlink, which these must match).
struct ImportCounts: Codable, Sendable {
    var inserted, updated, unchanged, stale, superseded, skipped, bytes, durationMs: Int
    var token: Int64?

    init(_ report: ImportReport) {
        inserted = report.inserted
        updated = report.updated
        unchanged = report.unchanged
        stale = report.stale
        superseded = report.superseded
        skipped = report.skippedTotal
        bytes = report.bytes
        durationMs = report.durationMs
        token = report.token
    }
}

struct FeedStatusReply: Codable, Sendable {
    var name, url: String
    var lastAttempt, lastSuccess: Date?
    var lastResult: String?
    var httpStatus, durationMs: Int?
    var lastError: String?
    var consecutiveFailures: Int
    var nextPull: Date?
    var lastImport: ImportCounts?

    init(_ status: FeedStatus) {
        name = status.name
        url = status.url
        lastAttempt = status.lastAttempt
        lastSuccess = status.lastSuccess
        lastResult = status.lastResult
        httpStatus = status.httpStatus
        durationMs = status.durationMs
        lastError = status.lastError
        consecutiveFailures = status.consecutiveFailures
        nextPull = status.nextPull
        lastImport = status.lastReport.map(ImportCounts.init)
    }
}

struct ClientStatusReply: Codable, Sendable {
    var name: String
    var token: Int64
    var lag: Int64
    var lastSeen: Date
}

struct StatusReply: Codable, Sendable {
    var version, storeId: String
    var headToken, oldestToken: Int64
    var quakeCount, databaseBytes: Int
    var lastChange: Date?
    var feeds: [FeedStatusReply]
    var subscribers: Int
    var clients: [ClientStatusReply]
}

struct RefreshReply: Codable, Sendable {
    struct Result: Codable, Sendable {
        var feed: String
        var result: String
        var counts: ImportCounts?
        var error: String?

        init(status: FeedStatus, result: PullResult) {
            feed = status.name
            switch result {
            case .imported(let report, _):
                self.result = "imported"
                counts = ImportCounts(report)
            case .notModified:
                self.result = "not-modified"
            case .failed(let reason):
                self.result = "failed"
                error = reason
            }
        }
    }
    var results: [Result]
    var headToken: Int64
}
