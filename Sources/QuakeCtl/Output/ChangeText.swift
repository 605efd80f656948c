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
        var text = ""
        appendLine(change, before: before, style, now: now, to: &text)
        return text
    }

    /// ``line(_:before:_:now:)``'s text appended to `text`. Written in place, the change read
    /// where it lies (no copy of it or of its quake): a catch-up prints one line per change.
    static func appendLine(
        _ change: IOQuaked.Change, before: IOQuaked.Quake?, _ style: OutputStyle, now: Date,
        to text: inout some TextOutput
    ) {
        switch change.kind {
        case .insert:
            appendLabel("new", .green, style, to: &text)
            guard let time = change.quake?.time else {
                Formatting.appendMagnitudeColumn(nil, style, to: &text)
                text.appendSpaces(2)
                Formatting.appendFitted("(removed since)", placeWidth, to: &text)
                text.appendSpaces(2)
                style.appendPainted(change.quakeId, .gray, to: &text)
                return
            }
            Formatting.appendRow(
                mag: change.quake?.mag, place: change.quake?.place, time: time, id: change.quake?.id ?? "",
                placeWidth: placeWidth, style, now: now, agencies: agency(change.quake?.net),
                agencyWidth: agencyWidth, to: &text)
        case .update:
            appendLabel("updated", .yellow, style, to: &text)
            // The change's quake when it has one, else the cache's row.
            let current = change.quake?.time != nil
            let mag = change.quake?.mag ?? newValue(change, "mag") ?? before?.mag
            Formatting.appendRow(
                mag: mag, place: current ? change.quake?.place : before?.place,
                time: (current ? change.quake?.time : before?.time) ?? 0, id: change.quakeId, placeWidth: placeWidth,
                style, now: now, agencies: agency(current ? change.quake?.net : before?.net), agencyWidth: agencyWidth,
                to: &text)
            if let fields = change.fields { appendFieldSummary(fields, style, separated: true, to: &text) }
        case .delete:
            appendLabel("removed", .red, style, to: &text)
            appendGoneRow(change, before: before, style, now: now, to: &text)
            text += "  ("
            text += reason(change)
            text += ")"
        case .enter:
            appendLabel("enter", .green, style, to: &text)
            Formatting.appendRow(
                mag: change.quake?.mag ?? newValue(change, "mag"), place: change.quake?.place ?? "(removed since)",
                time: change.quake?.time ?? 0, id: change.quakeId, placeWidth: placeWidth, style, now: now,
                agencies: agency(change.quake?.net ?? before?.net), agencyWidth: agencyWidth, to: &text)
            if let fields = change.fields { appendFieldSummary(fields, style, separated: true, to: &text) }
        case .leave:
            appendLabel("leave", .red, style, to: &text)
            appendGoneRow(change, before: before, style, now: now, to: &text)
            if let fields = change.fields { appendFieldSummary(fields, style, separated: true, to: &text) }
        }
    }

    /// A change's kind in its 9 columns, in its colour.
    static func appendLabel(_ label: String, _ color: ANSIColor, _ style: OutputStyle, to text: inout some TextOutput) {
        if style.colors {
            text += style.paint(Formatting.fit(label, 9), color)
        } else {
            Formatting.appendFitted(label, 9, to: &text)
        }
    }

    /// The row of a quake that went (a delete, a leave): from its tombstone, else the cache's row.
    static func appendGoneRow(
        _ change: IOQuaked.Change, before: IOQuaked.Quake?, _ style: OutputStyle, now: Date,
        to text: inout some TextOutput
    ) {
        let t = change.tombstone
        Formatting.appendRow(
            mag: t?.mag ?? before?.mag, place: t?.place ?? before?.place, time: t?.time ?? before?.time ?? 0,
            id: change.quakeId, placeWidth: placeWidth, style, now: now, agencies: agency(before?.net),
            agencyWidth: agencyWidth, to: &text)
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
        _ fields: [IOQuaked.FieldChange], _ style: OutputStyle, separated: Bool = false, to text: inout some TextOutput
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
                appendMag(f.old, to: &text)
                text += "→"
                appendMag(f.new, to: &text)
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

    /// A magnitude change's value: `4.5`, or `?`.
    static func appendMag(_ value: IOQuaked.FieldValue?, to text: inout some TextOutput) {
        if let number = value?.number { Formatting.appendOneDecimal(number, to: &text) } else { text += "?" }
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
