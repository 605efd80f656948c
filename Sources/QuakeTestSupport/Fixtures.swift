import Foundation

/// Locations of the test fixtures checked into `Tests/Fixtures`.
///
/// Found relative to this source file, so tests read the copies in the repository and never
/// anything outside it.
public enum Fixtures {
    /// The package root (the directory holding `Package.swift`).
    public static let packageRoot: URL = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent()  // QuakeTestSupport
        .deletingLastPathComponent()  // Sources
        .deletingLastPathComponent()

    /// `Tests/Fixtures/usgs`: real USGS summary feeds (public-domain data).
    public static let usgsDirectory: URL = packageRoot.appendingPathComponent("Tests/Fixtures/usgs")

    /// Every `*.geojson` fixture, sorted by name.
    public static var usgsFeeds: [URL] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: usgsDirectory.path)) ?? []
        return names.filter { $0.hasSuffix(".geojson") }.sorted().map { usgsDirectory.appendingPathComponent($0) }
    }

    /// One fixture by file name (for example `"abruzzi__earthquake-viz__all_day.geojson"`).
    public static func usgs(_ name: String) -> URL {
        usgsDirectory.appendingPathComponent(name)
    }
}
