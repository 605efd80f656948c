import QuakeClient
import QuakeProtocol
import Varlink
import Foundation
import QuakeCtl
import QuakeTestSupport
import Testing

extension ClientEndToEnd {
    @Suite struct ExportTests {
        /// 100,000 quakes export in constant memory (GeoJSON, SVG and KML), and the GeoJSON imports
        /// back unchanged.
        /// (ThreadSanitizer makes the import and export several times slower: over 2 minutes.)
        @Test(.timeLimit(Sanitizer.thread ? .minutes(8) : .minutes(2)))
        func largeExportStaysSmallAndRoundTrips() async throws {
            let patience: Duration = Sanitizer.thread ? .seconds(360) : .seconds(90)
            try await withTemporaryDirectory { dir in
                let feed = dir.appendingPathComponent("big.geojson")
                let generated = try await ChildProcess.run(
                    "/usr/bin/python3",
                    [
                        Fixtures.packageRoot.appendingPathComponent("scripts/gen-feed.py").path, "--features", "100000",
                        feed.path,
                    ],
                    timeout: patience)
                #expect(generated.status == 0, "\(generated.stderr)")
                let daemonDirectory = dir.appendingPathComponent("daemon")
                try FileManager.default.createDirectory(at: daemonDirectory, withIntermediateDirectories: true)
                let once = try await ChildProcess.run(
                    BuiltProducts.path("quaked"),
                    [
                        "--once", "--state-directory", daemonDirectory.appendingPathComponent("state").path, "--socket",
                        daemonDirectory.appendingPathComponent("once.sock").path, "--feed", feed.absoluteString,
                    ],
                    timeout: patience)
                #expect(once.status == 0, "\(once.stderr)")
                try FileManager.default.removeItem(at: feed)

                let daemon = try await Quaked(in: daemonDirectory, feeds: [TestFeeds.day])
                let count = try daemon.withStore { try $0.count() }
                #expect(count == 100_146)
                let export = dir.appendingPathComponent("export.geojson")
                let measured = try await ChildProcess.run(
                    "/usr/bin/time",
                    [
                        "-f", "maxrss=%M", BuiltProducts.path("quakectl"), "export", "--format", "geojson", "-o",
                        export.path,
                        "--socket", daemon.socketPath,
                    ],
                    timeout: patience)
                // The map formats stream too: an SVG circle and a KML Placemark per quake, written
                // to /dev/null through the shell (GNU time counts the shell's waited-for child).
                for format in ["svg", "kml"] {
                    let map = try await ChildProcess.run(
                        "/usr/bin/time",
                        [
                            "-f", "maxrss=%M", "/bin/sh", "-c",
                            "'\(BuiltProducts.path("quakectl"))' export --format \(format) --socket '\(daemon.socketPath)' > /dev/null",
                        ],
                        timeout: patience)
                    #expect(map.status == 0, "\(format): \(map.stderr)")
                    let mapKilobytes = try #require(Self.peakKilobytes(map.stderr))
                    print("export --format \(format) of 100,146 quakes: peak RSS \(mapKilobytes) KB")
                    if !Sanitizer.isActive { #expect(mapKilobytes < 64 * 1024, "\(format): peak RSS \(mapKilobytes) KB") }
                }
                try await daemon.stop()
                #expect(measured.status == 0, "\(measured.stderr)")
                let kilobytes = try #require(Self.peakKilobytes(measured.stderr))
                print("export --format geojson of 100,146 quakes: peak RSS \(kilobytes) KB")
                if !Sanitizer.isActive { #expect(kilobytes < 64 * 1024, "peak RSS \(kilobytes) KB") }
                #expect(measured.stderr.contains("Exported 100,146 earthquakes"))

                // Re-importing the export into the same store changes nothing.
                let reimport = try await ChildProcess.run(
                    BuiltProducts.path("quaked"),
                    [
                        "--once", "--json", "--state-directory", daemon.stateDirectory.path, "--socket",
                        daemonDirectory.appendingPathComponent("once.sock").path, "--feed", export.absoluteString,
                    ],
                    timeout: patience)
                #expect(reimport.status == 0, "\(reimport.stderr)")
                let report = try #require(
                    try JSONSerialization.jsonObject(with: Data(reimport.stdout.utf8)) as? [String: Any])
                #expect(report["features"] as? Int == 100_146)
                #expect(report["unchanged"] as? Int == 100_146)
                #expect(report["inserted"] as? Int == 0)
                #expect(report["updated"] as? Int == 0)
                #expect((report["skipped"] as? [String: Any])?.isEmpty == true)
            }
        }

        /// The peak RSS GNU time printed with `-f maxrss=%M`.
        static func peakKilobytes(_ stderr: String) -> Int? {
            stderr.split(separator: "\n").last { $0.hasPrefix("maxrss=") }.flatMap { Int($0.dropFirst("maxrss=".count)) }
        }

        @Test func csvAndNDJSONCarryEveryQuake() async throws {
            try await withQuaked { daemon in
                let stored = try daemon.withStore { try $0.allQuakes() }.map(wire)
                let ndjson = try await quakectl(["export", "--format", "ndjson", "--socket", daemon.socketPath])
                #expect(ndjson.status == 0)
                let decoded = try ndjson.stdout.split(separator: "\n").map {
                    try JSONDecoder().decode(IOQuaked.Quake.self, from: Data($0.utf8))
                }
                #expect(byID(decoded) == byID(stored))

                let csv = try await quakectl(["export", "--format", "csv", "--socket", daemon.socketPath])
                #expect(csv.status == 0)
                let records = csv.stdout.components(separatedBy: "\r\n").filter { !$0.isEmpty }
                #expect(records.first == QuakeFields.names.filter { $0 != "contributors" }.joined(separator: ","))
                #expect(records.count == stored.count + 1)  // no field of these fixtures holds a line break

                // -o writes the file only when complete; a failure leaves nothing behind.
                let missing = daemon.directory.appendingPathComponent("no/such/dir/out.csv").path
                let failed = try await quakectl([
                    "export", "--format", "csv", "-o", missing, "--socket", daemon.socketPath,
                ])
                #expect(failed.status == 1)
                #expect(failed.stderr.contains("cannot write"))
            }
        }
    }
}
