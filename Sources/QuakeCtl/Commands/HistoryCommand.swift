import QuakeClient
import QuakeProtocol
import ArgumentParser
import Foundation

/// `quakectl history`: transactions with their changes.
public struct HistoryCommand: AsyncParsableCommand {
    public static let configuration = CommandConfiguration(
        commandName: "history",
        abstract: "Show history transactions with their changes, oldest first.",
        discussion: "With --json, one transaction object per line.")

    @OptionGroup public var options: ClientOptions

    @OptionGroup(title: "Display") public var display: DisplayOptions

    @Option(help: ArgumentHelp("Start after this token (default: the oldest token still kept).", valueName: "token"))
    public var after: Int?

    @Option(help: ArgumentHelp("Show at most this many transactions.", valueName: "n"))
    public var limit: Int = 20

    @Flag(help: "One line per transaction, without its changes.")
    public var summary = false

    public init() {}

    public func validate() throws {
        if limit < 1 { throw ValidationError("--limit must be at least 1.") }
        if let after, after < 0 { throw ValidationError("--after must not be negative.") }
    }

    public func run() async throws {
        let style = try display.apply(to: options.style)
        try await options.withConnection { connection in
            var token: Int
            var storeId: String?
            if let after {
                token = after
            } else {
                let status = try await connection.status()
                token = status.oldestToken
                storeId = status.storeId
            }
            var shown = 0
            while shown < limit {
                let page = try await connection.fetchHistory(
                    storeId: storeId, after: token, limit: min(limit - shown, IOQuaked.Defaults.historyLimitMaximum))
                storeId = page.storeId
                var text = ""
                for transaction in page.transactions.prefix(limit - shown) {
                    text +=
                        style.json
                        ? JSONText.encode(transaction) + "\n" : Self.text(transaction, style, summary: summary)
                    shown += 1
                }
                if !text.isEmpty { Console.out(text) }
                token = page.nextAfter
                if !page.hasMore { break }
            }
            if shown == 0 && !style.json { Console.line(style.dim("no history after token \(token)")) }
        }
    }

    static func text(_ t: IOQuaked.Transaction, _ style: OutputStyle, summary: Bool = false, now: Date = Date())
        -> String
    {
        var header =
            style.bold("token \(t.token)") + " · \(t.author) · \(Formatting.time(t.timestamp, style, now: now))"
        header +=
            " · +\(Formatting.count(t.inserted)) new, \(Formatting.count(t.updated)) updated, \(Formatting.count(t.deleted)) removed"
        if let source = t.source { header += " · " + style.dim(source) }
        var out = header + "\n"
        if !summary {
            for change in t.changes { out += "  " + ChangeText.line(change, style, now: now) + "\n" }
        }
        return out
    }
}
