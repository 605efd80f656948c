import QuakeClient
import QuakeProtocol
import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// How quakectl prints: JSON or text, colours or not, relative or absolute times, in which time
/// zone and unit (text only: JSON is always UTC and kilometres).
public struct OutputStyle: Sendable {
    public var json: Bool
    /// ANSI colours: only on a terminal, never with `NO_COLOR` set (https://no-color.org) or
    /// `TERM=dumb`.
    public var colors: Bool
    public var absoluteTimes: Bool
    /// Progress lines on stderr: only when stderr is a terminal and the output is not JSON.
    public var progress: Bool
    /// The zone of absolute times in text (`--tz`).
    public var timeZone: TimeZone
    /// The unit of depths and distances in text (`--units`).
    public var units: DistanceUnit

    public init(
        json: Bool = false, colors: Bool = false, absoluteTimes: Bool = false, progress: Bool = false,
        timeZone: TimeZone = .current, units: DistanceUnit = .km
    ) {
        self.json = json
        self.colors = colors
        self.absoluteTimes = absoluteTimes
        self.progress = progress
        self.timeZone = timeZone
        self.units = units
    }

    public static func detect(
        json: Bool, absoluteTimes: Bool, environment: [String: String] = ProcessInfo.processInfo.environment
    ) -> OutputStyle {
        let noColor = !(environment["NO_COLOR"] ?? "").isEmpty || environment["TERM"] == "dumb"
        return OutputStyle(
            json: json, colors: !json && !noColor && isatty(STDOUT_FILENO) == 1, absoluteTimes: absoluteTimes,
            progress: !json && isatty(STDERR_FILENO) == 1)
    }

    /// `text` in an ANSI SGR colour, when colours are on.
    public func paint(_ text: String, _ color: ANSIColor?) -> String {
        guard colors, let color else { return text }
        return "\u{1B}[\(color.rawValue)m\(text)\u{1B}[0m"
    }

    /// ``paint(_:_:)``'s text appended to `text`, without a string of its own when there are no
    /// colours.
    func appendPainted(_ painted: String, _ color: ANSIColor?, to text: inout some TextOutput) {
        if colors, color != nil { text += paint(painted, color) } else { text += painted }
    }

    public func dim(_ text: String) -> String { paint(text, .gray) }
    public func bold(_ text: String) -> String { paint(text, .bold) }
}

/// The SGR codes quakectl uses.
public enum ANSIColor: String, Sendable {
    case green = "32"
    case yellow = "33"
    case orange = "38;5;208"
    case red = "31"
    case purple = "35"
    case gray = "90"
    case bold = "1"
}

/// Writes to stdout and stderr with `write(2)`: each call reaches the file before it returns, so a
/// line printed after a commit is out even if the process is killed a moment later.
public enum Console {
    public static func out(_ text: String) { write(STDOUT_FILENO, text) }
    static func out(_ text: OutputBytes) { text.bytes.withUnsafeBytes { writeAll(STDOUT_FILENO, $0) } }
    public static func err(_ text: String) { write(STDERR_FILENO, text) }

    /// A line on stdout.
    public static func line(_ text: String) { out(text + "\n") }

    static func write(_ fd: Int32, _ text: String) {
        // The string's own UTF-8, not a copy (a catch-up writes a transaction's lines at once).
        var text = text
        text.withUTF8 { writeAll(fd, UnsafeRawBufferPointer($0)) }
    }

    static func writeAll(_ fd: Int32, _ bytes: UnsafeRawBufferPointer) {
        var offset = 0
        while offset < bytes.count {
            let n = systemWrite(fd, bytes.baseAddress! + offset, bytes.count - offset)
            if n < 0 {
                if errno == EINTR { continue }
                // The reader of stdout went away (`quakectl watch | head`): end as SIGPIPE
                // would, quietly. (SIGPIPE itself is ignored for the sockets' sake.)
                if errno == EPIPE && fd == STDOUT_FILENO { exit(128 + SIGPIPE) }
                return
            }
            offset += n
        }
    }
}

/// A transient status line on stderr ("Checking for earthquakes…"), shown only on a terminal.
public struct ProgressLine: Sendable {
    public let enabled: Bool

    public init(enabled: Bool) { self.enabled = enabled }

    public func show(_ text: String) {
        guard enabled else { return }
        Console.err("\r\u{1B}[2K" + text)
    }

    public func clear() {
        guard enabled else { return }
        Console.err("\r\u{1B}[2K")
    }
}

#if canImport(Glibc)
    private let systemWrite = Glibc.write
#elseif canImport(Darwin)
    private let systemWrite = Darwin.write
#endif
