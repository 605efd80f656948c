import Foundation
import QuakeFeed

extension QuakeFilter {
    /// What a filtered reader is sent for one stored change, judging the quake before and after it:
    /// in → in: the change as it is; absent → in: insert; out → in: enter; in → out: leave;
    /// out → out, and deletes of quakes that were out: nothing (`nil`).
    func judge(_ kind: ChangeKind, image: QuakeImage, before: QuakeImage?) -> ChangeKind? {
        switch kind {
        case .insert:
            return matches(image) ? .insert : nil
        case .delete:
            return matches(image) ? .delete : nil
        case .update, .enter, .leave:
            let wasIn = matches(before ?? image)
            let isIn = before == nil ? wasIn : matches(image)
            switch (wasIn, isIn) {
            case (true, true): return .update
            case (false, true): return .enter
            case (true, false): return .leave
            case (false, false): return nil
            }
        }
    }

    /// A condition for SQL that every matching quake meets (some non-matching ones may too):
    /// it narrows the rows ``matches(_:)`` then decides on.
    func narrowingSQL(prefix: String = "") -> (sql: String, arguments: [Double]) {
        var conditions: [String] = []
        var arguments: [Double] = []
        if let minMagnitude {
            conditions.append("\(prefix)mag >= ?")
            arguments.append(minMagnitude)
        }
        if let maxMagnitude {
            conditions.append("\(prefix)mag <= ?")
            arguments.append(maxMagnitude)
        }
        if let since {
            conditions.append("\(prefix)time >= ?")
            arguments.append(Double(since))
        }
        switch region {
        case .circle(let lat, _, let radiusKm):
            // The circle lies within this band of latitudes (111.19 km a degree on the sphere
            // distanceKm uses, less a margin for rounding).
            let delta = radiusKm / 111.0 + 1e-6
            conditions.append("\(prefix)lat BETWEEN ? AND ?")
            arguments += [lat - delta, lat + delta]
        case .box(let minLat, let maxLat, _, _):
            conditions.append("\(prefix)lat BETWEEN ? AND ?")
            arguments += [minLat, maxLat]
        case .polygons(let region):
            let bounds = region.latitudeBounds
            conditions.append("\(prefix)lat BETWEEN ? AND ?")
            arguments += [bounds.lowerBound - 1e-6, bounds.upperBound + 1e-6]
        case nil:
            break
        }
        return (conditions.isEmpty ? "1" : conditions.joined(separator: " AND "), arguments)
    }
}

extension QuakeFilter {
    /// Which of a quake's values the filter looks at.
    struct Needs {
        var magnitude, position, type, alert, tsunami, status, significance, sources: Bool
    }

    var needs: Needs {
        Needs(
            magnitude: minMagnitude != nil || maxMagnitude != nil, position: region != nil, type: types != nil,
            alert: minAlert != nil, tsunami: tsunami != nil, status: reviewedOnly, significance: minSignificance != nil,
            sources: agencies != nil || minAgencies != nil)
    }
}

extension QuakeImage {
    /// These values with an update's old values applied, read straight from history's `atOld`
    /// (`{"mag":{"float":4.5},"status":{"string":"automatic"},"alert":null}`, as SQLite's
    /// json_group_object writes it). Nil for anything else (an escape in a string, say): the
    /// caller then decodes it the slow way.
    func replacingOldValues(json: UnsafeRawBufferPointer) -> QuakeImage? {
        var q = self
        var i = 0
        let n = json.count
        func skipSpaces() { while i < n, json[i] == 0x20 || json[i] == 0x0A || json[i] == 0x09 || json[i] == 0x0D { i += 1 } }
        func expect(_ byte: UInt8) -> Bool {
            skipSpaces()
            guard i < n, json[i] == byte else { return false }
            i += 1
            return true
        }
        /// A string without escapes.
        func string() -> String? {
            guard expect(UInt8(ascii: "\"")) else { return nil }
            let start = i
            while i < n, json[i] != UInt8(ascii: "\""), json[i] != UInt8(ascii: "\\") { i += 1 }
            guard i < n, json[i] == UInt8(ascii: "\"") else { return nil }
            let text = String(decoding: UnsafeRawBufferPointer(rebasing: json[start..<i]), as: UTF8.self)
            i += 1
            return text
        }
        func number() -> Double? {
            skipSpaces()
            let start = i
            while i < n, json[i] != UInt8(ascii: "}"), json[i] != UInt8(ascii: ","), json[i] != 0x20 { i += 1 }
            return Double(String(decoding: UnsafeRawBufferPointer(rebasing: json[start..<i]), as: UTF8.self))
        }
        guard expect(UInt8(ascii: "{")) else { return nil }
        skipSpaces()
        if i < n, json[i] == UInt8(ascii: "}") { return q }
        while true {
            guard let field = string(), expect(UInt8(ascii: ":")) else { return nil }
            skipSpaces()
            var value = FieldValue.null
            if i + 4 <= n, json[i] == UInt8(ascii: "n") {
                i += 4  // null
            } else {
                guard expect(UInt8(ascii: "{")), let member = string(), expect(UInt8(ascii: ":")) else { return nil }
                switch member {
                case "float":
                    guard let d = number() else { return nil }
                    value = .real(d)
                case "int":
                    guard let d = number(), let v = Int64(exactly: d) else { return nil }
                    value = .integer(v)
                case "string":
                    guard let text = string() else { return nil }
                    value = .text(text)
                default:
                    return nil
                }
                guard expect(UInt8(ascii: "}")) else { return nil }
            }
            q = q.replacing([FieldChange(field: field, old: value, new: .null)])
            skipSpaces()
            guard i < n else { return nil }
            if json[i] == UInt8(ascii: "}") { return q }
            guard json[i] == UInt8(ascii: ",") else { return nil }
            i += 1
        }
    }

    /// The quake columns these come from, in the order history's `at…` columns keep them.
    /// `sources` came later (migration v13): ``v8Columns`` are the ones migration v8 added.
    static let columns = v8Columns + ["sources"]
    /// History's columns: `atMag`, `atLat`, ..., `atSources`.
    static let historyColumns = columns.map(historyColumn)
    /// The columns migration v8 added, fixed: its SQL must not change with ``columns``.
    static let v8Columns = ["mag", "lat", "lon", "time", "type", "alert", "tsunami", "status", "sig"]
    static let v8HistoryColumns = v8Columns.map(historyColumn)

    /// `mag` → `atMag`.
    static func historyColumn(_ column: String) -> String {
        "at" + column.prefix(1).uppercased() + column.dropFirst()
    }

    /// These values with the given fields' values replaced (an update's old values).
    func replacing(_ changes: [FieldChange]) -> QuakeImage {
        var q = self
        for change in changes {
            let v = change.old
            switch change.field {
            case "mag": q.mag = v.double
            case "lat": q.lat = v.double
            case "lon": q.lon = v.double
            case "time": q.time = v.int
            case "type": q.type = v.string
            case "alert": q.alert = v.string
            case "tsunami": q.tsunami = v.int
            case "status": q.status = v.string
            case "sig": q.sig = v.int
            // History's `atSources` keeps no agencies as '' (NULL is unknown: see migration v13).
            case "sources": q.sources = v.string ?? ""
            default: break
            }
        }
        return q
    }
}

extension FieldValue {
    var double: Double? {
        switch self {
        case .real(let d): d
        case .integer(let i): Double(i)
        default: nil
        }
    }

    var int: Int64? {
        if case .integer(let i) = self { return i }
        return nil
    }

    var string: String? {
        if case .text(let s) = self { return s }
        return nil
    }
}
