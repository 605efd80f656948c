import QuakeClient
import QuakeProtocol
import Foundation
import Varlink

/// History changes as lines: `new`, `updated` (with what changed), `removed` (with why), and for
/// a filtered watch `enter` (a stored quake now matches) and `leave` (it no longer does, with what
/// changed). Times are in the style's zone, depths and places' distances in its unit. Before the
/// id, the agency of the quake's preferred report (`net`, upper-cased: `US`, `EMSC`), blank when
/// the change does not say and no cached row does.
public enum ChangeText {
    /// The width of the place column in change lines.
    static let placeWidth = 36
    /// The width of the agency column in change lines.
    static let agencyWidth = 6

    /// The agency column's text: `net`, upper-cased.
    static func agency(_ net: String?) -> String { net?.uppercased() ?? "" }

    /// One change as a line. `before` is the quake as it was (from a cache), when known.
    public static func line(
        _ change: IOQuaked.Change, before: IOQuaked.Quake? = nil, _ style: OutputStyle, now: Date = Date()
    ) -> String {
        switch change.kind {
        case .insert:
            let label = style.paint(Formatting.fit("new", 9), .green)
            guard let q = change.quake else {
                return "\(label)\(Formatting.magnitudeColumn(nil, style))  "
                    + "\(Formatting.fit("(removed since)", placeWidth))  \(style.dim(change.quakeId))"
            }
            return label
                + Formatting.row(
                    mag: q.mag, place: q.place, time: q.time, id: q.id, placeWidth: placeWidth, style, now: now,
                    agencies: agency(q.net), agencyWidth: agencyWidth)
        case .update:
            let label = style.paint(Formatting.fit("updated", 9), .yellow)
            let q = change.quake ?? before
            let mag = change.quake?.mag ?? newValue(change, "mag") ?? before?.mag
            let row = Formatting.row(
                mag: mag, place: q?.place, time: q?.time ?? 0, id: change.quakeId, placeWidth: placeWidth, style,
                now: now, agencies: agency(q?.net), agencyWidth: agencyWidth)
            var text = label + row
            appendFieldSummary(change.fields ?? [], style, separated: true, to: &text)
            return text
        case .delete:
            let label = style.paint(Formatting.fit("removed", 9), .red)
            return label + goneRow(change, before: before, style, now: now) + "  (" + reason(change) + ")"
        case .enter:
            let label = style.paint(Formatting.fit("enter", 9), .green)
            let q = change.quake
            let row = Formatting.row(
                mag: q?.mag ?? newValue(change, "mag"), place: q?.place ?? "(removed since)", time: q?.time ?? 0,
                id: change.quakeId, placeWidth: placeWidth, style, now: now,
                agencies: agency(q?.net ?? before?.net), agencyWidth: agencyWidth)
            var text = label + row
            appendFieldSummary(change.fields ?? [], style, separated: true, to: &text)
            return text
        case .leave:
            let label = style.paint(Formatting.fit("leave", 9), .red)
            var text = label + goneRow(change, before: before, style, now: now)
            appendFieldSummary(change.fields ?? [], style, separated: true, to: &text)
            return text
        }
    }

    /// The row of a quake that went (a delete, a leave): from its tombstone, else the cache's row.
    static func goneRow(_ change: IOQuaked.Change, before: IOQuaked.Quake?, _ style: OutputStyle, now: Date) -> String {
        let t = change.tombstone
        return Formatting.row(
            mag: t?.mag ?? before?.mag, place: t?.place ?? before?.place, time: t?.time ?? before?.time ?? 0,
            id: change.quakeId, placeWidth: placeWidth, style, now: now, agencies: agency(before?.net),
            agencyWidth: agencyWidth)
    }

    /// A quake shown as it is (`watch --last`).
    public static func line(quake q: IOQuaked.Quake, _ style: OutputStyle, now: Date = Date()) -> String {
        style.dim(Formatting.fit("quake", 9))
            + Formatting.row(
                mag: q.mag, place: q.place, time: q.time, id: q.id, placeWidth: placeWidth, style, now: now,
                agencies: agency(q.net), agencyWidth: agencyWidth)
    }

    /// Why a quake was removed, as words.
    public static func reason(_ change: IOQuaked.Change) -> String {
        switch change.reason {
        case .superseded: change.supersededBy.map { "superseded by \($0)" } ?? "superseded"
        case .expired: "expired"
        case .deletedByUser: "deleted by user"
        case .deletedUpstream: "deleted upstream"
        case nil: "removed"
        }
    }

    /// `M 4.1→3.9, status automatic→reviewed`; `revised` when only `updated` moved.
    public static func fieldSummary(_ fields: [IOQuaked.FieldChange], _ style: OutputStyle) -> String {
        var summary = ""
        appendFieldSummary(fields, style, to: &summary)
        return summary
    }

    /// ``fieldSummary(_:_:)``'s text appended to `text` (after two spaces when `separated`), or
    /// nothing when it is empty. Written in place: a catch-up makes one of these per update.
    static func appendFieldSummary(
        _ fields: [IOQuaked.FieldChange], _ style: OutputStyle, separated: Bool = false, to text: inout String
    ) {
        var parts = 0
        // `contributors` (each agency's solution) changes with the fields it moves, which say it
        // better; `agency` with `net`, which is shown as the agency. Alone, they are a revision.
        let hasNet = fields.contains { $0.field == "net" }
        for i in fields.indices
        where fields[i].field != "updated" && fields[i].field != "contributors" && !(hasNet && fields[i].field == "agency") {
            parts += 1
            guard parts <= 4 else { continue }
            text += parts == 1 ? (separated ? "  " : "") : ", "
            let f = fields[i]
            switch f.field {
            case "mag":
                text += "M "
                text += magText(f.old)
                text += "→"
                text += magText(f.new)
            case "time":
                text += "time "
                text += timeText(f.old, style)
                text += "→"
                text += timeText(f.new, style)
            case "depth":
                text += "depth "
                text += depthText(f.old, style)
                text += "→"
                text += depthText(f.new, style)
            case "place":
                text += "place "
                text += placeText(f.old, style)
                text += "→"
                text += placeText(f.new, style)
            case "sources":
                // An agency joining or leaving the event: `agencies EMSC→EMSC+INGV`.
                text += "agencies "
                text += agenciesText(f.old)
                text += "→"
                text += agenciesText(f.new)
            case "net", "agency":
                text += "agency "
                text += f.old?.string?.uppercased() ?? "–"
                text += "→"
                text += f.new?.string?.uppercased() ?? "–"
            default:
                text += f.field
                text += " "
                text += valueText(f.old)
                text += "→"
                text += valueText(f.new)
            }
        }
        if parts == 0 {
            if !fields.isEmpty { text += separated ? "  revised" : "revised" }
        } else if parts > 4 {
            text += ", +\(parts - 4) more"
        }
    }

    static func newValue(_ change: IOQuaked.Change, _ field: String) -> Double? {
        change.fields?.first(where: { $0.field == field })?.new?.number
    }

    static func magText(_ value: IOQuaked.FieldValue?) -> String {
        value?.number.map(Formatting.oneDecimal) ?? "?"
    }

    static func timeText(_ value: IOQuaked.FieldValue?, _ style: OutputStyle) -> String {
        value?.int.map { Formatting.absolute($0, timeZone: style.timeZone) } ?? "–"
    }

    static func depthText(_ value: IOQuaked.FieldValue?, _ style: OutputStyle) -> String {
        value?.number.map { Formatting.distance(kilometres: $0, style.units) } ?? "–"
    }

    static func placeText(_ value: IOQuaked.FieldValue?, _ style: OutputStyle) -> String {
        valueText(value?.string.map { IOQuaked.FieldValue(string: Formatting.place($0, style.units)) } ?? value)
    }

    /// A `sources` value as agencies (`EMSC+INGV`), cut as the list's column is.
    static func agenciesText(_ value: IOQuaked.FieldValue?) -> String {
        Formatting.agencies(net: nil, sources: value?.string).map { Formatting.fitAgencies($0, 32) } ?? "–"
    }

    static func valueText(_ value: IOQuaked.FieldValue?) -> String {
        if let s = value?.string {
            let count = Formatting.asciiCount(s) ?? s.count
            return count > 32 ? String(s.prefix(31)) + "…" : s
        }
        if let i = value?.int { return String(i) }
        if let d = value?.float { return d.rounded() == d && abs(d) < 1e15 ? String(Int(d)) : String(d) }
        return "–"
    }
}

extension IOQuaked.FieldValue {
    /// The value as a number, whether the field is an int or a float.
    var number: Double? { float ?? int.map(Double.init) }
}
