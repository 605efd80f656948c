import Foundation
import QuakeDaemon

/// `quaked --check-config`: the effective configuration, every key in ``DaemonConfiguration/Key``
/// order with its value in config-file syntax and where the value came from.
///
/// The text is itself a valid config file (the sources are `#` comments), so it can be pasted
/// back; `feed` has one line per feed.
enum CheckConfig {
    /// ```
    /// # configuration file: /etc/quaked/quaked.conf
    /// feed = all_month                          # default
    /// interval = 5m                             # /etc/quaked/quaked.conf:12
    /// ```
    static func text(_ resolved: ResolvedConfiguration) -> String {
        let entries = resolved.entries
        let settings = entries.map { "\($0.key) = \($0.value)" }
        // Sources line up, unless a long value (a feed URL) would push them far right.
        let width = min(settings.map(\.count).max() ?? 0, 40)
        var text = "# configuration file: \(resolved.file ?? "none")\n"
        for (setting, entry) in zip(settings, entries) {
            let padding = String(repeating: " ", count: max(width - setting.count, 0) + 2)
            text += "\(setting)\(padding)# \(entry.source)\n"
        }
        return text
    }

    /// `{"configFile":"/etc/quaked/quaked.conf","settings":[{"key":"feed","source":"default","value":"all_month"},...]}`:
    /// one object on one line; `configFile` is null when no file was read.
    static func json(_ resolved: ResolvedConfiguration) -> String {
        let object: [String: Any] = [
            "configFile": resolved.file.map { $0 as Any } ?? NSNull(),
            "settings": resolved.entries.map { ["key": $0.key, "value": $0.value, "source": $0.source] },
        ]
        // Cannot fail: strings, arrays and dictionaries only.
        let data = try! JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])
        return String(decoding: data, as: UTF8.self) + "\n"
    }
}
