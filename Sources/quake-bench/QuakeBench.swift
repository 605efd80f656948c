import ArgumentParser
import Foundation
import QuakeFeed
import QuakeStore

/// `quake-bench`: speed and memory figures for quaked, each against a peer measured in the same run.
@main
struct QuakeBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "quake-bench",
        abstract: "Measure quaked's import against a plain Python peer, in one run.",
        subcommands: [
            ImportBenchmark.self, ImportOnce.self, ParseOnce.self, ProtocolBenchmark.self, PushBenchmark.self, BackfillBenchmark.self,
            SyncBenchmark.self, SoakBenchmark.self, AssociateBenchmark.self, AssociateChild.self, QuakeMLBenchmark.self, QuakeMLChild.self,
            MeasureChild.self, ModelRun.self,
        ],
        defaultSubcommand: ImportBenchmark.self)
}

/// Imports the same synthetic feed with quaked's importer and with Python's json.load + sqlite3
/// executemany, each in its own process, and prints wall time, features per second, peak RSS and
/// the ratios; then quaked's no-op re-import of the same feed.
struct ImportBenchmark: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "import", abstract: "Import benchmark: quaked vs Python json.load + sqlite3.")

    @Option(help: "Features in the synthetic feed.")
    var features = 100_000

    @Option(help: "Working directory for the feed and the stores (default: a temp directory).")
    var work: String?

    @Flag(help: "Skip the Python peer (for very large feeds).")
    var noPeer = false

    @Option(help: "Rounds: each imports with quaked (first and no-op) and with the peer.")
    var runs = 5

    func validate() throws {
        guard runs >= 1 else { throw ValidationError("--runs must be at least 1") }
        guard features >= 1 else { throw ValidationError("--features must be at least 1") }
    }

    func run() async throws {
        let root = SyntheticFeed.packageRoot
        let workDir = try SyntheticFeed.workDirectory(work)
        let feed = try SyntheticFeed.make(features: features, in: workDir).url

        let storeDir = workDir.appendingPathComponent("quaked-store")
        let peerDB = workDir.appendingPathComponent("peer.sqlite")
        let me = CommandLine.arguments[0].hasPrefix("/") ? CommandLine.arguments[0] : "/proc/self/exe"
        let selfPath = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? me

        // Rounds interleave the importers, so a slow spell of the machine hits both alike.
        var firsts: [ChildRun] = []
        var noops: [ChildRun] = []
        var peers: [ChildRun] = []
        for round in 1...runs {
            print("round \(round) of \(runs) …")
            try? FileManager.default.removeItem(at: storeDir)
            let first = try MeasuredProcess.run([selfPath, "import-once", feed.path, storeDir.path])
            guard first.status == 0 else { throw ValidationError("quaked import failed (exit \(first.status))") }
            let noop = try MeasuredProcess.run([selfPath, "import-once", feed.path, storeDir.path])
            guard noop.status == 0 else { throw ValidationError("quaked re-import failed (exit \(noop.status))") }
            firsts.append(first)
            noops.append(noop)
            if !noPeer {
                for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: peerDB.path + suffix) }
                let peer = try MeasuredProcess.run([
                    "python3", root.appendingPathComponent("Benchmarks/peer_import.py").path, feed.path, peerDB.path,
                ])
                guard peer.status == 0 else { throw ValidationError("the Python peer failed (exit \(peer.status))") }
                peers.append(peer)
            }
        }

        print("")
        print("median of \(runs) runs (fastest in brackets)")
        print("importer                          wall s   features/s   peak RSS MB")
        row("quaked (first import)", firsts)
        row("quaked (no-op re-import)", noops)
        if !noPeer {
            row("python json.load + sqlite3", peers)
            print("")
            print(
                String(
                    format: "speed: quaked is %.1fx faster than the peer (fastest runs: %.1fx)",
                    median(peers) / median(firsts), fastest(peers) / fastest(firsts)))
            print(
                String(
                    format: "memory: quaked peaks at %.2fx the peer's RSS",
                    Double(firsts.map(\.maxRSSBytes).max()!) / Double(peers.map(\.maxRSSBytes).max()!)))
        }
        print(
            String(
                format: "no-op re-import takes %.2f of the first import's time (fastest runs: %.2f)",
                median(noops) / median(firsts), fastest(noops) / fastest(firsts)))
        print("quaked report (first): \(firsts[0].stdout.trimmingCharacters(in: .whitespacesAndNewlines))")
        print("quaked report (no-op): \(noops[0].stdout.trimmingCharacters(in: .whitespacesAndNewlines))")
    }

    private func median(_ runs: [ChildRun]) -> Double {
        let sorted = runs.map(\.wall.inSeconds).sorted()
        return sorted.count % 2 == 1
            ? sorted[sorted.count / 2] : (sorted[sorted.count / 2 - 1] + sorted[sorted.count / 2]) / 2
    }

    private func fastest(_ runs: [ChildRun]) -> Double {
        runs.map(\.wall.inSeconds).min()!
    }

    private func row(_ name: String, _ runs: [ChildRun]) {
        let s = median(runs)
        let rss = Double(runs.map(\.maxRSSBytes).max()!) / 1_048_576
        print(
            name.padding(toLength: 32, withPad: " ", startingAt: 0)
                + String(format: "%8.2f %12.0f %13.1f   [%.2f s]", s, Double(features) / s, rss, fastest(runs)))
    }

}

/// The child side of the benchmark: one import in a fresh process, so its peak RSS is its own.
struct ImportOnce: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "import-once", abstract: "Import FEED into the store in DIR once and print the report as JSON.",
        shouldDisplay: false)

    @Argument var feed: String
    @Argument var directory: String

    func run() async throws {
        let store = try QuakeStore(directory: URL(fileURLWithPath: directory))
        let report = try await store.importFile(URL(fileURLWithPath: feed))
        try store.close()
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        print(String(decoding: try encoder.encode(report), as: UTF8.self))
    }
}

/// Parses FEED without storing it (decoding every feature, or only validating it): how much of an
/// import is the parser's, which runs on its own thread beside SQLite's.
struct ParseOnce: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "parse-once", abstract: "Parse FEED in 128 KiB chunks and print the time taken.",
        shouldDisplay: false)

    @Argument var feed: String
    @Flag(help: "Only validate each feature and read its id, as a re-import does.") var noDecode = false

    func run() async throws {
        let started = ContinuousClock.now
        let handle = try FileHandle(forReadingFrom: URL(fileURLWithPath: feed))
        defer { try? handle.close() }
        var parser = FeedParser()
        var features = 0
        var checksum: UInt64 = 0
        while let chunk = try handle.read(upToCount: 128 * 1024), !chunk.isEmpty {
            try chunk.withUnsafeBytes { bytes in
                try parser.consume(bytes, decode: !noDecode) { element in
                    features += 1
                    checksum ^= element.hash
                }
            }
        }
        try parser.finish()
        let seconds = (ContinuousClock.now - started) / .seconds(1)
        print(
            String(
                format: "%d features in %.3f s (%.0f MB/s), hash xor %016llx", features, seconds,
                Double(parser.bytesConsumed) / seconds / 1e6, checksum))
    }
}
