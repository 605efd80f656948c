import Foundation
import QuakeAssociation
import QuakeFeed
import QuakeModel

/// One regional authority: `prefer = AGENCY[,AGENCY...] region=REGION`. In the region, the
/// agencies' reports are preferred to other agencies' equally reviewed ones (reviewed or manual
/// still beats automatic), before the order of the sources; docs/design/agencies.md.
///
/// ```
/// prefer = INGV region=35,6,48,19
/// prefer = GFZ,EMSC region=/etc/quaked/alps.geojson
/// prefer = geonet region=-41,174,800
/// ```
///
/// An agency is matched against a report's agency (QuakeML's `creationInfo/agencyID`: `INGV`)
/// and against its source's name (`ingv`), ASCII case ignored. The region is written as
/// `source`'s and `catalog-region`'s `region=` (``ConfigValue/region(_:)``): `LAT,LON,KM` a
/// circle, `MINLAT,MINLON,MAXLAT,MAXLON` a box; or it is the absolute path of a GeoJSON file of
/// polygons, read as `quakectl --region` reads one (QuakeFeed's `GeoJSONRegion`, validated by
/// `PolygonRegion`), whenever the configuration is loaded: a reload reads it again.
public struct PreferenceConfiguration: Sendable, Equatable, CustomStringConvertible {
    /// Where the agencies are the authority.
    public enum Area: Sendable, Equatable {
        /// A circle or a box.
        case shape(CatalogRegion)
        /// The polygons of a GeoJSON file, with the absolute path they were read from.
        case file(path: String, polygons: PolygonRegion)
    }

    /// In the order given: an earlier agency ranks first among the line's.
    public var agencies: [String]
    public var area: Area

    /// The largest polygon file read: PolygonRegion takes at most 50,000 points anyway.
    public static let maxFileSize = 16 << 20

    /// The grammar, for error messages.
    static let usage =
        "write AGENCY[,AGENCY...] region=REGION, the region LAT,LON,KM (a circle), MINLAT,MINLON,MAXLAT,MAXLON (a box) "
        + "or the absolute path of a GeoJSON polygon file, e.g. prefer = INGV region=35,6,48,19"

    public init(agencies: [String], area: Area) {
        self.agencies = agencies
        self.area = area
    }

    /// What the Associator ranks by.
    public var regionalPreference: RegionalPreference {
        let region: Region
        switch area {
        case .shape(.near(let lat, let lon, let radiusKm)): region = .circle(lat: lat, lon: lon, radiusKm: radiusKm)
        case .shape(.box(let minLat, let maxLat, let minLon, let maxLon)):
            region = .box(minLat: minLat, maxLat: maxLat, minLon: minLon, maxLon: maxLon)
        case .file(_, let polygons): region = .polygon(polygons)
        }
        return RegionalPreference(agencies: agencies, region: region)
    }

    /// Reads `AGENCY[,AGENCY...] region=REGION` (agencies separated by commas, spaces or both),
    /// reading a polygon file it names. Throws ``ConfigValue/Problem`` saying what is wrong and
    /// what to write instead, prefixed `prefer AGENCIES:` once the agencies are read.
    public init(parsing text: String) throws {
        let words = text.split(whereSeparator: \.isWhitespace).map(String.init)
        let agencyWords = words.prefix { !$0.contains("=") }
        let agencies = agencyWords.joined(separator: ",").split(separator: ",").map(String.init)
        guard !agencies.isEmpty else {
            throw ConfigValue.Problem(message: "'\(text)' names no agency: \(Self.usage)")
        }
        for agency in agencies where !Self.isValidAgency(agency) {
            throw ConfigValue.Problem(
                message:
                    "'\(agency)' is not an agency: give an agency's code or a source's name, 1 to 32 letters, digits, '-', '_' or '.' (e.g. INGV, emsc)"
            )
        }
        let name = "prefer \(agencies.joined(separator: ","))"
        var seen: Set<String> = []
        for agency in agencies where !seen.insert(agency.lowercased()).inserted {
            throw ConfigValue.Problem(
                message: "\(name): \(agency) is named twice (case is ignored): name each agency once")
        }
        var area: Area?
        for option in words.dropFirst(agencyWords.count) {
            guard let equals = option.firstIndex(of: "="), equals != option.startIndex else {
                throw ConfigValue.Problem(
                    message: "\(name): '\(option)' is not an option: write the agencies, then region=REGION")
            }
            let key = String(option[..<equals])
            let value = String(option[option.index(after: equals)...])
            guard key == "region" else {
                throw ConfigValue.Problem(message: "\(name): unknown option '\(key)' (options: region)")
            }
            guard area == nil else {
                throw ConfigValue.Problem(
                    message:
                        "\(name): option region: given twice: give one region a line (another region for the same agencies is another prefer line)"
                )
            }
            do {
                area = try Self.area(value)
            } catch let problem as ConfigValue.Problem {
                throw ConfigValue.Problem(message: "\(name): option region: \(problem.message)")
            }
        }
        guard let area else {
            throw ConfigValue.Problem(message: "\(name): no region: \(Self.usage)")
        }
        self.init(agencies: agencies, area: area)
    }

    /// An agency's code or a source's name: 1 to 32 ASCII letters, digits, `-`, `_` or `.`.
    public static func isValidAgency(_ agency: String) -> Bool {
        let bytes = Array(agency.utf8)
        guard !bytes.isEmpty, bytes.count <= 32 else { return false }
        return bytes.allSatisfy { b in
            (0x61...0x7A).contains(b) || (0x41...0x5A).contains(b) || (0x30...0x39).contains(b)
                || b == UInt8(ascii: "-") || b == UInt8(ascii: "_") || b == UInt8(ascii: ".")
        }
    }

    /// `region=`'s value: a circle or a box as ``ConfigValue/region(_:)`` reads them, or a polygon
    /// file's absolute path.
    static func area(_ value: String) throws -> Area {
        if value.isEmpty || value == "none" {
            throw ConfigValue.Problem(
                message:
                    "a preference needs a region: give LAT,LON,KM (a circle), MINLAT,MINLON,MAXLAT,MAXLON (a box) or the absolute path of a GeoJSON polygon file"
            )
        }
        if value.hasPrefix("/") {
            return .file(path: value, polygons: try polygons(atPath: value))
        }
        let numeric = value.unicodeScalars.allSatisfy { "0123456789+-.,eE".unicodeScalars.contains($0) }
        guard numeric else {
            throw ConfigValue.Problem(
                message:
                    "'\(value)' is not a region: give LAT,LON,KM (a circle), MINLAT,MINLON,MAXLAT,MAXLON (a box), or a GeoJSON polygon file by its absolute path (e.g. region=/etc/quaked/italy.geojson)"
            )
        }
        guard let region = try ConfigValue.region(value) else {
            throw ConfigValue.Problem(message: "'\(value)' is not a region: \(usage)")
        }
        return .shape(region)
    }

    /// The validated polygons of the GeoJSON file at `path`.
    static func polygons(atPath path: String) throws -> PolygonRegion {
        let bytes: [UInt8]
        do {
            bytes = try ConfigFile.readBytes(path, limit: maxFileSize)
        } catch {
            throw ConfigValue.Problem(message: "cannot read the polygon file \(path): \(error.reason)")
        }
        let remedy =
            "give a GeoJSON Polygon or MultiPolygon (or a Feature or FeatureCollection of them), positions [longitude, latitude], as quakectl --region reads"
        do {
            let region = try GeoJSONRegion.parse(Data(bytes))
            try region.validate()
            return region
        } catch let problem as GeoJSONRegion.Problem {
            throw ConfigValue.Problem(message: "the polygon file \(path) is not GeoJSON polygons: \(problem): \(remedy)")
        } catch let problem as PolygonRegion.Problem {
            throw ConfigValue.Problem(
                message:
                    "the polygon file \(path) is not a region: \(problem) (each ring closed, at least 3 corners, not crossing itself)"
            )
        }
    }

    /// The preference as ``init(parsing:)`` reads it: a polygon file by its path.
    public var description: String {
        let region: String
        switch area {
        case .shape(let shape): region = ConfigValue.text(region: shape)
        case .file(let path, _): region = path
        }
        return "\(agencies.joined(separator: ",")) region=\(region)"
    }
}
