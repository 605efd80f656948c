import Foundation
import QuakeClient
import QuakeMap
import QuakeTestSupport
import Testing

@testable import QuakeCtl

#if canImport(FoundationXML)
    import FoundationXML
#endif

extension ClientEndToEnd {
    /// `export --format svg|kml` and `quakectl map`, against a real daemon; the SVG rendered by
    /// rsvg-convert, the KML read by GDAL's ogrinfo, the terminal map run under tmux.
    @Suite struct MapTests {
        /// The feeds' time: the same in each, so a quake given again is unchanged.
        static let now = Int(Date().timeIntervalSince1970 * 1000)

        /// A feed of made-up quakes at the given places.
        static func feed(_ quakes: [(id: String, lat: Double, lon: Double, mag: Double)], in dir: URL, name: String = "map")
            throws -> URL
        {
            let now = Self.now
            let features: [[String: Any]] = quakes.enumerated().map { index, quake in
                [
                    "type": "Feature", "id": quake.id,
                    "properties": [
                        "mag": quake.mag, "place": "test place \(quake.id)", "time": now - 3_600_000 + index * 1000,
                        "updated": now, "status": "reviewed", "tsunami": 0, "sig": 100, "net": "us",
                        "code": quake.id, "ids": ",\(quake.id),", "sources": ",us,", "types": ",origin,",
                        "magType": "mb", "type": "earthquake", "title": "M \(quake.mag) - test place \(quake.id)",
                    ] as [String: Any],
                    "geometry": ["type": "Point", "coordinates": [quake.lon, quake.lat, 10.0]],
                ]
            }
            let url = dir.appendingPathComponent("\(name).geojson")
            try JSONSerialization.data(withJSONObject: ["type": "FeatureCollection", "metadata": [:], "features": features])
                .write(to: url)
            return url
        }

        static let quakes = [
            (id: "us1000pac", lat: -30.0, lon: -120.0, mag: 6.1),  // the South Pacific, no land near
            (id: "us1000ind", lat: -20.0, lon: 80.0, mag: 4.2),  // the Indian Ocean
            (id: "us1000atl", lat: 30.0, lon: -40.0, mag: 2.5),  // the North Atlantic
        ]

        static func tool(_ name: String) throws -> String {
            let path = "/usr/bin/\(name)"
            guard FileManager.default.isExecutableFile(atPath: path) else {
                throw TestFailure("\(path) is missing: scripts/install-deps installs it")
            }
            return path
        }

        @Test func theSVGIsWellFormedAndRendersEachQuakeWhereItIs() async throws {
            try await withTemporaryDirectory { dir in
                try await withQuaked(feeds: [try Self.feed(Self.quakes, in: dir)]) { daemon in
                    let svg = dir.appendingPathComponent("map.svg")
                    let export = try await quakectl(["export", "--format", "svg", "-o", svg.path, "--socket", daemon.socketPath])
                    #expect(export.status == 0, "\(export.stderr)")
                    let data = try Data(contentsOf: svg)
                    let parser = XMLParser(data: data)
                    let counter = ElementCounter()
                    parser.delegate = counter
                    #expect(parser.parse(), "well-formed XML: \(parser.parserError.map { "\($0)" } ?? "")")
                    #expect(counter.counts["svg"] == 1)
                    // Three quakes and the legend's six swatches.
                    #expect(counter.counts["circle"] == 3 + 6)
                    #expect((counter.counts["path"] ?? 0) > 100, "the coastlines")

                    let png = dir.appendingPathComponent("map.png")
                    let render = try await ChildProcess.run(try Self.tool("rsvg-convert"), [svg.path, "-o", png.path])
                    #expect(render.status == 0, "\(render.stderr)")
                    // The map is 1440 × 720, with a 44-pixel band above and below.
                    func pixel(_ lat: Double, _ lon: Double) -> String {
                        "\(Int((lon + 180) / 360 * 1440)),\(44 + Int((90 - lat) / 180 * 720))"
                    }
                    let points = Self.quakes.map { pixel($0.lat, $0.lon) } + [pixel(-50, -150), pixel(0, -30)]
                    let read = try await ChildProcess.run(
                        "/usr/bin/python3",
                        [Fixtures.packageRoot.appendingPathComponent("Tests/Peers/png_pixels.py").path, png.path] + points)
                    #expect(read.status == 0, "\(read.stderr)")
                    let lines = read.stdout.split(separator: "\n").map(String.init)
                    #expect(lines.first == "1440 808", "the PNG's size")
                    let ocean = "238 244 248"
                    for (index, quake) in Self.quakes.enumerated() {
                        #expect(lines[1 + index] != ocean, "\(quake.id) at \(points[index]) is drawn: \(lines[1 + index])")
                    }
                    #expect(lines[4] == ocean && lines[5] == ocean, "open ocean stays the ocean's colour")
                    // M 6.1 is in list's purple (≥ 5), M 4.2 in its red, blended with the ocean.
                    let purple = lines[1].split(separator: " ").compactMap { Int($0) }
                    #expect(purple[2] > purple[1] && purple[0] > purple[1], "purple: \(lines[1])")
                    let red = lines[2].split(separator: " ").compactMap { Int($0) }
                    #expect(red[0] > red[1] + 60 && red[0] > red[2] + 60, "red: \(lines[2])")
                }
            }
        }

        @Test func aBoxZoomsTheSVGAndAZeroAreaBoxIsRefused() async throws {
            try await withTemporaryDirectory { dir in
                try await withQuaked(feeds: [try Self.feed(Self.quakes, in: dir)]) { daemon in
                    let export = try await quakectl([
                        "export", "--format", "svg", "--box=-40,-130,-20,-110", "--socket", daemon.socketPath,
                    ])
                    #expect(export.status == 0, "\(export.stderr)")
                    #expect(export.stdout.components(separatedBy: "<circle").count - 1 == 1 + 6, "one quake in the box")
                    #expect(export.stdout.contains("height=\"1528\""), "20° by 20°: a square map, 1440 + 2 × 44 high")
                    #expect(export.stdout.contains("in -40,-130,-20,-110"), "the title says the region")
                    let zero = try await quakectl([
                        "export", "--format", "svg", "--box", "10,20,10,30", "--socket", daemon.socketPath,
                    ])
                    #expect(zero.status == 64)
                    #expect(zero.stderr.contains("--box"), "\(zero.stderr)")
                }
            }
        }

        @Test func theKMLIsReadByGDAL() async throws {
            try await withTemporaryDirectory { dir in
                try await withQuaked(feeds: [try Self.feed(Self.quakes, in: dir)]) { daemon in
                    let kml = dir.appendingPathComponent("map.kml")
                    let export = try await quakectl(["export", "--format", "kml", "-o", kml.path, "--socket", daemon.socketPath])
                    #expect(export.status == 0, "\(export.stderr)")
                    let parser = XMLParser(data: try Data(contentsOf: kml))
                    let counter = ElementCounter()
                    parser.delegate = counter
                    #expect(parser.parse())
                    #expect(counter.counts["Placemark"] == 3)
                    let info = try await ChildProcess.run(try Self.tool("ogrinfo"), ["-ro", "-al", kml.path])
                    #expect(info.status == 0, "\(info.stderr)")
                    #expect(info.stdout.contains("Feature Count: 3"), "\(info.stdout.prefix(600))")
                    #expect(info.stdout.contains("POINT (-120 -30)"), "the Pacific quake's point")
                    #expect(info.stdout.contains("us1000ind"))
                }
            }
        }

        // MARK: - The terminal map, under tmux

        /// A tmux server of the test's own (its own socket), one window of a shell.
        final class Tmux: Sendable {
            let socket: String
            let tmux: String

            init(directory: URL, columns: Int, rows: Int, environment: [String: String]) async throws {
                tmux = try MapTests.tool("tmux")
                socket = directory.appendingPathComponent("tmux.sock").path
                let variables = environment.flatMap { ["-e", "\($0.key)=\($0.value)"] }
                try await run(["new-session", "-d", "-x", "\(columns)", "-y", "\(rows)", "-s", "map"] + variables + ["sh"])
            }

            @discardableResult
            func run(_ arguments: [String]) async throws -> String {
                let result = try await ChildProcess.run(tmux, ["-S", socket, "-f", "/dev/null"] + arguments)
                guard result.status == 0 else { throw TestFailure("tmux \(arguments): \(result.stderr)") }
                return result.stdout
            }

            func type(_ text: String) async throws { try await run(["send-keys", "-t", "map", text, "Enter"]) }
            func key(_ key: String) async throws { try await run(["send-keys", "-t", "map", key]) }
            /// The screen's lines, plain, or with the escape sequences of colours (`escapes`).
            func screen(escapes: Bool = false) async throws -> [String] {
                try await run(["capture-pane", "-p", "-t", "map"] + (escapes ? ["-e"] : [])).components(separatedBy: "\n")
            }
            func display(_ format: String) async throws -> String {
                try await run(["display-message", "-p", "-t", "map", format]).trimmingCharacters(in: .whitespacesAndNewlines)
            }
            func waitFor(_ text: String, timeout: Duration = .seconds(20)) async throws -> [String] {
                let deadline = ContinuousClock.now + timeout
                while true {
                    let screen = try await screen()
                    if screen.contains(where: { $0.contains(text) }) { return screen }
                    guard ContinuousClock.now < deadline else {
                        throw TestFailure("no \"\(text)\" on the screen:\n\(screen.joined(separator: "\n"))")
                    }
                    try await Task.sleep(for: .milliseconds(100))
                }
            }
            func kill() async { _ = try? await run(["kill-server"]) }
        }

        /// Where a point is on a world map drawn in `columns` × `rows` (a title line, the map,
        /// a footer line), worked out here independently of the code: the world fills the map
        /// area whenever the area is less than twice as wide as high in dots, as here.
        static func cell(lat: Double, lon: Double, columns: Int, rows: Int) -> (line: Int, column: Int) {
            let dotsAcross = Double(columns * 2)
            let dotsDown = Double((rows - 2) * 4)
            let x = Int(((lon + 180) / 360 * dotsAcross).rounded(.down))
            let y = Int(((90 - lat) / 180 * dotsDown).rounded(.down))
            return (1 + y / 4, x / 2)
        }

        static func character(_ screen: [String], _ cell: (line: Int, column: Int)) -> Character? {
            guard cell.line < screen.count else { return nil }
            let line = Array(screen[cell.line])
            return cell.column < line.count ? line[cell.column] : nil
        }

        @Test func theTerminalMapDrawsLiveQuakesRedrawsOnResizeAndRestoresTheTerminal() async throws {
            try await withTemporaryDirectory { dir in
                try await withQuaked(feeds: [try Self.feed(Array(Self.quakes.prefix(2)), in: dir)]) { daemon in
                    // NO_COLOR empty: colours on, whatever the test runner's environment says.
                    let tmux = try await Tmux(
                        directory: dir, columns: 100, rows: 30, environment: ["LANG": "C.UTF-8", "NO_COLOR": ""])
                    defer { Task { await tmux.kill() } }
                    let cache = dir.appendingPathComponent("map.sqlite").path
                    try await tmux.type(
                        "\(BuiltProducts.path("quakectl")) map --watch --cache \(cache) --socket \(daemon.socketPath); echo EXIT=$?")
                    // The first frame may come before the watch's snapshot: wait for the quakes.
                    var screen = try await tmux.waitFor("2 earthquakes")
                    #expect(screen.first?.hasPrefix("Earthquakes") == true, "\(screen.first ?? "")")
                    #expect(screen.last { !$0.isEmpty }?.hasPrefix("q quits") == true)
                    for quake in Self.quakes.prefix(2) {
                        let cell = Self.cell(lat: quake.lat, lon: quake.lon, columns: 100, rows: 30)
                        #expect(Self.character(screen, cell) == "●", "\(quake.id) at line \(cell.line), column \(cell.column)")
                    }
                    #expect(screen.joined().filter { $0 == "●" }.count == 2 + 5, "two quakes and the legend's five")
                    #expect(screen.joined().contains { (0x2801...0x28FF).contains($0.unicodeScalars.first!.value) }, "coastlines")
                    #expect(try await tmux.display("#{alternate_on}") == "1")

                    // A new quake arrives: it appears, highlighted.
                    _ = try await daemon.importOnce(try Self.feed(Self.quakes, in: dir, name: "more"))
                    screen = try await tmux.waitFor("3 earthquakes")
                    let atlantic = Self.cell(lat: 30, lon: -40, columns: 100, rows: 30)
                    #expect(Self.character(screen, atlantic) == "◉", "the new quake, highlighted")
                    let pacificBefore = Self.cell(lat: -30, lon: -120, columns: 100, rows: 30)
                    #expect(Self.character(screen, pacificBefore) == "●", "an unchanged quake is not highlighted")
                    let colored = try await tmux.screen(escapes: true).joined()
                    #expect(colored.contains("\u{1B}[35m●"), "M 6.1 in list's purple")

                    // The window grows: the map is drawn again for the new size.
                    try await tmux.run(["resize-window", "-t", "map", "-x", "120", "-y", "40"])
                    let pacific = Self.cell(lat: -30, lon: -120, columns: 120, rows: 40)
                    let deadline = ContinuousClock.now + .seconds(10)
                    while Self.character(try await tmux.screen(), pacific) != "●" && ContinuousClock.now < deadline {
                        try await Task.sleep(for: .milliseconds(100))
                    }
                    #expect(Self.character(try await tmux.screen(), pacific) == "●", "redrawn at line \(pacific.line)")

                    // Too small for a map while running: a message in its place, then the map again.
                    try await tmux.run(["resize-window", "-t", "map", "-x", "30", "-y", "8"])
                    let small = try await tmux.waitFor("Terminal too small")
                    #expect(!small.joined().contains("●"), "no half-drawn map")
                    try await tmux.run(["resize-window", "-t", "map", "-x", "120", "-y", "40"])
                    _ = try await tmux.waitFor("q quits")

                    // A quake deleted in the store goes from the map.
                    let deleted = try await quakectl(["delete", "us1000pac", "--socket", daemon.socketPath])
                    #expect(deleted.status == 0, "\(deleted.stderr)")
                    screen = try await tmux.waitFor("2 earthquakes")
                    #expect(Self.character(screen, pacific) != "●", "gone from line \(pacific.line)")

                    // q quits: the shell's screen is back, with its cursor.
                    try await tmux.key("q")
                    screen = try await tmux.waitFor("EXIT=0")
                    #expect(!screen.joined().contains("●"), "the map is gone")
                    #expect(try await tmux.display("#{alternate_on}") == "0")
                    #expect(try await tmux.display("#{cursor_flag}") == "1")
                }
            }
        }

        @Test func noColorASCIIAndTooSmallTerminals() async throws {
            try await withTemporaryDirectory { dir in
                try await withQuaked(feeds: [try Self.feed(Self.quakes, in: dir)]) { daemon in
                    let quakectl = BuiltProducts.path("quakectl")
                    // NO_COLOR and a C locale: no colours, no braille, the quakes as "o".
                    let plain = try await Tmux(
                        directory: dir, columns: 80, rows: 24, environment: ["LANG": "C", "NO_COLOR": "1"])
                    try await plain.type("\(quakectl) map --socket \(daemon.socketPath); echo EXIT=$?")
                    let screen = try await plain.waitFor("q quits")
                    let text = screen.joined()
                    let ascii = text.unicodeScalars.allSatisfy { $0.isASCII }
                    #expect(ascii, "ASCII only")
                    let cell = Self.cell(lat: -30, lon: -120, columns: 80, rows: 24)
                    #expect(Self.character(screen, cell) == "o")
                    #expect(text.contains("."), "the coastlines in dots")
                    let escapes = try await plain.screen(escapes: true).joined()
                    #expect(!escapes.contains("\u{1B}[3"), "no colours under NO_COLOR")
                    try await plain.key("C-c")
                    _ = try await plain.waitFor("EXIT=0")
                    #expect(try await plain.display("#{alternate_on}") == "0")
                    await plain.kill()

                    // Too small: a message, and the terminal as it was.
                    try FileManager.default.createDirectory(
                        at: dir.appendingPathComponent("small"), withIntermediateDirectories: true)
                    let small = try await Tmux(
                        directory: dir.appendingPathComponent("small"), columns: 30, rows: 8, environment: ["LANG": "C.UTF-8"])
                    defer { Task { await small.kill() } }
                    try await small.type("\(quakectl) map --socket \(daemon.socketPath); echo EXIT=$?")
                    let refused = try await small.waitFor("EXIT=64").joined()
                    #expect(refused.contains("small (30×8)"), "\(refused)")
                    #expect(try await small.display("#{alternate_on}") == "0")

                    // No terminal at all.
                    let piped = try await QuakeCtlTests.quakectl(["map", "--socket", daemon.socketPath])
                    #expect(piped.status == 64)
                    #expect(piped.stderr.contains("export --format svg"), "\(piped.stderr)")
                    let zero = try await QuakeCtlTests.quakectl(["map", "--box", "1,2,1,3", "--socket", daemon.socketPath])
                    #expect(zero.status == 64 && zero.stderr.contains("--box"), "\(zero.stderr)")
                }
            }
        }
    }
}

/// Counts the elements an XML parser meets.
final class ElementCounter: NSObject, XMLParserDelegate {
    var counts: [String: Int] = [:]

    func parser(
        _ parser: XMLParser, didStartElement elementName: String, namespaceURI: String?, qualifiedName: String?,
        attributes: [String: String] = [:]
    ) {
        counts[elementName, default: 0] += 1
    }
}
