import Foundation
import QuakeStore

/// What quaked knows about one feed's pulls, as `GetStatus` and `quakectl status` show it.
public struct FeedStatus: Sendable, Equatable {
    /// The feed as configured (`all_month` or a URL).
    public var name: String
    public var url: String
    /// When the last pull started.
    public var lastAttempt: Date?
    /// When a pull last succeeded (imported or not modified).
    public var lastSuccess: Date?
    /// How the last pull ended.
    public var lastResult: Outcome?
    /// HTTP status of the last pull: 200 or 304, or the status a failed pull was answered with
    /// (nil for files and for failures without an answer).
    public var httpStatus: Int?
    /// How long the last pull took.
    public var durationMs: Int?
    /// Counts of the last import.
    public var lastReport: ImportReport?
    /// Why the last pull failed; nil after a success.
    public var failure: QuakedError?
    /// ``failure`` in words.
    public var lastError: String? { failure?.description }
    /// Failed pulls in a row.
    public var consecutiveFailures: Int = 0
    /// When the next scheduled pull is due.
    public var nextPull: Date?

    public enum Outcome: String, Sendable, Equatable {
        case imported
        case notModified = "not-modified"
        case failed
    }

    public init(feed: FeedSource) {
        name = feed.name
        url = feed.url.absoluteString
    }
}

/// The result of one pull, handed to everyone waiting for it.
public enum PullResult: Sendable {
    case imported(ImportReport, httpStatus: Int?)
    case notModified
    case failed(QuakedError)

    public var isSuccess: Bool {
        if case .failed = self { return false }
        return true
    }
}
