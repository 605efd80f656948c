import ArgumentParser
import Foundation
import NIOConcurrencyHelpers
import QuakeProtocol
import QuakeTestSupport

#if canImport(Glibc)
    import Glibc
#endif

/// Push latency end to end: a local websocket server (``PushTestServer``) sends EMSC reports at a
/// steady rate to a real quaked (an `emsc` source) with 1,000 subscribers and one
/// `quakectl watch --exec` hook; the times from each message sent to every subscriber's `changed`
/// and to the hook's process running. Beside them, the poll path: the same kind of reports
/// published in a USGS feed (a local HTTP server) that quaked pulls every second, its shortest
/// interval.
struct PushBenchmark: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "push",
        abstract: "EMSC websocket push to changed and to a watch --exec hook, beside the poll path.")

    @Option(help: "Subscribers (each its own connection, unfiltered).")
    var subscribers = 1000

    @Option(help: "Messages pushed over the websocket (after 3 warm-up messages, not counted).")
    var messages = 200

    @Option(help: "Messages per second.")
    var rate = 5.0

    @Option(help: "Reports published in the polled feed (one every 0.5 to 1.5 s, at random).")
    var polls = 40

    @Flag(help: "Print one JSON object with the figures (progress goes to stderr).")
    var json = false

    @Option(help: "Keep the working directory (store, config, hook log) here.")
    var keep: String?

    @Option(help: "quaked's --log-level (its log is printed when a report does not arrive).")
    var logLevel = "error"

    /// The goals, reported beside the figures, never asserted.
    static let changedGoalMs = 20.0
    static let hookGoalMs = 100.0

    struct Figures: Encodable {
        struct Path: Encodable {
            var reports: Int
            /// Sent (or published) to each subscriber's `changed` readable: every subscriber of every report.
            var changedP50Ms: Double
            var changedP99Ms: Double
            /// Sent to the first subscriber's `changed`, per report.
            var firstChangedP50Ms: Double
            var firstChangedP99Ms: Double
            /// Sent to the hook's first instruction.
            var hookP50Ms: Double
            var hookP99Ms: Double
            var hooksSeen: Int
        }
        var subscribers: Int
        var push: Path
        var poll: Path
        var changedGoalMs: Double
        var hookGoalMs: Double
    }

    func say(_ text: String) {
        if json {
            FileHandle.standardError.write(Data((text + "\n").utf8))
        } else {
            print(text)
        }
    }

    func validate() throws {
        guard subscribers >= 1, messages >= 1, polls >= 0, rate > 0 else {
            throw ValidationError("--subscribers and --messages at least 1, --polls at least 0, --rate above 0")
        }
    }

    /// CLOCK_REALTIME in seconds: the one clock this process and the hook (bash's `$EPOCHREALTIME`) share.
    static func realtime() -> Double {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        return Double(now.tv_sec) + Double(now.tv_nsec) / 1e9
    }

    func run() async throws {
        var limit = rlimit()
        getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        limit.rlim_cur = limit.rlim_max
        setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)

        let work =
            keep.map { URL(fileURLWithPath: $0) }
            ?? URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("quake-bench-push-\(getpid())")
        try? FileManager.default.removeItem(at: work)
        try FileManager.default.createDirectory(at: work, withIntermediateDirectories: true)
        defer { if keep == nil { try? FileManager.default.removeItem(at: work) } }

        let directory = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent()
        let quaked = directory.appendingPathComponent("quaked").path
        let quakectl = directory.appendingPathComponent("quakectl").path
        guard FileManager.default.isExecutableFile(atPath: quaked), FileManager.default.isExecutableFile(atPath: quakectl)
        else {
            throw ValidationError(
                "build quaked and quakectl next to quake-bench first: swift build -c release --scratch-path .build-release --product quaked (and quakectl)"
            )
        }

        let push = try await PushTestServer.start()
        let http = try await FeedTestServer.start()
        defer {
            Task { await push.shutdown() }
            Task { try? await http.shutdown() }
        }
        // EMSC's FDSN service for the catch-up on connect: empty, and QuakeML (the test service
        // does not speak EMSC's JSON).
        let catchUp = FDSNTestService(on: http, basePath: "/emsc/fdsnws/event/1/")
        // The polled feed: every report published so far, served as it is at each request, with
        // no max-age, so quaked pulls it every `interval`.
        let published = NIOLockedValueBox<[String]>([Self.feature(id: "pb000", index: 0, published: Self.now())])
        http.setHandler("/feed.geojson") { _ in
            let features = published.withLockedValue { $0 }
            return TestResponse(
                body: .bytes(
                    Array(
                        (#"{"type":"FeatureCollection","metadata":{"count":\#(features.count)},"features":["#
                            + features.joined(separator: ",") + "]}").utf8)),
                contentType: "application/json", gzip: false, conditional: false)
        }

        let state = work.appendingPathComponent("state")
        let socket = work.appendingPathComponent("q.sock").path
        let config = work.appendingPathComponent("quaked.conf")
        try """
        feed = \(http.url("/feed.geojson"))
        interval = 1s
        source = emsc emsc \(push.url) catch-up=\(catchUp.baseURL) format=xml
        retry-initial-delay = 50ms
        retry-max-delay = 300ms

        """.write(to: config, atomically: true, encoding: .utf8)
        let daemon = try ChildProcess(
            quaked,
            ["--config", config.path, "--state-directory", state.path, "--socket", socket, "--log-level", logLevel])
        defer { daemon.signal(SIGTERM) }
        let deadline = ContinuousClock.now + .seconds(30)
        while !UnixSocketClient.canConnect(socket) || push.openConnections == 0 {
            guard daemon.isRunning else { throw ValidationError("quaked exited: \(daemon.stderr)") }
            guard ContinuousClock.now < deadline else { throw ValidationError("quaked did not start or connect") }
            try await Task.sleep(for: .milliseconds(50))
        }

        // The hook: its first instruction appends the token and CLOCK_REALTIME (a bash builtin,
        // no process of its own), then it drains the change on stdin.
        let hookLog = work.appendingPathComponent("hook.log").path
        let hook = work.appendingPathComponent("hook.sh")
        try """
        #!/bin/bash
        printf '%s %s\\n' "$QUAKED_TOKEN" "$EPOCHREALTIME" >> '\(hookLog)'
        cat > /dev/null

        """.write(to: hook, atomically: true, encoding: .utf8)
        chmod(hook.path, 0o755)
        _ = FileManager.default.createFile(atPath: hookLog, contents: nil)
        let watch = try ChildProcess(
            quakectl,
            [
                "watch", "--since", "now", "--cache", work.appendingPathComponent("watch-cache.sqlite").path,
                "--socket", socket, "--exec", hook.path,
            ], environment: ["LC_ALL": "C"])
        defer { watch.signal(SIGTERM) }

        say("opening \(subscribers) subscribers …")
        var clients: [UnixSocketClient] = []
        for _ in 0..<subscribers {
            let client = try UnixSocketClient(path: socket)
            try client.send(
                #"{"method":"\#(IOQuaked.Subscribe.name)","parameters":{"heartbeatSeconds":3600},"more":true}"#)
            _ = try client.receive()
            clients.append(client)
        }

        // The push path: one message every 1 / rate seconds, each a new quake (a minute apart in
        // origin time, so none is associated with another), each waited for at every subscriber.
        say(String(format: "push: %d messages at %.1f/s over the websocket …", messages, rate))
        var pushPath = Samples()
        let warmUps = 3
        // The head the subscribers were last told: a later round's `changed` is above it.
        var lastHead = 0
        let period = Duration.seconds(1 / rate)
        var next = ContinuousClock.now
        for index in 0..<(warmUps + messages) {
            try await Task.sleep(until: next)
            next += period
            let sentAt = Self.realtime()
            let started = ContinuousClock.now
            let message = Self.message(index: index, sent: sentAt)
            guard try await push.send(message) == 1 else { throw ValidationError("the websocket is not connected") }
            let latencies: [Double]
            let head: Int
            do {
                // Messages wait while the first catch-up runs: the warm-ups may take a while.
                (latencies, head) = try Self.waitForAll(
                    clients, since: started, after: lastHead, timeout: index < warmUps ? 30_000 : 5_000)
                lastHead = head
            } catch {
                say("message \(index) did not arrive; quaked's log:\n\(daemon.stderr)")
                throw error
            }
            if index < warmUps {
                // The hook of a warm-up message shows the watch is running.
                if index == warmUps - 1 { try await waitForHook(hookLog, lines: warmUps, watch: watch) }
                continue
            }
            pushPath.add(latencies: latencies, head: head, sentAt: sentAt)
        }

        // The poll path: a report published in the feed, at random moments against quaked's
        // 1-second pulls.
        say("poll: \(polls) reports published in a feed pulled every second …")
        var pollPath = Samples()
        for index in 0..<polls {
            try await Task.sleep(for: .milliseconds(Int.random(in: 500...1500)))
            let publishedAt = Self.realtime()
            let started = ContinuousClock.now
            published.withLockedValue {
                $0.append(Self.feature(id: String(format: "pb%03d", index + 1), index: index + 1, published: Self.now()))
            }
            let (latencies, head) = try Self.waitForAll(
                clients, since: started, after: lastHead, timeout: 10_000)
            lastHead = head
            pollPath.add(latencies: latencies, head: head, sentAt: publishedAt)
        }

        try await waitForHook(hookLog, lines: warmUps + messages + polls, watch: watch)
        let hooks = try Self.hookTimes(hookLog)
        let pushFigures = pushPath.figures(hooks: hooks)
        let pollFigures = pollPath.figures(hooks: hooks)

        say("")
        say("sent to changed (every subscriber) and to the hook's process, \(subscribers) subscribers + 1 watch --exec:")
        say("  path     reports   changed p50   changed p99   first p50   first p99   hook p50   hook p99   (ms)")
        for (name, figures) in [("push", pushFigures), ("poll", pollFigures)] {
            say(
                String(
                    format: "  %@ %10d %13.2f %13.2f %11.2f %11.2f %10.2f %10.2f", name.padding(toLength: 6, withPad: " ", startingAt: 0),
                    figures.reports, figures.changedP50Ms, figures.changedP99Ms, figures.firstChangedP50Ms,
                    figures.firstChangedP99Ms, figures.hookP50Ms, figures.hookP99Ms))
        }
        say(
            String(
                format: "  goals (push): changed p99 <= %.0f ms: %.2f (%@); hook p99 <= %.0f ms: %.2f (%@)", Self.changedGoalMs,
                pushFigures.changedP99Ms, pushFigures.changedP99Ms <= Self.changedGoalMs ? "met" : "not met", Self.hookGoalMs,
                pushFigures.hookP99Ms, pushFigures.hookP99Ms <= Self.hookGoalMs ? "met" : "not met"))
        say("  the poll path's figures are dominated by the 1 s interval: a report waits for the next pull")
        if pushFigures.hooksSeen < pushFigures.reports || pollFigures.hooksSeen < pollFigures.reports {
            say("  hooks seen: push \(pushFigures.hooksSeen) of \(pushFigures.reports), poll \(pollFigures.hooksSeen) of \(pollFigures.reports)")
        }
        if json {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys]
            print(
                String(
                    decoding: try encoder.encode(
                        Figures(
                            subscribers: subscribers, push: pushFigures, poll: pollFigures, changedGoalMs: Self.changedGoalMs,
                            hookGoalMs: Self.hookGoalMs)), as: UTF8.self))
        }
    }

    /// The latencies of one path: every subscriber's, and per report its head token and when it was sent.
    struct Samples {
        var latencies: [Double] = []
        var first: [Double] = []
        var reports: [(head: Int, sentAt: Double)] = []

        mutating func add(latencies measured: [Double], head: Int, sentAt: Double) {
            latencies += measured
            first.append(measured.min() ?? .nan)
            reports.append((head, sentAt))
        }

        /// The hook of a report is the one run for its transaction (QUAKED_TOKEN = the head its
        /// subscribers were told).
        func figures(hooks: [Int: Double]) -> Figures.Path {
            let hookLatencies = reports.compactMap { report in hooks[report.head].map { ($0 - report.sentAt) * 1000 } }
            let p = ProtocolBenchmark.percentile
            return Figures.Path(
                reports: reports.count, changedP50Ms: p(latencies, 0.5), changedP99Ms: p(latencies, 0.99),
                firstChangedP50Ms: p(first, 0.5), firstChangedP99Ms: p(first, 0.99), hookP50Ms: p(hookLatencies, 0.5),
                hookP99Ms: p(hookLatencies, 0.99), hooksSeen: hookLatencies.count)
        }
    }

    private func waitForHook(_ path: String, lines: Int, watch: ChildProcess) async throws {
        let deadline = ContinuousClock.now + .seconds(30)
        while (try? Self.hookTimes(path).count) ?? 0 < lines {
            guard watch.isRunning else { throw ValidationError("quakectl watch exited: \(watch.stderr)") }
            guard ContinuousClock.now < deadline else {
                say("  (the hook ran \((try? Self.hookTimes(path).count) ?? 0) times of \(lines))")
                return
            }
            try await Task.sleep(for: .milliseconds(20))
        }
    }

    /// The hook log: token → CLOCK_REALTIME of the hook's first instruction.
    static func hookTimes(_ path: String) throws -> [Int: Double] {
        var times: [Int: Double] = [:]
        for line in try String(contentsOfFile: path, encoding: .utf8).split(separator: "\n") {
            let parts = line.split(separator: " ")
            guard parts.count == 2, let token = Int(parts[0]), let time = Double(parts[1]) else { continue }
            times[token] = min(times[token] ?? time, time)
        }
        return times
    }

    /// Milliseconds from `since` until each subscriber's next `changed` for a head above `after`
    /// became readable, and the head it announced (the first one read).
    ///
    /// A `changed` for `after` or below is left over from an earlier round (a transaction that
    /// came beside the one measured: its frame waited in the socket): it is read and passed
    /// over, not taken for this round's, which would have dated the round's receipt at once and
    /// matched its hook to an earlier transaction's.
    ///
    /// One poll(2) over every socket not yet done, as `protocol` has always measured. (epoll was
    /// tried: its callback on every socket made each of quaked's writes dearer, and quaked's own
    /// share of the fan-out rose with it.)
    static func waitForAll(
        _ subscribers: [UnixSocketClient], since: ContinuousClock.Instant, after previous: Int = 0,
        timeout: Int32 = 5_000
    ) throws -> ([Double], Int) {
        var pending = Set(subscribers.indices)
        var latencies: [Double] = []
        latencies.reserveCapacity(subscribers.count)
        var head = 0
        var fds = subscribers.map { pollfd(fd: $0.fd, events: Int16(POLLIN), revents: 0) }
        while !pending.isEmpty {
            guard poll(&fds, nfds_t(fds.count), timeout) > 0 else { throw ValidationError("notifications timed out") }
            let now = ContinuousClock.now
            for i in fds.indices where fds[i].revents != 0 && pending.contains(i) {
                fds[i].revents = 0
                // Bytes, not text: this loop's own cost would count as the later subscribers' latency.
                while let message = try subscribers[i].receiveBytes(timeout: .seconds(1)) {
                    if ProtocolBenchmark.occurrences(of: #""event":"changed""#, in: message) > 0,
                        let announced = Self.headToken(in: message), announced > previous
                    {
                        if head == 0 { head = announced }
                        latencies.append((now - since).inSeconds * 1000)
                        pending.remove(i)
                        fds[i].events = 0
                        break
                    }
                    // Passed over: read on only if another message is already here.
                    if !subscribers[i].hasBufferedMessage { break }
                }
            }
        }
        return (latencies, head)
    }

    /// The `headToken` of a reply, read over its bytes.
    static func headToken(in message: [UInt8]) -> Int? {
        let key = Array(#""headToken":"#.utf8)
        guard let at = ProtocolBenchmark.firstOffset(of: key, in: message) else { return nil }
        let digits = message[(at + key.count)...].prefix { $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }
        return digits.isEmpty ? nil : digits.reduce(0) { $0 * 10 + Int($1 - UInt8(ascii: "0")) }
    }

    static func now() -> Int64 { Int64(realtime() * 1000) }

    /// An EMSC websocket message: a new event `benchNNNNNN`, its origin time `index` minutes after
    /// six hours ago (no two within association's reach), lastupdate the moment it is sent.
    static func message(index: Int, sent: Double) -> String {
        let time = Int64(sent * 1000) - 6 * 3_600_000 + Int64(index) * 60_000
        let latitude = Double((index * 7) % 120) - 60
        let longitude = Double((index * 37) % 340) - 170
        return """
            {"action":"create","data":{"type":"Feature","id":"bench\(String(format: "%06d", index))","geometry":{"type":"Point",\
            "coordinates":[\(longitude),\(latitude),-10.0]},"properties":{"lastupdate":"\(iso(Int64(sent * 1000)))",\
            "magtype":"ml","evtype":"ke","lon":\(longitude),"auth":"EMSC","lat":\(latitude),"depth":10.0,\
            "unid":"bench\(String(format: "%06d", index))","mag":3.5,"time":"\(iso(time))","source_id":"\(index + 1)",\
            "source_catalog":"EMSC-RTS","flynn_region":"BENCH REGION"}}}
            """
    }

    /// A USGS feature for the polled feed: origin time `index` minutes after twelve hours ago.
    static func feature(id: String, index: Int, published: Int64) -> String {
        let time = published - 12 * 3_600_000 + Int64(index) * 60_000
        let latitude = Double((index * 11) % 120) - 60
        let longitude = Double((index * 53) % 340) - 170
        return #"{"type":"Feature","properties":{"mag":3.1,"place":"\#(index) km N of Polltown","time":\#(time),"updated":\#(published),"status":"automatic","tsunami":0,"sig":100,"net":"pb","code":"\#(id)","ids":",\#(id),","type":"earthquake","title":"M 3.1 - poll"},"geometry":{"type":"Point","coordinates":[\#(longitude),\#(latitude),10]},"id":"\#(id)"}"#
    }

    static func iso(_ milliseconds: Int64) -> String {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter.string(from: Date(timeIntervalSince1970: Double(milliseconds) / 1000))
    }
}
