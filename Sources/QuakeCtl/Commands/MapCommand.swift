import ArgumentParser
import Foundation
import QuakeClient
import QuakeMap
import QuakeProtocol
import UnixSignals
import QuakeModel

/// `quakectl map`: the quakes on a world map in the terminal, drawn with braille dots.
public struct MapCommand: AsyncParsableCommand {
    public static let configuration = CommandConfiguration(
        commandName: "map",
        abstract: "Draw the earthquakes on a world map in the terminal; --watch keeps it live.",
        discussion: """
            The world's coastlines (Natural Earth 1:110m) in Unicode braille, in an \
            equirectangular projection, and each quake the filters select as a dot in the \
            colours of list (the largest drawn last). --box, --near with --radius, or --region \
            zoom in. With --watch, new and updated quakes appear as they come, highlighted for \
            --highlight, and quakes that leave the filters or are deleted go; the cache for it \
            is kept like watch's. The footer shows the count, the time span and when the map \
            last changed. It redraws when the terminal is resized; q or Ctrl-C quits and \
            restores the terminal. NO_COLOR turns the colours off; outside a UTF-8 locale the \
            map is drawn in ASCII. It needs a terminal of at least 40×12.
            """)

    @OptionGroup public var options: ClientOptions

    @OptionGroup(title: "Filters") public var filters: FilterOptions

    @Flag(help: "Follow quaked's changes: new and updated quakes appear, leaving ones go.")
    public var watch = false

    @Option(
        help: ArgumentHelp(
            "With --watch, the cache file. Default: $XDG_CACHE_HOME/quakectl/map.sqlite.", valueName: "path"))
    public var cache: String?

    @Option(
        help: ArgumentHelp(
            "How long a new or updated quake stays highlighted (\(QuakeDuration.examples)).", valueName: "duration"))
    public var highlight: String = "30s"

    public init() {}

    static let minimumSize = (columns: 40, rows: 12)

    public func validate() throws {
        _ = try filters.viewport(of: try filters.filter())
        guard DurationArgument.milliseconds(highlight) != nil else {
            throw ValidationError("--highlight takes a duration: \(QuakeDuration.examples).")
        }
        if cache != nil && !watch { throw ValidationError("--cache is for --watch.") }
    }

    public func run() async throws {
        guard isatty(STDOUT_FILENO) == 1, isatty(STDIN_FILENO) == 1 else {
            throw QuakectlError(
                QuakectlError.usage,
                "quakectl map draws on a terminal, and its input or output is not one; for a map in a file, use quakectl export --format svg."
            )
        }
        guard let size = TerminalSession.size(), size.columns >= Self.minimumSize.columns,
            size.rows >= Self.minimumSize.rows
        else {
            let shown = TerminalSession.size().map { "\($0.columns)×\($0.rows)" } ?? "of unknown size"
            throw QuakectlError(
                QuakectlError.usage,
                "the terminal is too small (\(shown)); quakectl map needs at least \(Self.minimumSize.columns)×\(Self.minimumSize.rows)."
            )
        }
        let filter = try filters.filter()
        let viewport = try filters.viewport(of: filter) ?? .world
        let style = options.style
        var map = MapView(
            viewport: viewport, title: filters.mapTitle, colors: style.colors, utf8: TerminalSession.isUTF8(),
            highlightMilliseconds: Int(DurationArgument.milliseconds(highlight)!))

        var watcher: Watcher?
        var watchCache: QuakeCache?
        if watch {
            let path = cache ?? CachePath.defaultPath(file: "map.sqlite")
            do {
                watchCache = try QuakeCache(path: path)
            } catch {
                throw QuakectlError(
                    QuakectlError.failure, "cannot open the cache at \(path) (\(error)); pass --cache with a writable path.")
            }
            var watchOptions = Watcher.Options(endpoint: try options.endpoint)
            watchOptions.filter = filter
            watcher = Watcher(options: watchOptions, cache: watchCache!)
            if let position = try watchCache!.position(), position.filter == filter?.key {
                map.load(try watchCache!.allQuakes())
            }
            map.away = "connecting to quaked…"
        } else {
            var quakes: [IOQuaked.Quake] = []
            try await options.withConnection { connection in
                for try await page in try await connection.snapshot(pageSize: 1000, filter: filter) {
                    quakes += page.quakes
                }
            }
            map.load(quakes)
        }

        enum Event: Sendable {
            case key(UInt8), resize, tick, quit, watch(WatchEvent), failed(String)
        }
        let (events, continuation) = AsyncStream.makeStream(of: Event.self, bufferingPolicy: .bufferingNewest(256))
        let terminal = TerminalSession()
        defer { terminal.restore() }
        let keys = KeyReader { continuation.yield(.key($0)) }
        defer { keys.stop() }
        var failure: String?
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                for await signal in await UnixSignalsSequence(trapping: .sigwinch, .sigint, .sigterm, .sighup) {
                    continuation.yield(signal == .sigwinch ? .resize : .quit)
                }
            }
            group.addTask {
                while !Task.isCancelled {
                    try? await Task.sleep(for: .seconds(1))
                    continuation.yield(.tick)
                }
            }
            if let watcher {
                group.addTask {
                    do {
                        try await watcher.run { continuation.yield(.watch($0)) }
                    } catch is CancellationError {
                    } catch {
                        continuation.yield(.failed(QuakectlError.from(error).message))
                    }
                }
            }
            Console.out(map.frame(size: TerminalSession.size() ?? size))
            loop: for await event in events {
                switch event {
                case .key(let byte) where byte == UInt8(ascii: "q") || byte == UInt8(ascii: "Q") || byte == 3:
                    break loop
                case .quit:
                    break loop
                case .failed(let message):
                    failure = message
                    break loop
                case .watch(let watchEvent):
                    if case .reset = watchEvent, let watchCache, let quakes = try? watchCache.allQuakes() {
                        map.load(quakes)
                    }
                    map.apply(watchEvent)
                case .key, .resize, .tick:
                    break
                }
                Console.out(map.frame(size: TerminalSession.size() ?? size))
            }
            group.cancelAll()
        }
        terminal.restore()
        if let failure { throw QuakectlError(QuakectlError.failure, failure) }
    }
}

/// What `map` shows, and how a frame of it is drawn.
struct MapView {
    struct Quake {
        var lat: Double?
        var lon: Double?
        var mag: Double?
        var time: Int
        /// When it came or changed while watching (ms since the epoch), for the highlight.
        var changedAt: Int?
    }

    let viewport: Viewport
    let title: String
    let colors: Bool
    let utf8: Bool
    let highlightMilliseconds: Int
    var quakes: [String: Quake] = [:]
    var updatedAt = Date()
    var away: String?

    mutating func load(_ list: [IOQuaked.Quake]) {
        quakes = [:]
        for quake in list { quakes[quake.id] = Quake(lat: quake.lat, lon: quake.lon, mag: quake.mag, time: quake.time) }
        updatedAt = Date()
    }

    mutating func apply(_ event: WatchEvent) {
        let now = Int(QuakeTime.milliseconds(Date(), rounding: .towardZero))
        switch event {
        case .disconnected(let reason), .cacheUnavailable(let reason):
            away = QuakectlError.from(reason).message
        case .connected, .cacheRecovered:
            away = nil
        case .applied(let transaction, _, _, _):
            for change in transaction.changes {
                switch change.kind {
                case .insert, .update, .enter:
                    if let quake = change.quake {
                        quakes[change.quakeId] = Quake(
                            lat: quake.lat, lon: quake.lon, mag: quake.mag, time: quake.time, changedAt: now)
                    } else if var quake = quakes[change.quakeId] {
                        for field in change.fields ?? [] {
                            let number = field.new.flatMap { $0.float ?? $0.int.map(Double.init) }
                            switch field.field {
                            case "lat": quake.lat = number
                            case "lon": quake.lon = number
                            case "mag": quake.mag = number
                            case "time": quake.time = field.new?.int ?? quake.time
                            default: break
                            }
                        }
                        quake.changedAt = now
                        quakes[change.quakeId] = quake
                    }
                case .delete, .leave:
                    quakes[change.quakeId] = nil
                }
            }
            updatedAt = Date()
        case .reset:
            updatedAt = Date()
        case .recent:
            break
        }
    }

    /// Text as the terminal can show it: outside UTF-8, ASCII stand-ins.
    private func text(_ text: String) -> String {
        guard !utf8 else { return text }
        let replacements = ["·": "|", "–": "-", "≥": ">=", "≤": "<=", "×": "x", "…": "..."]
        var out = text
        for (from, to) in replacements { out = out.replacingOccurrences(of: from, with: to) }
        return String(out.unicodeScalars.map { $0.isASCII ? Character($0) : "?" })
    }

    private func paint(_ text: String, _ sgr: String?) -> String {
        guard colors, let sgr else { return text }
        return "\u{1B}[\(sgr)m\(text)\u{1B}[0m"
    }

    /// One line cut to `width` cells (the texts here are one cell per character).
    private static func fit(_ text: String, _ width: Int) -> String {
        text.count <= width ? text + String(repeating: " ", count: width - text.count) : String(text.prefix(width))
    }

    /// The whole screen: the title and legend, the map, the footer; from the top left, every
    /// line written in full, so nothing of an earlier frame stays.
    func frame(size: (columns: Int, rows: Int), now: Date = Date()) -> String {
        let columns = size.columns
        let rows = size.rows
        var lines: [String] = []
        guard columns >= MapCommand.minimumSize.columns, rows >= MapCommand.minimumSize.rows else {
            let message = "Terminal too small: \(columns)×\(rows); needs \(MapCommand.minimumSize.columns)×\(MapCommand.minimumSize.rows). q quits."
            for row in 0..<rows {
                lines.append(Self.fit(row == rows / 2 ? String(message.prefix(columns)) : "", columns))
            }
            return "\u{1B}[H" + lines.joined(separator: "\r\n")
        }
        let mapRows = rows - 2
        // Braille dots are about square: 2 across and 4 down a cell of about 1:2.
        let view = viewport.fitted(aspect: Double(columns * 2) / Double(mapRows * 4))
        var raster = MapRaster(viewport: view, columns: columns, rows: mapRows)
        let nowMs = Int(QuakeTime.milliseconds(now, rounding: .towardZero))
        var inView = 0
        var earliest: Int?
        var latest: Int?
        // Smaller first, so the largest and the highlighted are drawn over them.
        let ordered = quakes.values.sorted {
            let a = ($0.changedAt.map { nowMs - $0 < highlightMilliseconds } ?? false, $0.mag ?? -1)
            let b = ($1.changedAt.map { nowMs - $0 < highlightMilliseconds } ?? false, $1.mag ?? -1)
            return a.0 == b.0 ? a.1 < b.1 : !a.0
        }
        for quake in ordered {
            earliest = min(earliest ?? quake.time, quake.time)
            latest = max(latest ?? quake.time, quake.time)
            guard let lat = quake.lat, let lon = quake.lon else { continue }
            let fresh = quake.changedAt.map { nowMs - $0 < highlightMilliseconds } ?? false
            if raster.mark(lat: lat, lon: lon, style: MagnitudeClass(quake.mag).rawValue + (fresh ? 100 : 0)) {
                inView += 1
            }
        }

        var legend = text(title)
        var plainLength = legend.count
        for kind in MagnitudeClass.allCases where kind != .unknown {
            let label = text(kind.label)
            legend += "  " + paint(utf8 ? "●" : "o", kind.color.rawValue) + " " + label
            plainLength += 4 + label.count
        }
        lines.append(plainLength <= columns ? legend + String(repeating: " ", count: columns - plainLength) : Self.fit(text(title), columns))

        for row in 0..<mapRows {
            var line = ""
            for column in 0..<columns {
                if let mark = raster.canvas.mark(column: column, row: row) {
                    let fresh = mark >= 100
                    let kind = MagnitudeClass(rawValue: mark % 100) ?? .unknown
                    let glyph = utf8 ? (fresh ? "◉" : "●") : (fresh ? "@" : "o")
                    line += paint(glyph, fresh ? "7;\(kind.color.rawValue)" : kind.color.rawValue)
                } else if utf8 {
                    line.append(raster.canvas.braille(column: column, row: row))
                } else {
                    line += raster.canvas.dotMask(column: column, row: row) == 0 ? " " : "."
                }
            }
            lines.append(line)
        }

        var footer = "q quits · " + Formatting.earthquakes(quakes.count)
        if inView != quakes.count { footer += " (\(Formatting.count(inView)) in view)" }
        if let earliest, let latest {
            footer += " · \(QuakeTime.utcMinutes(earliest)) to "
                + "\(QuakeTime.utcMinutes(latest)) UTC"
        }
        let ago = Int(now.timeIntervalSince(updatedAt))
        footer += " · updated \(ago < 1 ? "just now" : Formatting.relative(Int(QuakeTime.milliseconds(updatedAt, rounding: .towardZero)), now: now))"
        if let away { footer += " · \(away)" }
        // One cell short of the corner: a character there makes some terminals scroll.
        lines.append(Self.fit(text(footer), columns - 1))
        return "\u{1B}[H" + lines.joined(separator: "\r\n")
    }
}
