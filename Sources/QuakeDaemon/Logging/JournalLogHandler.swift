import CSystemd
import Glibc
import Logging

/// A `LogHandler` that writes structured records to the systemd journal with `sd_journal_sendv`.
///
/// Each record carries `MESSAGE`, `PRIORITY`, `SYSLOG_IDENTIFIER`, `LOGGER` (the logger's label),
/// `CODE_FILE`, `CODE_LINE`, `CODE_FUNC` and one field per metadata key (see
/// ``journalFieldName(_:)``), so `journalctl -u quaked FEED_URL=...` works.
/// Only use it when journald is really attached (``LogDestination/detect(environment:)``):
/// `sd_journal_sendv` silently drops records when journald is absent.
public struct JournalLogHandler: LogHandler {
    public var logLevel: Logger.Level
    public var metadata: Logger.Metadata = [:]
    public var metadataProvider: Logger.MetadataProvider?
    public let label: String
    public let identifier: String

    /// - Parameters:
    ///   - label: The logger's label, sent as `LOGGER`.
    ///   - identifier: `SYSLOG_IDENTIFIER`, e.g. `"quaked"`.
    public init(
        label: String, identifier: String, level: Logger.Level = .info,
        metadataProvider: Logger.MetadataProvider? = nil
    ) {
        self.label = label
        self.identifier = identifier
        self.logLevel = level
        self.metadataProvider = metadataProvider
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        let merged = QuakedLogging.metadata(of: event, handler: metadata, provider: metadataProvider)
        let entries = Self.entries(
            message: event.message.description, level: event.level, identifier: identifier,
            label: label, metadata: merged, file: event.file, function: event.function, line: event.line)
        // Errors (journald gone, message too big) are ignored: logging must not fail the caller.
        _ = Self.withIOVecs(entries) { sd_journal_sendv($0.baseAddress, CInt($0.count)) }
    }

    // MARK: - Pure helpers (tested directly)

    /// Fields this handler sets itself; metadata keys mapping to one of them get a `META_`
    /// prefix so they cannot duplicate or spoof them.
    static let reservedFields: Set<String> = [
        "MESSAGE", "PRIORITY", "SYSLOG_IDENTIFIER", "LOGGER", "CODE_FILE", "CODE_LINE", "CODE_FUNC",
    ]

    /// The syslog priority journald expects for a swift-log level.
    public static func priority(for level: Logger.Level) -> Int {
        switch level {
        case .trace, .debug: 7
        case .info: 6
        case .notice: 5
        case .warning: 4
        case .error: 3
        case .critical: 2
        }
    }

    /// Maps a metadata key to a valid journal field name, or `nil` when nothing usable is left.
    ///
    /// Journald only accepts `[A-Z0-9_]`, at most 64 characters, not starting with `_`
    /// (trusted fields) or a digit, and silently drops other fields. So ASCII letters are
    /// upper-cased, every other character (each non-ASCII character counts once) becomes `_`,
    /// then leading `_` and digits are stripped: `"feed.url"` → `FEED_URL`, `"_x"` → `X`,
    /// `"a-b"` → `A_B`, `"ünï"` → `N_`, `"2x"` → `X`, `"€"` → `nil`.
    public static func journalFieldName(_ key: String) -> String? {
        var name = String(
            key.map { c -> Character in
                guard c.isASCII, let ascii = c.asciiValue else { return "_" }
                switch ascii {
                case UInt8(ascii: "a")...UInt8(ascii: "z"): return Character(Unicode.Scalar(ascii - 32))
                case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"): return c
                default: return "_"
                }
            })
        name = String(name.drop { $0 == "_" || $0.isNumber })
        guard !name.isEmpty else { return nil }
        return String(name.prefix(64))
    }

    /// The `FIELD=value` entries of one record, in a fixed order (metadata sorted by key).
    static func entries(
        message: String, level: Logger.Level, identifier: String, label: String,
        metadata: Logger.Metadata, file: String, function: String, line: UInt
    ) -> [String] {
        var result = [
            "MESSAGE=\(message)",
            "PRIORITY=\(priority(for: level))",
            "SYSLOG_IDENTIFIER=\(identifier)",
            "LOGGER=\(label)",
            "CODE_FILE=\(file)",
            "CODE_LINE=\(line)",
            "CODE_FUNC=\(function)",
        ]
        for (key, value) in metadata.sorted(by: { $0.key < $1.key }) {
            guard var field = journalFieldName(key) else { continue }
            if reservedFields.contains(field) { field = String("META_\(field)".prefix(64)) }
            result.append("\(field)=\(Self.string(value))")
        }
        return result
    }

    /// Strings unquoted; other values in swift-log's usual rendering.
    static func string(_ value: Logger.MetadataValue) -> String {
        if case .string(let s) = value { return s }
        return value.description
    }

    /// Lays `entries` out in one buffer and calls `body` with one `iovec` per entry.
    /// Values may contain newlines or any bytes: `sd_journal_sendv` sends explicit lengths.
    static func withIOVecs<R>(_ entries: [String], _ body: (UnsafeBufferPointer<iovec>) -> R) -> R {
        var bytes: [UInt8] = []
        var ranges: [Range<Int>] = []
        for entry in entries {
            let start = bytes.count
            bytes.append(contentsOf: entry.utf8)
            ranges.append(start..<bytes.count)
        }
        return bytes.withUnsafeBufferPointer { buffer in
            let vectors = ranges.map { range in
                iovec(
                    iov_base: UnsafeMutableRawPointer(mutating: buffer.baseAddress.map { $0 + range.lowerBound }),
                    iov_len: range.count)
            }
            return vectors.withUnsafeBufferPointer(body)
        }
    }
}
