import Foundation
import Logging
import QuakeModel
import QuakeStore

/// One shape for quaked's operational failures (a pull, a reload): what kind of failure it is, a
/// message that says what happened and what to do, the place in the configuration when there is
/// one, the error underneath, and for HTTP failures the status and `Retry-After` as fields.
///
/// `GetStatus` shows a failed pull's kind, HTTP status and `Retry-After` as members of its own
/// (`errorKind`, `httpStatus`, `retryAfter`) beside the text (`lastError`), `Reload`'s
/// `ReloadFailed` the place, and the log the same as metadata fields (``logMetadata``).
public struct QuakedError: Error, Sendable, CustomStringConvertible {
    /// What kind of failure, as `errorKind` and the log's `error.kind` name it.
    public enum Kind: String, Sendable, CaseIterable {
        /// No answer: DNS, connection refused, TLS, a timeout, a connection lost, too many redirects.
        case transport
        /// The server answered with a status other than 200 or 304 (``QuakedError/httpStatus``).
        case httpStatus = "http-status"
        /// The document is over the maximum feed size.
        case tooLarge = "too-large"
        /// The body is not a valid USGS GeoJSON feed (bad JSON, truncated, wrong shape).
        case invalidFeed = "invalid-feed"
        /// SQLite refused the write (disk full, read-only file, corruption).
        case storage
        /// quaked stopped the work: it is shutting down, or a reload removed the feed.
        case cancelled
        /// A configuration that does not load (``QuakedError/place`` says where, when known).
        case configuration
        /// Anything else.
        case other
    }

    public var kind: Kind
    /// What went wrong and, where it helps, what to do about it.
    public var message: String
    /// The status the server answered, for ``Kind/httpStatus`` (and a 200 whose body failed).
    public var httpStatus: Int?
    /// When the server asked to be asked again (the `Retry-After` of a 429 or 503).
    public var retryAfter: Date?
    /// Where a configuration value was set: `/etc/quaked/quaked.conf:12`, `--interval`,
    /// `QUAKED_INTERVAL`.
    public var place: String?
    /// The error underneath (the HTTP client's, the importer's, the configuration's), if any.
    public var cause: (any Error)?

    public init(
        kind: Kind, message: String, httpStatus: Int? = nil, retryAfter: Date? = nil, place: String? = nil,
        cause: (any Error)? = nil
    ) {
        self.kind = kind
        self.message = message
        self.httpStatus = httpStatus
        self.retryAfter = retryAfter
        self.place = place
        self.cause = cause
    }

    /// Any error in this shape: a ``QuakedError`` as it is, the importer's and the
    /// configuration's errors with their kind and place, cancellation as ``Kind/cancelled``,
    /// anything else as ``Kind/other`` with its description.
    public init(_ error: any Error) {
        switch error {
        case let error as QuakedError:
            self = error
        case let error as ImportError:
            let kind: Kind =
                switch error.kind {
                case .invalidFeed: .invalidFeed
                case .tooLarge: .tooLarge
                case .source: .transport
                case .cancelled: .cancelled
                case .storage: .storage
                }
            self.init(kind: kind, message: error.description, cause: error)
        case let error as ConfigurationError:
            self.init(kind: .configuration, message: error.description, place: error.place, cause: error)
        case is CancellationError:
            self.init(kind: .cancelled, message: "cancelled: quaked is stopping", cause: error)
        default:
            self.init(kind: .other, message: "\(error)", cause: error)
        }
    }

    public var description: String { message }

    /// The failure as swift-log metadata: `error` (the message), `error.kind`, and where set
    /// `http.status`, `retry.after` (UTC) and `config.place`.
    public var logMetadata: Logger.Metadata {
        var metadata: Logger.Metadata = ["error": "\(message)", "error.kind": "\(kind.rawValue)"]
        if let httpStatus { metadata["http.status"] = "\(httpStatus)" }
        if let retryAfter { metadata["retry.after"] = "\(QuakeTime.iso8601(QuakeTime.milliseconds(retryAfter)))" }
        if let place { metadata["config.place"] = "\(place)" }
        return metadata
    }
}

extension QuakedError: Equatable {
    /// Equal in every field but ``cause``, which need not be comparable.
    public static func == (lhs: QuakedError, rhs: QuakedError) -> Bool {
        lhs.kind == rhs.kind && lhs.message == rhs.message && lhs.httpStatus == rhs.httpStatus
            && lhs.retryAfter == rhs.retryAfter && lhs.place == rhs.place
    }
}

extension ConfigurationError {
    /// Where the value found wrong was set, when a file line, an option or a variable set it
    /// (not a check of the configuration as a whole, nor a reload already in progress).
    public var place: String? {
        ["configuration", "reload"].contains(source) ? nil : source
    }
}
