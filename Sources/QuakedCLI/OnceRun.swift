import ArgumentParser
import AsyncHTTPClient
import Foundation
import QuakeDaemon
import QuakeStore

/// `quaked --once`: pull each feed, import it, report, exit non-zero if any pull failed.
struct OnceRun {
    let store: QuakeStore
    let configuration: DaemonConfiguration
    let json: Bool

    func run() async throws {
        let limits = configuration.pullLimits
        let clients = FeedHTTPClients(
            configuration: FeedPuller.clientConfiguration(limits: limits), proxies: configuration.proxy)
        let puller = FeedPuller(clients: clients, limits: limits, userAgent: QuakedVersion.userAgent)
        var failures = 0
        let expiringBefore = configuration.eventRetention.map { Date().addingTimeInterval(-($0 / .seconds(1))) }
        for source in configuration.feeds {
            do {
                // Conditional, with the validators of the body the store last imported.
                let validators = try store.feedState(url: source.url.absoluteString)?.validators ?? .init()
                let outcome = try await puller.pull(
                    source, into: store, validators: validators, expiringBefore: expiringBefore)
                print(render(outcome, source: source))
            } catch {
                failures += 1
                FileHandle.standardError.write(Data("quaked: \(source): \(error)\n".utf8))
            }
        }
        try await clients.shutdown()
        if failures > 0 { throw ExitCode(1) }
    }

    private func render(_ outcome: FeedPuller.Outcome, source: FeedSource) -> String {
        let report = outcome.report
        if json {
            var object: [String: Any] = [
                "store": store.storeID, "source": source.url.absoluteString,
                "httpStatus": outcome.httpStatus.map { $0 as Any } ?? NSNull(),
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
        guard let report else { return "\(source): not modified" }
        let token = report.token.map { "token \($0)" } ?? "no changes"
        return "\(source): \(report.features) features: +\(report.inserted) new, \(report.updated) updated, "
            + "\(report.unchanged) unchanged, \(report.stale) stale, \(report.superseded) superseded, "
            + "\(report.skippedTotal) skipped\(report.expired > 0 ? " (\(report.expired) expired)" : "") · \(token) · "
            + "\(report.bytes) bytes in \(report.durationMs) ms"
    }
}
