import Foundation
import QuakeStore

/// One configured source: `source = NAME KIND URL [KEY=VALUE ...]`, an agency whose reports
/// quaked follows and associates with the other sources' (docs/design/agencies.md).
///
/// Only the `fdsn` kind exists yet: an FDSN event service (fdsnws-event) asked every `interval`
/// for the events updated since its last run (``SourceSync``). The kinds `usgs`, `emsc` and
/// `geonet` are refused with the `fdsn` line that follows the same agency.
///
/// ```
/// source = emsc fdsn https://www.seismicportal.eu/fdsnws/event/1/ format=text interval=2m
/// source = ingv fdsn https://webservices.ingv.it/fdsnws/event/1/ region=35,6,48,19 min-magnitude=2
/// ```
public struct SourceConfiguration: Sendable, Equatable, CustomStringConvertible {
    /// The kinds of source quaked knows.
    public enum Kind: String, Sendable, Equatable, CaseIterable {
        /// An FDSN event service, asked with `updatedafter`.
        case fdsn
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
    /// The FDSN event service's base URL (`query` is appended).
    public var service: CatalogService
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

    /// The options, in the order ``description`` writes them.
    public static let optionNames = ["format", "interval", "since", "overlap", "min-magnitude", "region"]

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
        let service: CatalogService
        do {
            service = try CatalogService(parsing: words[2])
        } catch {
            throw ConfigValue.Problem(message: "source \(name): \(error)")
        }
        self.init(name: name, service: service)
        self.kind = kind
        var seen: Set<String> = []
        for option in words.dropFirst(3) {
            guard let equals = option.firstIndex(of: "="), equals != option.startIndex else {
                throw ConfigValue.Problem(
                    message:
                        "source \(name): '\(option)' is not an option: write KEY=VALUE after the URL (options: \(Self.optionNames.joined(separator: ", ")))"
                )
            }
            let key = String(option[..<equals])
            let value = String(option[option.index(after: equals)...])
            func problem(_ message: String) -> ConfigValue.Problem {
                ConfigValue.Problem(message: "source \(name): option \(key): \(message)")
            }
            guard Self.optionNames.contains(key) else {
                throw ConfigValue.Problem(
                    message:
                        "source \(name): unknown option '\(key)' (options: \(Self.optionNames.joined(separator: ", ")))")
            }
            guard seen.insert(key).inserted else {
                throw problem("given twice: give each option once")
            }
            do {
                switch key {
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
        case "emsc":
            return "the emsc source kind (EMSC's websocket) is not supported yet: follow EMSC's FDSN event service with "
                + "source = \(name) fdsn https://www.seismicportal.eu/fdsnws/event/1/"
        case "geonet":
            return "the geonet source kind (GeoNet's quake API) is not supported yet: follow GeoNet's FDSN event service with "
                + "source = \(name) fdsn https://service.geonet.org.nz/fdsnws/event/1/"
        default:
            return "'\(kind)' is not a source kind: use fdsn (an FDSN event service), as in "
                + "source = \(name) fdsn https://www.seismicportal.eu/fdsnws/event/1/"
        }
    }

    /// The source as ``init(parsing:)`` reads it, every option written out (the region and the
    /// minimum magnitude only when set).
    public var description: String {
        var words = [
            name, kind.rawValue, service.description, "format=\(format.rawValue)",
            "interval=\(ConfigValue.text(duration: interval))", "since=\(ConfigValue.text(duration: since))",
            "overlap=\(ConfigValue.text(duration: overlap))",
        ]
        if let minMagnitude { words.append("min-magnitude=\(minMagnitude)") }
        if let region { words.append("region=\(ConfigValue.text(region: region))") }
        return words.joined(separator: " ")
    }
}
