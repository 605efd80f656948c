import ArgumentParser
import Foundation
import Logging
import QuakeDaemon
import QuakeStore

/// `quaked --once`: builds the daemon's components (``QuakedApplication``, as the daemon does),
/// pulls each feed once through the scheduler and runs each source once, reports each, exits
/// non-zero if any pull or run failed.
/// No socket, no services running.
struct OnceRun {
    let configuration: DaemonConfiguration
    let loader: ConfigurationLoader
    let json: Bool

    func run() async throws {
        // The summary and the failures are printed here; the log has nothing to add.
        let logger = Logger(label: "quaked") { _ in SwiftLogNoOpLogHandler() }
        let app: QuakedApplication
        do {
            app = try QuakedApplication.build(configuration: configuration, loader: loader, logger: logger)
        } catch {
            QuakedCommand.fail("cannot open the store in \(configuration.stateDirectory): \(error)", exitCode: 1)
        }
        let store = app.store
        var failures = 0
        for (status, result) in await app.pullEveryFeedOnce() {
            switch result {
            case .imported(let report, let httpStatus):
                print(render(report, httpStatus: httpStatus, store: store, source: status))
            case .notModified:
                print(render(nil, httpStatus: 304, store: store, source: status))
            case .failed(let failure):
                failures += 1
                FileHandle.standardError.write(Data("quaked: \(status.name): \(failure)\n".utf8))
            }
        }
        for run in await app.runEverySourceOnce() {
            if let report = run.report {
                print(render(run, report, store: store))
            } else {
                failures += 1
                FileHandle.standardError.write(
                    Data("quaked: source \(run.name): \(run.failure.map { "\($0)" } ?? "failed")\n".utf8))
            }
        }
        try await app.shutdown()
        if failures > 0 { throw ExitCode(1) }
    }

    /// One source's line: the run's counts, as text or as one JSON object.
    private func render(_ run: QuakedApplication.SourceRun, _ report: SourceImportReport, store: QuakeStore) -> String {
        if json {
            let object: [String: Any] = [
                "store": store.storeID, "source": run.name, "httpStatus": run.httpStatus.map { $0 as Any } ?? NSNull(),
                "items": report.items, "applied": report.applied, "ignored": report.ignored,
                "created": report.created, "updated": report.updated, "deleted": report.deleted,
                "superseded": report.superseded, "skipped": run.skipped,
                "token": report.token.map { $0 as Any } ?? NSNull(),
            ]
            let data = try! JSONSerialization.data(
                withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])
            return String(decoding: data, as: UTF8.self)
        }
        let token = report.token.map { "token \($0)" } ?? "no changes"
        return "source \(run.name): \(report.items) reports: \(report.created) new, \(report.updated) updated, "
            + "\(report.deleted) deleted, \(report.superseded) superseded, \(report.ignored) ignored, "
            + "\(run.skipped) skipped · \(token)"
    }

    /// One feed's line: the import's counts (nil when not modified), as text or as one JSON object.
    private func render(_ report: ImportReport?, httpStatus: Int?, store: QuakeStore, source: FeedStatus) -> String {
        if json {
            var object: [String: Any] = [
                "store": store.storeID, "source": source.url,
                "httpStatus": httpStatus.map { $0 as Any } ?? NSNull(),
            ]
            if let report {
                object.merge([
                    "inserted": report.inserted, "updated": report.updated, "unchanged": report.unchanged,
                    "stale": report.stale, "superseded": report.superseded, "skipped": report.skipped,
                    "features": report.features, "token": report.token.map { $0 as Any } ?? NSNull(),
                    "bytes": report.bytes, "durationMs": report.durationMs,
                ]) { $1 }
            } else {
                object.merge([
                    "inserted": 0, "updated": 0, "unchanged": 0, "stale": 0, "superseded": 0,
                    "skipped": [String: Int](), "features": 0, "token": NSNull(), "bytes": 0, "durationMs": 0,
                    "notModified": true,
                ]) { $1 }
            }
            let data = try! JSONSerialization.data(
                withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])
            return String(decoding: data, as: UTF8.self)
        }
        guard let report else { return "\(source.name): not modified" }
        let token = report.token.map { "token \($0)" } ?? "no changes"
        return "\(source.name): \(report.features) features: +\(report.inserted) new, \(report.updated) updated, "
            + "\(report.unchanged) unchanged, \(report.stale) stale, \(report.superseded) superseded, "
            + "\(report.skippedTotal) skipped\(report.expired > 0 ? " (\(report.expired) expired)" : "") · \(token) · "
            + "\(report.bytes) bytes in \(report.durationMs) ms"
    }
}
