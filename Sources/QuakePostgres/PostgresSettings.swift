import Foundation
import NIOSSL
import PostgresNIO

/// Where and how `quakectl sync` connects, read as libpq reads it: a `postgresql://` URL, then the
/// `PG*` environment variables for what the URL leaves out, then libpq's defaults.
///
/// - URL: `postgresql://[USER[:PASSWORD]@][HOST][:PORT][/DB][?param=value&...]` (or
///   `postgres://`); `host`, `port`, `user`, `password`, `dbname`, `sslmode`, `sslrootcert`,
///   `connect_timeout`, `application_name`, `options` (`-c name=value` ...), `keepalives`,
///   `keepalives_idle`, `keepalives_interval` and `keepalives_count` may also come as
///   parameters. A host that starts
///   with `/` (percent-encoded in the authority, or `?host=/run/postgresql`) is the directory of
///   the server's Unix socket.
/// - Environment: `PGHOST`, `PGPORT`, `PGUSER`, `PGPASSWORD`, `PGDATABASE`, `PGSSLMODE`,
///   `PGSSLROOTCERT`, `PGCONNECT_TIMEOUT`, `PGAPPNAME`, `PGOPTIONS`, `PGPASSFILE`.
/// - Defaults: the socket in `/var/run/postgresql` (Debian's), port 5432, the user this process
///   runs as, a database named as the user, `sslmode=prefer` (TLS when the server offers it; never
///   over a Unix socket), `connect_timeout=10`; TCP keepalive on (probes after 30 s idle, every
///   10 s, 3 unanswered close the connection), and the session parameters
///   `statement_timeout=60s` and `idle_in_transaction_session_timeout=60s` (``defaultParameters``;
///   `options` overrides them). A request with no reply within ``replyTimeoutMilliseconds``
///   (`statement_timeout` + 5 s) is abandoned: the connection is closed, its transaction rolled back.
/// - The password, when neither the URL nor `PGPASSWORD` gives one: `--password-file` (the
///   password alone, as a systemd credential holds it), else libpq's password file (`PGPASSFILE`,
///   else `~/.pgpass`: lines of `host:port:database:user:password`).
public struct PostgresSettings: Sendable, Equatable {
    public enum SSLMode: String, Sendable, CaseIterable {
        case disable, allow, prefer, require
        case verifyCA = "verify-ca"
        case verifyFull = "verify-full"
    }

    public var host: String
    public var port: Int
    public var user: String
    public var password: String?
    public var database: String
    public var sslMode: SSLMode
    public var sslRootCert: String?
    public var connectTimeout: Int
    public var applicationName: String
    /// TCP keepalive on the connection's socket, as libpq's `keepalives`, `keepalives_idle`,
    /// `keepalives_interval` and `keepalives_count` (seconds, seconds, probes). The server is
    /// asked for the same on its side (`tcp_keepalives_*`), so that it drops the session, and
    /// the sink's lock, of a client it can no longer reach.
    public var keepalives = true
    public var keepalivesIdle = 30
    public var keepalivesInterval = 10
    public var keepalivesCount = 3
    /// Run-time parameters set at connection start: ``defaultParameters``, then libpq's
    /// `options` (`-c name=value`).
    public var parameters: [String: String] = PostgresSettings.defaultParameters

    /// A statement runs at most a minute, and a transaction left open (by a client that went
    /// away) is ended after a minute: neither holds the sink's row lock for longer.
    public static let defaultParameters = ["statement_timeout": "60s", "idle_in_transaction_session_timeout": "60s"]

    /// How long a request waits for PostgreSQL's reply before the connection is closed (and its
    /// transaction rolled back): `statement_timeout` and 5 s, so that a server that is there
    /// cancels the statement itself first; 65 s when `statement_timeout` is 0 (no limit).
    public var replyTimeoutMilliseconds: Int {
        let statement = parameters["statement_timeout"].flatMap(Self.milliseconds) ?? 0
        return (statement > 0 ? statement : 60_000) + 5_000
    }

    /// A setting of milliseconds as PostgreSQL reads it: a number, then `us`, `ms` (the default
    /// unit), `s`, `min`, `h` or `d`.
    public static func milliseconds(_ text: String) -> Int? {
        let text = text.trimmingCharacters(in: .whitespaces)
        let digits = text.prefix { $0.isNumber }
        guard let number = Int(digits), digits.count < 12 else { return nil }
        switch text.dropFirst(digits.count).trimmingCharacters(in: .whitespaces) {
        case "": return number
        case "us": return number / 1000
        case "ms": return number
        case "s": return number * 1000
        case "min": return number * 60_000
        case "h": return number * 3_600_000
        case "d": return number * 86_400_000
        default: return nil
        }
    }

    /// Whether `host` is an IP address (not a name a TLS certificate is checked against).
    var hostIsAddress: Bool {
        var v4 = in_addr()
        var v6 = in6_addr()
        return inet_pton(AF_INET, host, &v4) == 1 || inet_pton(AF_INET6, host, &v6) == 1
    }

    /// The server's Unix socket, when `host` is a directory.
    public var unixSocketPath: String? {
        host.hasPrefix("/") ? (host as NSString).appendingPathComponent(".s.PGSQL.\(port)") : nil
    }

    /// The URL without its password, for messages and logs.
    public var redacted: String {
        let where_ = unixSocketPath != nil ? "\(user)@/\(database)?host=\(host)&port=\(port)" : "\(user)@\(host):\(port)/\(database)"
        return "postgresql://\(where_)"
    }

    /// Why settings cannot be read: names the setting and what it takes.
    public struct Invalid: Error, CustomStringConvertible, Equatable {
        public var description: String
        init(_ description: String) { self.description = description }
    }

    /// Reads `url` (nil: the environment alone), then `environment`, then the defaults.
    /// `passwordFile`: `--password-file`, the password alone, which wins over `PGPASSFILE` and
    /// `~/.pgpass` (but not over a password in the URL or `PGPASSWORD`).
    public static func resolve(
        url: String?, environment: [String: String] = ProcessInfo.processInfo.environment,
        passwordFile: String? = nil, userName: String = PostgresSettings.processUserName()
    ) throws -> PostgresSettings {
        var values: [String: String] = [:]
        if let url { values = try parse(url: url) }
        let fromEnvironment = [
            "host": "PGHOST", "port": "PGPORT", "user": "PGUSER", "password": "PGPASSWORD", "dbname": "PGDATABASE",
            "sslmode": "PGSSLMODE", "sslrootcert": "PGSSLROOTCERT", "connect_timeout": "PGCONNECT_TIMEOUT",
            "application_name": "PGAPPNAME", "options": "PGOPTIONS",
        ]
        for (key, variable) in fromEnvironment where values[key] == nil {
            if let value = environment[variable], !value.isEmpty { values[key] = value }
        }
        let host = values["host"] ?? "/var/run/postgresql"
        if host.contains(",") {
            throw Invalid("host \(host.debugDescription): several hosts are not supported; give one")
        }
        let portText = values["port"] ?? "5432"
        guard let port = Int(portText), (1...65535).contains(port) else {
            throw Invalid("port \(portText.debugDescription) is not a port number (1 to 65535)")
        }
        let user = values["user"] ?? userName
        let database = values["dbname"] ?? user
        let modeText = values["sslmode"] ?? "prefer"
        guard let sslMode = SSLMode(rawValue: modeText) else {
            throw Invalid(
                "sslmode \(modeText.debugDescription) is not one of \(SSLMode.allCases.map(\.rawValue).joined(separator: ", "))")
        }
        let timeoutText = values["connect_timeout"] ?? "10"
        guard let timeout = Int(timeoutText), timeout >= 0 else {
            throw Invalid("connect_timeout \(timeoutText.debugDescription) is not a number of seconds")
        }
        if user.isEmpty { throw Invalid("the user name is empty") }
        if database.isEmpty { throw Invalid("the database name is empty") }
        var settings = PostgresSettings(
            host: host, port: port, user: user, password: values["password"], database: database, sslMode: sslMode,
            sslRootCert: values["sslrootcert"], connectTimeout: timeout == 0 ? 10 : timeout,
            applicationName: values["application_name"] ?? "quakectl sync")
        for (key, value) in try options(values["options"] ?? "") { settings.parameters[key] = value }
        if let text = settings.parameters["statement_timeout"], milliseconds(text) == nil {
            throw Invalid("statement_timeout \(text.debugDescription) is not a duration (a number, then ms, s, min or h)")
        }
        func seconds(_ key: String, _ value: inout Int) throws {
            guard let text = values[key] else { return }
            guard let number = Int(text), number > 0 else {
                throw Invalid("\(key) \(text.debugDescription) is not a number of seconds (1 or more)")
            }
            value = number
        }
        if let text = values["keepalives"] {
            guard text == "0" || text == "1" else { throw Invalid("keepalives \(text.debugDescription) is not 0 or 1") }
            settings.keepalives = text == "1"
        }
        try seconds("keepalives_idle", &settings.keepalivesIdle)
        try seconds("keepalives_interval", &settings.keepalivesInterval)
        try seconds("keepalives_count", &settings.keepalivesCount)
        if settings.password == nil, let passwordFile {
            // The password alone (a systemd credential): one line, its newline dropped.
            guard let data = FileManager.default.contents(atPath: passwordFile) else {
                throw Invalid("cannot read the password file \(passwordFile)")
            }
            let password = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .newlines)
            settings.password = password.isEmpty ? nil : password
        } else if settings.password == nil {
            let file =
                environment["PGPASSFILE"].flatMap { $0.isEmpty ? nil : $0 }
                ?? environment["HOME"].map { ($0 as NSString).appendingPathComponent(".pgpass") }
            if let file {
                settings.password = PasswordFile.lookup(path: file, host: host, port: port, database: database, user: user)
            }
        }
        return settings
    }

    /// The URL's parts, by libpq's parameter names (percent-decoded).
    static func parse(url: String) throws -> [String: String] {
        let schemes = ["postgresql://", "postgres://"]
        guard let scheme = schemes.first(where: { url.hasPrefix($0) }) else {
            throw Invalid("\(Self.redact(url).debugDescription) is not a postgresql:// URL")
        }
        var rest = Substring(url.dropFirst(scheme.count))
        var query: Substring = ""
        if let mark = rest.firstIndex(of: "?") {
            query = rest[rest.index(after: mark)...]
            rest = rest[..<mark]
        }
        var path: Substring = ""
        if let slash = rest.firstIndex(of: "/") {
            path = rest[rest.index(after: slash)...]
            rest = rest[..<slash]
        }
        var values: [String: String] = [:]
        func decoded(_ text: Substring, _ what: String) throws -> String {
            guard let value = String(text).removingPercentEncoding else {
                throw Invalid("the URL's \(what) has a bad percent-encoding")
            }
            return value
        }
        if let at = rest.lastIndex(of: "@") {
            let credentials = rest[..<at]
            rest = rest[rest.index(after: at)...]
            if let colon = credentials.firstIndex(of: ":") {
                values["user"] = try decoded(credentials[..<colon], "user")
                values["password"] = try decoded(credentials[credentials.index(after: colon)...], "password")
            } else if !credentials.isEmpty {
                values["user"] = try decoded(credentials, "user")
            }
        }
        if rest.hasPrefix("[") {
            guard let close = rest.firstIndex(of: "]") else { throw Invalid("the URL's IPv6 host has no closing ]") }
            values["host"] = String(rest[rest.index(after: rest.startIndex)..<close])
            let after = rest[rest.index(after: close)...]
            if after.hasPrefix(":") { values["port"] = String(after.dropFirst()) } else if !after.isEmpty {
                throw Invalid("the URL has \(String(after).debugDescription) after its IPv6 host")
            }
        } else if !rest.isEmpty {
            if let colon = rest.lastIndex(of: ":") {
                values["port"] = String(rest[rest.index(after: colon)...])
                rest = rest[..<colon]
            }
            if !rest.isEmpty { values["host"] = try decoded(rest, "host") }
        }
        if !path.isEmpty { values["dbname"] = try decoded(path, "database name") }
        let known: Set = [
            "host", "port", "user", "password", "dbname", "sslmode", "sslrootcert", "connect_timeout", "application_name",
            "options", "keepalives", "keepalives_idle", "keepalives_interval", "keepalives_count",
        ]
        for pair in query.split(separator: "&") where !pair.isEmpty {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let key = try decoded(parts[0], "parameter name")
            guard known.contains(key) else {
                throw Invalid(
                    "the URL parameter \(key.debugDescription) is not one quakectl sync takes (\(known.sorted().joined(separator: ", ")))"
                )
            }
            values[key] = parts.count > 1 ? try decoded(parts[1], "parameter \(key)") : ""
        }
        return values
    }

    /// libpq's `options`: command-line options for the server, of which quakectl takes run-time
    /// parameters, `-c name=value` (or `-cname=value`, `--name=value`); a backslash escapes the
    /// next character (a space in a value).
    static func options(_ text: String) throws -> [(String, String)] {
        var words: [String] = []
        var word = ""
        var escaped = false
        var inWord = false
        for character in text {
            if escaped {
                word.append(character)
                escaped = false
            } else if character == "\\" {
                escaped = true
                inWord = true
            } else if character.isWhitespace {
                if inWord { words.append(word) }
                word = ""
                inWord = false
            } else {
                word.append(character)
                inWord = true
            }
        }
        if inWord { words.append(word) }
        var settings: [(String, String)] = []
        var index = 0
        while index < words.count {
            var setting: String
            if words[index] == "-c", index + 1 < words.count {
                setting = words[index + 1]
                index += 2
            } else if words[index].hasPrefix("-c"), words[index].count > 2 {
                setting = String(words[index].dropFirst(2))
                index += 1
            } else if words[index].hasPrefix("--") {
                setting = String(words[index].dropFirst(2))
                index += 1
            } else {
                throw Invalid(
                    "options \(text.debugDescription): give run-time parameters as -c name=value (\(words[index].debugDescription) is not one)")
            }
            guard let equals = setting.firstIndex(of: "="), equals != setting.startIndex else {
                throw Invalid("options \(text.debugDescription): \(setting.debugDescription) is not name=value")
            }
            // --name=value: libpq and the server read - in a name as _.
            let name = setting[..<equals].replacingOccurrences(of: "-", with: "_")
            setting = String(setting[setting.index(after: equals)...])
            settings.append((name, setting))
        }
        return settings
    }

    /// `url` with any password replaced by `***`.
    public static func redact(_ url: String) -> String {
        guard let scheme = url.range(of: "://") else { return url }
        let authorityEnd = url[scheme.upperBound...].firstIndex { $0 == "/" || $0 == "?" } ?? url.endIndex
        let authority = url[scheme.upperBound..<authorityEnd]
        guard let at = authority.lastIndex(of: "@"), let colon = authority[..<at].firstIndex(of: ":") else { return url }
        return String(url[..<authority.index(after: colon)]) + "***" + String(url[at...])
    }

    public static func processUserName() -> String {
        if let entry = getpwuid(geteuid()), let name = entry.pointee.pw_name { return String(cString: name) }
        return ProcessInfo.processInfo.environment["USER"] ?? "postgres"
    }

    /// postgres-nio's configuration for these settings.
    public func configuration() throws -> PostgresConnection.Configuration {
        var configuration: PostgresConnection.Configuration
        if let socket = unixSocketPath {
            if sslMode == .require || sslMode == .verifyCA || sslMode == .verifyFull {
                throw Invalid("sslmode=\(sslMode.rawValue) needs a TCP host: a Unix socket (\(host)) has no TLS")
            }
            configuration = .init(unixSocketPath: socket, username: user, password: password, database: database)
        } else {
            configuration = .init(
                host: host, port: port, username: user, password: password, database: database, tls: try tls())
        }
        configuration.options.connectTimeout = .seconds(Int64(connectTimeout))
        // Run-time parameters go in the startup message (as libpq sends options), the server's
        // keepalives first, so that options may override them.
        var parameters: [String: String] = [:]
        if keepalives {
            parameters["tcp_keepalives_idle"] = String(keepalivesIdle)
            parameters["tcp_keepalives_interval"] = String(keepalivesInterval)
            parameters["tcp_keepalives_count"] = String(keepalivesCount)
        }
        parameters.merge(self.parameters) { $1 }
        configuration.options.additionalStartupParameters =
            [("application_name", applicationName)] + parameters.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
        return configuration
    }

    private func tls() throws -> PostgresConnection.Configuration.TLS {
        var tls = TLSConfiguration.makeClientConfiguration()
        switch sslMode {
        case .disable: return .disable
        case .allow, .prefer, .require:
            // libpq: encryption without checking the server's certificate.
            tls.certificateVerification = .none
        case .verifyCA: tls.certificateVerification = .noHostnameVerification
        case .verifyFull: tls.certificateVerification = .fullVerification
        }
        if let root = sslRootCert, root != "system", sslMode == .verifyCA || sslMode == .verifyFull {
            guard FileManager.default.isReadableFile(atPath: root) else {
                throw Invalid("sslrootcert \(root): no such readable file")
            }
            tls.trustRoots = .file(root)
        }
        let context: NIOSSLContext
        do {
            context = try NIOSSLContext(configuration: tls)
        } catch {
            throw Invalid("cannot set up TLS (\(error))")
        }
        return sslMode == .allow || sslMode == .prefer ? .prefer(context) : .require(context)
    }
}

/// libpq's password file: lines of `host:port:database:user:password`, `*` matching anything,
/// `\:` and `\\` escaped, `#` comments.
enum PasswordFile {
    static func lookup(path: String, host: String, port: Int, database: String, user: String) -> String? {
        guard let data = FileManager.default.contents(atPath: path) else { return nil }
        let text = String(decoding: data, as: UTF8.self)
        // libpq treats a socket directory as "localhost" in the file, as well as its path.
        let hosts: Set = host.hasPrefix("/") ? [host, "localhost"] : [host]
        for line in text.split(whereSeparator: \.isNewline) where !line.hasPrefix("#") {
            let fields = split(line)
            guard fields.count == 5 else { continue }
            func matches(_ field: String, _ values: Set<String>) -> Bool { field == "*" || values.contains(field) }
            if matches(fields[0], hosts), matches(fields[1], [String(port)]), matches(fields[2], [database]),
                matches(fields[3], [user])
            {
                return fields[4]
            }
        }
        return nil
    }

    static func split(_ line: Substring) -> [String] {
        var fields: [String] = []
        var current = ""
        var escaped = false
        for character in line {
            if escaped {
                current.append(character)
                escaped = false
            } else if character == "\\" {
                escaped = true
            } else if character == ":" && fields.count < 4 {
                fields.append(current)
                current = ""
            } else {
                current.append(character)
            }
        }
        fields.append(current)
        return fields
    }
}
