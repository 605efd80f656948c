import Foundation
import QuakeVarlink

/// History changes as lines: `new`, `updated` (with what changed) and `removed` (with why).
public enum ChangeText {
    /// The width of the place column in change lines.
    static let placeWidth = 36

    /// One change as a line. `before` is the quake as it was (from a cache), when known.
    public static func line(
        _ change: QuakedAPI.Change, before: QuakedAPI.Quake? = nil, _ style: OutputStyle, now: Date = Date()
    ) -> String {
        switch change.kind {
        case "insert":
            let label = style.paint(Formatting.fit("new", 9), .green)
            guard let q = change.quake else {
                return "\(label)\(Formatting.magnitudeColumn(nil, style))  "
                    + "\(Formatting.fit("(removed since)", placeWidth))  \(style.dim(change.quakeId))"
            }
            return label
                + Formatting.row(
                    mag: q.mag, place: q.place, time: q.time, id: q.id, placeWidth: placeWidth, style, now: now)
        case "update":
            let label = style.paint(Formatting.fit("updated", 9), .yellow)
            let q = change.quake ?? before
            let mag = change.quake?.mag ?? newValue(change, "mag") ?? before?.mag
            let row = Formatting.row(
                mag: mag, place: q?.place, time: q?.time ?? 0, id: change.quakeId, placeWidth: placeWidth, style,
                now: now)
            let summary = fieldSummary(change.fields ?? [], style)
            return label + row + (summary.isEmpty ? "" : "  " + summary)
        case "delete":
            let label = style.paint(Formatting.fit("removed", 9), .red)
            let t = change.tombstone
            let row = Formatting.row(
                mag: t?.mag ?? before?.mag, place: t?.place ?? before?.place, time: t?.time ?? before?.time ?? 0,
                id: change.quakeId, placeWidth: placeWidth, style, now: now)
            return label + row + "  (" + reason(change) + ")"
        default:
            return Formatting.fit(change.kind, 9) + change.quakeId
        }
    }

    /// Why a quake was removed, as words.
    public static func reason(_ change: QuakedAPI.Change) -> String {
        switch change.reason {
        case "superseded": change.supersededBy.map { "superseded by \($0)" } ?? "superseded"
        case "expired": "expired"
        case "deleted-by-user": "deleted by user"
        case let other?: other
        case nil: "removed"
        }
    }

    /// `M 4.1→3.9, status automatic→reviewed`; `revised` when only `updated` moved.
    public static func fieldSummary(_ fields: [QuakedAPI.FieldChange], _ style: OutputStyle) -> String {
        var parts: [String] = []
        for f in fields where f.field != "updated" {
            switch f.field {
            case "mag":
                parts.append("M \(magText(f.old))→\(magText(f.new))")
            case "time":
                parts.append("time \(timeText(f.old, style))→\(timeText(f.new, style))")
            default:
                parts.append("\(f.field) \(valueText(f.old))→\(valueText(f.new))")
            }
        }
        if parts.isEmpty { return fields.isEmpty ? "" : "revised" }
        if parts.count > 4 { parts = Array(parts.prefix(4)) + ["+\(parts.count - 4) more"] }
        return parts.joined(separator: ", ")
    }

    static func newValue(_ change: QuakedAPI.Change, _ field: String) -> Double? {
        guard case .number(let n)? = change.fields?.first(where: { $0.field == field })?.new else { return nil }
        return n
    }

    static func magText(_ value: JSONValue?) -> String {
        if case .number(let n)? = value { return Formatting.oneDecimal(n) }
        return "?"
    }

    static func timeText(_ value: JSONValue?, _ style: OutputStyle) -> String {
        if case .number(let n)? = value { return Formatting.absolute(Int64(n), timeZone: style.timeZone) }
        return "–"
    }

    static func valueText(_ value: JSONValue?) -> String {
        switch value {
        case nil, .null?: return "–"
        case .number(let n)?:
            return n.rounded() == n && abs(n) < 1e15 ? String(Int64(n)) : String(n)
        case .string(let s)?: return s.count > 32 ? String(s.prefix(31)) + "…" : s
        case .bool(let b)?: return String(b)
        case .array?, .object?: return "…"
        }
    }
}
