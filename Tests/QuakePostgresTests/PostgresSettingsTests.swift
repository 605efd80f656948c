import Foundation
import QuakeModelCheck
import QuakePostgres
import QuakeProtocol
import QuakeTestSupport
import Testing

/// `quakectl sync`'s connection settings as libpq reads them, and the COPY text it sends.
@Suite struct PostgresSettingsTests {
    @Test func aURLGivesEveryPart() throws {
        let settings = try PostgresSettings.resolve(
            url: "postgresql://ann%40team:p%3Ass@db.example.org:6543/cat%2Falog?sslmode=verify-full&sslrootcert=/etc/ca.pem&application_name=x&connect_timeout=3",
            environment: ["PGHOST": "ignored", "PGUSER": "ignored"])
        #expect(settings.host == "db.example.org")
        #expect(settings.port == 6543)
        #expect(settings.user == "ann@team")
        #expect(settings.password == "p:ss")
        #expect(settings.database == "cat/alog")
        #expect(settings.sslMode == .verifyFull)
        #expect(settings.sslRootCert == "/etc/ca.pem")
        #expect(settings.connectTimeout == 3)
        #expect(settings.applicationName == "x")
        #expect(settings.unixSocketPath == nil)
        #expect(!settings.redacted.contains("p:ss"))
        #expect(PostgresSettings.redact("postgresql://ann:secret@h/db") == "postgresql://ann:***@h/db")
    }

    @Test func theEnvironmentFillsWhatTheURLLeavesOut() throws {
        let environment = [
            "PGHOST": "/run/pg", "PGPORT": "5433", "PGUSER": "bob", "PGPASSWORD": "pw", "PGDATABASE": "quakes",
            "PGSSLMODE": "disable",
        ]
        let settings = try PostgresSettings.resolve(url: "postgresql://", environment: environment)
        #expect(settings.host == "/run/pg")
        #expect(settings.unixSocketPath == "/run/pg/.s.PGSQL.5433")
        #expect(settings.user == "bob")
        #expect(settings.password == "pw")
        #expect(settings.database == "quakes")
        #expect(settings.sslMode == .disable)
        // Nothing at all: Debian's socket directory, the user's name for user and database.
        let defaults = try PostgresSettings.resolve(url: nil, environment: [:], userName: "carol")
        #expect(defaults.unixSocketPath == "/var/run/postgresql/.s.PGSQL.5432")
        #expect(defaults.user == "carol")
        #expect(defaults.database == "carol")
        #expect(defaults.sslMode == .prefer)
        #expect(defaults.password == nil)
        // A socket directory in the URL, percent-encoded or as a parameter; IPv6 in brackets.
        #expect(try PostgresSettings.resolve(url: "postgresql://%2Ftmp%2Fpg/db", environment: [:]).host == "/tmp/pg")
        #expect(try PostgresSettings.resolve(url: "postgresql:///db?host=/tmp/pg", environment: [:]).host == "/tmp/pg")
        let v6 = try PostgresSettings.resolve(url: "postgres://[::1]:7000/db", environment: [:])
        #expect(v6.host == "::1" && v6.port == 7000)
    }

    @Test func passwordsComeFromTheFileOrPgpass() throws {
        try withTemporaryDirectoryBlocking { dir in
            let secret = dir.appendingPathComponent("password")
            try "s3cret:x\n".write(to: secret, atomically: true, encoding: .utf8)
            let fromFile = try PostgresSettings.resolve(
                url: "postgresql://u@h/d", environment: [:], passwordFile: secret.path)
            #expect(fromFile.password == "s3cret:x")
            // The URL's password and PGPASSWORD come first.
            #expect(
                try PostgresSettings.resolve(
                    url: "postgresql://u:url@h/d", environment: ["PGPASSWORD": "env"], passwordFile: secret.path
                ).password == "url")
            #expect(
                try PostgresSettings.resolve(url: "postgresql://u@h/d", environment: ["PGPASSWORD": "env"], passwordFile: secret.path)
                    .password == "env")
            let pgpass = dir.appendingPathComponent("pgpass")
            try """
                # comment
                other:5432:d:u:wrong
                h:5432:*:u:pa\\:ss
                *:*:*:*:fallback
                """.write(to: pgpass, atomically: true, encoding: .utf8)
            #expect(
                try PostgresSettings.resolve(url: "postgresql://u@h/d", environment: ["PGPASSFILE": pgpass.path]).password
                    == "pa:ss")
            #expect(
                try PostgresSettings.resolve(url: "postgresql://v@h2/d", environment: ["PGPASSFILE": pgpass.path]).password
                    == "fallback")
            #expect(throws: PostgresSettings.Invalid.self) {
                try PostgresSettings.resolve(url: "postgresql://u@h/d", environment: [:], passwordFile: "/nonexistent/x")
            }
        }
    }

    /// The liveness defaults, and libpq's keepalives and options parameters over them.
    @Test func keepalivesAndSessionParametersHaveDefaultsAndTakeLibpqParameters() throws {
        let plain = try PostgresSettings.resolve(url: "postgresql://h/d", environment: [:])
        #expect(plain.keepalives && plain.keepalivesIdle == 30 && plain.keepalivesInterval == 10 && plain.keepalivesCount == 3)
        #expect(plain.parameters == ["statement_timeout": "60s", "idle_in_transaction_session_timeout": "60s"])
        #expect(plain.replyTimeoutMilliseconds == 65_000)
        let startup = Dictionary(uniqueKeysWithValues: try plain.configuration().options.additionalStartupParameters)
        #expect(startup["statement_timeout"] == "60s")
        #expect(startup["tcp_keepalives_idle"] == "30")
        #expect(startup["application_name"] == "quakectl sync")

        let tuned = try PostgresSettings.resolve(
            url: "postgresql://h/d?keepalives_idle=5&keepalives_interval=2&keepalives_count=4&options=-c%20statement_timeout%3D1500ms%20--lock-timeout=3s%20-cwork_mem=8MB",
            environment: [:])
        #expect(tuned.keepalivesIdle == 5 && tuned.keepalivesInterval == 2 && tuned.keepalivesCount == 4)
        #expect(tuned.parameters["statement_timeout"] == "1500ms")
        #expect(tuned.parameters["lock_timeout"] == "3s")
        #expect(tuned.parameters["work_mem"] == "8MB")
        #expect(tuned.replyTimeoutMilliseconds == 6_500)

        let off = try PostgresSettings.resolve(
            url: "postgresql://h/d?keepalives=0", environment: ["PGOPTIONS": "-c statement_timeout=0"])
        #expect(!off.keepalives)
        #expect(off.replyTimeoutMilliseconds == 65_000)
        let offStartup = Dictionary(uniqueKeysWithValues: try off.configuration().options.additionalStartupParameters)
        #expect(offStartup["tcp_keepalives_idle"] == nil)
        #expect(offStartup["statement_timeout"] == "0")
        #expect(PostgresSettings.milliseconds("2min") == 120_000)
        #expect(PostgresSettings.milliseconds("soon") == nil)
    }

    @Test(arguments: [
        ("mysql://h/d", "is not a postgresql:// URL"),
        ("postgresql://h:99999/d", "is not a port number"),
        ("postgresql://h/d?sslmode=sometimes", "sslmode \"sometimes\" is not one of"),
        ("postgresql://h/d?tcp_user_timeout=5", "\"tcp_user_timeout\" is not one quakectl sync takes"),
        ("postgresql://h/d?options=-x", "give run-time parameters as -c name=value"),
        ("postgresql://h/d?options=-c%20statement_timeout", "is not name=value"),
        ("postgresql://h/d?options=-c%20statement_timeout%3Dsoon", "statement_timeout \"soon\" is not a duration"),
        ("postgresql://h/d?keepalives_idle=0", "keepalives_idle \"0\" is not a number of seconds"),
        ("postgresql://h/d?keepalives=yes", "keepalives \"yes\" is not 0 or 1"),
        ("postgresql://a,b/d", "several hosts are not supported"),
        ("postgresql://h/d?connect_timeout=soon", "connect_timeout"),
    ])
    func badSettingsAreNamed(url: String, message: String) {
        #expect {
            try PostgresSettings.resolve(url: url, environment: [:])
        } throws: { error in
            "\(error)".contains(message)
        }
    }

    /// Seeded: URLs spliced from pieces that matter to the parser (schemes, @, :, [, ], /, ?,
    /// &, =, %, bad escapes, non-ASCII) either resolve to settings a connection can use or fail
    /// with ``PostgresSettings/Invalid``; nothing else, and no crash.
    @Test func anyURLResolvesOrIsRefusedByName() {
        let seed = ProcessInfo.processInfo.environment["QUAKED_TEST_SEED"].flatMap(UInt64.init) ?? 2_026_112_6
        var random = SeededRandom(seed: seed)
        let pieces = [
            "postgresql://", "postgres://", "http://", "u", "user", ":", "@", "[", "]", "::1", "/", "?", "&", "=", "%",
            "%2F", "%zz", "%C3%A9", "é", "host", "5432", "99999", "-1", "db", "sslmode", "verify-full", "port",
            "password", "p@ss", ",", " ", "\u{0}", "host=/tmp", "connect_timeout", "x",
        ]
        for index in 0..<5000 {
            let url = (0..<Int.random(in: 1...10, using: &random)).map { _ in pieces.randomElement(using: &random)! }
                .joined()
            do {
                let settings = try PostgresSettings.resolve(url: url, environment: [:], userName: "u")
                #expect((1...65535).contains(settings.port), "case \(index): \(url.debugDescription)")
                #expect(!settings.user.isEmpty && !settings.database.isEmpty, "case \(index): \(url.debugDescription)")
            } catch {
                #expect(error is PostgresSettings.Invalid, "case \(index) (seed \(seed)): \(url.debugDescription): \(error)")
            }
        }
    }

    @Test func copyTextEscapesAndWritesTimesAsUTC() throws {
        var random = SystemRandomNumberGenerator()
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withFullDate, .withTime, .withColonSeparatorInTime, .withFractionalSeconds, .withDashSeparatorInDate]
        formatter.timeZone = TimeZone(identifier: "UTC")
        for _ in 0..<2000 {
            // 1900 to 2200, in ms.
            let ms = Int.random(in: -2_208_988_800_000...7_258_118_400_000, using: &random)
            let quake = IOQuaked.Quake(id: "x", time: ms)
            let line = String(decoding: PostgresSink.copyText([quake]), as: UTF8.self)
            let fields = line.dropLast().split(separator: "\t", omittingEmptySubsequences: false)
            #expect(fields.count == PostgresSink.columnNames.count)
            let expected = formatter.string(from: Date(timeIntervalSince1970: Double(ms) / 1000))
                .replacingOccurrences(of: "T", with: " ") + "+00"
            #expect(String(fields[3]) == expected, "ms \(ms)")
        }
        let odd = IOQuaked.Quake(id: "a\tb", mag: 1e-7, place: "line\nnext \\ end\r", time: 0, tz: -60)
        let line = String(decoding: PostgresSink.copyText([odd]), as: UTF8.self)
        #expect(line.hasPrefix("a\\tb\t1e-07\tline\\nnext \\\\ end\\r\t1970-01-01 00:00:00.000+00\t\\N\t-60\t"))
        #expect(line.hasSuffix("\n") && line.dropLast().contains("\n") == false)
    }
}

/// `withTemporaryDirectory` for synchronous bodies.
func withTemporaryDirectoryBlocking<T>(_ body: (URL) throws -> T) throws -> T {
    let url = try makeTemporaryDirectory()
    defer { try? FileManager.default.removeItem(at: url) }
    return try body(url)
}
