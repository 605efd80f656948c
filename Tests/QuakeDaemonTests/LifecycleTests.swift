import Foundation
import QuakeProtocol
import QuakeTestSupport
import Testing

/// systemd notifications, reload and shutdown of a real quaked process.
extension EndToEnd {
    @Suite("quaked lifecycle")
    struct LifecycleTests {
        static let small = Fixtures.usgs("rodu__quakemap__all_day.geojson")
        static let day = Fixtures.usgs("abruzzi__earthquake-viz__all_day.geojson")

        /// Runs `body` with a quaked (one small file feed, hourly) that notifies `receiver`.
        static func withNotifyingDaemon(
            environment: [String: String] = [:], _ body: (DaemonHarness, DatagramReceiver) async throws -> Void
        ) async throws {
            let receiver = try DatagramReceiver()
            defer { receiver.close() }
            try await withTemporaryDirectory { dir in
                let daemon = try await DaemonHarness(
                    in: dir, ["--feed", Self.small.absoluteString, "--interval", "1h"],
                    environment: environment.merging(["NOTIFY_SOCKET": receiver.path]) { $1 }, waitForSocket: false)
                try await body(daemon, receiver)
            }
        }

        /// Waits for quaked to exit and expects status 0, showing its log otherwise.
        static func expectCleanExit(_ daemon: DaemonHarness) async throws {
            #expect(try await daemon.process.wait() == 0, "quaked's log:\n\(daemon.process.stderr)")
        }

        @Test("NOTIFY_SOCKET receives READY, STATUS, WATCHDOG, RELOADING/READY and STOPPING in that order")
        func notifications() async throws {
            try await Self.withNotifyingDaemon(environment: ["WATCHDOG_USEC": "400000"]) { daemon, receiver in
                var messages: [String] = []
                func collect(until done: (String) -> Bool) throws {
                    while true {
                        let message = try receiver.receive()
                        messages.append(message)
                        if done(message) { return }
                    }
                }
                try collect { _ in
                    messages.contains("READY=1") && messages.contains("WATCHDOG=1")
                        && messages.contains { $0.hasPrefix("STATUS=") && $0.contains("last pull") }
                }
                // READY comes only once the socket answers.
                #expect(UnixSocketClient.canConnect(daemon.socketPath))
                daemon.process.signal(SIGHUP)
                try collect { _ in messages.last == "READY=1" && messages.contains { $0.hasPrefix("RELOADING=1") } }
                daemon.process.signal(SIGTERM)
                try collect { $0 == "STOPPING=1" }
                try await Self.expectCleanExit(daemon)

                let events = messages.filter { $0 != "WATCHDOG=1" }
                let ready = try #require(events.firstIndex(of: "READY=1"))
                let status = try #require(events.firstIndex { $0.hasPrefix("STATUS=") })
                let reloading = try #require(events.firstIndex { $0.hasPrefix("RELOADING=1\nMONOTONIC_USEC=") })
                let readyAgain = try #require(events.lastIndex(of: "READY=1"))
                let stopping = try #require(events.firstIndex(of: "STOPPING=1"))
                #expect(ready < status && status < reloading && reloading < readyAgain && readyAgain < stopping)
                #expect(stopping == events.count - 1)
                #expect(events.contains { $0.hasPrefix("STATUS=151 quakes · token 1") })
                #expect(messages.filter { $0 == "WATCHDOG=1" }.count >= 1)
            }
        }

        @Test("a SIGHUP the moment READY=1 arrives reloads; it does not end the daemon")
        func hangupRightAfterReady() async throws {
            try await Self.withNotifyingDaemon { daemon, receiver in
                var messages: [String] = []
                while messages.last != "READY=1" { messages.append(try receiver.receive()) }
                daemon.process.signal(SIGHUP)
                while !messages.contains(where: { $0.hasPrefix("RELOADING=1") }) || messages.last != "READY=1" {
                    messages.append(try receiver.receive())
                }
                #expect(daemon.process.isRunning)
                daemon.process.signal(SIGTERM)
                try await Self.expectCleanExit(daemon)
            }
        }

        @Test("a SIGTERM the moment READY=1 arrives is a graceful stop")
        func terminateRightAfterReady() async throws {
            try await Self.withNotifyingDaemon { daemon, receiver in
                while try receiver.receive() != "READY=1" {}
                daemon.process.signal(SIGTERM)
                try await Self.expectCleanExit(daemon)
                #expect(daemon.process.stderr.contains("quaked stopped"))
            }
        }

        @Test("SIGHUP and Reload with a broken config keep the old one running; a good one applies")
        func reloadRejectsBrokenConfiguration() async throws {
            try await withTemporaryDirectory { dir in
                let config = dir.appendingPathComponent("quaked.conf")
                try "# test\nfeed = \(Self.small.absoluteString)\ninterval = 1h\n".write(
                    to: config, atomically: true, encoding: .utf8)
                let daemon = try await DaemonHarness(in: dir, ["--config", config.path])
                try await waitUntil(timeout: .seconds(10)) { try await daemon.getStatus().headToken == 1 }

                try "feed = \(Self.day.absoluteString)\ninterval = banana\n".write(
                    to: config, atomically: true, encoding: .utf8)
                let reply = try await daemon.result(IOQuaked.Reload.self, .init())
                #expect(reply.error?.name == IOQuaked.ReloadFailed.name)
                let failure = try reply.error?.decode(IOQuaked.ReloadFailed.self)
                let reason = failure?.reason ?? ""
                #expect(reason.contains("interval") && reason.contains(":2"), "\(reason)")
                #expect(failure?.place == config.path + ":2", "\(reply)")
                #expect(
                    daemon.process.stderr.contains("config.place=\(config.path):2"), "the log names the place as a field")
                daemon.process.signal(SIGHUP)
                try await waitUntil(timeout: .seconds(10)) {
                    daemon.process.stderr.components(separatedBy: "reload rejected").count >= 3
                }
                #expect(daemon.process.isRunning)
                let feeds = try await daemon.getStatus().feeds
                #expect(feeds.map(\.name) == [Self.small.absoluteString])

                try "feed = \(Self.day.absoluteString)\ninterval = 1h\n".write(
                    to: config, atomically: true, encoding: .utf8)
                daemon.process.signal(SIGHUP)
                try await waitUntil(timeout: .seconds(10)) {
                    let feeds = try await daemon.getStatus().feeds
                    return feeds.first?.name == Self.day.absoluteString && feeds.first?.lastResult == .imported
                }
                #expect(try await daemon.getStatus().headToken == 2)
                #expect(try await daemon.stop() == 0)
            }
        }
    }
}
