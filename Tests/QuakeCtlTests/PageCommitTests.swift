import Foundation
import GRDB
@testable import QuakeClient
import QuakeProtocol
import QuakeStore
import QuakeTestSupport
import Testing
import Varlink

/// Counts the commits of a cache's SQLite writer (every write transaction, whatever it changed).
final class CommitCounter: TransactionObserver, @unchecked Sendable {
    private let lock = NSLock()
    private var count = 0
    var commits: Int { lock.withLock { count } }

    func observes(eventsOfKind eventKind: DatabaseEventKind) -> Bool { false }
    func databaseDidChange(with event: DatabaseEvent) {}
    func databaseDidCommit(_ db: Database) { lock.withLock { count += 1 } }
    func databaseDidRollback(_ db: Database) {}

    /// A counter of `cache`'s commits from now on; keep it (the cache holds it weakly).
    static func counting(_ cache: QuakeCache) -> CommitCounter {
        let counter = CommitCounter()
        cache.writer.add(transactionObserver: counter, extent: .observerLifetime)
        return counter
    }
}

/// A catch-up's page committed at once: ``QuakeCache/prepare(page:storeId:)`` and
/// ``QuakeCache/apply(page:storeId:outbox:)`` against the same transactions applied one by one.
@Suite struct PageCommitTests {
    static func change(_ id: String, _ kind: IOQuaked.ChangeKind, _ quake: IOQuaked.Quake? = nil) -> IOQuaked.Change {
        IOQuaked.Change(quakeId: id, kind: kind, fields: nil, tombstone: nil, reason: nil, supersededBy: nil, quake: quake)
    }

    static func transaction(_ token: Int, _ changes: [IOQuaked.Change]) -> IOQuaked.Transaction {
        IOQuaked.Transaction(
            token: token, author: .import, timestamp: 0, source: nil, inserted: 0, updated: changes.count, deleted: 0,
            changes: changes)
    }

    static func cache(_ dir: URL, _ name: String) throws -> QuakeCache {
        let cache = try QuakeCache(path: dir.appendingPathComponent(name).path)
        try cache.beginReset()
        try cache.stage([CacheTests.quake("a", mag: 1), CacheTests.quake("b", mag: 2)])
        try cache.finishReset(storeId: "S", token: 5)
        return cache
    }

    /// Rows written, removed, written again and read for `before` within one page.
    static let page: [IOQuaked.Transaction] = [
        transaction(6, [change("c", .insert, CacheTests.quake("c", mag: 3)), change("a", .update, CacheTests.quake("a", mag: 1.5))]),
        // b leaves: its row as the cache has it.
        transaction(7, [change("b", .leave)]),
        // a's row as t6 left it, not the cache's before the page.
        transaction(8, [change("a", .update)]),
        // b left in t7: no row to report.
        transaction(9, [change("b", .update), change("d", .insert, CacheTests.quake("d", mag: 4))]),
        transaction(10, [change("a", .delete), change("c", .update, CacheTests.quake("c", mag: 3.3))]),
        transaction(11, [change("a", .enter, CacheTests.quake("a", mag: 5)), change("d", .leave)]),
    ]

    @Test func aPageIsOneCommitWithTheRowsAndBeforesOfOneByOne() async throws {
        try await withTemporaryDirectory { dir in
            let one = try Self.cache(dir, "one.sqlite")
            let paged = try Self.cache(dir, "paged.sqlite")
            var befores: [[String: IOQuaked.Quake]] = []
            for transaction in Self.page {
                befores.append(try #require(try one.prepare(transaction, storeId: "S")))
                #expect(try one.apply(transaction, storeId: "S"))
            }
            #expect(befores[1]["b"]?.mag == 2)
            #expect(befores[2]["a"]?.mag == 1.5)
            #expect(befores[3].isEmpty)

            let counter = CommitCounter.counting(paged)
            let prepared = try #require(try paged.prepare(page: Self.page[...], storeId: "S"))
            #expect(prepared.start == 0)
            #expect(prepared.before == befores)
            #expect(try paged.apply(page: Self.page[...], storeId: "S"))
            #expect(counter.commits == 1, "the page in one SQLite transaction")
            #expect(try paged.position()?.token == 11)
            #expect(try paged.allQuakes() == one.allQuakes())
            #expect(try paged.allQuakes().map(\.id) == ["a", "c"])

            // Applied already, or from another store: nothing; a page half applied goes on after it.
            #expect(try paged.prepare(page: Self.page[...], storeId: "S") == nil)
            #expect(try paged.apply(page: Self.page[...], storeId: "S") == false)
            let later = [Self.transaction(12, [Self.change("c", .delete)]), Self.transaction(13, [Self.change("x", .insert, CacheTests.quake("x", mag: 1))])]
            #expect(try paged.prepare(page: later[...], storeId: "T") == nil)
            #expect(try paged.apply(page: later[...], storeId: "T") == false)
            #expect(try paged.prepare(page: (Self.page + later)[...], storeId: "S")?.start == 6)
            #expect(try paged.position()?.token == 11)
            #expect(try paged.allQuakes().map(\.id) == ["a", "c"])
        }
    }

    @Test func theOutboxEntriesCommitWithThePage() async throws {
        try await withTemporaryDirectory { dir in
            let cache = try Self.cache(dir, "outbox.sqlite")
            let entries = Self.page.map {
                OutboxEntry(storeId: "S", token: $0.token, queuedAt: 0, held: false, mag: nil, line: "{}", environment: [:])
            }
            let counter = CommitCounter.counting(cache)
            #expect(try cache.apply(page: Self.page[...], storeId: "S", outbox: entries))
            #expect(counter.commits == 1, "rows, position and outbox in one SQLite transaction")
            #expect(try cache.outbox().map(\.token) == Self.page.map(\.token))
            // Not applied (already), not queued.
            #expect(try cache.apply(page: Self.page[...], storeId: "S", outbox: entries) == false)
            #expect(try cache.outboxCount() == Self.page.count)
        }
    }
}

extension ClientEndToEnd {
    /// The Watcher against a real quaked: a catch-up commits each page once, after delivering it.
    @Suite struct WatcherPageTests {
        /// `count` transactions after the daemon's first import: a quake deleted in each.
        static func deletes(_ daemon: Quaked, _ count: Int) async throws {
            let ids = try daemon.withStore { try $0.allQuakes() }.prefix(count).map(\.id)
            for id in ids {
                #expect(try await quakectl(["delete", id, "--socket", daemon.socketPath]).status == 0)
            }
        }

        @Test func aCatchUpCommitsEachPageOnceAfterDeliveringAllOfIt() async throws {
            try await withQuaked { daemon in
                try await Self.deletes(daemon, 7)
                let (storeId, head) = try daemon.withStore { ($0.storeID, Int(try $0.head())) }
                let cache = try QuakeCache(path: daemon.directory.appendingPathComponent("paged.sqlite").path)
                try cache.beginReset()
                try cache.finishReset(storeId: storeId, token: 0)
                let counter = CommitCounter.counting(cache)
                var options = Watcher.Options(socketPath: daemon.socketPath)
                options.pageLimit = 3
                options.sinceNow = true
                let watcher = Watcher(options: options, cache: cache)
                // Each delivered transaction with the cache's position as it was delivered.
                let delivered = LockedBox<[(token: Int, position: Int)]>([])
                let stop = WatchStop()
                let running = Task {
                    try await watcher.run(stop: stop) { event in
                        guard case .applied(let transaction, _, _, _) = event else { return }
                        let position = try cache.position()?.token ?? -1
                        delivered.mutate { $0.append((transaction.token, position)) }
                    }
                }
                try await waitUntil(timeout: .seconds(30)) { try cache.position()?.token == head }
                await stop.request()
                try await running.value

                let runs = delivered.value
                let tokens = try daemon.withStore { try $0.history(after: 0, limit: 1000).transactions.map { Int($0.token) } }
                #expect(runs.map(\.token) == tokens, "each transaction delivered once, in order")
                #expect(runs.count >= 8)
                // Pages of 3: the position moves only after a page's last delivery, to its end.
                let pages = Dictionary(grouping: runs, by: \.position)
                #expect(pages.count == (runs.count + 2) / 3, "\(runs)")
                for (position, page) in pages {
                    #expect(page.allSatisfy { $0.token > position })
                    #expect(page.count == 3 || page.map(\.token).contains(head))
                }
                #expect(counter.commits == pages.count, "one SQLite transaction per page")
                try cache.close()
            }
        }

        /// A `quakectl watch` killed (-9) in the middle of a catch-up page, after printing some of
        /// it and before committing it: the next run prints the page again, and nothing is lost.
        @Test func aWatchKilledInTheMiddleOfAPagePrintsItAgainAndLosesNothing() async throws {
            try await withQuaked { daemon in
                let cache = daemon.directory.appendingPathComponent("killed.sqlite").path
                let first = try WatchTests.watch(daemon, cache: cache)
                try await WatchTests.expectCaughtUp(first, daemon, cache: cache)
                first.signal(SIGTERM)
                #expect(try await first.wait() == 0)
                let start = try #require(try QuakeCache(path: cache).position()?.token)

                // A page of three transactions: a delete (one line), a week's import (more lines
                // than a pipe holds), a delete.
                let ids = try daemon.withStore { try $0.allQuakes() }.prefix(2).map(\.id)
                #expect(try await quakectl(["delete", ids[0], "--socket", daemon.socketPath]).status == 0)
                _ = try await daemon.importOnce(TestFeeds.week)
                #expect(try await quakectl(["delete", ids[1], "--socket", daemon.socketPath]).status == 0)
                let expected = try daemon.historyChanges(after: start)
                #expect(Set(expected.map(\.token)).count == 3)

                // Its output into a pipe nobody reads: the watch stops, blocked, once the pipe is full.
                let process = Process()
                process.executableURL = URL(fileURLWithPath: BuiltProducts.path("quakectl"))
                process.arguments = ["watch", "--json", "--heartbeat", "1", "--socket", daemon.socketPath, "--cache", cache]
                let output = Pipe()
                process.standardOutput = output
                process.standardError = FileHandle.nullDevice
                try process.run()
                let reader = output.fileHandleForReading.fileDescriptor
                _ = fcntl(reader, F_SETFL, fcntl(reader, F_GETFL) | O_NONBLOCK)
                let capacity = Int(fcntl(reader, 1032))  // F_GETPIPE_SZ
                try await waitUntil(timeout: .seconds(30)) {
                    var pending: Int32 = 0
                    _ = withUnsafeMutablePointer(to: &pending) { ioctl(reader, UInt(FIONREAD), $0) }
                    return Int(pending) >= capacity - 4096
                }
                try await Task.sleep(for: .milliseconds(300))
                #expect(try QuakeCache(path: cache).position()?.token == start, "printed, not committed")
                kill(process.processIdentifier, SIGKILL)
                process.waitUntilExit()
                var bytes: [UInt8] = []
                var chunk = [UInt8](repeating: 0, count: 65536)
                while true {
                    let n = read(reader, &chunk, chunk.count)
                    if n <= 0 { break }
                    bytes += chunk[0..<n]
                }
                // Whole lines only: the kill may have cut the last one.
                let text = String(decoding: bytes, as: UTF8.self)
                let killedRun = try WatchOutput(String(text[..<(text.lastIndex(of: "\n") ?? text.startIndex)]))
                #expect(killedRun.changes.first?.quakeId == ids[0], "the page's first transaction was printed")
                #expect(Set(killedRun.changes.map(\.token)).count == 2)

                let second = try WatchTests.watch(daemon, cache: cache)
                defer { second.signal(SIGKILL) }
                try await WatchTests.expectCaughtUp(second, daemon, cache: cache)
                let printed = try WatchOutput(second.stdout).changes
                #expect(printed.count == Set(printed).count, "a change was printed twice by one run")
                #expect(printed.sorted() == expected.sorted(), "the whole page again, and nothing lost")
                #expect(Set(killedRun.changes).isSubset(of: Set(expected)))
            }
        }
    }
}

/// A value shared with a Watcher's handler.
final class LockedBox<Value>: @unchecked Sendable {
    private let lock = NSLock()
    private var stored: Value
    init(_ value: Value) { stored = value }
    var value: Value { lock.withLock { stored } }
    func mutate(_ body: (inout Value) -> Void) { lock.withLock { body(&stored) } }
}
