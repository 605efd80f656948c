import Foundation
import QuakeMap
import QuakeModel
import QuakeProtocol
import QuakeModel

/// The magnitude classes of `list`'s colours (``Formatting/magnitudeColor(_:)``), for maps.
enum MagnitudeClass: Int, CaseIterable {
    case unknown, belowOne, belowTwo, belowThree, belowFive, fiveAndAbove

    init(_ mag: Double?) {
        switch Formatting.magnitudeColor(mag) {
        case .green: self = .belowOne
        case .yellow: self = .belowTwo
        case .orange: self = .belowThree
        case .red: self = .belowFive
        case .purple: self = .fiveAndAbove
        default: self = .unknown
        }
    }

    var color: ANSIColor {
        switch self {
        case .unknown: .gray
        case .belowOne: .green
        case .belowTwo: .yellow
        case .belowThree: .orange
        case .belowFive: .red
        case .fiveAndAbove: .purple
        }
    }

    /// The same colours as RGB.
    var hex: String {
        switch self {
        case .unknown: "7f7f7f"
        case .belowOne: "2ca02c"
        case .belowTwo: "d4b000"
        case .belowThree: "ff8700"
        case .belowFive: "d62728"
        case .fiveAndAbove: "9467bd"
        }
    }

    var label: String {
        switch self {
        case .unknown: "unknown"
        case .belowOne: "< 1"
        case .belowTwo: "1–2"
        case .belowThree: "2–3"
        case .belowFive: "3–5"
        case .fiveAndAbove: "≥ 5"
        }
    }
}

enum XMLText {
    /// Text and attribute values: & < > " ' escaped; characters XML 1.0 does not allow dropped.
    static func escape(_ text: String) -> String {
        var out = ""
        out.reserveCapacity(text.utf8.count)
        for scalar in text.unicodeScalars {
            switch scalar {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "'": out += "&apos;"
            case "\t", "\n", "\r": out.unicodeScalars.append(scalar)
            default:
                let v = scalar.value
                if v >= 0x20 && !(0xFFFE...0xFFFF).contains(v) { out.unicodeScalars.append(scalar) }
            }
        }
        return out
    }

    static func number(_ value: Double) -> String {
        String(format: "%.2f", value)
    }
}

/// `export --format svg`: one map of the quakes, streamed. The header holds the title, the
/// coastlines of the view (the world, or the region of --box or --near) and the legend; each
/// quake is a circle scaled by magnitude, in `list`'s colour, drawn as it comes; the footer adds
/// the count and the time span. Memory stays constant: nothing is kept per quake.
public final class SVGExportWriter: ExportWriter {
    let viewport: Viewport
    let title: String
    /// The map's size in pixels (the title band and the legend band come on top).
    let width: Double
    let height: Double
    static let band = 44.0
    private var count = 0
    private var drawn = 0
    private var earliest: Int?
    private var latest: Int?

    init(viewport: Viewport, title: String, width: Double = 1440) {
        self.viewport = viewport
        self.title = title
        self.width = width
        self.height = (width * viewport.height / viewport.width).rounded().clamped(to: 120...2880)
    }

    /// Where a point is drawn, nil outside the view.
    func pixel(lat: Double, lon: Double) -> (x: Double, y: Double)? {
        viewport.position(lat: lat, lon: lon).map { ($0.x * width, Self.band + $0.y * height) }
    }

    /// The circle's radius for a magnitude: 3 px, growing with the magnitude.
    static func radius(_ mag: Double?) -> Double {
        let mag = max(0, min(10, mag ?? 0))
        return 3 + mag * mag / 4
    }

    private func append(_ text: String, _ out: inout [UInt8]) {
        out.append(contentsOf: Array(text.utf8))
    }

    public func header(into out: inout [UInt8]) {
        let total = height + 2 * Self.band
        append(
            """
            <?xml version="1.0" encoding="UTF-8"?>
            <svg xmlns="http://www.w3.org/2000/svg" width="\(Int(width))" height="\(Int(total))" viewBox="0 0 \(Int(width)) \(Int(total))" font-family="sans-serif">
            <title>\(XMLText.escape(title))</title>
            <rect width="100%" height="100%" fill="#ffffff"/>
            <rect x="0" y="\(Int(Self.band))" width="\(Int(width))" height="\(Int(height))" fill="#eef4f8"/>
            <text x="12" y="28" font-size="20" fill="#222222">\(XMLText.escape(title))</text>
            <g fill="none" stroke="#5b6b7c" stroke-width="1" stroke-linejoin="round">

            """, &out)
        for line in Coastlines.lines {
            guard let path = coastlinePath(line) else { continue }
            append("<path d=\"\(path)\"/>\n", &out)
        }
        append("</g>\n<g stroke=\"#222222\" stroke-width=\"0.6\" fill-opacity=\"0.75\">\n", &out)
    }

    /// The SVG path of a coastline, its first point unwrapped into the view and each next one the
    /// shorter way round from it (the SVG viewport clips what lies outside); nil when nothing of
    /// it shows.
    func coastlinePath(_ line: [GeoPoint]) -> String? {
        var path = ""
        var previous: GeoPoint?
        var previousLon = 0.0
        var visible = false
        for point in line {
            let lon = previous.map { previousLon + $0.eastwardStep(to: point) } ?? viewport.unwrap(point.lon)
            let fraction = viewport.fraction(lat: point.lat, unwrappedLon: lon)
            let x = fraction.x * width
            let y = Self.band + fraction.y * height
            if (-10...(width + 10)).contains(x) && ((Self.band - 10)...(Self.band + height + 10)).contains(y) {
                visible = true
            }
            path += (previous == nil ? "M" : "L") + XMLText.number(x) + " " + XMLText.number(y)
            previous = point
            previousLon = lon
        }
        return visible ? path : nil
    }

    public func quake(_ q: IOQuaked.Quake, index: Int, into out: inout [UInt8]) {
        count += 1
        earliest = min(earliest ?? q.time, q.time)
        latest = max(latest ?? q.time, q.time)
        guard let lat = q.lat, let lon = q.lon, let pixel = pixel(lat: lat, lon: lon) else { return }
        drawn += 1
        let kind = MagnitudeClass(q.mag)
        let label = "\(Formatting.magnitude(q.mag)) \(q.place ?? q.id)"
        append(
            "<circle cx=\"\(XMLText.number(pixel.x))\" cy=\"\(XMLText.number(pixel.y))\" r=\"\(XMLText.number(Self.radius(q.mag)))\" fill=\"#\(kind.hex)\"><title>\(XMLText.escape(label))</title></circle>\n",
            &out)
    }

    public func footer(into out: inout [UInt8]) {
        append("</g>\n", &out)
        let y = Self.band + height + 28
        var x = 12.0
        for kind in MagnitudeClass.allCases {
            append(
                "<circle cx=\"\(Int(x + 6))\" cy=\"\(Int(y - 6))\" r=\"6\" fill=\"#\(kind.hex)\"/><text x=\"\(Int(x + 16))\" y=\"\(Int(y))\" font-size=\"15\" fill=\"#222222\">M \(XMLText.escape(kind.label))</text>\n",
                &out)
            x += 110
        }
        var summary = "\(Formatting.earthquakes(count))"
        if drawn != count { summary += " (\(Formatting.count(drawn)) in view)" }
        if let earliest, let latest {
            func minute(_ ms: Int) -> String {
                QuakeTime.utcMinutes(ms)
            }
            summary += ", \(minute(earliest)) to \(minute(latest)) UTC"
        }
        append(
            "<text x=\"\(Int(width - 12))\" y=\"\(Int(y))\" font-size=\"15\" fill=\"#222222\" text-anchor=\"end\">\(XMLText.escape(summary))</text>\n</svg>\n",
            &out)
    }
}

/// `export --format kml`: a KML 2.2 document for Google Earth and QGIS, one Placemark per quake
/// (its name, time, magnitude style, the quake's fields as ExtendedData, a Point), streamed.
public struct KMLExportWriter: ExportWriter {
    let title: String

    private func append(_ text: String, _ out: inout [UInt8]) {
        out.append(contentsOf: Array(text.utf8))
    }

    public func header(into out: inout [UInt8]) {
        append(
            """
            <?xml version="1.0" encoding="UTF-8"?>
            <kml xmlns="http://www.opengis.net/kml/2.2">
            <Document>
            <name>\(XMLText.escape(title))</name>

            """, &out)
        for kind in MagnitudeClass.allCases {
            // KML colours are aabbggrr.
            let hex = Array(kind.hex)
            let abgr = "ff" + String(hex[4...5]) + String(hex[2...3]) + String(hex[0...1])
            let scale = 0.5 + Double(kind.rawValue) * 0.2
            append(
                "<Style id=\"mag\(kind.rawValue)\"><IconStyle><color>\(abgr)</color><scale>\(XMLText.number(scale))</scale><Icon><href>http://maps.google.com/mapfiles/kml/shapes/shaded_dot.png</href></Icon></IconStyle></Style>\n",
                &out)
        }
    }

    public func quake(_ q: IOQuaked.Quake, index: Int, into out: inout [UInt8]) {
        var text = "<Placemark id=\"\(XMLText.escape(q.id))\"><name>\(XMLText.escape(q.title ?? "\(Formatting.magnitude(q.mag)) - \(q.place ?? q.id)"))</name>"
        text += "<TimeStamp><when>\(QuakeTime.iso8601(q.time))</when></TimeStamp>"
        text += "<styleUrl>#mag\(MagnitudeClass(q.mag).rawValue)</styleUrl><ExtendedData>"
        for (i, value) in QuakeFields.values(q).enumerated() {
            let name = QuakeFields.names[i]
            // As in CSV: `agency` is a field, the contributors' JSON is not (`sources` lists them).
            if QuakeRecord.fields[i].isJSON { continue }
            let shown: String
            switch value {
            case .null: continue
            case .integer(let n) where QuakeRecord.fields[i].isTime: shown = QuakeTime.iso8601(n)
            case .integer(let n): shown = String(n)
            case .real(let d): shown = String(d)
            case .text(let s): shown = s
            }
            text += "<Data name=\"\(name)\"><value>\(XMLText.escape(shown))</value></Data>"
        }
        text += "</ExtendedData>"
        if let lat = q.lat, let lon = q.lon {
            text += "<Point><coordinates>\(lon),\(lat)</coordinates></Point>"
        }
        text += "</Placemark>\n"
        append(text, &out)
    }

    public func footer(into out: inout [UInt8]) {
        append("</Document>\n</kml>\n", &out)
    }
}

extension Comparable {
    func clamped(to range: ClosedRange<Self>) -> Self {
        min(max(self, range.lowerBound), range.upperBound)
    }
}
