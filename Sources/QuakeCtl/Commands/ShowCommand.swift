import QuakeClient
import QuakeModel
import QuakeProtocol
import ArgumentParser
import Foundation

/// `quakectl show ID`: one quake, every field.
public struct ShowCommand: AsyncParsableCommand {
    public static let configuration = CommandConfiguration(
        commandName: "show",
        abstract: "Show every stored field of one earthquake.",
        discussion: "An unknown id exits 65.")

    @OptionGroup public var options: ClientOptions

    @OptionGroup(title: "Display") public var display: DisplayOptions

    @Argument(help: ArgumentHelp("The earthquake's id, e.g. us7000abcd.", valueName: "id"))
    public var id: String

    public init() {}

    public func run() async throws {
        let quake = try await options.withConnection { try await $0.get(id: id) }
        let style = try display.apply(to: options.style)
        if style.json {
            Console.line(JSONText.encode(quake))
        } else {
            Console.out(Self.text(quake, style))
        }
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
            case .text(let s): shown = s
            }
            text += "  " + style.dim(Formatting.fit(name, width)) + "  " + shown + "\n"
        }
        return text
    }
}
