import QuakeClient
import QuakeModel
import QuakeProtocol
import ArgumentParser
import Foundation

/// `quakectl show ID`: one quake, every field.
public struct ShowCommand: AsyncParsableCommand {
    public static let configuration = CommandConfiguration(
        commandName: "show",
        abstract: "Show every stored field of one earthquake, and each source's report of it.",
        discussion: """
            After the fields, when sources (source = in quaked.conf) have reported the event, a \
            table of their reports, the preferred one (whose values the event shows) marked *. \
            --json adds them as "reports" (only when there are any). An unknown id exits 65.
            """)

    @OptionGroup public var options: ClientOptions

    @OptionGroup(title: "Display") public var display: DisplayOptions

    @Argument(help: ArgumentHelp("The earthquake's id, e.g. us7000abcd.", valueName: "id"))
    public var id: String

    public init() {}

    public func run() async throws {
        let id = id
        let (quake, reports) = try await options.withConnection { connection in
            let quake = try await connection.get(id: id)
            return (quake, try await Self.reports(id: id, connection))
        }
        let style = try display.apply(to: options.style)
        if style.json {
            Console.line(Self.json(quake, reports: reports))
        } else {
            var text = Self.text(quake, style)
            if !reports.isEmpty { text += Self.reportsText(reports, style) }
            Console.out(text)
        }
    }

    /// The event's reports; none from a quaked without GetReports (older than sources), or when
    /// the quake went away between the two calls.
    static func reports(id: String, _ connection: QuakedConnection) async throws -> [IOQuaked.Report] {
        do {
            return try await connection.reports(id: id) ?? []
        } catch IOQuaked.Failure.noSuchQuake {
            return []
        }
    }

    /// `--json`: the quake's object, with `"reports"` when there are any.
    static func json(_ quake: IOQuaked.Quake, reports: [IOQuaked.Report]) -> String {
        reports.isEmpty ? JSONText.encode(quake) : JSONText.encode(WithReports(quake: quake, reports: reports))
    }

    /// A quake's members and `reports` in one object.
    struct WithReports: Encodable {
        var quake: IOQuaked.Quake
        var reports: [IOQuaked.Report]

        enum Key: String, CodingKey { case reports }

        func encode(to encoder: any Encoder) throws {
            try quake.encode(to: encoder)
            var container = encoder.container(keyedBy: Key.self)
            try container.encode(reports, forKey: .reports)
        }
    }

    /// The reports side by side: source, agency, id, time, magnitude and type, depth, place and
    /// evaluation status (the mode when there is no status); the preferred one marked `*`.
    static func reportsText(_ reports: [IOQuaked.Report], _ style: OutputStyle) -> String {
        let header = ["source", "agency", "id", "time", "mag", "depth", "place", "status"]
        let rows: [[String]] = reports.map { r in
            var mag = r.mag.map(Formatting.oneDecimal) ?? "–"
            if let type = r.magType { mag += " " + type }
            return [
                r.source, r.agency ?? "–", r.id, Formatting.absolute(r.time, timeZone: style.timeZone), mag,
                r.depth.map { Formatting.distance(kilometres: $0, style.units, decimals: 1) } ?? "–",
                r.place.map { Formatting.place($0, style.units) } ?? "–", r.status ?? r.mode ?? "–",
            ]
        }
        // Each column as wide as its widest cell; the place at most 40 characters, the last unpadded.
        let widths = header.indices.map { column in
            let widest = ([header] + rows).map { $0[column].count }.max() ?? 0
            return header[column] == "place" ? min(widest, 40) : widest
        }
        func line(_ cells: [String]) -> String {
            cells.indices.map { $0 == cells.count - 1 ? cells[$0] : Formatting.fit(cells[$0], widths[$0]) }
                .joined(separator: "  ")
        }
        var text = "\n" + style.bold("reports") + "\n"
        text += "    " + style.dim(line(header)) + "\n"
        for (report, cells) in zip(reports, rows) {
            text += (report.preferred ? "  * " : "    ") + line(cells) + "\n"
        }
        return text
    }

    /// `INGV 20231114_0000001 (preferred), EMSC 20231114_0000002`: each contributor's agency (its
    /// source without one) and id, the preferred first.
    static func contributorsText(_ contributors: [IOQuaked.Contributor]) -> String {
        contributors.map { "\($0.agency ?? $0.source) \($0.id)" + ($0.preferred ? " (preferred)" : "") }
            .joined(separator: ", ")
    }

    static func text(_ q: IOQuaked.Quake, _ style: OutputStyle, now: Date = Date()) -> String {
        var text = style.paint(Formatting.magnitude(q.mag), Formatting.magnitudeColor(q.mag))
        if let magType = q.magType { text += " " + magType }
        text += "  " + style.bold(q.place ?? "(unknown place)") + "\n"
        let values = QuakeFields.values(q)
        let width = QuakeFields.names.map(\.count).max() ?? 8
        for (field, value) in zip(QuakeRecord.fields, values) {
            let name = field.name
            let shown: String
            switch value {
            case .null: shown = style.dim("–")
            case .integer(let ms) where field.isTime:
                shown = "\(Formatting.absolute(Int(ms), timeZone: style.timeZone)) (\(Formatting.relative(Int(ms), now: now)))"
            case .integer(let n): shown = String(n)
            case .real(let d) where name == "depth":
                shown = Formatting.distance(kilometres: d, style.units, decimals: 3)
            case .real(let d) where name == "mag":
                shown = style.paint(d.description, Formatting.magnitudeColor(d))
            case .real(let d): shown = d.description
            case .text(let s) where name == "place": shown = Formatting.place(s, style.units)
            case .text where field.isJSON:
                // The contributors, one word each (the reports table below has their solutions).
                shown = Self.contributorsText(q.contributors ?? [])
            case .text(let s): shown = s
            }
            text += "  " + style.dim(Formatting.fit(name, width)) + "  " + shown + "\n"
        }
        return text
    }
}
