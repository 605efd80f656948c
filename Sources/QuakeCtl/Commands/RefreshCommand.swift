import QuakeClient
import QuakeProtocol
import ArgumentParser
import Foundation

/// `quakectl refresh`: pull now and wait.
public struct RefreshCommand: AsyncParsableCommand {
    public static let configuration = CommandConfiguration(
        commandName: "refresh",
        abstract: "Pull the feeds now and wait for the import.",
        discussion: "Exits non-zero when a pull failed, with the reason. A pull already running is joined.")

    @OptionGroup public var options: ClientOptions

    @Option(help: ArgumentHelp("Pull only this feed (a configured feed name or URL).", valueName: "name"))
    public var feed: String?

    public init() {}

    public func run() async throws {
        let style = options.style
        let progress = ProgressLine(enabled: style.progress)
        progress.show("Checking for earthquakes…")
        let reply: IOQuaked.Refresh.Reply
        do {
            reply = try await options.withConnection { try await $0.refresh(feed: feed) }
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
    }

    /// `+12 new, 3 updated, 1 removed · token 58`, or `no changes`.
    static func summary(_ reply: IOQuaked.Refresh.Reply) -> String {
        let counts = reply.results.compactMap(\.counts)
        let inserted = counts.reduce(0) { $0 + $1.inserted }
        let updated = counts.reduce(0) { $0 + $1.updated }
        let removed = counts.reduce(0) { $0 + $1.superseded }
        if inserted + updated + removed == 0 { return "no changes" }
        return "+\(Formatting.count(inserted)) new, \(Formatting.count(updated)) updated, "
            + "\(Formatting.count(removed)) removed · token \(reply.headToken)"
    }
}
