import Foundation
@_exported import QuakeModel

/// One version of a quake in a generated document: a real feature's properties, with the values
/// the model varies.
public struct FeatureVersion: Hashable, Sendable, CustomStringConvertible {
    /// Which real feature the other properties come from.
    public var template: Int
    public var id: String
    /// `properties.ids` as its list of entries (written ",a,b,"), or nil for null.
    public var ids: [String]?
    public var time: Int64
    public var updated: Int64?
    public var mag: Double?
    /// Properties set to null.
    public var nulls: [String] = []
    /// Text properties given another value than the template's (type, status, alert): what a
    /// filter looks at besides magnitude, time and place.
    public var overrides: [String: String] = [:]

    public var description: String {
        var parts = ["\(id)", "ids=\(ids.map { ",\($0.joined(separator: ",")),"} ?? "null")"]
        parts.append("time=\(time)")
        parts.append("updated=\(updated.map(String.init) ?? "null")")
        parts.append("mag=\(mag.map { "\($0)" } ?? "null")")
        if !nulls.isEmpty { parts.append("null:\(nulls.joined(separator: ","))") }
        for key in overrides.keys.sorted() { parts.append("\(key)=\(overrides[key]!)") }
        if template != 0 { parts.append("template=\(template)") }
        return parts.joined(separator: " ")
    }
}

/// An element of `features` that the importer must skip.
public enum JunkFeature: String, Hashable, Sendable, CaseIterable {
    case notAnObject = "42"
    case missingID = #"{"type":"Feature","properties":{"time":1700000000000}}"#
    case missingTime = #"{"type":"Feature","properties":{"time":null,"mag":1},"id":"zz0001"}"#
    case badMagnitude = #"{"type":"Feature","properties":{"time":1700000000000,"mag":"big"},"id":"zz0002"}"#
}

public enum DocumentElement: Hashable, Sendable, CustomStringConvertible {
    case feature(FeatureVersion)
    case junk(JunkFeature)

    public var description: String {
        switch self {
        case .feature(let version): version.description
        case .junk(let junk): "junk \(junk)"
        }
    }
}

/// One step of a case.
public enum ModelStep: Hashable, Sendable, CustomStringConvertible {
    /// Import a document, sent in chunks of these sizes (cycled; empty: in one piece).
    case importDocument([DocumentElement], chunks: [Int])
    /// `quakectl delete` of these ids (stored or not).
    case delete([String])
    /// An event-retention pass deleting quakes whose time is before this.
    case retention(before: Int64)

    public var description: String {
        switch self {
        case .importDocument(let elements, let chunks):
            let chunking = chunks.isEmpty ? "whole" : "chunks \(chunks.map(String.init).joined(separator: ","))"
            return "import (\(chunking)):\n"
                + elements.map { "      - \($0)" }.joined(separator: "\n")
        case .delete(let ids):
            return "delete \(ids.joined(separator: " "))"
        case .retention(let before):
            return "retention: expire time < \(before)"
        }
    }
}

/// How a model case is generated.
public struct ModelShape: Sendable {
    /// Steps per case.
    public var steps = 10
    /// Events the documents talk about; each has up to three ids.
    public var events = 6
    /// Elements per document, at most.
    public var documentSize = 8

    public init(steps: Int = 10, events: Int = 6, documentSize: Int = 8) {
        self.steps = steps
        self.events = events
        self.documentSize = documentSize
    }
}

/// Generates cases: random sequences of feed documents built from real features, with aliases in
/// both directions and chains, versions newer, older and as old, upstream deletions (status
/// `deleted`), nulls, junk and duplicates, random chunking, deletes and retention passes.
public struct ModelGenerator {
    public static let baseTime: Int64 = 1_700_000_000_000
    static let day: Int64 = 86_400_000
    let templates: Int
    let shape: ModelShape

    public init(templates: Int, shape: ModelShape) {
        self.templates = templates
        self.shape = shape
    }

    /// The ids of event `e`: its first is its original id, the others later preferred ids.
    static func ids(ofEvent e: Int) -> [String] {
        ["us\(e)000", "ci\(e)111", "nc\(e)222"]
    }

    public func makeCase(_ random: inout SeededRandom) -> [ModelStep] {
        (0..<shape.steps).map { _ in makeStep(&random) }
    }

    func makeStep(_ r: inout SeededRandom) -> ModelStep {
        switch Int.random(in: 0..<10, using: &r) {
        case 0:
            let ids = (0..<Int.random(in: 1...3, using: &r)).map { _ in anyID(&r) }
            return .delete(ids)
        case 1:
            return .retention(before: Self.baseTime + Int64.random(in: 0...10, using: &r) * Self.day / 2)
        default:
            return .importDocument(makeDocument(&r), chunks: makeChunks(&r))
        }
    }

    func anyID(_ r: inout SeededRandom) -> String {
        Self.ids(ofEvent: Int.random(in: 0..<shape.events, using: &r)).randomElement(using: &r)!
    }

    /// A document: as in a real feed, one feature per id, but the same feature may come twice
    /// (an exact duplicate). Versions of one event under different ids may share a document.
    func makeDocument(_ r: inout SeededRandom) -> [DocumentElement] {
        var elements: [DocumentElement] = []
        var byID: [String: DocumentElement] = [:]
        for _ in 0..<Int.random(in: 0...shape.documentSize, using: &r) {
            let roll = Int.random(in: 0..<20, using: &r)
            if roll == 0 {
                elements.append(.junk(JunkFeature.allCases.randomElement(using: &r)!))
            } else if roll <= 3, let previous = elements.randomElement(using: &r) {
                elements.append(previous)  // the same feature twice
            } else {
                let version = makeVersion(&r)
                let element = byID[version.id] ?? .feature(version)
                byID[version.id] = element
                elements.append(element)
            }
        }
        return elements
    }

    func makeVersion(_ r: inout SeededRandom) -> FeatureVersion {
        let event = Int.random(in: 0..<shape.events, using: &r)
        let eventIDs = Self.ids(ofEvent: event)
        // As the USGS does, a version under a later preferred id usually lists the earlier ones (a
        // chain); a version under an earlier id lists none of the later ones (a lagging copy: the
        // reverse direction).
        let preferred = Int.random(in: 0..<eventIDs.count, using: &r)
        var ids: [String]? = [eventIDs[preferred]]
        for other in eventIDs[..<preferred] where Int.random(in: 0..<5, using: &r) != 0 {
            ids!.append(other)
        }
        if Int.random(in: 0..<12, using: &r) == 0 { ids!.append(anyID(&r)) }  // another event's id
        if Int.random(in: 0..<15, using: &r) == 0 { ids = nil }
        ids?.shuffle(using: &r)
        let time = Self.baseTime + Int64(event) * Self.day + (Int.random(in: 0..<8, using: &r) == 0 ? 60_000 : 0)
        let updated: Int64? =
            Int.random(in: 0..<12, using: &r) == 0 ? nil : time + Int64.random(in: 0...4, using: &r) * 1000
        let mags: [Double?] = [nil, 2.5, 3.9, 4.4, 4.5]
        var nulls: [String] = []
        for key in ["place", "felt", "alert", "status", "tsunami"] where Int.random(in: 0..<10, using: &r) == 0 {
            nulls.append(key)
        }
        var overrides: [String: String] = [:]
        if Int.random(in: 0..<6, using: &r) == 0 { overrides["type"] = ["quarry blast", "explosion"].randomElement(using: &r)! }
        if Int.random(in: 0..<4, using: &r) == 0 { overrides["status"] = ["automatic", "reviewed"].randomElement(using: &r)! }
        // An upstream deletion, as an FDSN query with includedeleted=true returns it.
        if Int.random(in: 0..<10, using: &r) == 0 { overrides["status"] = "deleted" }
        if Int.random(in: 0..<4, using: &r) == 0 {
            overrides["alert"] = ["green", "yellow", "orange", "red"].randomElement(using: &r)!
        }
        return FeatureVersion(
            template: Int.random(in: 0..<templates, using: &r), id: eventIDs[preferred], ids: ids, time: time,
            updated: updated, mag: mags.randomElement(using: &r)!, nulls: nulls, overrides: overrides)
    }

    func makeChunks(_ r: inout SeededRandom) -> [Int] {
        if Bool.random(using: &r) { return [] }
        return (0..<Int.random(in: 1...4, using: &r)).map { _ in Int.random(in: 1...300, using: &r) }
    }
}

/// Writes generated documents as feed JSON.
public struct DocumentWriter {
    /// Real features' `properties` (as JSON objects, for their other fields) and geometries.
    let templates: [(properties: [String: Any], geometry: Any)]

    /// Takes the first `count` features of a real feed as templates.
    public init(feed url: URL, count: Int = 8) throws {
        let object = try JSONSerialization.jsonObject(with: Data(contentsOf: url)) as? [String: Any]
        let features = (object?["features"] as? [[String: Any]]) ?? []
        templates = features.prefix(count).map { feature in
            let properties = (feature["properties"] as? [String: Any]) ?? [:]
            return (properties, feature["geometry"] ?? NSNull())
        }
        if templates.isEmpty {
            throw CocoaError(.fileReadCorruptFile, userInfo: [NSFilePathErrorKey: url.path])
        }
    }

    public var templateCount: Int { templates.count }

    public func json(_ version: FeatureVersion) -> String {
        let template = templates[version.template % templates.count]
        var properties: [String: Any] = template.properties
        properties["time"] = version.time
        properties["updated"] = version.updated ?? NSNull()
        properties["mag"] = version.mag ?? NSNull()
        properties["ids"] = version.ids.map { ",\($0.joined(separator: ",")),"} ?? NSNull()
        properties["code"] = String(version.id.dropFirst(2))
        properties["net"] = String(version.id.prefix(2))
        for (key, value) in version.overrides { properties[key] = value }
        for key in version.nulls { properties[key] = NSNull() }
        let feature: [String: Any] = [
            "type": "Feature", "properties": properties, "geometry": template.geometry, "id": version.id,
        ]
        let data = try! JSONSerialization.data(withJSONObject: feature, options: [.sortedKeys])
        return String(decoding: data, as: UTF8.self)
    }

    public func document(_ elements: [DocumentElement]) -> [UInt8] {
        let features = elements.map { element in
            switch element {
            case .feature(let version): json(version)
            case .junk(let junk): junk.rawValue
            }
        }
        let text = """
            {"type":"FeatureCollection","metadata":{"generated":1700000200000,"count":\(features.count)},\
            "features":[\(features.joined(separator: ","))]}
            """
        return Array(text.utf8)
    }
}
