// What FeedParser should make of a document, written the slow, obvious way over a tree parsed by
// another parser (Varlink's JSONScanner): the feed format's rules (FeedFeature, FeedMetadata,
// FeatureDecoder), with the last of a repeated key winning.

import FuzzSupport
import QuakeFeed
import VarlinkFuzzSupport

/// The items and metadata of a document FeedParser accepted, by the model.
func model(_ document: Node) -> (items: [FeedItem], metadata: FeedMetadata) {
    guard case .object(let root) = document else { fail("the parser accepted a document that is not an object") }
    var items: [FeedItem] = []
    var metadata = FeedMetadata()
    for member in root {
        switch String(decoding: member.key, as: UTF8.self) {
        case "features":
            guard case .array(let elements) = member.value else { fail("features is not an array") }
            items = elements.enumerated().map { feature($1, index: $0) }
        case "metadata":
            metadata = modelMetadata(member.value)
        default:
            break
        }
    }
    return (items, metadata)
}

func typeName(_ node: Node) -> String {
    switch node {
    case .string: "a string"
    case .object: "an object"
    case .array: "an array"
    case .bool: "a boolean"
    case .null: "null"
    case .number, .invalid: "a number"
    }
}

func text(_ bytes: [UInt8]) -> String { String(decoding: bytes, as: UTF8.self) }

func isIntegerLiteral(_ number: String) -> Bool { !number.contains { $0 == "." || $0 == "e" || $0 == "E" } }

func modelMetadata(_ node: Node) -> FeedMetadata {
    var m = FeedMetadata()
    guard case .object(let members) = node else { return m }
    for member in members {
        let value = member.value
        var string: String?
        var int: Int64?
        if case .string(let s) = value { string = text(s) }
        if case .number(let n) = value { int = exactInt64(n) }
        switch text(member.key) {
        case "url": m.url = string
        case "title": m.title = string
        case "api": m.api = string
        case "generated": m.generated = int
        case "status": m.status = int.flatMap { Int(exactly: $0) }
        case "count": m.count = int.flatMap { Int(exactly: $0) }
        default: break
        }
    }
    return m
}

func feature(_ node: Node, index: Int) -> FeedItem {
    guard case .object(let members) = node else {
        return .skipped(.notAnObject, index: index, detail: "feature: expected an object, found \(typeName(node))")
    }
    var f = FeedFeature(id: "", time: 0)
    var id: String?
    var idProblem = "id: missing"
    var time: Int64?
    var timeProblem = "properties.time: missing"
    var invalid: String?
    func setInvalid(_ problem: String) { if invalid == nil { invalid = problem } }
    for member in members {
        let value = member.value
        switch text(member.key) {
        case "id":
            id = nil
            switch value {
            case .string(let s) where s.isEmpty: idProblem = "id: empty string"
            case .string(let s): id = text(s)
            default: idProblem = "id: expected a string, found \(typeName(value))"
            }
        case "type":
            if case .string(let s) = value {
                if text(s) != "Feature" { setInvalid("type: expected \"Feature\", found \"\(text(s))\"") }
            } else {
                setInvalid("type: expected \"Feature\", found \(typeName(value))")
            }
        case "properties":
            // Replaces an earlier one whole (the geometry stays).
            let (lon, lat, depth) = (f.lon, f.lat, f.depth)
            f = FeedFeature(id: "", time: 0)
            (f.lon, f.lat, f.depth) = (lon, lat, depth)
            time = nil
            timeProblem = "properties.time: missing"
            switch value {
            case .object(let fields):
                properties(fields, &f, &time, &timeProblem, setInvalid)
            case .null:
                break
            default:
                timeProblem = "properties: expected an object or null, found \(typeName(value))"
            }
        case "geometry":
            (f.lon, f.lat, f.depth) = (nil, nil, nil)
            switch value {
            case .object(let fields):
                var problem: String? = "geometry.coordinates: missing"
                for field in fields where text(field.key) == "coordinates" {
                    (f.lon, f.lat, f.depth) = (nil, nil, nil)
                    problem = "geometry.coordinates: expected an array of 2 or 3 numbers"
                    guard case .array(let coordinates) = field.value else { continue }
                    var allNumbers = true
                    for (k, c) in coordinates.enumerated() {
                        var v: Double?
                        switch c {
                        case .number(let n): v = Double(n)!
                        case .null: break
                        default: allNumbers = false
                        }
                        switch k {
                        case 0: f.lon = v
                        case 1: f.lat = v
                        case 2: f.depth = v
                        default: break
                        }
                    }
                    if allNumbers && (coordinates.count == 2 || coordinates.count == 3) { problem = nil }
                }
                if let problem {
                    (f.lon, f.lat, f.depth) = (nil, nil, nil)
                    setInvalid(problem)
                }
            case .null:
                break
            default:
                setInvalid("geometry: expected an object or null, found \(typeName(value))")
            }
        default:
            break
        }
    }
    guard let id else { return .skipped(.missingID, index: index, detail: idProblem) }
    guard let time else { return .skipped(.missingTime, index: index, detail: timeProblem) }
    if let invalid { return .skipped(.invalidField, index: index, detail: invalid) }
    f.id = id
    f.time = time
    return .feature(f, index: index)
}

func properties(
    _ fields: [Node.Member], _ f: inout FeedFeature, _ time: inout Int64?, _ timeProblem: inout String,
    _ setInvalid: (String) -> Void
) {
    for field in fields {
        let name = text(field.key)
        let value = field.value
        func double() -> Double? {
            switch value {
            case .number(let n): return Double(n)!
            case .null: return nil
            default:
                setInvalid("properties.\(name): expected a number or null, found \(typeName(value))")
                return nil
            }
        }
        func integer() -> Int64? {
            switch value {
            case .number(let n):
                if let v = exactInt64(n) { return v }
                setInvalid(
                    "properties.\(name): expected an integer or null, found "
                        + (isIntegerLiteral(n) ? "an integer out of range" : "a number with a fraction"))
                return nil
            case .null: return nil
            default:
                setInvalid("properties.\(name): expected an integer or null, found \(typeName(value))")
                return nil
            }
        }
        func string() -> String? {
            switch value {
            case .string(let s): return text(s)
            case .null: return nil
            default:
                setInvalid("properties.\(name): expected a string or null, found \(typeName(value))")
                return nil
            }
        }
        switch name {
        case "time":
            time = nil
            switch value {
            case .number(let n):
                if isIntegerLiteral(n), let t = exactInt64(n) {
                    time = t
                } else {
                    timeProblem =
                        isIntegerLiteral(n)
                        ? "properties.time: integer out of range"
                        : "properties.time: expected an integer, found a number with a fraction or exponent"
                }
            case .null: timeProblem = "properties.time: null"
            default: timeProblem = "properties.time: expected an integer, found \(typeName(value))"
            }
        case "mag": f.mag = double()
        case "cdi": f.cdi = double()
        case "mmi": f.mmi = double()
        case "dmin": f.dmin = double()
        case "rms": f.rms = double()
        case "gap": f.gap = double()
        case "updated": f.updated = integer()
        case "tz": f.tz = integer()
        case "felt": f.felt = integer()
        case "tsunami": f.tsunami = integer()
        case "sig": f.sig = integer()
        case "nst": f.nst = integer()
        case "place": f.place = string()
        case "url": f.url = string()
        case "detail": f.detail = string()
        case "alert": f.alert = string()
        case "status": f.status = string()?.lowercased()
        case "net": f.net = string()
        case "code": f.code = string()
        case "ids": f.ids = string()
        case "sources": f.sources = string()
        case "types": f.types = string()
        case "magType": f.magType = string()
        case "type": f.type = string()
        case "title": f.title = string()
        default: break
        }
    }
}
