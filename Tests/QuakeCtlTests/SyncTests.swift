import Foundation
import QuakeAssociation
import QuakeClient
import QuakeCtl
import QuakeFeed
import QuakeModel
import QuakeModelCheck
import QuakePostgres
import QuakeProtocol
import QuakeStore
import QuakeTestSupport
import Testing

/// `quakectl sync` against a real PostgreSQL (with PostGIS) started by the tests, a real quaked
/// and real quakectl processes.
extension ClientEndToEnd {
    @Suite struct SyncTests {
        /// A fresh database (with PostGIS when the server has it) and its URL.
        static func database(_ pg: PostgresTestServer, _ name: String) throws -> String {
            try pg.psql("CREATE DATABASE \(name)", database: "postgres")
            if pg.hasPostGIS { try pg.psql("CREATE EXTENSION postgis", database: name) }
            return "postgresql://postgres@127.0.0.1:\(pg.port)/\(name)?sslmode=disable"
        }

        static func withPostgres<T>(_ body: (PostgresTestServer) async throws -> T) async throws -> T {
            let pg = try await PostgresTestServer.start()
            do {
                let result = try await body(pg)
                try? await pg.kill()
                return result
            } catch {
                try? await pg.kill()
                throw error
            }
        }

        static func sync(
            _ daemon: Quaked, to url: String, _ arguments: [String] = [], environment: [String: String] = [:]
        ) throws -> ChildProcess {
            try startQuakectl(
                ["sync", "--socket", daemon.socketPath, "--to", url, "--json", "--max-backoff", "0.5", "--heartbeat", "2"]
                    + arguments, environment: environment)
        }

        /// Waits until the sink's position is the store's head (with `filter`), then checks that
        /// its table holds exactly what the filter selects from the store.
        static func expectInStep(
            _ sync: ChildProcess, _ daemon: Quaked, url: String, name: String = "quakes", table: String = "quakes",
            filter: QuakeFilter = QuakeFilter(), timeout: Duration = .seconds(60)
        ) async throws {
            let settings = try PostgresSettings.resolve(url: url, environment: [:])
            let key = IOQuaked.Filter(filter).key
            let deadline = ContinuousClock.now + timeout
            while true {
                guard sync.isRunning else { throw TestFailure("sync exited: \(sync.stderr)") }
                let head = try daemon.withStore { try $0.head() }
                if let read = try? await PostgresSink.read(settings: settings, name: name, table: table),
                    let position = read.position, position.token == Int(head), position.filter == key
                {
                    let expected = try FilteredWatchTests.filtered(daemon, filter)
                    // The store as of the table's token: if a transaction came in between (the
                    // daemon's own pull), compare again once the sink has it too.
                    guard try daemon.withStore({ try $0.head() }) == head else { continue }
                    let actual = byID(read.quakes)
                    if actual != expected {
                        let missing = Set(expected.keys).subtracting(actual.keys).sorted()
                        let extra = Set(actual.keys).subtracting(expected.keys).sorted()
                        let differing = expected.keys.filter { actual[$0] != nil && actual[$0] != expected[$0] }.sorted()
                        throw TestFailure(
                            "the table \(table) at token \(position.token) differs from the store: missing \(missing.prefix(5)), extra \(extra.prefix(5)), different \(differing.prefix(5))"
                                + (differing.first.map { "\n  table: \(actual[$0]!)\n  store: \(expected[$0]!)" } ?? ""))
                    }
                    return
                }
                guard ContinuousClock.now < deadline else {
                    throw TestFailure("the sink \(name) did not reach the head \(head): \(sync.stderr.suffix(2000))")
                }
                try await Task.sleep(for: .milliseconds(50))
            }
        }

        struct SyncLine: Decodable {
            var event: String
            var token: Int?
            var quakes: Int?
            var reason: String?
            var changes: Int?
        }

        static func lines(_ sync: ChildProcess) throws -> [SyncLine] {
            try sync.stdout.split(separator: "\n").map { try JSONDecoder().decode(SyncLine.self, from: Data($0.utf8)) }
        }

        @Test func aSinkCreatesItsTableLoadsASnapshotAndFollowsHistory() async throws {
            try await Self.withPostgres { pg in
                try await withQuaked { daemon in
                    let url = try Self.database(pg, "follow")
                    let sync = try Self.sync(daemon, to: url)
                    defer { sync.signal(SIGKILL) }
                    try await Self.expectInStep(sync, daemon, url: url)
                    let first = try Self.lines(sync)
                    #expect(first.filter { $0.event == "reset" }.count == 1)
                    #expect(first.first?.reason == "new table")
                    #expect(first.first?.quakes == (try daemon.withStore { try $0.allQuakes() }.count))

                    // The columns: one per field, timestamptz times, and PostGIS's geom.
                    let columns = try pg.psql(
                        "SELECT column_name || ' ' || data_type FROM information_schema.columns WHERE table_name = 'quakes' ORDER BY ordinal_position",
                        database: "follow"
                    ).split(separator: "\n")
                    #expect(columns.count == 33)
                    #expect(columns.contains("time timestamp with time zone"))
                    #expect(columns.contains("agency text") && columns.contains("contributors jsonb"))
                    #expect(columns.contains("mag_type text"))
                    #expect(columns.contains("geom USER-DEFINED"))
                    #expect(pg.hasPostGIS, "the tests need PostGIS (postgresql-15-postgis-3)")

                    // A PostGIS query: within 100 km of a stored quake (itself included, every
                    // other result no farther than 100 km by the haversine formula).
                    let center = try #require(try daemon.withStore { try $0.allQuakes() }.first { $0.lat != nil })
                    let near = try pg.psql(
                        """
                        SELECT id FROM quakes WHERE ST_DWithin(geom::geography,
                          ST_MakePoint(\(center.lon!), \(center.lat!))::geography, 100000)
                        """, database: "follow"
                    ).split(separator: "\n").map(String.init)
                    #expect(near.contains(center.id))
                    let stored = byID(try daemon.withStore { try $0.allQuakes() }.map(wire))
                    for id in near {
                        let quake = try #require(stored[id])
                        let km = Geodesy.distanceKm(center.lat!, center.lon!, quake.lat!, quake.lon!)
                        #expect(km < 100.5, "\(id) is \(km) km away")
                    }

                    // A delete and a revision reach the table, a transaction each.
                    let victim = try #require(stored.keys.sorted().first)
                    #expect(try await quakectl(["delete", victim, "--socket", daemon.socketPath]).status == 0)
                    let revised = try #require(stored.values.first { ($0.mag ?? 9) < 3 && $0.id != victim })
                    let feed = try FilteredWatchTests.revision(of: revised.id, mag: 4.4, revision: 1, in: daemon.directory)
                    _ = try await daemon.importOnce(feed)
                    try await Self.expectInStep(sync, daemon, url: url)
                    #expect(try pg.psql("SELECT count(*) FROM quakes WHERE id = '\(victim)'", database: "follow") == "0")
                    #expect(try pg.psql("SELECT mag FROM quakes WHERE id = '\(revised.id)'", database: "follow") == "4.4")
                    let applied = try Self.lines(sync).filter { $0.event == "applied" }
                    #expect(applied.count == 2)

                    // Stopped, it keeps its position; started again, it applies what it missed
                    // and does not reset.
                    sync.signal(SIGTERM)
                    #expect(try await sync.wait() == 0)
                    let another = try #require(stored.keys.sorted().dropFirst().first)
                    #expect(try await quakectl(["delete", another, "--socket", daemon.socketPath]).status == 0)
                    let again = try Self.sync(daemon, to: url)
                    defer { again.signal(SIGKILL) }
                    try await Self.expectInStep(again, daemon, url: url)
                    let second = try Self.lines(again)
                    #expect(second.filter { $0.event == "reset" }.isEmpty)
                    #expect(second.filter { $0.event == "applied" }.count == 1)
                    // A dropped table is made again from a snapshot.
                    again.signal(SIGTERM)
                    #expect(try await again.wait() == 0)
                    try pg.psql("DROP TABLE quakes", database: "follow")
                    let rebuilt = try Self.sync(daemon, to: url)
                    defer { rebuilt.signal(SIGKILL) }
                    try await Self.expectInStep(rebuilt, daemon, url: url)
                    #expect(try Self.lines(rebuilt).first?.reason == "new table")
                    // quaked keeps the sink's place as a durable client.
                    let status = try await quakectl(["status", "--json", "--socket", daemon.socketPath])
                    #expect(status.stdout.contains("sync-quakes"))
                }
            }
        }

        /// A store that starts following sources: every row gains agency and contributors (one
        /// transaction), then a second agency joins a quake. The table's `contributors` is a jsonb
        /// array, written with the row; a table made before the two columns gains them and is
        /// loaded again.
        @Test func contributorsReachTheTableAsJSONB() async throws {
            try await Self.withPostgres { pg in
                try await withQuaked { daemon in
                    let url = try Self.database(pg, "agencies")
                    let sync = try Self.sync(daemon, to: url)
                    defer { sync.signal(SIGKILL) }
                    try await Self.expectInStep(sync, daemon, url: url)
                    #expect(try pg.psql("SELECT count(*) FROM quakes WHERE contributors IS NOT NULL", database: "agencies") == "0")

                    let stored = try daemon.withStore { try $0.allQuakes() }
                    let quake = try #require(stored.first { $0.lat != nil && $0.lon != nil })
                    let emsc = SourceReport(
                        source: "emsc", id: "emsc-joins", agency: "EMSC", time: quake.time + 2_000,
                        latitude: quake.lat! + 0.05, longitude: quake.lon!, depth: 10, magnitude: 4.9, magnitudeType: "mb",
                        place: "SOMEWHERE", updated: (quake.updated ?? quake.time) + 1)
                    let report = try await daemon.withStoreAsync { store in
                        try await store.importSource(
                            "emsc", items: [.report(emsc)], position: nil, query: nil,
                            association: AssociationConfiguration(sourceOrder: ["usgs", "emsc"]))
                    }
                    #expect(report.updated == stored.filter { $0.lat != nil && $0.lon != nil }.count)
                    try await Self.expectInStep(sync, daemon, url: url)
                    let table = "quakes"
                    #expect(
                        try pg.psql("SELECT jsonb_typeof(contributors) FROM \(table) WHERE id = '\(quake.id)'", database: "agencies")
                            == "array")
                    #expect(
                        try pg.psql(
                            "SELECT string_agg(c ->> 'source', ',') FROM \(table), jsonb_array_elements(contributors) c WHERE id = '\(quake.id)'",
                            database: "agencies") == "usgs,emsc")
                    #expect(
                        try pg.psql(
                            "SELECT contributors -> 1 ->> 'mag' FROM \(table) WHERE id = '\(quake.id)'", database: "agencies")
                            == "4.9")
                    #expect(
                        try pg.psql("SELECT agency FROM \(table) WHERE id = '\(quake.id)'", database: "agencies")
                            == quake.net?.uppercased())

                    // A table an older quakectl made: without the two columns. The sink adds them
                    // and loads the rows again, so they hold the values.
                    sync.signal(SIGTERM)
                    #expect(try await sync.wait() == 0)
                    try pg.psql("ALTER TABLE quakes DROP COLUMN agency, DROP COLUMN contributors", database: "agencies")
                    let again = try Self.sync(daemon, to: url)
                    defer { again.signal(SIGKILL) }
                    // Until the new sink has looked at the table, the table (without the columns)
                    // still carries the old sink's position at the head: wait for its reset.
                    let deadline = ContinuousClock.now + .seconds(60)
                    // (A line being written may not parse yet: read again.)
                    while (try? Self.lines(again))?.contains(where: { $0.event == "reset" }) != true {
                        guard again.isRunning, ContinuousClock.now < deadline else {
                            throw TestFailure("the sink did not reset the table it found without the columns: \(again.stderr)")
                        }
                        try await Task.sleep(for: .milliseconds(50))
                    }
                    try await Self.expectInStep(again, daemon, url: url)
                    #expect(try Self.lines(again).filter { $0.event == "reset" }.count == 1)
                    #expect(
                        try pg.psql("SELECT count(*) FROM quakes WHERE contributors IS NULL AND lat IS NOT NULL", database: "agencies")
                            == "0")
                }
            }
        }

        /// Odd values survive both ways in: COPY (the snapshot) and the upsert (history): text
        /// with tabs, newlines and backslashes, times before 1970, nulls, extreme numbers.
        @Test func oddValuesRoundTripThroughCopyAndUpserts() async throws {
            try await Self.withPostgres { pg in
                try await withTemporaryDirectory { dir in
                    func document(_ suffix: String, updated: Int) throws -> URL {
                        let features = [
                            #"{"type":"Feature","id":"odd1\#(suffix)","properties":{"mag":-0.5,"place":"tab\there\nnew line \\ back\\slash \"quoted\" ünï €","time":-86399999,"updated":\#(updated),"felt":9007199254740991,"cdi":1e-7,"sig":-3},"geometry":{"type":"Point","coordinates":[179.999999,-89.5,-3.25]}}"#,
                            #"{"type":"Feature","id":"odd2\#(suffix)","properties":{"time":253402300799999,"mag":null,"place":"\\N"},"geometry":{"type":"Point","coordinates":[-180,90]}}"#,
                            #"{"type":"Feature","id":"odd3\#(suffix)","properties":{"time":0,"updated":\#(updated),"place":""},"geometry":null}"#,
                        ]
                        let url = dir.appendingPathComponent("odd\(suffix).geojson")
                        try #"{"type":"FeatureCollection","metadata":{},"features":[\#(features.joined(separator: ","))]}"#
                            .write(to: url, atomically: true, encoding: .utf8)
                        return url
                    }
                    let daemon = try await Quaked(in: dir, feeds: [try document("a", updated: 1)])
                    defer { daemon.kill() }
                    let url = try Self.database(pg, "odd")
                    let sync = try Self.sync(daemon, to: url)
                    defer { sync.signal(SIGKILL) }
                    // The snapshot (COPY) holds the "a" quakes; the import of "b" comes through history.
                    try await Self.expectInStep(sync, daemon, url: url)
                    _ = try await daemon.importOnce(try document("b", updated: 2))
                    try await Self.expectInStep(sync, daemon, url: url)
                    #expect(try pg.psql("SELECT count(*) FROM quakes", database: "odd") == "6")
                    #expect(
                        try pg.psql("SELECT time FROM quakes WHERE id = 'odd1b'", database: "odd")
                            == "1969-12-31 00:00:00.001+00")
                    #expect(
                        try pg.psql("SELECT time FROM quakes WHERE id = 'odd2a'", database: "odd")
                            == "9999-12-31 23:59:59.999+00")
                    #expect(try pg.psql("SELECT geom IS NULL FROM quakes WHERE id = 'odd3a'", database: "odd") == "t")
                    #expect(
                        try pg.psql("SELECT ST_AsText(geom) FROM quakes WHERE id = 'odd2b'", database: "odd")
                            == "POINT Z (-180 90 NaN)")
                    // An unknown depth (NaN) does not stop a distance query.
                    #expect(
                        try pg.psql(
                            "SELECT id FROM quakes WHERE ST_DWithin(geom::geography, ST_MakePoint(-180, 89.9)::geography, 100000) ORDER BY id",
                            database: "odd") == "odd2a\nodd2b")
                }
            }
        }

        @Test func filteredSinksShareADatabaseWithTheirOwnTables() async throws {
            try await Self.withPostgres { pg in
                try await withQuaked { daemon in
                    let url = try Self.database(pg, "shared")
                    let strong = QuakeFilter(minMagnitude: 4)
                    let all = try Self.sync(daemon, to: url)
                    defer { all.signal(SIGKILL) }
                    let filtered = try Self.sync(daemon, to: url, ["--table", "strong", "--min-mag", "4"])
                    defer { filtered.signal(SIGKILL) }
                    try await Self.expectInStep(all, daemon, url: url)
                    try await Self.expectInStep(filtered, daemon, url: url, name: "strong", table: "strong", filter: strong)

                    // A quake revised across the threshold enters and leaves the filtered table.
                    let small = try #require(try daemon.withStore { try $0.allQuakes() }.first { ($0.mag ?? 9) < 3 })
                    for (step, mag) in [4.5, 3.9, 4.4].enumerated() {
                        let feed = try FilteredWatchTests.revision(of: small.id, mag: mag, revision: step + 1, in: daemon.directory)
                        _ = try await daemon.importOnce(feed)
                        try await Self.expectInStep(all, daemon, url: url)
                        try await Self.expectInStep(filtered, daemon, url: url, name: "strong", table: "strong", filter: strong)
                        let there = try pg.psql("SELECT count(*) FROM strong WHERE id = '\(small.id)'", database: "shared")
                        #expect(there == (mag >= 4 ? "1" : "0"))
                    }

                    // A table kept by another sink is refused (exit 64) and left alone.
                    let thief = try await quakectl(
                        ["sync", "--socket", daemon.socketPath, "--to", url, "--table", "strong", "--name", "thief"],
                        timeout: .seconds(30))
                    #expect(thief.status == 64)
                    #expect(thief.stderr.contains("the table strong is kept by the sink \"strong\""))
                    // So is a sink pointed at another table than its own.
                    let moved = try await quakectl(
                        ["sync", "--socket", daemon.socketPath, "--to", url, "--table", "other", "--name", "strong"],
                        timeout: .seconds(30))
                    #expect(moved.status == 64)
                    #expect(moved.stderr.contains("keeps the table strong"))

                    // The same sink with another filter starts over from a snapshot, and says so.
                    filtered.signal(SIGTERM)
                    #expect(try await filtered.wait() == 0)
                    let wider = try Self.sync(daemon, to: url, ["--table", "strong", "--min-mag", "2"])
                    defer { wider.signal(SIGKILL) }
                    try await Self.expectInStep(
                        wider, daemon, url: url, name: "strong", table: "strong", filter: QuakeFilter(minMagnitude: 2))
                    #expect(try Self.lines(wider).first?.reason?.contains("another filter") == true)

                    // One process at a time runs a sink: a second waits for the first.
                    let twin = try Self.sync(daemon, to: url)
                    defer { twin.signal(SIGKILL) }
                    try await waitUntil(timeout: .seconds(20)) { twin.stderr.contains("another quakectl sync runs the sink") }
                    all.signal(SIGTERM)
                    #expect(try await all.wait() == 0)
                    try await Self.expectInStep(twin, daemon, url: url)
                    #expect(try Self.lines(twin).filter { $0.event == "reset" }.isEmpty)
                }
            }
        }

        /// Logins, passwords and TLS as libpq takes them; a refused login, a table of the wrong
        /// shape and a server that goes away are reported, retried, and recovered from.
        @Test func failuresAreReportedAndRetriedUntilTheyPass() async throws {
            try await Self.withPostgres { pg in
                try await withQuaked { daemon in
                    _ = try Self.database(pg, "auth")
                    try pg.psql("GRANT ALL ON SCHEMA public TO \(PostgresTestServer.sinkRole)", database: "auth")
                    let base = "postgresql://\(PostgresTestServer.sinkRole)@127.0.0.1:\(pg.port)/auth?sslmode=disable"

                    // A wrong password: the server's refusal, then retries.
                    let refused = try Self.sync(daemon, to: base, environment: ["PGPASSWORD": "wrong"])
                    defer { refused.signal(SIGKILL) }
                    try await waitUntil(timeout: .seconds(20)) { refused.stderr.contains("password authentication failed") }
                    try await Task.sleep(for: .seconds(1))
                    #expect(refused.isRunning)
                    #expect(refused.stderr.components(separatedBy: "password authentication failed").count == 2, "said once")
                    refused.signal(SIGTERM)
                    #expect(try await refused.wait() == 0)

                    // The password from --password-file (as a systemd credential holds it).
                    let secret = daemon.directory.appendingPathComponent("password")
                    try (PostgresTestServer.sinkPassword + "\n").write(to: secret, atomically: true, encoding: .utf8)
                    let byFile = try Self.sync(daemon, to: base, ["--password-file", secret.path])
                    defer { byFile.signal(SIGKILL) }
                    try await Self.expectInStep(byFile, daemon, url: "\(base)&password=\(Self.percentEncoded(PostgresTestServer.sinkPassword))")
                    byFile.signal(SIGTERM)
                    #expect(try await byFile.wait() == 0)

                    // A table of the wrong shape: a clear error, retried until it is fixed.
                    try pg.psql("CREATE TABLE misshapen (id text PRIMARY KEY, mag text)", database: "auth")
                    try pg.psql("ALTER TABLE misshapen OWNER TO \(PostgresTestServer.sinkRole)", database: "auth")
                    let shaped = try Self.sync(
                        daemon, to: base, ["--table", "misshapen"], environment: ["PGPASSWORD": PostgresTestServer.sinkPassword])
                    defer { shaped.signal(SIGKILL) }
                    try await waitUntil(timeout: .seconds(20)) {
                        shaped.stderr.contains("the table misshapen in") && shaped.stderr.contains("has the wrong shape")
                            && shaped.stderr.contains("mag is text, not double precision")
                    }
                    try pg.psql("DROP TABLE misshapen", database: "auth")
                    let url = "\(base)&password=\(Self.percentEncoded(PostgresTestServer.sinkPassword))"
                    try await Self.expectInStep(shaped, daemon, url: url, name: "misshapen", table: "misshapen")
                    #expect(shaped.stderr.contains("PostgreSQL works again"))

                    // The server goes away (kill -9) while changes arrive, and comes back.
                    try await pg.kill()
                    let ids = try daemon.withStore { try $0.allQuakes() }.map(\.id).sorted().prefix(3)
                    #expect(try await quakectl(["delete"] + ids + ["--socket", daemon.socketPath]).status == 0)
                    try await waitUntil(timeout: .seconds(20)) {
                        shaped.stderr.contains("cannot connect to PostgreSQL") || shaped.stderr.contains("closed the connection")
                    }
                    try await pg.restart()
                    try await Self.expectInStep(shaped, daemon, url: url, name: "misshapen", table: "misshapen")
                    shaped.signal(SIGTERM)
                    #expect(try await shaped.wait() == 0)

                    // TLS: sslmode=verify-full against the server's certificate, and require.
                    try await pg.enableTLS()
                    let tlsURL =
                        "postgresql://postgres@localhost:\(pg.port)/auth?sslmode=verify-full&sslrootcert=\(pg.certificatePath)"
                    let verified = try Self.sync(daemon, to: tlsURL, ["--table", "tls"])
                    defer { verified.signal(SIGKILL) }
                    try await Self.expectInStep(verified, daemon, url: tlsURL, name: "tls", table: "tls")
                    verified.signal(SIGTERM)
                    #expect(try await verified.wait() == 0)
                    // A setting libpq does not know is a usage error.
                    let plain = try await quakectl(
                        ["sync", "--socket", daemon.socketPath, "--to", "postgresql://postgres@localhost:1/auth?sslmode=bogus"])
                    #expect(plain.status == 64)
                    #expect(plain.stderr.contains("sslmode \"bogus\" is not one of"))
                }
            }
        }

        /// The example sync.conf's TABLE and FILTER, passed as quaked-sync@.service passes them
        /// (`--name %i --table ${TABLE} --password-file %d/password $FILTER`, the password file
        /// empty for a server that asks none), keep their table in step with that filter.
        @Test func theExampleSyncConfigurationWorksAsTheUnitPassesIt() async throws {
            let conf = try String(
                contentsOf: Fixtures.packageRoot.appendingPathComponent("packaging/examples/sync.conf"), encoding: .utf8)
            func words(_ key: String) throws -> [String] {
                let line = try #require(conf.split(separator: "\n").first { $0.hasPrefix("\(key)=") })
                return line.dropFirst(key.count + 1).split(separator: " ").map(String.init)
            }
            let table = try #require(try words("TABLE").first)
            let filter = try words("FILTER")
            #expect(try words("TO").first?.hasPrefix("postgresql://") == true)
            try await Self.withPostgres { pg in
                try await withQuaked { daemon in
                    let url = try Self.database(pg, "example")
                    let password = daemon.directory.appendingPathComponent("password")
                    #expect(FileManager.default.createFile(atPath: password.path, contents: Data()))
                    let sync = try Self.sync(
                        daemon, to: url, ["--name", "team", "--table", table, "--password-file", password.path] + filter)
                    defer { sync.signal(SIGKILL) }
                    let quakeFilter = try #require(try FilterOptions.parse(filter).filter(sinceIsFilter: true))
                    try await Self.expectInStep(
                        sync, daemon, url: url, name: "team", table: table, filter: try QuakeFilter(quakeFilter))
                }
            }
        }

        static func percentEncoded(_ text: String) -> String {
            text.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? text
        }

        @Test func anExpiredTokenReplacesTheRowsInOneTransaction() async throws {
            try await Self.withPostgres { pg in
                try await withQuaked(feeds: [TestFeeds.week]) { daemon in
                    let url = try Self.database(pg, "expiry")
                    let first = try Self.sync(daemon, to: url)
                    try await Self.expectInStep(first, daemon, url: url)
                    first.signal(SIGKILL)
                    _ = try await first.wait()
                    let before = try pg.psql("SELECT count(*) FROM quakes", database: "expiry")

                    let ids = try daemon.withStore { try $0.allQuakes() }.map(\.id).sorted().prefix(5)
                    #expect(try await quakectl(["delete"] + ids + ["--socket", daemon.socketPath]).status == 0)
                    try await daemon.withStoreAsync { store in
                        _ = try await store.purgeHistory(olderThan: .zero, now: Date().addingTimeInterval(60))
                    }
                    // While the reset runs, a reader sees the whole old table or the whole new
                    // one, never a part.
                    let second = try Self.sync(daemon, to: url)
                    defer { second.signal(SIGKILL) }
                    var seen = Set<String>()
                    let after = String(Int(before)! - 5)
                    let deadline = ContinuousClock.now + .seconds(60)
                    while ContinuousClock.now < deadline {
                        let count = try pg.psql("SELECT count(*) FROM quakes", database: "expiry")
                        seen.insert(count)
                        if count == after { break }
                    }
                    #expect(seen.isSubset(of: [before, after]), "a reader saw \(seen.sorted())")
                    try await Self.expectInStep(second, daemon, url: url)
                    #expect(try Self.lines(second).first?.reason?.contains("has been purged") == true)
                }
            }
        }
    }
}
