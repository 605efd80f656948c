import Foundation
import Glibc
import QuakeConfigValues
import QuakeProtocol
import Varlink

/// Builds a ``DaemonConfiguration`` from its sources, highest first: command-line flags,
/// environment (`QUAKED_*`), the config file, built-in defaults.
///
/// Kept separate from the flags' parsing so that SIGHUP can re-run it with the same flags and a
/// fresh read of the file and environment.
public struct ConfigurationLoader: Sendable {
    /// The default config file, read only when it exists.
    public static let defaultFile = "/etc/quaked/quaked.conf"

    /// Settings given as flags, in the order given.
    public var flags: [(key: DaemonConfiguration.Key, value: String, flag: String)]
    /// `--config PATH`: a file that must exist.
    public var configFile: String?
    public var environment: [String: String]
    public var defaults: DefaultPaths

    public init(
        flags: [(key: DaemonConfiguration.Key, value: String, flag: String)] = [], configFile: String? = nil,
        environment: [String: String] = ProcessInfo.processInfo.environment, defaults: DefaultPaths? = nil
    ) {
        self.flags = flags
        self.configFile = configFile
        self.environment = environment
        self.defaults = defaults ?? DefaultPaths(environment: environment)
    }

    /// The file actually read: `--config`, else `$QUAKED_CONFIG`, else the default when it exists.
    public var effectiveFile: String? {
        if let configFile { return configFile }
        if let fromEnvironment = environment["QUAKED_CONFIG"], !fromEnvironment.isEmpty { return fromEnvironment }
        return FileManager.default.fileExists(atPath: Self.defaultFile) ? Self.defaultFile : nil
    }

    public func load() throws -> DaemonConfiguration {
        try resolve().configuration
    }

    /// Loads the configuration and remembers where each value came from.
    public func resolve() throws -> ResolvedConfiguration {
        var resolved = ResolvedConfiguration(defaults: defaults, file: effectiveFile)
        if let file = resolved.file {
            try applyFile(file, to: &resolved)
        }
        for key in DaemonConfiguration.Key.allCases {
            if let value = environment[key.environmentName] {
                try resolved.apply(key, value, source: key.environmentName)
            }
        }
        // `--feed`, `--source` and `--prefer` add to the other flags of their key.
        var repeatedFlags: Set<DaemonConfiguration.Key> = []
        for (key, value, flag) in flags {
            try resolved.apply(key, value, source: flag, replaceFeeds: !repeatedFlags.contains(key))
            if key.isRepeatable { repeatedFlags.insert(key) }
        }
        // The proxy comes from the environment only (curl's variables, not QUAKED_ ones).
        resolved.configuration.proxy = try ProxySettings(environment: environment)
        do {
            try resolved.configuration.validate()
        } catch var error as ConfigurationError {
            // Name the source of the value found wrong, when one set it.
            if let key = DaemonConfiguration.Key(rawValue: error.key), !resolved.isDefault(key) {
                error.source = resolved.source(of: key)
            }
            throw error
        }
        return resolved
    }

    /// The file's text, read with plain `read(2)`: Foundation's readers refuse `/dev/null` (an
    /// empty configuration, as `--config /dev/null` means) and report errors vaguely.
    private static func read(_ path: String) throws -> String {
        let bytes: [UInt8]
        do {
            bytes = try ConfigFile.readBytes(path)
        } catch {
            throw ConfigurationError(key: "config", source: path, problem: "cannot read the file: \(error.reason)")
        }
        guard let text = String(validating: bytes, as: UTF8.self) else {
            throw ConfigurationError(key: "config", source: path, problem: "the file is not UTF-8 text")
        }
        return text
    }

    /// `key = value` lines; `#` starts a comment; blank lines are ignored; `feed`, `source` and
    /// `prefer` may repeat.
    private func applyFile(_ path: String, to configuration: inout ResolvedConfiguration) throws {
        let text = try Self.read(path)
        var repeated: Set<DaemonConfiguration.Key> = []
        for (number, rawLine) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let line = rawLine.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            if trimmed.isEmpty { continue }
            let source = "\(path):\(number + 1)"
            guard let equals = trimmed.firstIndex(of: "=") else {
                throw ConfigurationError(key: trimmed, source: source, problem: "expected 'key = value'")
            }
            let name = trimmed[..<equals].trimmingCharacters(in: .whitespaces)
            let value = trimmed[trimmed.index(after: equals)...].trimmingCharacters(in: .whitespaces)
            guard let key = DaemonConfiguration.Key(rawValue: name) else {
                let known = DaemonConfiguration.Key.allCases.map(\.rawValue).joined(separator: ", ")
                throw ConfigurationError(key: name, source: source, problem: "unknown key (known keys: \(known))")
            }
            try configuration.apply(key, value, source: source, replaceFeeds: !repeated.contains(key))
            if key.isRepeatable { repeated.insert(key) }
        }
    }
}

/// A loaded configuration and where each of its values came from: what `quaked --check-config`
/// prints, and what start-up errors about a value (the socket's directory) name.
public struct ResolvedConfiguration: Sendable {
    public fileprivate(set) var configuration: DaemonConfiguration
    /// The config file read, if any.
    public let file: String?
    public let defaults: DefaultPaths
    /// For each key a source set, the source of each entry of ``DaemonConfiguration/text(for:)``
    /// (`--interval`, `QUAKED_INTERVAL`, `/etc/quaked/quaked.conf:12`); keys not here have
    /// their defaults.
    public private(set) var sources: [DaemonConfiguration.Key: [String]] = [:]

    public init(defaults: DefaultPaths, file: String? = nil) {
        self.configuration = DaemonConfiguration(defaults: defaults)
        self.file = file
        self.defaults = defaults
    }

    /// ``DaemonConfiguration/apply(_:_:source:replaceFeeds:)``, remembering the source.
    public mutating func apply(
        _ key: DaemonConfiguration.Key, _ text: String, source: String, replaceFeeds: Bool = true
    ) throws {
        let kept = replaceFeeds ? [] : sources[key, default: []]
        try configuration.apply(key, text, source: source, replaceFeeds: replaceFeeds)
        let added = max(configuration.text(for: key).count - kept.count, 1)
        sources[key] = kept + Array(repeating: source, count: added)
    }

    /// Whether `key` has its built-in default.
    public func isDefault(_ key: DaemonConfiguration.Key) -> Bool { sources[key] == nil }

    /// Where `key`'s value came from: its (last) source, or `default`.
    public func source(of key: DaemonConfiguration.Key) -> String {
        sources[key]?.last ?? "default"
    }

    /// One line of the effective configuration: a key, one value, where it came from.
    public struct Entry: Sendable, Equatable {
        public var key: String
        public var value: String
        /// `default` (with the rule for the state directory and socket, as in
        /// `default ($XDG_RUNTIME_DIR)`), a flag, an environment variable or `file:line`.
        public var source: String
    }

    /// Every key in ``DaemonConfiguration/Key/allCases`` order, one entry per value.
    public var entries: [Entry] {
        DaemonConfiguration.Key.allCases.flatMap { key -> [Entry] in
            let values = configuration.text(for: key)
            let keySources = sources[key] ?? Array(repeating: defaultDescription(key), count: values.count)
            return values.enumerated().map { index, value in
                Entry(key: key.rawValue, value: value, source: keySources[min(index, keySources.count - 1)])
            }
        }
    }

    private func defaultDescription(_ key: DaemonConfiguration.Key) -> String {
        let rule: String
        switch key {
        case .stateDirectory:
            switch defaults.stateDirectoryBase {
            case .serviceManager: rule = "$STATE_DIRECTORY"
            case .root: rule = "root"
            case .user: rule = "$XDG_STATE_HOME"
            case .fallback: rule = "no $XDG_STATE_HOME"
            }
        case .socket:
            switch defaults.socketBase {
            case .serviceManager: rule = "$RUNTIME_DIRECTORY"
            case .root: rule = "root"
            case .user: rule = "$XDG_RUNTIME_DIR"
            case .fallback: rule = "no $XDG_RUNTIME_DIR"
            }
        default:
            return "default"
        }
        return "default (\(rule))"
    }
}
