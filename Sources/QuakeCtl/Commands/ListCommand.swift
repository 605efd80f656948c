import QuakeClient
import QuakeProtocol
import ArgumentParser
import Foundation

/// `quakectl list`: stored earthquakes, newest first.
public struct ListCommand: AsyncParsableCommand {
    public static let configuration = CommandConfiguration(
        commandName: "list",
        abstract: "List stored earthquakes, newest first.",
        discussion: "Each line shows magnitude, place, time and id; a footer counts what matched.")

    @OptionGroup public var options: ClientOptions

    @Option(
        name: .customLong("min-mag"),
        help: ArgumentHelp("Only earthquakes of at least this magnitude.", valueName: "magnitude"))
    public var minMagnitude: Double?

    @Option(help: ArgumentHelp("Only earthquakes since then: \(TimeArgument.help).", valueName: "time"))
    public var since: String?

    @Option(
        help: ArgumentHelp("Only events of this type (earthquake, quarry blast, explosion, ...).", valueName: "type"))
    public var type: String?

    @Option(help: ArgumentHelp("Show at most this many.", valueName: "n"))
    public var limit: Int?

    @Option(help: ArgumentHelp("Only earthquakes within --radius of this point.", valueName: "lat,lon"))
    public var near: String?

    @Option(help: ArgumentHelp("The radius for --near in kilometres (default 100).", valueName: "km"))
    public var radius: Double?

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
        _ = try filter()
        if order != "time" && order != "magnitude" { throw ValidationError("--order takes time or magnitude.") }
        if cache && order != "time" { throw ValidationError("--cache lists newest first only; drop --order.") }
    }

    func filter(now: Date = Date()) throws -> QuakeFilter {
        var filter = QuakeFilter(minMagnitude: minMagnitude, type: type, limit: limit)
        if let since {
            guard let ms = TimeArgument.parse(since, now: now) else {
                throw ValidationError("--since \(since) is not a time; use \(TimeArgument.help).")
            }
            filter.since = ms
        }
        if let limit, limit < 0 { throw ValidationError("--limit must not be negative.") }
        if radius != nil && near == nil { throw ValidationError("--radius needs --near LAT,LON.") }
        if let near {
            let parts = near.split(separator: ",").map { Double($0.trimmingCharacters(in: .whitespaces)) }
            guard parts.count == 2, let lat = parts[0], let lon = parts[1], (-90...90).contains(lat),
                (-180...180).contains(lon)
            else {
                throw ValidationError("--near takes LAT,LON in degrees, e.g. --near 37.77,-122.42.")
            }
            let km = radius ?? 100
            guard km > 0 else { throw ValidationError("--radius must be positive.") }
            filter.near = IOQuaked.Near(lat: lat, lon: lon, radiusKm: km)
        }
        return filter
    }

    public func run() async throws {
        let filter = try filter()
        let style = options.style
        let quakes: [IOQuaked.Quake]
        let total: Int
        let token: Int
        let updated: Int?
        if cache {
            let cache = try QuakeCache.openExisting(path: cachePath ?? CachePath.defaultPath())
            let result = try cache.query(filter)
            let position = try cache.position()
            (quakes, total, token, updated) = (result.quakes, result.total, position?.token ?? 0, position.map { Int($0.appliedAt) })
        } else {
            (quakes, total, token, updated) = try await QuakedConnection.with(options.socketPath) { connection in
                let reply = try await connection.query(
                    IOQuaked.Query.Parameters(
                        minMagnitude: filter.minMagnitude, since: filter.since, type: filter.type, near: filter.near,
                        limit: filter.limit, order: IOQuaked.QueryOrder(rawValue: order)))
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
        var text = ""
        for q in quakes {
            text += Formatting.row(
                mag: q.mag, place: q.place, time: q.time, id: q.id, placeWidth: width, style, now: now)
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
