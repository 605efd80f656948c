import Foundation
import Glibc
import Logging
import QuakeSystemd
import NIOConcurrencyHelpers
import Testing

@testable import QuakeDaemon

/// Tests of the systemd integration: sd_notify, socket activation, journal and stderr logging.
@Suite struct SystemdTests {
    // MARK: - Process environment (NOTIFY_SOCKET, WATCHDOG_*, LISTEN_*)

    /// The only tests touching these process-global variables; serialized, and every test
    /// restores the previous values.
    @Suite(.serialized) struct Environment {
        @Test func notificationsArriveInOrder() throws {
            let receiver = try DatagramReceiver()
            defer { receiver.close() }
            try withEnvironment(["NOTIFY_SOCKET": receiver.path]) {
                let notifier = SystemdNotifier()
                #expect(notifier.isEnabled)
                #expect(notifier.ready())
                #expect(notifier.status("pulled 12 events\nfrom all_day"))
                #expect(notifier.watchdog())
                let before = SystemdNotifier.monotonicMicroseconds()
                #expect(notifier.reloading())
                let after = SystemdNotifier.monotonicMicroseconds()
                #expect(notifier.stopping())

                #expect(try receiver.receive() == "READY=1")
                #expect(try receiver.receive() == "STATUS=pulled 12 events from all_day")
                #expect(try receiver.receive() == "WATCHDOG=1")
                let reloading = try receiver.receive()
                let lines = reloading.split(separator: "\n")
                #expect(lines.count == 2)
                #expect(lines.first == "RELOADING=1")
                let stamp = try #require(lines.last.flatMap { UInt64($0.dropFirst("MONOTONIC_USEC=".count)) })
                #expect(lines.last?.hasPrefix("MONOTONIC_USEC=") == true)
                #expect(stamp >= before && stamp <= after)
                #expect(try receiver.receive() == "STOPPING=1")
                #expect(receiver.pending() == nil, "no extra datagrams")
            }
        }

        @Test func notifierIsNoOpWithoutSystemd() throws {
            try withEnvironment(["NOTIFY_SOCKET": nil]) {
                let notifier = SystemdNotifier()
                #expect(!notifier.isEnabled)
                #expect(!notifier.ready())
                #expect(!notifier.send("STATUS=x"))
            }
        }

        @Test func sendFailureIsReported() throws {
            let dir = try TemporaryDirectory()
            defer { dir.remove() }
            try withEnvironment(["NOTIFY_SOCKET": dir.path + "/nobody-listens"]) {
                #expect(SystemdNotifier().isEnabled)
                #expect(!SystemdNotifier().ready())
            }
        }

        @Test func watchdogIntervalIsHalfOfWatchdogUsec() throws {
            try withEnvironment(["WATCHDOG_USEC": "2000000", "WATCHDOG_PID": "\(getpid())"]) {
                #expect(SystemdNotifier().watchdogInterval == .seconds(1))
            }
            try withEnvironment(["WATCHDOG_USEC": "2000000", "WATCHDOG_PID": "\(getpid() + 1)"]) {
                #expect(SystemdNotifier().watchdogInterval == nil, "watchdog meant for another process")
            }
            try withEnvironment(["WATCHDOG_USEC": nil, "WATCHDOG_PID": nil]) {
                #expect(SystemdNotifier().watchdogInterval == nil)
            }
        }

        @Test func noSocketActivationWithoutListenFds() throws {
            try withEnvironment(["LISTEN_FDS": nil, "LISTEN_PID": nil, "LISTEN_FDNAMES": nil]) {
                #expect(SocketActivation.listenFileDescriptors().isEmpty)
                #expect(SocketActivation.listenSockets().isEmpty)
            }
        }

        @Test func socketActivationForAnotherProcessIsIgnored() throws {
            try withEnvironment(["LISTEN_FDS": "1", "LISTEN_PID": "\(getpid() + 1)", "LISTEN_FDNAMES": "varlink"]) {
                #expect(SocketActivation.listenFileDescriptors().isEmpty)
                #expect(getenv("LISTEN_FDS") == nil, "unset so children do not inherit it")
            }
        }
    }

    // MARK: - Socket checks

    @Test func unixStreamSocketCheck() throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let listening = try unixSocket(type: SOCK_STREAM, path: dir.path + "/listen.sock")
        defer { Glibc.close(listening) }
        #expect(Glibc.listen(listening, 4) == 0)
        #expect(SocketActivation.isUnixStreamSocket(listening))

        let notListening = try unixSocket(type: SOCK_STREAM, path: dir.path + "/idle.sock")
        defer { Glibc.close(notListening) }
        #expect(!SocketActivation.isUnixStreamSocket(notListening))

        let datagram = try unixSocket(type: SOCK_DGRAM, path: dir.path + "/dgram.sock")
        defer { Glibc.close(datagram) }
        #expect(!SocketActivation.isUnixStreamSocket(datagram))
        #expect(!SocketActivation.isUnixStreamSocket(-1))
    }

    // MARK: - Journal

    @Test(arguments: [
        ("feed.url", "FEED_URL"), ("history.token", "HISTORY_TOKEN"), ("_x", "X"), ("a-b", "A_B"),
        ("ünï", "N_"), ("__Mixed_Case9", "MIXED_CASE9"), ("2fa", "FA"), ("MESSAGE_ID", "MESSAGE_ID"),
    ])
    func journalFieldNames(key: String, expected: String) {
        #expect(JournalLogHandler.journalFieldName(key) == expected)
    }

    @Test func unusableJournalFieldNamesAreDropped() {
        for key in ["", "_", "___", "€", "42", "_9"] {
            #expect(JournalLogHandler.journalFieldName(key) == nil, "\(key)")
        }
        #expect(JournalLogHandler.journalFieldName(String(repeating: "k", count: 100))?.count == 64)
    }

    @Test func journalPriorities() {
        let expected: [(Logger.Level, Int)] = [
            (.trace, 7), (.debug, 7), (.info, 6), (.notice, 5), (.warning, 4), (.error, 3), (.critical, 2),
        ]
        for (level, priority) in expected {
            #expect(JournalLogHandler.priority(for: level) == priority, "\(level)")
        }
    }

    @Test func journalEntriesAndIOVecs() {
        let entries = JournalLogHandler.entries(
            message: "pulled\nfeed", level: .warning, identifier: "quaked", label: "quaked.feed",
            metadata: [
                "feed.url": "https://example.org/all_day.geojson", "count": .stringConvertible(12), "message": "spoof",
                "€": "x",
            ],
            file: "QuakeDaemon/Feed.swift", function: "pull()", line: 42)
        #expect(
            entries == [
                "MESSAGE=pulled\nfeed", "PRIORITY=4", "SYSLOG_IDENTIFIER=quaked", "LOGGER=quaked.feed",
                "CODE_FILE=QuakeDaemon/Feed.swift", "CODE_LINE=42", "CODE_FUNC=pull()",
                "COUNT=12", "FEED_URL=https://example.org/all_day.geojson", "META_MESSAGE=spoof",
            ])
        let rebuilt = JournalLogHandler.withIOVecs(entries) { vectors in
            vectors.map {
                String(decoding: UnsafeRawBufferPointer(start: $0.iov_base, count: $0.iov_len), as: UTF8.self)
            }
        }
        #expect(rebuilt == entries)
    }

    // MARK: - Destination

    @Test func journalDestinationOnlyWhenStreamMatchesStderr() throws {
        var info = stat()
        try #require(fstat(2, &info) == 0)
        let real = "\(info.st_dev):\(info.st_ino)"
        #expect(LogDestination.detect(environment: ["JOURNAL_STREAM": real]) == .journal)
        #expect(LogDestination.detect(environment: [:]) == .stderr)
        #expect(LogDestination.detect(environment: ["JOURNAL_STREAM": "garbage"]) == .stderr)
        #expect(LogDestination.detect(environment: ["JOURNAL_STREAM": "\(info.st_dev):"]) == .stderr)
        #expect(LogDestination.detect(environment: ["JOURNAL_STREAM": "\(info.st_dev):\(info.st_ino + 1)"]) == .stderr)
        #expect(LogDestination.detect(environment: ["JOURNAL_STREAM": "\(info.st_dev):\(info.st_ino):1"]) == .stderr)
    }

    @Test func makeHandlerFollowsDestination() {
        let journal = QuakedLogging.makeHandler(label: "a", level: .debug, destination: .journal, identifier: "quaked")
        #expect((journal as? JournalLogHandler)?.identifier == "quaked")
        #expect(journal.logLevel == .debug)
        let stderr = QuakedLogging.makeHandler(label: "b", level: .error, destination: .stderr)
        #expect(stderr is StderrLogHandler)
        #expect(stderr.logLevel == .error)
    }

    // MARK: - Stderr lines

    @Test func stderrLineFormat() throws {
        let lines = CapturedLines()
        var logger = Logger(label: "quaked.feed") { label in
            StderrLogHandler(label: label, level: .info) { line in lines.append(line) }
        }
        logger[metadataKey: "feed"] = "all day"
        logger.debug("not logged")
        logger.warning("pulled feed", metadata: ["count": .stringConvertible(12), "note": "say \"hi\"", "empty": ""])
        let captured = lines.all
        try #require(captured.count == 1)
        let line = captured[0]
        let pattern = #/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z warning quaked\.feed: (.*)\n$/#
        let match = try #require(line.wholeMatch(of: pattern))
        #expect(match.1 == #"pulled feed count=12 empty="" feed="all day" note="say \"hi\"""#)
    }

    @Test func stderrLineEscapesNewlinesAndFormatsTime() {
        let date = Date(timeIntervalSince1970: 1_700_000_000.25)
        let line = StderrLogHandler.line(
            date: date, level: .error, label: "l", message: "a\nb", metadata: ["k": "x\ny"])
        #expect(line == "2023-11-14T22:13:20.250Z error l: a\\nb k=\"x\\ny\"\n")
    }

    @Test func concurrentLinesDoNotInterleave() async throws {
        var fds: [CInt] = [0, 0]
        try #require(pipe(&fds) == 0)
        defer { Glibc.close(fds[0]) }
        let writer = fds[1]
        // 4 × 50 lines of 200 bytes fit in the 64 KiB pipe buffer, so no reader is needed.
        await withTaskGroup(of: Void.self) { group in
            for task in 0..<4 {
                group.addTask {
                    let line = String(repeating: Character("\(task)"), count: 199) + "\n"
                    for _ in 0..<50 { StderrLogHandler.write(line, to: writer) }
                }
            }
        }
        Glibc.close(writer)
        var data = [UInt8]()
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let count = read(fds[0], &buffer, buffer.count)
            if count <= 0 { break }
            data.append(contentsOf: buffer[0..<count])
        }
        let lines = String(decoding: data, as: UTF8.self).split(separator: "\n")
        #expect(lines.count == 200)
        #expect(lines.allSatisfy { $0.count == 199 && Set($0).count == 1 })
    }
}

// MARK: - Helpers

/// Sets (or unsets, for `nil`) environment variables around `body`, then restores them.
private func withEnvironment(_ values: [String: String?], _ body: () throws -> Void) throws {
    let saved = values.keys.map { ($0, getenv($0).map { String(cString: $0) }) }
    func apply(_ name: String, _ value: String?) {
        if let value { setenv(name, value, 1) } else { unsetenv(name) }
    }
    for (name, value) in values { apply(name, value) }
    defer { for (name, value) in saved { apply(name, value) } }
    try body()
}

/// Lines captured from a `StderrLogHandler` output closure.
private final class CapturedLines: Sendable {
    private let lines = NIOLockedValueBox<[String]>([])
    func append(_ line: String) { lines.withLockedValue { $0.append(line) } }
    var all: [String] { lines.withLockedValue { $0 } }
}

struct SocketError: Error, CustomStringConvertible {
    var description: String
    init(_ what: String) { description = "\(what): \(String(cString: strerror(errno)))" }
}

struct TemporaryDirectory {
    let path: String
    init() throws {
        var template = Array("/tmp/quaked-systemd-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw SocketError("mkdtemp") }
        path = String(cString: made)
    }
    func remove() { try? FileManager.default.removeItem(atPath: path) }
}

/// A bound (not listening) AF_UNIX socket of `type` at `path` (short enough for sun_path).
func unixSocket(type: __socket_type, path: String) throws -> CInt {
    let fd = socket(AF_UNIX, CInt(type.rawValue), 0)
    guard fd >= 0 else { throw SocketError("socket") }
    var address = sockaddr_un()
    address.sun_family = sa_family_t(AF_UNIX)
    withUnsafeMutableBytes(of: &address.sun_path) { raw in
        let bytes = Array(path.utf8.prefix(raw.count - 1))
        raw.copyBytes(from: bytes)
    }
    let bound = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
    }
    guard bound == 0 else {
        Glibc.close(fd)
        throw SocketError("bind \(path)")
    }
    return fd
}

/// A fake systemd notification socket.
struct DatagramReceiver {
    let directory: TemporaryDirectory
    let path: String
    let fd: CInt

    init() throws {
        directory = try TemporaryDirectory()
        path = directory.path + "/notify.sock"
        fd = try unixSocket(type: SOCK_DGRAM, path: path)
        // A missing datagram fails the test after 2 s instead of hanging it.
        var timeout = timeval(tv_sec: 2, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    }

    func receive() throws -> String {
        guard let message = read(flags: 0) else { throw SocketError("recv") }
        return message
    }

    /// A datagram already queued, without waiting.
    func pending() -> String? { read(flags: CInt(MSG_DONTWAIT)) }

    private func read(flags: CInt) -> String? {
        var buffer = [UInt8](repeating: 0, count: 4096)
        let count = recv(fd, &buffer, buffer.count, flags)
        guard count >= 0 else { return nil }
        return String(decoding: buffer[0..<count], as: UTF8.self)
    }

    func close() {
        Glibc.close(fd)
        directory.remove()
    }
}
