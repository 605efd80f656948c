import QuakeClient
import QuakeProtocol
import ArgumentParser
import Foundation
import QuakeFeed

/// `quakectl list`: stored earthquakes, newest first.
public struct ListCommand: AsyncParsableCommand {
    public static let configuration = CommandConfiguration(
        commandName: "list",
        abstract: "List stored earthquakes, newest first.",
        discussion: """
            Each line shows magnitude, place, time, the agencies that reported the quake (the \
            preferred one first: US+AK, EMSC+INGV; cut to 16 characters with a count of the rest: \
            US+AK +3) and id; a footer counts what matched.
            """)

    @OptionGroup public var options: ClientOptions

    @OptionGroup(title: "Filters") public var filters: FilterOptions

    @OptionGroup(title: "Display") public var display: DisplayOptions

    @Option(help: ArgumentHelp("Show at most this many.", valueName: "n"))
    public var limit: Int?

    @Option(help: ArgumentHelp("time (newest first) or magnitude (largest first).", valueName: "order"))
    public var order: String = "time"

    @Flag(help: "List from watch's local cache; quaked need not run.")
    public var cache = false

    @Option(
        help: ArgumentHelp(
            "The cache file for --cache. Default: $XDG_CACHE_HOME/quakectl/cache.sqlite.", valueName: "path"))
    public var cachePath: String?

    public init() {}

    public func validate() throws {
        _ = try filters.filter()
        if let limit, limit < 0 { throw ValidationError("--limit must not be negative.") }
        if order != "time" && order != "magnitude" { throw ValidationError("--order takes time or magnitude.") }
        if cache && order != "time" { throw ValidationError("--cache lists newest first only; drop --order.") }
    }

    public func run() async throws {
        let filter = try filters.filter()
        let style = try display.apply(to: options.style)
        let quakes: [IOQuaked.Quake]
        let total: Int
        let token: Int
        let updated: Int?
        if cache {
            let cache = try QuakeCache.openExisting(path: cachePath ?? CachePath.defaultPath())
            let result = try cache.query(try filters.localFilter(), limit: limit)
            let state = try cache.positionAndAppliedAt()
            (quakes, total, token, updated) = (
                result.quakes, result.total, state?.position.token ?? 0, state.map { Int($0.appliedAt) }
            )
        } else {
            (quakes, total, token, updated) = try await options.withConnection { connection in
                let reply = try await connection.query(
                    IOQuaked.Query.Parameters(
                        limit: limit, order: IOQuaked.QueryOrder(rawValue: order), filter: filter))
                let status = try? await connection.status()
                let updated = status?.lastChange ?? status?.feeds.compactMap(\.lastSuccess).max()
                return (reply.quakes, reply.total, reply.headToken, updated)
            }
        }
        if style.json {
            Console.line(JSONText.encode(IOQuaked.Query.Reply(quakes: quakes, total: total, headToken: token)))
            return
        }
        let now = Date()
        let width = Formatting.placeWidth(quakes.map(\.place))
        let agencies = quakes.map { Formatting.agencies(net: $0.net, sources: $0.sources) }
        let agencyWidth = Formatting.agencyWidth(agencies)
        var text = ""
        for (q, agencies) in zip(quakes, agencies) {
            text += Formatting.row(
                mag: q.mag, place: q.place, time: q.time, id: q.id, placeWidth: width, style, now: now,
                agencies: agencies, agencyWidth: agencyWidth)
            text += "\n"
        }
        var footer =
            quakes.count < total
            ? "showing \(Formatting.count(quakes.count)) of \(Formatting.earthquakes(total))"
            : Formatting.earthquakes(total)
        if let updated { footer += " · updated \(Formatting.time(updated, style, now: now))" }
        if cache { footer += " · from the cache" }
        text += style.dim(footer) + "\n"
        Console.out(text)
    }
}
