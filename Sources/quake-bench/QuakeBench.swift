import ArgumentParser
import Foundation
import QuakeStore

/// `quake-bench`: speed and memory figures for quaked, each against a peer measured in the same run.
@main
struct QuakeBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "quake-bench",
        abstract: "Measure quaked's import against a plain Python peer, in one run.",
        subcommands: [ImportBenchmark.self, ImportOnce.self, ProtocolBenchmark.self],
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

    func run() async throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        let workDir = URL(fileURLWithPath: work ?? NSTemporaryDirectory() + "/quake-bench")
        try FileManager.default.createDirectory(at: workDir, withIntermediateDirectories: true)
        let feed = workDir.appendingPathComponent("feed-\(features).geojson")
        if !FileManager.default.fileExists(atPath: feed.path) {
            print("generating \(feed.path) …")
            let gen = try MeasuredProcess.run([
                "python3", root.appendingPathComponent("scripts/gen-feed.py").path, "--features", "\(features)",
                feed.path,
            ])
            guard gen.status == 0 else { throw ValidationError("gen-feed.py failed (exit \(gen.status))") }
        }
        let size = (try FileManager.default.attributesOfItem(atPath: feed.path)[.size] as? Int) ?? 0
        print("feed: \(features) features, \(String(format: "%.1f", Double(size) / 1e6)) MB")

        let storeDir = workDir.appendingPathComponent("quaked-store")
        try? FileManager.default.removeItem(at: storeDir)
        let me = CommandLine.arguments[0].hasPrefix("/") ? CommandLine.arguments[0] : "/proc/self/exe"
        let selfPath = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? me

        let first = try MeasuredProcess.run([selfPath, "import-once", feed.path, storeDir.path])
        guard first.status == 0 else { throw ValidationError("quaked import failed (exit \(first.status))") }
        let noop = try MeasuredProcess.run([selfPath, "import-once", feed.path, storeDir.path])
        guard noop.status == 0 else { throw ValidationError("quaked re-import failed (exit \(noop.status))") }

        print("")
        print("importer                          wall s   features/s   peak RSS MB")
        row("quaked (first import)", first)
        row("quaked (no-op re-import)", noop)
        if !noPeer {
            let peerDB = workDir.appendingPathComponent("peer.sqlite")
            for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: peerDB.path + suffix) }
            let peer = try MeasuredProcess.run([
                "python3", root.appendingPathComponent("Benchmarks/peer_import.py").path, feed.path, peerDB.path,
            ])
            guard peer.status == 0 else { throw ValidationError("the Python peer failed (exit \(peer.status))") }
            row("python json.load + sqlite3", peer)
            print("")
            print(
                String(
                    format: "speed: quaked is %.1fx faster than the peer", peer.wall.inSeconds / first.wall.inSeconds))
            print(
                String(
                    format: "memory: quaked peaks at %.2fx the peer's RSS",
                    Double(first.maxRSSBytes) / Double(peer.maxRSSBytes)))
        }
        print(
            String(
                format: "no-op re-import takes %.2f of the first import's time",
                noop.wall.inSeconds / first.wall.inSeconds))
        print("quaked report (first): \(first.stdout.trimmingCharacters(in: .whitespacesAndNewlines))")
        print("quaked report (no-op): \(noop.stdout.trimmingCharacters(in: .whitespacesAndNewlines))")
    }

    private func row(_ name: String, _ run: ChildRun) {
        let s = run.wall.inSeconds
        print(
            name.padding(toLength: 32, withPad: " ", startingAt: 0)
                + String(format: "%8.2f %12.0f %13.1f", s, Double(features) / s, Double(run.maxRSSBytes) / 1_048_576))
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
