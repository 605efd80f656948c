import Foundation
import Glibc
import Logging
import QuakeModel

/// A `LogHandler` writing one plain line per record:
/// `2025-01-02T03:04:05.678Z info quaked.feed: pulled feed count=12 feed="all day"`.
///
/// Used when stderr is not the journal (a terminal, a file, a container). Each line goes out
/// in a single `write(2)` so lines from concurrent tasks never interleave.
public struct StderrLogHandler: LogHandler {
    /// Receives each finished line, including its trailing newline.
    public typealias Output = @Sendable (String) -> Void

    public var logLevel: Logger.Level
    public var metadata: Logger.Metadata = [:]
    public var metadataProvider: Logger.MetadataProvider?
    public let label: String
    private let output: Output

    /// - Parameter output: Where lines go; defaults to file descriptor 2. Tests pass a closure.
    public init(
        label: String, level: Logger.Level = .info, metadataProvider: Logger.MetadataProvider? = nil,
        output: @escaping Output = StderrLogHandler.writeToStandardError
    ) {
        self.label = label
        self.logLevel = level
        self.metadataProvider = metadataProvider
        self.output = output
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        let merged = QuakedLogging.metadata(of: event, handler: metadata, provider: metadataProvider)
        output(
            Self.line(
                date: Date(), level: event.level, label: label, message: event.message.description, metadata: merged))
    }

    /// Writes `line` to fd 2 (see ``write(_:to:)``).
    public static func writeToStandardError(_ line: String) {
        write(line, to: 2)
    }

    /// Writes `line` to `fd` with as few `write(2)` calls as the kernel allows: one, unless
    /// interrupted or the pipe is full.
    static func write(_ line: String, to fd: CInt) {
        let bytes = Array(line.utf8)
        bytes.withUnsafeBytes { buffer in
            var offset = 0
            while offset < buffer.count {
                let written = Glibc.write(fd, buffer.baseAddress! + offset, buffer.count - offset)
                if written < 0 {
                    if errno == EINTR { continue }
                    return  // stderr is gone: nowhere left to report it
                }
                offset += written
            }
        }
    }

    // MARK: - Pure helpers (tested directly)

    /// One formatted line ending in `\n`; newlines inside the message are escaped so one
    /// record is always one line. Metadata is sorted by key.
    static func line(date: Date, level: Logger.Level, label: String, message: String, metadata: Logger.Metadata)
        -> String
    {
        var line = "\(timestamp(date)) \(level.rawValue) \(label): \(escapeNewlines(message))"
        for (key, value) in metadata.sorted(by: { $0.key < $1.key }) {
            line += " \(key)=\(quoted(JournalLogHandler.string(value)))"
        }
        return line + "\n"
    }

    /// ISO 8601 in UTC with milliseconds, e.g. `2025-01-02T03:04:05.678Z`.
    static func timestamp(_ date: Date) -> String {
        QuakeTime.iso8601(QuakeTime.milliseconds(date, rounding: .down))
    }

    /// Quotes values that would be ambiguous unquoted (empty, spaces, quotes, `=`, newlines).
    static func quoted(_ value: String) -> String {
        let needsQuotes = value.isEmpty || value.contains { $0 == " " || $0 == "\"" || $0 == "=" || $0.isNewline }
        guard needsQuotes else { return value }
        let escaped = escapeNewlines(
            value.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\""))
        return "\"\(escaped)\""
    }

    private static func escapeNewlines(_ text: String) -> String {
        text.replacingOccurrences(of: "\r", with: "\\r").replacingOccurrences(of: "\n", with: "\\n")
    }
}
