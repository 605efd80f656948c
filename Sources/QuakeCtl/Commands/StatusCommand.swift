import QuakeClient
import QuakeProtocol
import ArgumentParser
import Foundation

/// `quakectl status`: the daemon, its store, its feeds and its clients.
public struct StatusCommand: AsyncParsableCommand {
    public static let configuration = CommandConfiguration(
        commandName: "status",
        abstract: "Show quaked's version, store, history, feeds, sources and clients.")

    @OptionGroup public var options: ClientOptions

    @OptionGroup(title: "Display") public var display: TimeZoneOptions

    public init() {}

    public func run() async throws {
        let status = try await options.withConnection { try await $0.status() }
        if options.json {
            Console.line(JSONText.encode(status))
        } else {
            Console.out(Self.text(status, try display.apply(to: options.style)))
        }
    }

    /// How a pull ended, in words.
    static func describe(_ result: IOQuaked.PullResult) -> String {
        switch result {
        case .imported: "imported"
        case .notModified: "not modified"
        case .failed: "failed"
        }
    }

    /// The sources section: each source's reports stored, last success and position, and the
    /// last run's error while it stands.
    static func sourcesText(_ sources: [IOQuaked.SourceStatus], _ style: OutputStyle, now: Date = Date()) -> String {
        func when(_ ms: Int) -> String { Formatting.time(ms, style, now: now) }
        var out = style.bold("sources") + "\n"
        for source in sources {
            var line = "  \(style.bold(source.name))  \(Formatting.count(source.reports)) report"
            if source.reports != 1 { line += "s" }
            line += " · last success \(source.lastSuccess.map(when) ?? "never")"
            if let position = source.position { line += " · position \(when(position))" }
            out += line + "\n"
            if let error = source.lastError {
                let at = source.lastAttempt.map { " (\(when($0)))" } ?? ""
                out += "    " + style.paint("error\(at): \(error)", .red) + "\n"
            }
        }
        return out
    }

    /// The association section: the windows, events and reports, and what the association did.
    static func associationText(_ a: IOQuaked.AssociationStatus, _ style: OutputStyle) -> String {
        let seconds = a.timeSeconds == a.timeSeconds.rounded() ? "\(Int(a.timeSeconds))" : "\(a.timeSeconds)"
        let km = a.distanceKm == a.distanceKm.rounded() ? "\(Int(a.distanceKm))" : "\(a.distanceKm)"
        var out = style.bold("association") + "  \(style.dim("within \(seconds) s and \(km) km"))\n"
        out +=
            "  \(Formatting.count(a.events)) event\(a.events == 1 ? "" : "s") of \(Formatting.count(a.reports)) report\(a.reports == 1 ? "" : "s")"
            + " · \(Formatting.count(a.joined)) joined, \(Formatting.count(a.new)) new, "
            + "\(Formatting.count(a.merged)) merged, \(Formatting.count(a.split)) split\n"
        return out
    }

    static func text(_ s: IOQuaked.GetStatus.Reply, _ style: OutputStyle, now: Date = Date()) -> String {
        func label(_ text: String) -> String { style.dim(Formatting.fit(text, 13)) }
        func when(_ ms: Int) -> String { Formatting.time(ms, style, now: now) }
        var out = style.bold("quaked \(s.version)") + "\n"
        out += "\(label("store"))\(s.storeId)\n"
        out +=
            "\(label("history"))tokens \(s.oldestToken)…\(s.headToken) (oldest \(s.oldestToken), head \(s.headToken))\n"
        out +=
            "\(label("earthquakes"))\(Formatting.count(s.quakeCount)) · database \(Formatting.bytes(s.databaseBytes))\n"
        out += "\(label("last change"))\(s.lastChange.map(when) ?? "never")\n"
        out += "\(label("subscribers"))\(Formatting.count(s.subscribers))\n"
        out += style.bold("feeds") + "\n"
        if s.feeds.isEmpty { out += "  none\n" }
        for feed in s.feeds {
            out += "  \(style.bold(feed.name))" + (feed.name == feed.url ? "" : "  \(style.dim(feed.url))") + "\n"
            if let attempt = feed.lastAttempt {
                var line = "    last pull \(when(attempt)): \(feed.lastResult.map(Self.describe) ?? "running")"
                var details: [String] = []
                // The kind of a failure, unless its HTTP status says it.
                if feed.lastResult == .failed, let kind = feed.errorKind, feed.httpStatus == nil {
                    details.append(kind)
                }
                if let code = feed.httpStatus { details.append("HTTP \(code)") }
                if let ms = feed.durationMs { details.append(Formatting.duration(ms: ms)) }
                if !details.isEmpty { line += " (\(details.joined(separator: ", ")))" }
                if feed.lastResult == .imported, let counts = feed.lastImport {
                    line +=
                        " · +\(Formatting.count(counts.inserted)) new, \(Formatting.count(counts.updated)) updated, "
                        + "\(Formatting.count(counts.unchanged)) unchanged"
                    if counts.expired > 0 { line += ", \(Formatting.count(counts.expired)) expired" }
                }
                out += line + "\n"
                if let error = feed.lastError, feed.lastResult == .failed {
                    out +=
                        "    " + style.paint("error: \(error)", .red)
                        + (feed.consecutiveFailures > 1 ? " (\(feed.consecutiveFailures) failures in a row)" : "")
                        + "\n"
                }
                if let retryAfter = feed.retryAfter, feed.lastResult == .failed {
                    out += "    the server asked for no pull before \(when(retryAfter)) (Retry-After)\n"
                }
                if let success = feed.lastSuccess, feed.lastResult == .failed {
                    out += "    last success \(when(success))\n"
                }
            } else {
                out += "    not pulled yet\n"
            }
            if let next = feed.nextPull { out += "    next pull \(when(next))\n" }
        }
        if let catalog = s.catalog {
            out += style.bold("catalog") + "  \(style.dim(catalog.url))\n"
            var line = "    every \(Formatting.duration(ms: catalog.intervalSeconds * 1000))"
            line += " · last success \(catalog.lastSuccess.map(when) ?? "never")"
            if let inserted = catalog.lastInserted, let updated = catalog.lastUpdated, let deleted = catalog.lastDeleted {
                line +=
                    " · +\(Formatting.count(inserted)) new, \(Formatting.count(updated)) updated, "
                    + "\(Formatting.count(deleted)) deleted upstream"
            }
            out += line + "\n"
            if let error = catalog.lastError { out += "    " + style.paint("error: \(error)", .red) + "\n" }
            if let next = catalog.nextRun { out += "    next run \(when(next))\n" }
        }
        if let sources = s.sources, !sources.isEmpty { out += Self.sourcesText(sources, style, now: now) }
        if let association = s.association { out += Self.associationText(association, style) }
        if let jobs = s.backfills, !jobs.isEmpty {
            out += style.bold("backfills") + "\n"
            for job in jobs { out += "  " + BackfillCommand.summary(job) + "\n" }
        }
        do {
            let clients = s.clients
            out += style.bold("clients") + "\n"
            if clients.isEmpty { out += "  none\n" }
            for c in clients {
                out +=
                    "  \(style.bold(c.name))  token \(c.token), \(Formatting.count(c.lag)) behind, seen \(when(c.lastSeen))\n"
                if let error = c.lastError {
                    let since = c.lastErrorAt.map { " (\(when($0)))" } ?? ""
                    out += "    " + style.paint("last error\(since): \(error)", .red) + "\n"
                }
            }
        }
        return out
    }
}
