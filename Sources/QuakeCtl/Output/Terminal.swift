import Foundation
import NIOConcurrencyHelpers

#if canImport(Glibc)
    import Glibc
#endif

/// A full-screen session on the terminal: the alternate screen, no cursor, keys read one at a
/// time without echo (Ctrl-C still sends SIGINT). ``restore()`` puts everything back; it runs
/// once, whatever ends the session.
final class TerminalSession: Sendable {
    private let saved: termios?
    private let restored = NIOLockedValueBox(false)

    /// The terminal's size in cells, nil when stdout is not a terminal.
    static func size() -> (columns: Int, rows: Int)? {
        var size = winsize()
        guard ioctl(STDOUT_FILENO, UInt(TIOCGWINSZ), &size) == 0, size.ws_col > 0, size.ws_row > 0 else { return nil }
        return (Int(size.ws_col), Int(size.ws_row))
    }

    /// Whether the locale's character set is UTF-8 (LC_ALL, else LC_CTYPE, else LANG).
    static func isUTF8(_ environment: [String: String] = ProcessInfo.processInfo.environment) -> Bool {
        let locale = [environment["LC_ALL"], environment["LC_CTYPE"], environment["LANG"]].compactMap { $0 }
            .first { !$0.isEmpty } ?? ""
        let normalized = locale.lowercased().replacingOccurrences(of: "-", with: "")
        return normalized.hasSuffix(".utf8") || normalized.contains(".utf8@")
    }

    init() {
        var attributes = termios()
        if tcgetattr(STDIN_FILENO, &attributes) == 0 {
            saved = attributes
            var raw = attributes
            raw.c_lflag &= ~tcflag_t(ICANON | ECHO)
            withUnsafeMutableBytes(of: &raw.c_cc) { cc in
                cc[Int(VMIN)] = 1
                cc[Int(VTIME)] = 0
            }
            tcsetattr(STDIN_FILENO, TCSANOW, &raw)
        } else {
            saved = nil
        }
        // The alternate screen, the cursor hidden, the screen cleared.
        Console.out("\u{1B}[?1049h\u{1B}[?25l\u{1B}[2J")
    }

    func restore() {
        let first = restored.withLockedValue { done in
            defer { done = true }
            return !done
        }
        guard first else { return }
        // Cleared first: a terminal resized meanwhile may keep rows of the alternate screen.
        Console.out("\u{1B}[0m\u{1B}[H\u{1B}[2J\u{1B}[?25h\u{1B}[?1049l")
        if var saved { tcsetattr(STDIN_FILENO, TCSANOW, &saved) }
    }
}

/// Reads keys from stdin on a thread of its own (a blocking read must not hold one of the few
/// threads Swift's tasks run on), calling `key` for each byte, until stopped.
final class KeyReader: Sendable {
    private let stopped = NIOLockedValueBox(false)

    init(_ key: @escaping @Sendable (UInt8) -> Void) {
        Thread.detachNewThread { [stopped] in
            var fds = pollfd(fd: STDIN_FILENO, events: Int16(POLLIN), revents: 0)
            var byte: UInt8 = 0
            while !stopped.withLockedValue({ $0 }) {
                fds.revents = 0
                guard poll(&fds, 1, 100) > 0 else { continue }
                if read(STDIN_FILENO, &byte, 1) == 1 {
                    key(byte)
                } else {
                    // End of input or an error: no more keys (Ctrl-C still works).
                    return
                }
            }
        }
    }

    func stop() { stopped.withLockedValue { $0 = true } }
}
