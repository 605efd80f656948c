import Foundation

/// One source's solution for an event, as the event's row carries it in `contributors`: io.quaked's
/// `Contributor` (the same members, in the same order).
///
/// The store keeps an event's contributors as text, their canonical JSON (``json(_:)``): compact,
/// members in the interface's order, optional members that are nil left out, numbers and strings
/// written exactly as the generated `IOQuaked.Contributor.write(to:)` writes them, so the text
/// passes through to the wire as it is (a test holds the two to the same bytes).
public struct Contributor: Sendable, Hashable, Codable {
    /// The configured source's name (`usgs` for the USGS feed, the catalog and USGS backfills).
    public var source: String
    /// The agency whose solution this is, when the source says.
    public var agency: String?
    /// The source's own id for the event.
    public var id: String
    /// Origin time, in milliseconds since the epoch.
    public var time: Int64
    public var lat: Double
    public var lon: Double
    /// Kilometres below the surface.
    public var depth: Double?
    public var mag: Double?
    public var magType: String?
    /// QuakeML's evaluation status (for the USGS: automatic or reviewed).
    public var status: String?
    /// When the agency last changed the solution, in milliseconds since the epoch, when it says.
    public var updated: Int64?
    /// Whether the event's values are this solution's (exactly one per event).
    public var preferred: Bool

    public init(
        source: String, agency: String? = nil, id: String, time: Int64, lat: Double, lon: Double, depth: Double? = nil,
        mag: Double? = nil, magType: String? = nil, status: String? = nil, updated: Int64? = nil, preferred: Bool
    ) {
        self.source = source
        self.agency = agency
        self.id = id
        self.time = time
        self.lat = lat
        self.lon = lon
        self.depth = depth
        self.mag = mag
        self.magType = magType
        self.status = status
        self.updated = updated
        self.preferred = preferred
    }

    /// The contributor of `report`. Its status is the report's evaluation status, or, without
    /// one, `automatic` for an automatic solution (the USGS's unreviewed reports).
    public init(_ report: SourceReport, preferred: Bool) {
        self.init(
            source: report.source, agency: report.agency, id: report.id, time: report.time, lat: report.latitude,
            lon: report.longitude, depth: report.depth, mag: report.magnitude, magType: report.magnitudeType,
            status: report.evaluationStatus?.rawValue
                ?? (report.evaluationMode == .automatic ? SourceReport.EvaluationMode.automatic.rawValue : nil),
            updated: report.updated, preferred: preferred)
    }

    /// An event's contributors: `preferred` first, then the other members by source (and id).
    public static func of(preferred: SourceReport, members: [SourceReport]) -> [Contributor] {
        let others = members.filter { $0.source != preferred.source || $0.id != preferred.id }
            .sorted { ($0.source, $0.id) < ($1.source, $1.id) }
        return [Contributor(preferred, preferred: true)] + others.map { Contributor($0, preferred: false) }
    }

    /// The canonical JSON of `contributors`: an array of objects, as io.quaked's `[]Contributor`
    /// is written by the generated encoder.
    public static func json(_ contributors: [Contributor]) -> String {
        var out: [UInt8] = []
        out.reserveCapacity(contributors.count * 200)
        out.append(UInt8(ascii: "["))
        for (i, c) in contributors.enumerated() {
            if i > 0 { out.append(UInt8(ascii: ",")) }
            c.write(to: &out)
        }
        out.append(UInt8(ascii: "]"))
        return String(decoding: out, as: UTF8.self)
    }

    /// This contributor's canonical JSON object.
    public var json: String {
        var out: [UInt8] = []
        write(to: &out)
        return String(decoding: out, as: UTF8.self)
    }

    /// The contributors of canonical (or any) JSON text; nil when it is not an array of them.
    ///
    /// The canonical text the store keeps (no whitespace, strings without escapes, plain numbers)
    /// is read by a scanner of that layout alone (history writes both values of every
    /// `contributors` change: `JSONDecoder` was an eighth of a three-agency import's time); any
    /// other text, and anything the scanner does not take, goes to `JSONDecoder`, so the result is
    /// the decoder's either way.
    public static func decode(json: String) -> [Contributor]? {
        var json = json
        let fast = json.withUTF8 { bytes in
            var scanner = CanonicalScanner(bytes: bytes)
            return scanner.contributors()
        }
        if let fast { return fast }
        return try? JSONDecoder().decode([Contributor].self, from: Data(json.utf8))
    }

    private func write(to out: inout [UInt8]) {
        var first = true
        func key(_ name: StaticString) {
            if !first { out.append(UInt8(ascii: ",")) }
            first = false
            out.append(UInt8(ascii: "\""))
            name.withUTF8Buffer { out.append(contentsOf: $0) }
            out.append(contentsOf: [UInt8(ascii: "\""), UInt8(ascii: ":")])
        }
        out.append(UInt8(ascii: "{"))
        key("source")
        CanonicalJSON.string(source, to: &out)
        if let agency {
            key("agency")
            CanonicalJSON.string(agency, to: &out)
        }
        key("id")
        CanonicalJSON.string(id, to: &out)
        key("time")
        CanonicalJSON.integer(time, to: &out)
        key("lat")
        CanonicalJSON.double(lat, to: &out)
        key("lon")
        CanonicalJSON.double(lon, to: &out)
        if let depth {
            key("depth")
            CanonicalJSON.double(depth, to: &out)
        }
        if let mag {
            key("mag")
            CanonicalJSON.double(mag, to: &out)
        }
        if let magType {
            key("magType")
            CanonicalJSON.string(magType, to: &out)
        }
        if let status {
            key("status")
            CanonicalJSON.string(status, to: &out)
        }
        if let updated {
            key("updated")
            CanonicalJSON.integer(updated, to: &out)
        }
        key("preferred")
        out.append(contentsOf: Array((preferred ? "true" : "false").utf8))
        out.append(UInt8(ascii: "}"))
    }
}

/// JSON values written as Varlink's `JSONWriter` writes them (QuakeModel has no dependencies, so
/// it has its own copy of the rules; the protocol tests compare the bytes).
public enum CanonicalJSON {
    /// An integer in decimal.
    public static func integer(_ value: Int64, to out: inout [UInt8]) {
        out.append(contentsOf: Array(String(value).utf8))
    }

    /// The shortest text that reads back as the same Double; an integral value below 1e15 without
    /// a fraction (`4`, not `4.0`); null for NaN and the infinities.
    public static func double(_ value: Double, to out: inout [UInt8]) {
        guard value.isFinite else { return out.append(contentsOf: Array("null".utf8)) }
        if value == value.rounded(.towardZero), abs(value) < 1e15 {
            return integer(Int64(value), to: &out)
        }
        out.append(contentsOf: Array(value.description.utf8))
    }

    /// A string: `"`, `\` and control characters escaped (`\n`, `\r`, `\t`, else `\u00XX`),
    /// everything else as UTF-8.
    public static func string(_ value: String, to out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        let hex = Array("0123456789abcdef".utf8)
        for byte in value.utf8 {
            switch byte {
            case UInt8(ascii: "\""): out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\"")])
            case UInt8(ascii: "\\"): out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\\")])
            case 0x0A: out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "n")])
            case 0x0D: out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "r")])
            case 0x09: out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "t")])
            case 0..<0x20:
                out.append(contentsOf: Array("\\u00".utf8))
                out.append(hex[Int(byte >> 4)])
                out.append(hex[Int(byte & 0xF)])
            default: out.append(byte)
            }
        }
        out.append(UInt8(ascii: "\""))
    }
}

/// Reads the canonical JSON of `[Contributor]` (``Contributor/json(_:)``); nil at the first byte
/// it does not expect, for the caller to hand the text to `JSONDecoder`. It takes only what the
/// decoder reads to the same values: strings without a backslash or a control character,
/// integers that fit `Int64`, finite numbers, `true`/`false`, `null` for optional members, each
/// known member at most once and every required one present.
private struct CanonicalScanner {
    let bytes: UnsafeBufferPointer<UInt8>
    var i = 0

    init(bytes: UnsafeBufferPointer<UInt8>) { self.bytes = bytes }

    mutating func contributors() -> [Contributor]? {
        guard take(UInt8(ascii: "[")) else { return nil }
        var result: [Contributor] = []
        if take(UInt8(ascii: "]")) { return i == bytes.count ? result : nil }
        repeat {
            guard let contributor = contributor() else { return nil }
            result.append(contributor)
        } while take(UInt8(ascii: ","))
        guard take(UInt8(ascii: "]")), i == bytes.count else { return nil }
        return result
    }

    private mutating func contributor() -> Contributor? {
        guard take(UInt8(ascii: "{")) else { return nil }
        var source: String?, agency: String?, id: String?, magType: String?, status: String?
        var time: Int64?, updated: Int64?
        var lat: Double?, lon: Double?, depth: Double?, mag: Double?
        var preferred: Bool?
        var seen = Set<String>()
        repeat {
            guard let key = string(), seen.insert(key).inserted, take(UInt8(ascii: ":")) else { return nil }
            if take(word: "null") {
                switch key {
                case "agency", "depth", "mag", "magType", "status", "updated": continue
                default: return nil
                }
            }
            switch key {
            case "source": guard let v = string() else { return nil }; source = v
            case "agency": guard let v = string() else { return nil }; agency = v
            case "id": guard let v = string() else { return nil }; id = v
            case "magType": guard let v = string() else { return nil }; magType = v
            case "status": guard let v = string() else { return nil }; status = v
            case "time": guard let v = integer() else { return nil }; time = v
            case "updated": guard let v = integer() else { return nil }; updated = v
            case "lat": guard let v = number() else { return nil }; lat = v
            case "lon": guard let v = number() else { return nil }; lon = v
            case "depth": guard let v = number() else { return nil }; depth = v
            case "mag": guard let v = number() else { return nil }; mag = v
            case "preferred": guard let v = boolean() else { return nil }; preferred = v
            default: return nil
            }
        } while take(UInt8(ascii: ","))
        guard take(UInt8(ascii: "}")), let source, let id, let time, let lat, let lon, let preferred else {
            return nil
        }
        return Contributor(
            source: source, agency: agency, id: id, time: time, lat: lat, lon: lon, depth: depth, mag: mag,
            magType: magType, status: status, updated: updated, preferred: preferred)
    }

    private mutating func take(_ byte: UInt8) -> Bool {
        guard i < bytes.count, bytes[i] == byte else { return false }
        i += 1
        return true
    }

    /// Takes `word` (`null`, `true`, `false`) when the text goes on with it.
    private mutating func take(word: StaticString) -> Bool {
        let utf8 = UnsafeBufferPointer(start: word.utf8Start, count: word.utf8CodeUnitCount)
        guard bytes.count - i >= utf8.count, bytes[i..<(i + utf8.count)].elementsEqual(utf8) else { return false }
        i += utf8.count
        return true
    }

    private mutating func string() -> String? {
        guard take(UInt8(ascii: "\"")) else { return nil }
        let start = i
        while i < bytes.count {
            let byte = bytes[i]
            if byte == UInt8(ascii: "\"") {
                let text = String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<i]), as: UTF8.self)
                i += 1
                return text
            }
            if byte == UInt8(ascii: "\\") || byte < 0x20 { return nil }
            i += 1
        }
        return nil
    }

    /// The text of a number: `-`, digits, and (unless `integer`) `.`, `e`, `E`, `+`.
    private mutating func numberText(integer: Bool) -> String? {
        let start = i
        while i < bytes.count {
            let byte = bytes[i]
            let isDigit = byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9")
            let isSign = byte == UInt8(ascii: "-")
            let isFraction =
                byte == UInt8(ascii: ".") || byte == UInt8(ascii: "e") || byte == UInt8(ascii: "E")
                || byte == UInt8(ascii: "+")
            guard isDigit || isSign || (isFraction && !integer) else { break }
            i += 1
        }
        guard i > start, i < bytes.count else { return nil }
        return String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<i]), as: UTF8.self)
    }

    private mutating func integer() -> Int64? {
        guard let text = numberText(integer: true), Self.isJSONNumber(text) else { return nil }
        return Int64(text)
    }

    private mutating func number() -> Double? {
        // JSON's grammar, which Double(String) is looser than (it takes "1.", ".5", "+1", "0x1p3").
        guard let text = numberText(integer: false), Self.isJSONNumber(text), let value = Double(text),
            value.isFinite
        else { return nil }
        return value
    }

    private mutating func boolean() -> Bool? {
        if take(word: "true") { return true }
        if take(word: "false") { return false }
        return nil
    }

    /// `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`
    private static func isJSONNumber(_ text: String) -> Bool {
        var utf8 = Array(text.utf8)[...]
        func digits() -> Int {
            var n = 0
            while let c = utf8.first, c >= UInt8(ascii: "0"), c <= UInt8(ascii: "9") {
                utf8.removeFirst()
                n += 1
            }
            return n
        }
        if utf8.first == UInt8(ascii: "-") { utf8.removeFirst() }
        let leadingZero = utf8.first == UInt8(ascii: "0")
        let integerDigits = digits()
        guard integerDigits > 0, !(leadingZero && integerDigits > 1) else { return false }
        if utf8.first == UInt8(ascii: ".") {
            utf8.removeFirst()
            guard digits() > 0 else { return false }
        }
        if utf8.first == UInt8(ascii: "e") || utf8.first == UInt8(ascii: "E") {
            utf8.removeFirst()
            if utf8.first == UInt8(ascii: "+") || utf8.first == UInt8(ascii: "-") { utf8.removeFirst() }
            guard digits() > 0 else { return false }
        }
        return utf8.isEmpty
    }
}
