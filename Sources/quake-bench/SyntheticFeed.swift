import ArgumentParser
import Foundation

/// The benchmarks' synthetic feed: `scripts/gen-feed.py` run on the real fixtures, cached in the
/// working directory by size (the script gives the same bytes for the same arguments).
enum SyntheticFeed {
    /// The package's root directory (this file is Sources/quake-bench/SyntheticFeed.swift).
    static let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    /// `work`, or the shared default (a `quake-bench` directory in the temp directory), created.
    static func workDirectory(_ work: String?) throws -> URL {
        let directory = URL(fileURLWithPath: work ?? NSTemporaryDirectory() + "/quake-bench")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        return directory
    }

    /// The feed of `features` features in `directory` (generated unless it is there already), and
    /// its size in bytes. `say` gets the progress lines.
    static func make(features: Int, in directory: URL, say: (String) -> Void = { print($0) }) throws -> (
        url: URL, bytes: Int
    ) {
        let feed = directory.appendingPathComponent("feed-\(features).geojson")
        if !FileManager.default.fileExists(atPath: feed.path) {
            say("generating \(feed.path) …")
            let gen = try MeasuredProcess.run([
                "python3", packageRoot.appendingPathComponent("scripts/gen-feed.py").path, "--features", "\(features)",
                feed.path,
            ])
            guard gen.status == 0 else {
                try? FileManager.default.removeItem(at: feed)
                throw ValidationError("gen-feed.py failed (exit \(gen.status))")
            }
        }
        let size = (try FileManager.default.attributesOfItem(atPath: feed.path)[.size] as? Int) ?? 0
        say("feed: \(features) features, \(String(format: "%.1f", Double(size) / 1e6)) MB")
        return (feed, size)
    }
}
