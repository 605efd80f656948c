import QuakeClient
import QuakeMap
import QuakeModel
import QuakeProtocol
import ArgumentParser
import Foundation
import QuakeModel

/// The formats of `quakectl export`.
public enum ExportFormat: String, CaseIterable, Sendable, ExpressibleByArgument {
    /// RFC 4180: CRLF line ends, a header row, fields quoted when they hold a comma, quote or line
    /// break. Times in ISO 8601 UTC with milliseconds.
    case csv
    /// A USGS-style FeatureCollection that quaked imports back unchanged (`agency` and the
    /// `contributors` array are properties too).
    case geojson
    /// One interface `Quake` object per line (`contributors` an array of `Contributor` objects).
    case ndjson
    /// A map: coastlines, a circle per quake scaled by magnitude in `list`'s colours, a legend.
    case svg
    /// KML 2.2, a Placemark per quake, for Google Earth and QGIS.
    case kml

    /// The writer; `viewport` is the part of the world an SVG map shows, `title` its title.
    public func writer(viewport: Viewport = .world, title: String = "quakectl export") -> any ExportWriter {
        switch self {
        case .csv: CSVExportWriter()
        case .geojson: GeoJSONExportWriter()
        case .ndjson: NDJSONExportWriter()
        case .svg: SVGExportWriter(viewport: viewport, title: title)
        case .kml: KMLExportWriter(title: title)
        }
    }
}

/// Turns a stream of quakes into bytes: a header, each quake, a footer.
public protocol ExportWriter {
    func header(into out: inout [UInt8])
    func quake(_ q: IOQuaked.Quake, index: Int, into out: inout [UInt8])
    func footer(into out: inout [UInt8])
}

/// A column per field but the JSON ones (`contributors`, whose agencies `sources` and `agency`
/// already give: a table cell holds no array of solutions).
public struct CSVExportWriter: ExportWriter {
    public init() {}

    /// The fields that are columns, by position in ``QuakeFields/names``.
    static let columns = QuakeRecord.fields.indices.filter { !QuakeRecord.fields[$0].isJSON }

    public func header(into out: inout [UInt8]) {
        out.append(contentsOf: Array(Self.columns.map { QuakeFields.names[$0] }.joined(separator: ",").utf8))
        out.append(contentsOf: [13, 10])
    }

    public func quake(_ q: IOQuaked.Quake, index: Int, into out: inout [UInt8]) {
        let values = QuakeFields.values(q)
        for (column, i) in Self.columns.enumerated() {
            if column > 0 { out.append(UInt8(ascii: ",")) }
            switch values[i] {
            case .null: break
            case .integer(let n) where QuakeRecord.fields[i].isTime:
                out.append(contentsOf: Array(QuakeTime.iso8601(n).utf8))
            case .integer(let n): out.append(contentsOf: Array(String(n).utf8))
            case .real(let d): JSONText.appendNumber(d, to: &out)
            case .text(let s): Self.appendField(s, to: &out)
            }
        }
        out.append(contentsOf: [13, 10])
    }

    public func footer(into out: inout [UInt8]) {}

    /// RFC 4180 section 2: quote a field with a comma, quote, CR or LF; double inner quotes.
    static func appendField(_ s: String, to out: inout [UInt8]) {
        let special: Set<UInt8> = [44, 34, 13, 10]  // , " CR LF
        let needsQuotes = s.utf8.contains { special.contains($0) }
        guard needsQuotes else {
            out.append(contentsOf: Array(s.utf8))
            return
        }
        out.append(34)
        for byte in s.utf8 {
            if byte == 34 { out.append(34) }
            out.append(byte)
        }
        out.append(34)
    }
}

public struct NDJSONExportWriter: ExportWriter {
    public init() {}

    public func header(into out: inout [UInt8]) {}

    public func quake(_ q: IOQuaked.Quake, index: Int, into out: inout [UInt8]) {
        out.append(UInt8(ascii: "{"))
        for (i, value) in QuakeFields.values(q).enumerated() {
            if i > 0 { out.append(UInt8(ascii: ",")) }
            JSONText.appendString(QuakeFields.names[i], to: &out)
            out.append(UInt8(ascii: ":"))
            JSONText.appendValue(value, json: QuakeRecord.fields[i].isJSON, to: &out)
        }
        out.append(contentsOf: [UInt8(ascii: "}"), 10])
    }

    public func footer(into out: inout [UInt8]) {}
}

/// The USGS summary format: properties (every field but `id` and the coordinates, nulls kept),
/// a Point geometry `[lon, lat, depth]` (null when the quake has no coordinates), and the id.
public struct GeoJSONExportWriter: ExportWriter {
    public init() {}

    public func header(into out: inout [UInt8]) {
        let generated = QuakeTime.now()
        out.append(
            contentsOf: Array(
                #"{"type":"FeatureCollection","metadata":{"generated":\#(generated),"title":"quakectl export","status":200},"features":["#
                    .utf8))
    }

    public func quake(_ q: IOQuaked.Quake, index: Int, into out: inout [UInt8]) {
        if index > 0 { out.append(UInt8(ascii: ",")) }
        out.append(contentsOf: Array(#"{"type":"Feature","properties":{"#.utf8))
        var first = true
        for (i, value) in QuakeFields.values(q).enumerated() {
            let name = QuakeFields.names[i]
            // The id and the coordinates are the feature's own, not properties; the fields the
            // store derives (agency, contributors: an array) are properties here, which quaked's
            // feed decoder skips when the file is imported back.
            switch QuakeRecord.fields[i].origin {
            case .featureID, .coordinate: continue
            case .property, .derived: break
            }
            if !first { out.append(UInt8(ascii: ",")) }
            first = false
            JSONText.appendString(name, to: &out)
            out.append(UInt8(ascii: ":"))
            JSONText.appendValue(value, json: QuakeRecord.fields[i].isJSON, to: &out)
        }
        out.append(contentsOf: Array(#"},"geometry":"#.utf8))
        if q.lon == nil && q.lat == nil && q.depth == nil {
            out.append(contentsOf: Array("null".utf8))
        } else {
            out.append(contentsOf: Array(#"{"type":"Point","coordinates":["#.utf8))
            for (i, c) in [q.lon, q.lat, q.depth].enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                JSONText.appendValue(c.map(QuakeValue.real) ?? .null, to: &out)
            }
            out.append(contentsOf: Array("]}".utf8))
        }
        out.append(contentsOf: Array(#","id":"#.utf8))
        JSONText.appendString(q.id, to: &out)
        out.append(UInt8(ascii: "}"))
    }

    public func footer(into out: inout [UInt8]) {
        out.append(contentsOf: Array("]}\n".utf8))
    }
}
