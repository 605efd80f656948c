import Foundation
import Logging
import QuakeStore
import QuakeVarlink

/// The io.quaked interface (and org.varlink.service): decodes each call's parameters, calls the
/// daemon, encodes the reply. Errors are typed Varlink errors; no call can stop the daemon.
public struct QuakedMethods: ControlMethods {
    let store: QuakeStore
    let scheduler: FeedScheduler
    let reloader: Reloader
    let logger: Logger

    public init(store: QuakeStore, scheduler: FeedScheduler, reloader: Reloader, logger: Logger) {
        self.store = store
        self.scheduler = scheduler
        self.reloader = reloader
        self.logger = logger
    }

    public func handle(_ call: VarlinkCall, reply: @escaping @Sendable (VarlinkReply) async throws -> Void) async throws {
        do {
            try await dispatch(call, reply: reply)
        } catch let error as MethodError {
            try await reply(VarlinkReply(parameters: error.parameters, error: error.name))
        } catch is DecodingError {
            try await reply(
                VarlinkReply(parameters: .object(["parameter": .string("parameters")]), error: VarlinkErrorName.invalidParameter))
        }
    }

    private func dispatch(_ call: VarlinkCall, reply: @escaping @Sendable (VarlinkReply) async throws -> Void) async throws {
        switch call.method {
        case "org.varlink.service.GetInfo":
            try await reply(
                VarlinkReply(
                    parameters: .object([
                        "vendor": .string("quaked"), "product": .string("quaked"),
                        "version": .string(QuakedVersion.string), "url": .string("https://github.com/quaked/quaked"),
                        "interfaces": .array([.string("org.varlink.service"), .string(QuakedInterface.name)]),
                    ])))
        case "org.varlink.service.GetInterfaceDescription":
            struct Parameters: Decodable { var interface: String }
            let parameters = try VarlinkCoding.decode(Parameters.self, from: call.parameters)
            let text: String
            switch parameters.interface {
            case QuakedInterface.name: text = QuakedInterface.description
            case "org.varlink.service": text = QuakedInterface.serviceDescription
            default:
                throw MethodError(
                    name: VarlinkErrorName.interfaceNotFound, parameters: .object(["interface": .string(parameters.interface)]))
            }
            try await reply(VarlinkReply(parameters: .object(["description": .string(text)])))
        case "io.quaked.GetStatus":
            try await reply(VarlinkReply(parameters: try VarlinkCoding.value(try status())))
        case "io.quaked.Refresh":
            struct Parameters: Decodable { var feed: String? }
            let parameters = try VarlinkCoding.decode(Parameters.self, from: call.parameters)
            let results: [(FeedStatus, PullResult)]
            do {
                results = try await scheduler.refresh(feed: parameters.feed)
            } catch let error as UnknownFeed {
                throw MethodError(name: "io.quaked.NoSuchFeed", parameters: .object(["feed": .string(error.name)]))
            }
            let reply_ = RefreshReply(
                results: results.map { RefreshReply.Result(status: $0.0, result: $0.1) }, headToken: try store.head())
            try await reply(VarlinkReply(parameters: try VarlinkCoding.value(reply_)))
        case "io.quaked.Reload":
            do {
                try await reloader.reload()
            } catch {
                throw MethodError(name: "io.quaked.ReloadFailed", parameters: .object(["reason": .string("\(error)")]))
            }
            try await reply(VarlinkReply(parameters: .object([:])))
        default:
            if call.interface != QuakedInterface.name && call.interface != "org.varlink.service" {
                throw MethodError(
                    name: VarlinkErrorName.interfaceNotFound, parameters: .object(["interface": .string(call.interface)]))
            }
            throw MethodError(name: VarlinkErrorName.methodNotFound, parameters: .object(["method": .string(call.method)]))
        }
    }

    func status() throws -> StatusReply {
        let path = store.path
        let bytes = ["", "-wal"].reduce(0) { total, suffix in
            total + ((try? FileManager.default.attributesOfItem(atPath: path + suffix)[.size] as? Int) ?? 0)
        }
        return StatusReply(
            version: QuakedVersion.string, storeId: store.storeID, headToken: try store.head(),
            oldestToken: try store.oldestToken(), quakeCount: try store.count(), databaseBytes: bytes,
            feeds: scheduler.statuses().map(FeedStatusReply.init))
    }
}

/// A typed Varlink error reply.
struct MethodError: Error {
    var name: String
    var parameters: JSONValue
}

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

struct StatusReply: Codable, Sendable {
    var version, storeId: String
    var headToken, oldestToken: Int64
    var quakeCount, databaseBytes: Int
    var feeds: [FeedStatusReply]
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
