import QuakeClient
import QuakeProtocol
import ArgumentParser
import Foundation

/// `quakectl refresh`: pull now and wait.
public struct RefreshCommand: AsyncParsableCommand {
    public static let configuration = CommandConfiguration(
        commandName: "refresh",
        abstract: "Pull the feeds and run the sources now, and wait for the import.",
        discussion: """
            Without --feed or --source, pulls every feed and runs every source (source = in \
            quaked.conf). Exits non-zero when a pull or a run failed, with the reason. A pull or \
            run already in progress is joined, not repeated.
            """)

    @OptionGroup public var options: ClientOptions

    @Option(help: ArgumentHelp("Pull only this feed (a configured feed name or URL).", valueName: "name"))
    public var feed: String?

    @Option(
        help: ArgumentHelp(
            "Run only this source now (a name of source = in quaked.conf): prints the reports it imported.",
            valueName: "name"))
    public var source: String?

    public init() {}

    public func validate() throws {
        if feed != nil && source != nil { throw ValidationError("give one of --feed and --source.") }
    }

    public func run() async throws {
        let style = options.style
        let progress = ProgressLine(enabled: style.progress)
        progress.show("Checking for earthquakes…")
        let reply: IOQuaked.Refresh.Reply
        do {
            reply = try await options.withConnection { [feed, source] in
                try await $0.refresh(feed: feed, source: source)
            }
            progress.clear()
        } catch {
            progress.clear()
            throw error
        }
        if style.json {
            Console.line(JSONText.encode(reply))
        } else {
            Console.line(Self.summary(reply))
        }
        let failed = reply.results.filter { $0.result == .failed }
        if !failed.isEmpty {
            let reasons = failed.map { "\($0.feed): \($0.error ?? "unknown error")" }.joined(separator: "; ")
            throw QuakectlError(
                QuakectlError.failure,
                "the pull failed (\(reasons)); `quakectl status` shows each feed's last result.")
        }
        let failedSources = (reply.sourceResults ?? []).filter { $0.result == .failed }
        if !failedSources.isEmpty {
            let reasons = failedSources.map { "\($0.source): \($0.error ?? "unknown error")" }.joined(separator: "; ")
            throw QuakectlError(
                QuakectlError.failure,
                "the source's run failed (\(reasons)); `quakectl status` shows each source's last run.")
        }
    }

    /// The feeds' summary, then a line per source run: `emsc: 12 reports, 3 events changed ·
    /// token 58`, `emsc: no changes`, or `emsc: failed`.
    static func summary(_ reply: IOQuaked.Refresh.Reply) -> String {
        let sources = reply.sourceResults ?? []
        var lines: [String] = []
        if !reply.results.isEmpty || sources.isEmpty { lines.append(feedSummary(reply)) }
        for result in sources { lines.append(sourceSummary(result)) }
        return lines.joined(separator: "\n")
    }

    static func sourceSummary(_ result: IOQuaked.SourceRefreshResult) -> String {
        switch result.result {
        case .failed:
            return "\(result.source): failed"
        case .imported, .notModified:
            let reports = result.reports ?? 0
            let events = result.events ?? 0
            if reports == 0 && events == 0 { return "\(result.source): no changes" }
            var line =
                "\(result.source): \(Formatting.count(reports)) report\(reports == 1 ? "" : "s"), "
                + "\(Formatting.count(events)) event\(events == 1 ? "" : "s") changed"
            if let token = result.token { line += " · token \(token)" }
            return line
        }
    }

    /// `+12 new, 3 updated, 1 removed · token 58`, or `no changes`.
    static func feedSummary(_ reply: IOQuaked.Refresh.Reply) -> String {
        let counts = reply.results.compactMap(\.counts)
        let inserted = counts.reduce(0) { $0 + $1.inserted }
        let updated = counts.reduce(0) { $0 + $1.updated }
        let removed = counts.reduce(0) { $0 + $1.superseded }
        if inserted + updated + removed == 0 { return "no changes" }
        return "+\(Formatting.count(inserted)) new, \(Formatting.count(updated)) updated, "
            + "\(Formatting.count(removed)) removed · token \(reply.headToken)"
    }
}
