import ArgumentParser
import Foundation
import QuakeClient
import QuakePostgres
import QuakeProtocol
import UnixSignals
import QuakeModel

/// `quakectl sync`: a durable watch whose cache is a PostgreSQL (PostGIS) table.
public struct SyncCommand: AsyncParsableCommand {
    public static let configuration = CommandConfiguration(
        commandName: "sync",
        abstract: "Keep a PostgreSQL/PostGIS table exactly in step with quaked.",
        discussion: """
            sync is watch with a PostgreSQL table for its cache. The table (--table, created on \
            first use) has one column per quake field, the times as timestamptz, and, where \
            PostGIS is installed in the database, geom, a geometry(PointZ, 4326) of lon, lat and \
            depth. The sink's position (store id, token, filter) is its row in quaked_sync_state. \
            Each history transaction is applied with its position in one PostgreSQL transaction, \
            so a kill at any point, of quakectl, quaked or PostgreSQL, leaves the table equal to \
            the store at the token it records. A new sink, an expired token, another store or \
            another filter replaces the table's rows from a snapshot in one transaction (the \
            first load with COPY): readers see the old rows until it commits.

            Connection settings are libpq's: the --to URL \
            (postgresql://USER@HOST:PORT/DB?sslmode=verify-full), then PGHOST, PGPORT, PGUSER, \
            PGPASSWORD, PGDATABASE, PGSSLMODE and PGSSLROOTCERT, then the defaults (the socket in \
            /var/run/postgresql, your user name). The password: the URL, PGPASSWORD, \
            --password-file (the password alone, as a systemd credential), or ~/.pgpass \
            (PGPASSFILE). Several sinks, each with its --name, its --table and its filters, may \
            share a database; quaked keeps the history each has not applied (as client \
            sync-NAME). A database that goes away, refuses the login or holds a table of the \
            wrong shape is reported once and retried with backoff; nothing applied is lost. A \
            table kept by another sink is a usage error (exit 64).

            One line per reset and per applied transaction; with --json, \
            {"event":"applied","token":...} and {"event":"reset",...} objects.
            """)

    @OptionGroup public var options: ClientOptions

    @Option(
        help: ArgumentHelp(
            "The database, as a libpq URL: postgresql://[USER@]HOST[:PORT]/DB[?sslmode=...]. Default: the PG* environment.",
            valueName: "url"))
    public var to: String?

    @Option(help: ArgumentHelp("The table the quakes go into (created when missing).", valueName: "name"))
    public var table: String = "quakes"

    @Option(
        help: ArgumentHelp(
            "The sink's name: its row in quaked_sync_state, and quaked's client sync-NAME. Default: the table's name.",
            valueName: "name"))
    public var name: String?

    @Option(
        name: .customLong("password-file"),
        help: ArgumentHelp("Read the password from FILE (the password alone, e.g. a systemd credential).", valueName: "file"))
    public var passwordFile: String?

    @OptionGroup(title: "Filters") public var filters: FilterOptions

    @Option(help: .hidden)
    public var heartbeat: Int = IOQuaked.Defaults.heartbeatSeconds

    /// The longest wait between retries, in seconds (tests shorten it).
    @Option(name: .customLong("max-backoff"), help: .hidden)
    public var maxBackoff: Double = 30

    public init() {}

    public func validate() throws {
        if filters.since == "now" {
            throw ValidationError("--since now is not a filter: a table holds the store's quakes, not the changes from now on.")
        }
        _ = try filters.filter(sinceIsFilter: true)
        if let name, name.isEmpty { throw ValidationError("--name must not be empty.") }
        if heartbeat < 1 { throw ValidationError("--heartbeat must be at least 1 second.") }
        if !(maxBackoff > 0) { throw ValidationError("--max-backoff must be positive.") }
    }

    public func run() async throws {
        let settings: PostgresSettings
        do {
            settings = try PostgresSettings.resolve(url: to, passwordFile: passwordFile)
        } catch let error as PostgresSettings.Invalid {
            throw QuakectlError(QuakectlError.usage, "--to: \(error).")
        }
        let style = options.style
        let sinkName = name ?? table
        let sink: PostgresSink
        do {
            sink = try PostgresSink(settings: settings, name: sinkName, table: table) { transaction, committedAt in
                SyncPrinter(style: style).committed(transaction, at: committedAt)
            }
        } catch let error as PostgresSinkError {
            throw QuakectlError(QuakectlError.usage, "\(error).")
        }
        var watchOptions = Watcher.Options(endpoint: try options.endpoint)
        watchOptions.clientName = "sync-" + sinkName
        watchOptions.filter = try filters.filter(sinceIsFilter: true)
        watchOptions.heartbeatSeconds = heartbeat
        watchOptions.maxBackoff = .milliseconds(Int64(maxBackoff * 1000))
        // COPY takes large pages best; quaked caps a page at what it allows.
        watchOptions.snapshotPageSize = 5000
        // The stop signals are the sync's own; a stop ends the ssh children of --host.
        let stop = WatchStop()
        let health = WatchHealth(heartbeatSeconds: watchOptions.heartbeatSeconds)
        let service = ServiceNotifications()
        let watcher = Watcher(options: watchOptions, cache: sink)
        let printer = SyncPrinter(style: style, sink: sink, table: table)
        do {
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask {
                    // SIGTERM, SIGINT and SIGHUP: the transaction in hand is committed, then sync exits 0.
                    for await _ in await UnixSignalsSequence(trapping: .sigterm, .sigint, .sighup) {
                        service.stopping()
                        await stop.request()
                        return
                    }
                }
                // Under systemd: started, and alive for as long as the sink is healthy.
                service.ready()
                if let keepAlive = service.keepAlive(health) {
                    // Runs until cancelled with the others, when the sink has stopped.
                    group.addTask { await keepAlive() }
                }
                group.addTask {
                    try await watcher.run(stop: stop, health: health) { try await printer.print($0) }
                }
                defer { group.cancelAll() }
                try await group.next()
            }
        } catch let error as PostgresSinkError {
            await sink.close()
            throw QuakectlError(error.isPermanent ? QuakectlError.usage : QuakectlError.failure, "\(error).")
        }
        await sink.close()
    }
}

/// How `sync` shows what happens: a line per reset, per committed transaction and per outage.
struct SyncPrinter: Sendable {
    let style: OutputStyle
    var sink: PostgresSink? = nil
    var table: String = ""

    func print(_ event: WatchEvent) async throws {
        switch event {
        case .connected(let afterOutage):
            if afterOutage { Console.err("quakectl: reconnected to quaked; catching up from the table's token.\n") }
        case .disconnected(let reason):
            Console.err("quakectl: \(QuakectlError.from(reason).message) Retrying; the table is kept.\n")
        case .cacheUnavailable(let reason):
            Console.err("quakectl: \(reason). Retrying with backoff; nothing applied is lost.\n")
        case .cacheRecovered:
            Console.err("quakectl: PostgreSQL works again; the table is in step.\n")
        case .reset(let storeId, let token, let quakes, let reason):
            // The Watcher speaks of its cache; here, the cache is the table.
            let reason = reason.replacingOccurrences(of: "cache", with: "table")
            if let notes = await sink?.notes {
                for note in notes { Console.err("quakectl: \(note).\n") }
            }
            if style.json {
                Console.line(
                    JSONText.encode(
                        SyncLine(event: "reset", storeId: storeId, token: token, quakes: quakes, reason: reason)))
            } else {
                Console.line(
                    style.bold("reset")
                        + "    table \(table) replaced (\(reason)): \(Formatting.earthquakes(quakes)) at token \(token) of store \(storeId)"
                )
            }
        case .applied, .recent:
            break  // an applied transaction is printed once committed (``committed(_:at:)``)
        }
    }

    /// After PostgreSQL committed a transaction (and its position).
    func committed(_ transaction: IOQuaked.Transaction, at date: Date) {
        let appliedAt = QuakeTime.milliseconds(date)
        if style.json {
            Console.line(
                JSONText.encode(
                    SyncLine(
                        event: "applied", token: transaction.token, author: transaction.author.rawValue,
                        changes: transaction.changes.count, committedAt: transaction.timestamp, appliedAt: appliedAt)))
        } else {
            var counts = [
                (transaction.inserted, "inserted"), (transaction.updated, "updated"), (transaction.deleted, "deleted"),
                (transaction.entered ?? 0, "entered"), (transaction.left ?? 0, "left"),
            ].filter { $0.0 > 0 }.map { "\($0.0) \($0.1)" }.joined(separator: ", ")
            if counts.isEmpty { counts = "no change" }
            Console.line("applied  token \(transaction.token) (\(transaction.author.rawValue)): \(counts)")
        }
    }

    struct SyncLine: Encodable {
        var event: String
        var storeId: String? = nil
        var token: Int
        var quakes: Int? = nil
        var reason: String? = nil
        var author: String? = nil
        var changes: Int? = nil
        /// quaked's commit of the transaction and PostgreSQL's, ms since the epoch.
        var committedAt: Int? = nil
        var appliedAt: Int64? = nil
    }
}
