import Foundation
import QuakeProtocol
import QuakeStore
import QuakeTestSupport
import Testing
import Varlink

/// The io.quaked Varlink interface against a real daemon on a temp socket.
extension EndToEnd {
    @Suite("Varlink protocol")
    struct ProtocolTests {
        static let feed = Fixtures.usgs("lhayesgolding__EarthquakeData__all_hour.geojson")
        static let interfaceFile = Fixtures.packageRoot.appendingPathComponent("Sources/QuakeProtocol/io.quaked.varlink")

        func startDaemon(in dir: URL, _ extra: [String] = [], environment: [String: String] = [:]) async throws
            -> DaemonHarness
        {
            let daemon = try await DaemonHarness(
                in: dir, ["--feed", Self.feed.absoluteString, "--interval", "1h"] + extra, environment: environment)
            try await waitUntil(timeout: .seconds(20)) { try await daemon.getStatus().headToken == 1 }
            return daemon
        }

        /// `python3 -m varlink.cli ...`: the independent Varlink implementation.
        func varlinkCLI(_ arguments: [String]) async throws -> (status: Int32, stdout: String, stderr: String) {
            try await ChildProcess.run("/usr/bin/env", [PeerTools.python, "-m", "varlink.cli"] + arguments)
        }

        @Test("the Python varlink client calls GetInfo, GetInterfaceDescription, GetStatus and Refresh")
        func pythonVarlinkClient() async throws {
            try await withTemporaryDirectory { dir in
                let daemon = try await startDaemon(in: dir)
                let address = "unix:\(daemon.socketPath)"
                let info = try await varlinkCLI(["info", address])
                #expect(info.status == 0, "\(info.stderr)")
                #expect(info.stdout.contains("Product: quaked"))
                #expect(info.stdout.contains("io.quaked"))

                let help = try await varlinkCLI(["help", "\(address)/io.quaked"])
                #expect(help.status == 0, "\(help.stderr)")
                // Served verbatim from the interface file, the protocol's one source of truth.
                let file = try String(contentsOf: Self.interfaceFile, encoding: .utf8)
                #expect(
                    help.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
                        == file.trimmingCharacters(in: .whitespacesAndNewlines))

                let status = try await varlinkCLI(["call", "\(address)/io.quaked.GetStatus", "{}"])
                #expect(status.status == 0, "\(status.stderr)")
                let parsed = try #require(
                    try JSONSerialization.jsonObject(with: Data(status.stdout.utf8)) as? [String: Any])
                #expect(parsed["quakeCount"] as? Int == 8)
                #expect(parsed["headToken"] as? Int == 1)
                #expect((parsed["storeId"] as? String)?.count == 36)

                let refresh = try await varlinkCLI(["call", "\(address)/io.quaked.Refresh", "{}"])
                #expect(refresh.status == 0, "\(refresh.stderr)")
                let refreshed = try #require(
                    try JSONSerialization.jsonObject(with: Data(refresh.stdout.utf8)) as? [String: Any])
                let result = try #require((refreshed["results"] as? [[String: Any]])?.first)
                #expect(result["result"] as? String == "imported")
                #expect((result["counts"] as? [String: Any])?["unchanged"] as? Int == 8)
                #expect(try await daemon.stop() == 0)
            }
        }

        @Test("raw frames: invalid JSON, unknown methods and interfaces get typed errors; the connection stays usable")
        func rawFramesWithSocat() async throws {
            try await withTemporaryDirectory { dir in
                let daemon = try await startDaemon(in: dir)
                let frames = [
                    "this is not json", #"{"method":"io.quaked.Nope"}"#, #"{"method":"com.example.X"}"#,
                    #"{"method":"io.quaked.Get","parameters":{"id":17}}"#, #"{"method":"io.quaked.Subscribe"}"#,
                    #"{"method":"io.quaked.GetStatus"}"#,
                ]
                let input = dir.appendingPathComponent("frames")
                try Data(frames.flatMap { Array($0.utf8) + [0] }).write(to: input)
                let result = try await ChildProcess.run(
                    "/usr/bin/socat",
                    ["-t", "3", "OPEN:\(input.path),rdonly!!STDOUT", "UNIX-CONNECT:\(daemon.socketPath)"])
                #expect(result.status == 0, "\(result.stderr)")
                let replies = result.stdout.split(separator: "\0").map {
                    (try? JSONSerialization.jsonObject(with: Data($0.utf8))) as? [String: Any] ?? [:]
                }
                #expect(replies.count == 6)
                #expect(
                    replies.map { $0["error"] as? String } == [
                        "org.varlink.service.InvalidParameter", "org.varlink.service.MethodNotFound",
                        "org.varlink.service.InterfaceNotFound", "org.varlink.service.InvalidParameter",
                        "org.varlink.service.ExpectedMore", nil,
                    ])
                #expect((replies[3]["parameters"] as? [String: Any])?["parameter"] as? String == "id")
                #expect((replies[5]["parameters"] as? [String: Any])?["quakeCount"] as? Int == 8)
                #expect(try await daemon.stop() == 0)
            }
        }

        @Test("a subscriber gets one notification per transaction, strictly increasing, and heartbeats when idle")
        func subscribeNotifications() async throws {
            try await withTemporaryDirectory { dir in
                let daemon = try await startDaemon(in: dir)
                let subscriber = try UnixSocketClient(path: daemon.socketPath)
                try subscriber.callMore(IOQuaked.Subscribe.self, .init(heartbeatSeconds: 1))
                let first = try #require(try subscriber.nextReply(IOQuaked.Subscribe.self))
                #expect(first.event == .subscribed)
                #expect(first.headToken == 1)
                let storeID = first.storeId

                let ids = try daemon.withStore { try $0.allQuakes().map(\.id) }
                var tokens: [Int] = []
                for id in ids.prefix(3) {
                    let token = try #require(try await daemon.call(IOQuaked.Delete.self, .init(ids: [id])).token)
                    var event: IOQuaked.Subscribe.Reply
                    repeat {
                        event = try #require(try subscriber.nextReply(IOQuaked.Subscribe.self))
                    } while event.event == .heartbeat
                    #expect(event.event == .changed)
                    #expect(event.author == .delete)
                    #expect(event.headToken == token)
                    #expect(event.storeId == storeID)
                    tokens.append(token)
                }
                #expect(tokens == [2, 3, 4])
                // Idle: heartbeats carry the head.
                let heartbeat = try #require(try subscriber.nextReply(IOQuaked.Subscribe.self, timeout: .seconds(3)))
                #expect(heartbeat.event == .heartbeat)
                #expect(heartbeat.headToken == 4)
                #expect(try await daemon.getStatus().subscribers == 1)
                #expect(try await daemon.stop() == 0)
            }
        }

        @Test("a commit by another process (quaked --once on the same store) reaches subscribers without waiting for a heartbeat")
        func otherProcessCommits() async throws {
            try await withTemporaryDirectory { dir in
                let daemon = try await startDaemon(in: dir)
                let subscriber = try UnixSocketClient(path: daemon.socketPath)
                // A heartbeat far away: only the commit itself can wake the subscriber.
                try subscriber.callMore(IOQuaked.Subscribe.self, .init(heartbeatSeconds: 3600))
                #expect(try #require(try subscriber.nextReply(IOQuaked.Subscribe.self)).event == .subscribed)
                let once = try await ChildProcess.run(
                    BuiltProducts.path("quaked"),
                    [
                        "--once", "--feed", Fixtures.usgs("abruzzi__earthquake-viz__all_day.geojson").absoluteString,
                        "--state-directory", daemon.stateDirectory.path,
                    ])
                #expect(once.status == 0, "\(once.stderr)")
                // The daemon checks the WAL file every 250 ms; with the heartbeat an hour away, a
                // reply within the receive deadline can only be the commit's own announcement.
                let event = try #require(try subscriber.nextReply(IOQuaked.Subscribe.self, timeout: .seconds(5)))
                #expect(event.event == .changed)
                #expect(event.author == .import)
                #expect(event.headToken == 2)
                #expect(try await daemon.stop() == 0)
            }
        }

        @Test("connections arriving while quaked stops never crash it: it exits 0")
        func connectionsDuringShutdown() async throws {
            // A connection accepted but not yet served when the shutdown came used to stop the
            // process (NIO: "Deinited NIOAsyncWriter without calling finish()"), in 14 of 15 such
            // bursts; a SIGTERM before the signals were trapped ended it with the default action.
            for _ in 0..<3 {
                try await withTemporaryDirectory { dir in
                    let daemon = try await DaemonHarness(
                        in: dir, ["--feed", Self.feed.absoluteString, "--interval", "1h"])
                    var clients: [UnixSocketClient] = []
                    for i in 0..<300 {
                        if i == 100 { daemon.process.signal(SIGTERM) }
                        guard let client = try? UnixSocketClient(path: daemon.socketPath) else { break }
                        clients.append(client)
                    }
                    let exit = try await daemon.process.wait(timeout: .seconds(15))
                    #expect(exit == 0, "quaked exited \(exit):\n\(daemon.process.stderr)")
                    #expect(clients.count >= 100)
                }
            }
        }

        /// A daemon whose history is five transactions: the import, then a Delete of one quake in
        /// each of four; with its store's id.
        func startDaemonWithFiveTransactions(in dir: URL) async throws -> (DaemonHarness, String) {
            let daemon = try await startDaemon(in: dir)
            let ids = try daemon.withStore { try $0.allQuakes().map(\.id) }
            for id in ids.prefix(4) { _ = try await daemon.call(IOQuaked.Delete.self, .init(ids: [id])) }
            return (daemon, try await daemon.getStatus().storeId)
        }

        /// FetchHistory's pages after `after`, two transactions each, asked one call at a time.
        static func pages(_ daemon: DaemonHarness, _ storeID: String, after: Int) async throws
            -> [IOQuaked.FetchHistory.Reply]
        {
            var pages: [IOQuaked.FetchHistory.Reply] = []
            var cursor = after
            while true {
                let page = try await daemon.call(IOQuaked.FetchHistory.self, .init(storeId: storeID, after: cursor, limit: 2))
                pages.append(page)
                cursor = page.nextAfter
                if !page.hasMore { return pages }
            }
        }

        @Test("FetchHistory after every token returns exactly the later transactions; bad tokens and stores are errors")
        func fetchHistory() async throws {
            try await withTemporaryDirectory { dir in
                let (daemon, storeID) = try await startDaemonWithFiveTransactions(in: dir)
                for after in 0...5 {
                    let tokens = try await Self.pages(daemon, storeID, after: after).flatMap { $0.transactions.map(\.token) }
                    #expect(tokens == Array(stride(from: after + 1, through: 5, by: 1)))
                }
                let first = try await daemon.call(IOQuaked.FetchHistory.self, .init(after: 0, limit: 1))
                let insert = first.transactions.first
                #expect(insert?.author == .import)
                #expect(insert?.changes.count == 8)

                let mismatch = try await daemon.result(
                    IOQuaked.FetchHistory.self, .init(storeId: UUID().uuidString.lowercased(), after: 1))
                #expect(mismatch.error?.name == IOQuaked.StoreMismatch.name)
                #expect(try mismatch.error?.decode(IOQuaked.StoreMismatch.self).storeId == storeID)
                let ahead = try await daemon.result(IOQuaked.FetchHistory.self, .init(after: 99))
                #expect(ahead.error?.name == IOQuaked.TokenAhead.name)
                #expect(try await daemon.stop() == 0)
            }
        }

        @Test("FetchHistory called with more streams the pages, each with continues but the last: the same pages as asked one by one")
        func fetchHistoryStreamed() async throws {
            try await withTemporaryDirectory { dir in
                let (daemon, storeID) = try await startDaemonWithFiveTransactions(in: dir)
                let client = try UnixSocketClient(path: daemon.socketPath)
                for after in 0...5 {
                    // Asked one page at a time...
                    let paged = try await Self.pages(daemon, storeID, after: after)
                    // ...and in one call with more: the same pages, continues on all but the last.
                    try client.callMore(
                        IOQuaked.FetchHistory.self, .init(storeId: storeID, after: after, limit: 2, client: "streamer"))
                    var streamed: [IOQuaked.FetchHistory.Reply] = []
                    var continued: [Bool] = []
                    while let (result, continues) = try client.next(IOQuaked.FetchHistory.self) {
                        streamed.append(try result.get())
                        continued.append(continues)
                        if !continues { break }
                    }
                    #expect(streamed == paged, "after \(after)")
                    #expect(continued == paged.indices.map { $0 < paged.count - 1 }, "after \(after)")
                    #expect(streamed.flatMap { $0.transactions.map(\.token) } == Array(stride(from: after + 1, through: 5, by: 1)))
                    // The connection serves the next call.
                    #expect(try client.call(IOQuaked.GetStatus.self, .init()).storeId == storeID)
                }
                // With a client name, the first page's after token is what is acknowledged.
                let clients = try await daemon.getStatus().clients
                #expect(clients.first { $0.name == "streamer" }?.token == 5)

                // A filter streams as it pages (pages may be empty while hasMore), and an error
                // is the only reply.
                let filter = IOQuaked.Filter(minMagnitude: 9.5)
                try client.callMore(IOQuaked.FetchHistory.self, .init(storeId: storeID, after: 0, limit: 1, filter: filter))
                var filtered: [IOQuaked.FetchHistory.Reply] = []
                while let (result, continues) = try client.next(IOQuaked.FetchHistory.self) {
                    filtered.append(try result.get())
                    if !continues { break }
                }
                #expect(filtered.count == 5 && filtered.last?.hasMore == false && filtered.last?.nextAfter == 5)
                try client.callMore(IOQuaked.FetchHistory.self, .init(storeId: storeID, after: 99, limit: 1))
                let ahead = try #require(try client.next(IOQuaked.FetchHistory.self))
                #expect(ahead.result.error?.name == IOQuaked.TokenAhead.name && !ahead.continues)
                #expect(try client.call(IOQuaked.GetStatus.self, .init()).storeId == storeID)
                #expect(try await daemon.stop() == 0)
            }
        }

        @Test("after a purge an old token is TokenExpired with the oldest and head tokens")
        func tokenExpired() async throws {
            try await withTemporaryDirectory { dir in
                // History written 10 and 9 days ago, then today: a 7-day history keeps only today's.
                let store = try QuakeStore(directory: dir.appendingPathComponent("state"))
                for (n, days) in [10.0, 9, 0].enumerated() {
                    let fixture = [
                        Self.feed, Fixtures.usgs("lhayesgolding__EarthquakeData__x.geojson"),
                        Fixtures.usgs("lhayesgolding__EarthquakeData__significant_week.geojson"),
                    ][n]
                    _ = try await store.importFeed(source: "test", now: Date().addingTimeInterval(-days * 86_400)) {
                        sink in
                        try await sink.sendFile(at: fixture)
                    }
                }
                try store.close()
                let daemon = try await DaemonHarness(in: dir, ["--feed", Self.feed.absoluteString, "--interval", "1h"])
                try await waitUntil(timeout: .seconds(10)) { try await daemon.getStatus().oldestToken == 2 }
                let expired = try await daemon.result(IOQuaked.FetchHistory.self, .init(after: 1))
                #expect(expired.error?.name == IOQuaked.TokenExpired.name)
                let parameters = try #require(try expired.error?.decode(IOQuaked.TokenExpired.self))
                #expect(parameters.oldestToken == 2)
                #expect(parameters.after == 1)
                #expect(parameters.headToken >= 3)
                let fine = try await daemon.result(IOQuaked.FetchHistory.self, .init(after: 2))
                #expect(fine.error == nil)
                #expect(try await daemon.stop() == 0)
            }
        }

        @Test(
            "history a named client still needs survives the purge; a client gone longer than the hard maximum does not hold it"
        )
        func consumerAwareRetention() async throws {
            try await withTemporaryDirectory { dir in
                let store = try QuakeStore(directory: dir.appendingPathComponent("state"))
                let fixtures = [
                    Self.feed, Fixtures.usgs("lhayesgolding__EarthquakeData__x.geojson"),
                    Fixtures.usgs("lhayesgolding__EarthquakeData__significant_week.geojson"),
                ]
                for (fixture, days) in zip(fixtures, [10.0, 9, 8]) {
                    _ = try await store.importFeed(source: "test", now: Date().addingTimeInterval(-days * 86_400)) {
                        sink in
                        try await sink.sendFile(at: fixture)
                    }
                }
                // "desk" applied token 1 and is still around; "attic" stopped at 0 six weeks ago.
                try await store.acknowledge(client: "desk", token: 1)
                try await store.acknowledge(client: "attic", token: 0, now: Date().addingTimeInterval(-42 * 86_400))
                try store.close()
                let daemon = try await DaemonHarness(
                    in: dir, ["--feed", Self.feed.absoluteString, "--interval", "1h"],
                    environment: ["QUAKED_HISTORY_MAX_AGE": "1d", "QUAKED_HISTORY_HARD_MAX_AGE": "30d"])
                try await waitUntil(timeout: .seconds(10)) { try await daemon.getStatus().oldestToken == 1 }
                #expect(try await daemon.result(IOQuaked.FetchHistory.self, .init(after: 1)).error == nil)
                #expect(
                    try await daemon.result(IOQuaked.FetchHistory.self, .init(after: 0)).error?.name
                        == IOQuaked.TokenExpired.name)
                let clients = try await daemon.getStatus().clients
                #expect(Set(clients.map(\.name)) == ["attic", "desk"])
                #expect(try await daemon.stop() == 0)
            }
        }

        @Test("Snapshot streams every row as of one token; Query and Get answer")
        func snapshotQueryGet() async throws {
            try await withTemporaryDirectory { dir in
                let daemon = try await startDaemon(in: dir)
                let client = try UnixSocketClient(path: daemon.socketPath)
                try client.callMore(IOQuaked.Snapshot.self, .init(pageSize: 3))
                var ids: [String] = []
                var token: Int?
                while true {
                    let reply = try #require(try client.next(IOQuaked.Snapshot.self))
                    let page = try reply.result.get()
                    ids += page.quakes.map(\.id)
                    token = page.token
                    if !reply.continues { break }
                }
                #expect(token == 1)
                let stored = try daemon.withStore { try $0.allQuakes().map(\.id) }
                #expect(ids == stored.sorted())

                let query = try await daemon.call(
                    IOQuaked.Query.self, .init(minMagnitude: 1.5, limit: 2, order: .magnitude))
                let mags = query.quakes.compactMap(\.mag)
                let expected = try daemon.withStore {
                    try $0.allQuakes().compactMap(\.mag).filter { $0 >= 1.5 }.sorted(by: >)
                }
                #expect(mags == Array(expected.prefix(2)))
                #expect(query.total == expected.count)

                let get = try await daemon.call(IOQuaked.Get.self, .init(id: stored[0]))
                #expect(get.quake.id == stored[0])
                let missing = try await daemon.result(IOQuaked.Get.self, .init(id: "xx0"))
                #expect(missing.error?.name == IOQuaked.NoSuchQuake.name)
                #expect(try await daemon.stop() == 0)
            }
        }

        @Test("1,000 concurrent subscribers all receive the notification")
        func thousandSubscribers() async throws {
            raiseOpenFileLimit()
            try await withTemporaryDirectory { dir in
                let daemon = try await startDaemon(in: dir)
                // A thousand blocking reads: on a Dispatch thread, not the cooperative pool.
                let (subscriberCount, received) = try await onBlockingThread { () throws -> (Int, Int) in
                    var subscribers: [UnixSocketClient] = []
                    for _ in 0..<1000 {
                        let client = try UnixSocketClient(path: daemon.socketPath)
                        try client.callMore(IOQuaked.Subscribe.self, .init(heartbeatSeconds: 600))
                        subscribers.append(client)
                    }
                    for client in subscribers {
                        #expect(try #require(try client.nextReply(IOQuaked.Subscribe.self)).event == .subscribed)
                    }
                    let rpc = try UnixSocketClient(path: daemon.socketPath)
                    let subscriberCount = try rpc.call(IOQuaked.GetStatus.self, .init()).subscribers
                    let id = try daemon.withStore { try $0.allQuakes()[0].id }
                    let token = try #require(try rpc.call(IOQuaked.Delete.self, .init(ids: [id])).token)
                    var received = 0
                    for client in subscribers {
                        let event = try #require(try client.nextReply(IOQuaked.Subscribe.self, timeout: .seconds(20)))
                        if event.event == .changed && event.headToken == token {
                            received += 1
                        }
                    }
                    return (subscriberCount, received)
                }
                #expect(subscriberCount == 1000)
                #expect(received == 1000)
                #expect(try await daemon.stop() == 0)
            }
        }

        @Test("a subscriber that never reads neither grows the daemon's memory nor holds up imports")
        func stuckSubscriber() async throws {
            try await withTemporaryDirectory { dir in
                let daemon = try await startDaemon(in: dir)
                let stuck = try UnixSocketClient(path: daemon.socketPath)
                try stuck.callMore(IOQuaked.Subscribe.self, .init(heartbeatSeconds: 1))
                // Warm up, then measure across many transactions the stuck subscriber never reads.
                let ids = try daemon.withStore { try $0.allQuakes().map(\.id) }
                _ = try await daemon.call(IOQuaked.Delete.self, .init(ids: [ids[0]]))
                let before = try residentKiB(daemon.process.pid)
                let started = ContinuousClock.now
                for round in 0..<100 {
                    // Each round: a refresh re-imports the deleted quake (insert), then a delete.
                    _ = try await daemon.call(IOQuaked.Refresh.self, .init())
                    _ = try await daemon.call(IOQuaked.Delete.self, .init(ids: [ids[round % 7 + 1]]))
                }
                let elapsed = ContinuousClock.now - started
                let after = try residentKiB(daemon.process.pid)
                #expect(try await daemon.getStatus().headToken >= 150)
                if !Sanitizer.isActive {
                    #expect(after - before < 8 * 1024, "RSS grew from \(before) KiB to \(after) KiB")
                }
                #expect(elapsed < .seconds(30), "200 writes took \(elapsed)")
                _ = stuck
                #expect(try await daemon.stop() == 0)
            }
        }

        @Test("a client that stops reading its replies is disconnected after write-timeout")
        func nonReadingClientIsDropped() async throws {
            try await withTemporaryDirectory { dir in
                let big = Fixtures.usgs("heltond__earthquakes__query.geojson")
                let daemon = try await DaemonHarness(
                    in: dir, ["--feed", big.absoluteString, "--interval", "1h"],
                    environment: ["QUAKED_WRITE_TIMEOUT": "1s"])
                try await waitUntil(timeout: .seconds(20)) { try await daemon.getStatus().quakeCount == 4312 }
                // 22 pages of about 150 kB: far more than the socket buffers hold.
                let stuck = try UnixSocketClient(path: daemon.socketPath)
                try stuck.callMore(IOQuaked.Snapshot.self, .init(pageSize: 200))
                try await Task.sleep(for: .seconds(3))
                #expect(try await daemon.getStatus().quakeCount == 4312)  // others carry on meanwhile
                // Now read: the buffered part of the reply, then the end of the connection, never the rest.
                let outcome = try await onBlockingThread { () -> String in
                    do {
                        var pages = 0
                        while let message = try stuck.receive(timeout: .seconds(10)) {
                            pages += 1
                            if !message.contains(#""continues":true"#) { return "whole snapshot (\(pages) pages)" }
                        }
                        return "closed after \(pages) pages"
                    } catch {
                        return "closed: \(error)"
                    }
                }
                #expect(outcome.hasPrefix("closed"), "\(outcome)")
                #expect(daemon.process.stderr.contains("stopped reading"))
                #expect(try await daemon.stop() == 0)
            }
        }

        @Test("oversized and never-ending messages get their errors and are closed; other clients carry on")
        func messageLimits() async throws {
            try await withTemporaryDirectory { dir in
                // The 1.1 MB message must reach its limit before the deadline: a sanitized daemon
                // reads it several times slower, too slow for 1 s on a busy machine.
                let deadline = Sanitizer.isActive ? "3s" : "1s"
                let daemon = try await startDaemon(in: dir, environment: ["QUAKED_MESSAGE_TIMEOUT": deadline])
                let bystander = try UnixSocketClient(path: daemon.socketPath)

                let big = try UnixSocketClient(path: daemon.socketPath)
                try big.send(
                    Array(#"{"method":"io.quaked.GetStatus","parameters":{"x":""#.utf8)
                        + [UInt8](repeating: 0x61, count: 1_100_000))
                let tooLarge = try #require(try big.receive())
                #expect(tooLarge.contains("io.quaked.MessageTooLarge"))
                #expect(try big.receive() == nil)  // closed

                let slow = try UnixSocketClient(path: daemon.socketPath)
                try slow.send(Array(#"{"method":"io.quaked.GetSt"#.utf8))
                let timedOut = try #require(try slow.receive(timeout: .seconds(10)))
                #expect(timedOut.contains("io.quaked.MessageTimeout"))
                #expect(try slow.receive() == nil)

                #expect(try bystander.result(IOQuaked.GetStatus.self, .init()).error == nil)
                #expect(try await daemon.stop() == 0)
            }
        }

        @Test("over max-connections, a connection is answered TooManyConnections")
        func connectionLimit() async throws {
            try await withTemporaryDirectory { dir in
                let daemon = try await startDaemon(in: dir, environment: ["QUAKED_MAX_CONNECTIONS": "2"])
                // Let the daemon notice that the start-up probes' connections have closed.
                try await Task.sleep(for: .seconds(1))
                let a = try UnixSocketClient(path: daemon.socketPath)
                let b = try UnixSocketClient(path: daemon.socketPath)
                #expect(try a.result(IOQuaked.GetStatus.self, .init()).error == nil)
                #expect(try b.result(IOQuaked.GetStatus.self, .init()).error == nil)
                let c = try UnixSocketClient(path: daemon.socketPath)
                // However late its call comes, the refused client reads the error as its reply,
                // never a broken pipe (CI saw one when the refusal came unprompted at once).
                try await Task.sleep(for: .milliseconds(300))
                let refused = try c.result(IOQuaked.GetStatus.self, .init())
                #expect(refused.error?.name == IOQuaked.TooManyConnections.name)
                #expect(try c.receive() == nil)  // closed
                // A client that sends nothing is told unprompted, and closed.
                let silent = try UnixSocketClient(path: daemon.socketPath)
                let told = try #require(try silent.receive(timeout: .seconds(5)))
                #expect(told.contains("io.quaked.TooManyConnections"))
                #expect(try silent.receive() == nil)
                _ = (a, b)
                #expect(try await daemon.stop() == 0)
            }
        }

        @Test("Delete from a peer that is not an administrator is PermissionDenied", .enabled(if: getuid() == 0))
        func permissionDenied() async throws {
            try await withTemporaryDirectory { dir in
                let daemon = try await startDaemon(in: dir)
                // Let an unprivileged user reach the socket, as group membership would.
                chmod(dir.path, 0o755)
                chmod(daemon.socketPath, 0o666)
                let input = dir.appendingPathComponent("delete")
                try Data(Array(#"{"method":"io.quaked.Delete","parameters":{"ids":["x"]}}"#.utf8) + [0]).write(
                    to: input)
                chmod(input.path, 0o644)
                let result = try await ChildProcess.run(
                    "/usr/bin/setpriv",
                    [
                        "--reuid=65534", "--regid=65534", "--clear-groups", "/usr/bin/socat", "-t", "2",
                        "OPEN:\(input.path),rdonly!!STDOUT",
                        "UNIX-CONNECT:\(daemon.socketPath)",
                    ])
                #expect(
                    result.stdout.contains("org.varlink.service.PermissionDenied"), "\(result.stdout) \(result.stderr)")
                // The same call as root (the daemon's own user) is allowed.
                #expect(try await daemon.result(IOQuaked.Delete.self, .init(ids: ["x"])).error == nil)
                #expect(try await daemon.stop() == 0)
            }
        }

        @Test("a named client's acknowledged token shows as lag in GetStatus")
        func namedClients() async throws {
            try await withTemporaryDirectory { dir in
                let daemon = try await startDaemon(in: dir)
                _ = try await daemon.call(IOQuaked.FetchHistory.self, .init(after: 0, client: "desk"))
                let ids = try daemon.withStore { try $0.allQuakes().map(\.id) }
                _ = try await daemon.call(IOQuaked.Delete.self, .init(ids: [ids[0]]))
                _ = try await daemon.call(IOQuaked.Delete.self, .init(ids: [ids[1]]))
                let clients = try await daemon.getStatus().clients
                #expect(clients.count == 1)
                #expect(clients.first?.name == "desk")
                #expect(clients.first?.token == 0)
                #expect(clients.first?.lag == 3)
                _ = try await daemon.call(IOQuaked.Acknowledge.self, .init(client: "desk", token: 3))
                #expect(try await daemon.getStatus().clients.first?.lag == 0)
                #expect(try await daemon.stop() == 0)
            }
        }
    }
}

/// Resident memory of a process, from /proc.
func residentKiB(_ pid: Int32) throws -> Int {
    let status = try String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)
    let line = status.split(separator: "\n").first { $0.hasPrefix("VmRSS:") } ?? ""
    return Int(line.split(separator: " ").dropFirst().first ?? "") ?? 0
}

/// This test process opens a thousand sockets: lift the soft limit to the hard one.
func raiseOpenFileLimit() {
    var limit = rlimit()
    guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return }
    limit.rlim_cur = limit.rlim_max
    setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
}
