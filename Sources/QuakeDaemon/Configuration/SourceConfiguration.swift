import Foundation
import QuakeConfigValues
import QuakeFeed
import QuakeModel
import QuakeStore

/// One configured source: `source = NAME KIND URL [KEY=VALUE ...]`, an agency whose reports
/// quaked follows and associates with the other sources' (docs/design/agencies.md).
///
/// The kinds (``SourceSync`` runs them):
/// - `fdsn`: an FDSN event service (fdsnws-event) asked every `interval` for the events updated
///   since its last run.
/// - `emsc`: EMSC's websocket (`wss://` or `ws://`), kept open; on every connect and reconnect
///   the `catch-up=` FDSN event service is asked for what was updated since the newest report
///   stored less `overlap`, with the fdsn kind's query and readers (`format=`, default geojson:
///   EMSC's `format=json`).
/// - `geonet`: GeoNet's quake API (`https://api.geonet.org.nz/quake?MMI=-1`), a rolling window
///   asked every `interval` with a conditional GET and imported whole.
///
/// The kind `usgs` is refused with the `fdsn` line that follows the same agency.
///
/// ```
/// source = ingv fdsn https://webservices.ingv.it/fdsnws/event/1/ region=35,6,48,19 min-magnitude=2
/// source = emsc emsc wss://www.seismicportal.eu/standing_order/websocket catch-up=https://www.seismicportal.eu/fdsnws/event/1/
/// source = geonet geonet https://api.geonet.org.nz/quake?MMI=-1 interval=60s
/// ```
public struct SourceConfiguration: Sendable, Equatable, CustomStringConvertible {
    /// The kinds of source quaked knows.
    public enum Kind: String, Sendable, Equatable, CaseIterable {
        /// An FDSN event service, asked with `updatedafter`.
        case fdsn
        /// EMSC's websocket, caught up through an FDSN event service (`catch-up=`).
        case emsc
        /// GeoNet's quake API, polled with a conditional GET.
        case geonet

        /// The options the kind takes, in the order ``description`` writes them.
        public var optionNames: [String] {
            switch self {
            case .fdsn: ["format", "interval", "since", "overlap", "min-magnitude", "region"]
            case .emsc: ["catch-up", "format", "since", "overlap", "min-magnitude", "region"]
            case .geonet: ["interval", "min-magnitude", "region"]
            }
        }
    }

    /// The answer's format: what `format=` the service is asked for, and which reader reads it.
    public enum Format: String, Sendable, Equatable, CaseIterable {
        /// QuakeML 1.2 (`format=xml`, every FDSN service's default): QuakeSources' QuakeMLReader.
        case xml
        /// The FDSN text format (`format=text`): FDSNTextReader.
        case text
        /// EMSC's GeoJSON (`format=json`, as the EMSC and some FDSN services answer it):
        /// EMSCGeoJSONReader.
        case geojson

        /// The `format` query parameter's value.
        public var parameter: String {
            switch self {
            case .xml: "xml"
            case .text: "text"
            case .geojson: "json"
            }
        }
    }

    /// `[a-z0-9][a-z0-9_-]{0,31}`: the name every report of the source carries, unique in a
    /// configuration; its place among the sources is its rank when reports are compared.
    public var name: String
    public var kind: Kind = .fdsn
    /// The FDSN event service's base URL (`query` is appended): the `fdsn` kind's URL, the
    /// `emsc` kind's `catch-up=`; for `geonet`, GeoNet's FDSN event service
    /// (``geonetService``), which only `backfill --source` asks.
    public var service: CatalogService
    /// The `emsc` kind's websocket URL (`ws://` or `wss://`), the `geonet` kind's quake API URL;
    /// nil for `fdsn`.
    public var endpoint: URL? = nil
    public var format: Format = .xml
    /// How often the service is asked (at least ``minimumInterval``).
    public var interval: Duration = .seconds(60)
    /// How far back the first run (no position yet) asks for updates.
    public var since: Duration = .seconds(86_400)
    /// How far before the last successful run's start the next one asks: the service's own
    /// indexing lag.
    public var overlap: Duration = .seconds(600)
    /// `minmagnitude`; nil: every magnitude.
    public var minMagnitude: Double? = nil
    /// A circle or a box; nil: everywhere.
    public var region: CatalogRegion? = nil

    /// The shortest `interval=` accepted: agencies' services are shared, and a minute is what
    /// their operators ask for.
    public static let minimumInterval = Duration.seconds(10)

    /// The options of the `fdsn` kind, in the order ``description`` writes them (``Kind/optionNames``
    /// for every kind).
    public static let optionNames = Kind.fdsn.optionNames

    /// GeoNet's FDSN event service: a `geonet` source's ``service``.
    public static let geonetService = try! CatalogService(parsing: "https://service.geonet.org.nz/fdsnws/event/1/")

    public init(name: String, service: CatalogService) {
        self.name = name
        self.service = service
    }

    /// Reads `NAME KIND URL [KEY=VALUE ...]`. Throws ``ConfigValue/Problem`` saying what is wrong,
    /// which option, and what to write instead.
    public init(parsing text: String) throws {
        let words = text.split(whereSeparator: \.isWhitespace).map(String.init)
        let usage = "write NAME KIND URL [KEY=VALUE ...], e.g. source = emsc fdsn https://www.seismicportal.eu/fdsnws/event/1/"
        guard words.count >= 3 else {
            throw ConfigValue.Problem(message: "'\(text)' is not a source: \(usage)")
        }
        let name = words[0]
        guard Self.isValidName(name) else {
            throw ConfigValue.Problem(
                message:
                    "'\(name)' is not a source name: use 1 to 32 lower-case letters, digits, '-' or '_', starting with a letter or digit (e.g. emsc, ingv, gfz)"
            )
        }
        let kindText = words[1]
        guard let kind = Kind(rawValue: kindText) else {
            throw ConfigValue.Problem(message: "source \(name): " + Self.unsupportedKind(kindText, name: name))
        }
        let optionNames = kind.optionNames
        var endpoint: URL?
        let service: CatalogService
        switch kind {
        case .fdsn:
            do {
                service = try CatalogService(parsing: words[2])
            } catch {
                throw ConfigValue.Problem(message: "source \(name): \(error)")
            }
        case .emsc:
            endpoint = try Self.endpoint(
                words[2], schemes: ["wss", "ws"], name: name,
                example: "wss://www.seismicportal.eu/standing_order/websocket", what: "EMSC's websocket URL")
            guard let catchUp = words.dropFirst(3).first(where: { $0.hasPrefix("catch-up=") }) else {
                throw ConfigValue.Problem(
                    message:
                        "source \(name): an emsc source needs catch-up=, the FDSN event service that brings what was published while the websocket was down: "
                        + "add catch-up=https://www.seismicportal.eu/fdsnws/event/1/")
            }
            do {
                service = try CatalogService(parsing: String(catchUp.dropFirst("catch-up=".count)))
            } catch {
                throw ConfigValue.Problem(message: "source \(name): option catch-up: \(error)")
            }
        case .geonet:
            endpoint = try Self.endpoint(
                words[2], schemes: ["https", "http"], name: name, example: "https://api.geonet.org.nz/quake?MMI=-1",
                what: "GeoNet's quake API URL", query: true)
            service = Self.geonetService
        }
        self.init(name: name, service: service)
        self.kind = kind
        self.endpoint = endpoint
        if kind == .emsc { format = .geojson }
        var seen: Set<String> = []
        for option in words.dropFirst(3) {
            guard let equals = option.firstIndex(of: "="), equals != option.startIndex else {
                throw ConfigValue.Problem(
                    message:
                        "source \(name): '\(option)' is not an option: write KEY=VALUE after the URL (options: \(optionNames.joined(separator: ", ")))"
                )
            }
            let key = String(option[..<equals])
            let value = String(option[option.index(after: equals)...])
            func problem(_ message: String) -> ConfigValue.Problem {
                ConfigValue.Problem(message: "source \(name): option \(key): \(message)")
            }
            guard optionNames.contains(key) else {
                throw ConfigValue.Problem(
                    message:
                        "source \(name): unknown option '\(key)' (options: \(optionNames.joined(separator: ", ")))")
            }
            guard seen.insert(key).inserted else {
                throw problem("given twice: give each option once")
            }
            do {
                switch key {
                case "catch-up":
                    break  // read above
                case "format":
                    guard let format = Format(rawValue: value) else {
                        throw problem("'\(value)' is not a format: use xml (QuakeML, the default), text or geojson")
                    }
                    self.format = format
                case "interval":
                    interval = try ConfigValue.duration(value, minimum: Self.minimumInterval)
                case "since":
                    since = try ConfigValue.duration(value)
                case "overlap":
                    overlap = try ConfigValue.duration(value)
                case "min-magnitude":
                    if value == "none" {
                        minMagnitude = nil
                    } else {
                        guard let m = Double(value), m.isFinite, (-2...10).contains(m) else {
                            throw problem("'\(value)' is not a magnitude: use a number from -2 to 10, or none")
                        }
                        minMagnitude = m
                    }
                case "region":
                    region = try ConfigValue.region(value)
                default:
                    break
                }
            } catch let inner as ConfigValue.Problem where !inner.message.hasPrefix("source \(name):") {
                throw problem(inner.message)
            }
        }
    }

    /// The `emsc` or `geonet` kind's URL: one of `schemes`, with a host; a query only when
    /// `query` (GeoNet's `?MMI=-1`).
    private static func endpoint(
        _ text: String, schemes: [String], name: String, example: String, what: String, query: Bool = false
    ) throws -> URL {
        guard let components = URLComponents(string: text), let scheme = components.scheme?.lowercased(),
            schemes.contains(scheme), let host = components.host, !host.isEmpty, components.fragment == nil,
            query || components.query == nil, let url = components.url
        else {
            throw ConfigValue.Problem(
                message:
                    "source \(name): '\(text)' is not \(what): use a \(schemes.map { $0 + "://" }.joined(separator: " or ")) URL with a host, such as \(example)"
            )
        }
        return url
    }

    /// Whether a report passes the source's `min-magnitude=` and `region=` (the emsc kind's
    /// websocket and the geonet kind's API send everything; an FDSN service is asked with them).
    /// A retraction always passes: it removes only what the source stored.
    public func admits(_ item: SourceItem) -> Bool {
        guard case .report(let report) = item else { return true }
        if let minMagnitude {
            guard let magnitude = report.magnitude, magnitude >= minMagnitude else { return false }
        }
        switch region {
        case nil:
            return true
        case .near(let lat, let lon, let radiusKm):
            return Geodesy.distanceKm(lat, lon, report.latitude, report.longitude) <= radiusKm
        case .box(let minLat, let maxLat, let minLon, let maxLon):
            guard (minLat...maxLat).contains(report.latitude) else { return false }
            return minLon <= maxLon
                ? (minLon...maxLon).contains(report.longitude)
                : report.longitude >= minLon || report.longitude <= maxLon
        }
    }

    /// Whether `name` is a source name: `[a-z0-9][a-z0-9_-]{0,31}`.
    public static func isValidName(_ name: String) -> Bool {
        let bytes = Array(name.utf8)
        func alphanumeric(_ b: UInt8) -> Bool { (0x61...0x7A).contains(b) || (0x30...0x39).contains(b) }
        guard let first = bytes.first, alphanumeric(first), bytes.count <= 32 else { return false }
        return bytes.allSatisfy { alphanumeric($0) || $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: "_") }
    }

    /// Why `kind` is refused, and the line to write instead.
    static func unsupportedKind(_ kind: String, name: String) -> String {
        switch kind {
        case "usgs":
            return "the usgs source kind is not supported yet: follow the USGS's FDSN event service with "
                + "source = \(name) fdsn https://earthquake.usgs.gov/fdsnws/event/1/"
        default:
            return "'\(kind)' is not a source kind: use fdsn (an FDSN event service), emsc (EMSC's websocket) "
                + "or geonet (GeoNet's quake API), as in source = \(name) fdsn https://www.seismicportal.eu/fdsnws/event/1/"
        }
    }

    /// The source as ``init(parsing:)`` reads it, every option written out (the region and the
    /// minimum magnitude only when set).
    public var description: String {
        var words: [String]
        switch kind {
        case .fdsn:
            words = [
                name, kind.rawValue, service.description, "format=\(format.rawValue)",
                "interval=\(ConfigValue.text(duration: interval))", "since=\(ConfigValue.text(duration: since))",
                "overlap=\(ConfigValue.text(duration: overlap))",
            ]
        case .emsc:
            words = [
                name, kind.rawValue, endpoint?.absoluteString ?? "", "catch-up=\(service.description)",
                "format=\(format.rawValue)", "since=\(ConfigValue.text(duration: since))",
                "overlap=\(ConfigValue.text(duration: overlap))",
            ]
        case .geonet:
            words = [
                name, kind.rawValue, endpoint?.absoluteString ?? "", "interval=\(ConfigValue.text(duration: interval))",
            ]
        }
        if let minMagnitude { words.append("min-magnitude=\(minMagnitude)") }
        if let region { words.append("region=\(ConfigValue.text(region: region))") }
        return words.joined(separator: " ")
    }
}
