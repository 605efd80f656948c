import Foundation
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
        var configuration = DaemonConfiguration(defaults: defaults)
        if let file = effectiveFile {
            try applyFile(file, to: &configuration)
        }
        for key in DaemonConfiguration.Key.allCases {
            if let value = environment[key.environmentName] {
                try configuration.apply(key, value, source: key.environmentName)
            }
        }
        var sawFeedFlag = false
        for (key, value, flag) in flags {
            try configuration.apply(key, value, source: flag, replaceFeeds: key != .feed || !sawFeedFlag)
            if key == .feed { sawFeedFlag = true }
        }
        try configuration.validate()
        return configuration
    }

    /// `key = value` lines; `#` starts a comment; blank lines are ignored; `feed` may repeat.
    private func applyFile(_ path: String, to configuration: inout DaemonConfiguration) throws {
        let text: String
        do {
            text = try String(contentsOfFile: path, encoding: .utf8)
        } catch {
            throw ConfigurationError(
                key: "config", source: path, problem: "cannot read the file: \(error.localizedDescription)")
        }
        var sawFeed = false
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
            try configuration.apply(key, value, source: source, replaceFeeds: key != .feed || !sawFeed)
            if key == .feed { sawFeed = true }
        }
    }
}
