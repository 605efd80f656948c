import Foundation
import QuakeTestSupport
import NIOConcurrencyHelpers
import Testing

@testable import QuakeStore

@Suite("Commit announcements", .timely)
struct CommitsTests {
    /// Much longer than any test waits for an in-process commit: seeing one means the write woke
    /// the iterator, not a poll.
    static let slowPoll = Duration.seconds(Sanitizer.isActive ? 600 : 60)
    /// What "at once" and "within a second" may take on a loaded machine (with the other test
    /// suites running in parallel on two cores, a few seconds have been seen; under
    /// ThreadSanitizer, with every suite several times slower, 10 to 15 s).
    static let patience = Duration.seconds(Sanitizer.isActive ? 60 : 10)

    @Test("an import, a delete and a retention pass are announced at once, to every iterator")
    func inProcessWrites() async throws {
        try await withTemporaryDirectory { dir in
            let store = try QuakeStore(directory: dir)
            let start = try store.head()
            try await consuming(store.commits(after: start, pollInterval: Self.slowPoll)) { first in
                try await consuming(store.commits(after: start, pollInterval: Self.slowPoll)) { second in
                    // A copy of the value writes: it shares the store's signal.
                    let writer = store
                    let imported = try #require(
                        try await importJSON(
                            feedJSON([featureJSON(id: "us1"), featureJSON(id: "us2")]), into: writer
                        ).token)
                    var expected = [StoreCommit(token: imported, author: .import)]
                    try await first.expect(expected)
                    try await second.expect(expected)

                    let deleted = try #require(try await writer.delete(ids: ["us1"]).token)
                    expected.append(StoreCommit(token: deleted, author: .delete))
                    try await first.expect(expected)
                    try await second.expect(expected)

                    // The fixture's events are from 2023: a day's retention expires us2.
                    let expired = try #require(try await writer.applyRetention(maxAge: .seconds(86_400)))
                    expected.append(StoreCommit(token: expired, author: .retention))
                    try await first.expect(expected)
                    try await second.expect(expected)
                    #expect(imported < deleted && deleted < expired)
                    #expect(try store.head() == expired)
                }
            }
        }
    }

    @Test("a commit through a second QuakeStore on the same file is announced by polling its files")
    func secondStoreOnTheSameFile() async throws {
        try await withTemporaryDirectory { dir in
            let store = try QuakeStore(directory: dir)
            let other = try QuakeStore(path: store.path)
            defer { try? other.close() }
            try await consuming(store.commits(after: try store.head())) { log in
                let imported = try #require(
                    try await importJSON(feedJSON([featureJSON(id: "us1"), featureJSON(id: "us2")]), into: other)
                        .token)
                var expected = [StoreCommit(token: imported, author: .import)]
                try await log.expect(expected)

                let deleted = try #require(try await other.delete(ids: ["us2"]).token)
                expected.append(StoreCommit(token: deleted, author: .delete))
                try await log.expect(expected)
            }
        }
    }

    @Test(
        "a commit by another process (quaked --once) is announced",
        .enabled(if: FileManager.default.isExecutableFile(atPath: BuiltProducts.path("quaked"))))
    func otherProcess() async throws {
        try await withTemporaryDirectory { dir in
            let store = try QuakeStore(directory: dir)
            try await consuming(store.commits(after: try store.head())) { log in
                let fixture = Fixtures.usgs("rodu__quakemap__all_day.geojson")
                let result = try await ChildProcess.run(
                    BuiltProducts.path("quaked"),
                    ["--once", "--feed", fixture.absoluteString, "--state-directory", dir.path, "--json"])
                #expect(result.status == 0, "\(result.stderr)")
                let report = try #require(
                    try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any])
                let token = try #require(report["token"] as? Int)
                try await log.expect([StoreCommit(token: HistoryToken(token), author: .import)])
            }
        }
    }

    @Test("looking at an idle store reads only file stamps; a change of the files is noticed")
    func idlePollsDoNotRead() async throws {
        try await withTemporaryDirectory { dir in
            let store = try QuakeStore(directory: dir)
            let first = try #require(try await importJSON(feedJSON([featureJSON(id: "us1")]), into: store).token)
            let other = try QuakeStore(path: store.path)
            defer { try? other.close() }
            // As if the files last changed an hour ago: their stamps are trusted from the start,
            // instead of after the seconds a fresh change is looked at again.
            for file in [store.path, store.path + "-wal"] {
                try FileManager.default.setAttributes(
                    [.modificationDate: Date(timeIntervalSinceNow: -3600)], ofItemAtPath: file)
            }
            let commits = store.commits(after: first, pollInterval: .milliseconds(10))

            // About a hundred looks at an idle store: one read, the first.
            let idleReads = try await withThrowingTaskGroup(of: Int.self) { group in
                group.addTask {
                    var iterator = commits.makeAsyncIterator()
                    let commit = try await iterator.next()
                    #expect(commit == nil)
                    return iterator.headReads
                }
                try await Task.sleep(for: .seconds(1))
                group.cancelAll()
                return try #require(try await group.next())
            }
            #expect(idleReads == 1)

            // A write by another store (no signal here) changes the WAL's stamp.
            try await consuming(commits) { log in
                let next = try #require(
                    try await importJSON(feedJSON([featureJSON(id: "us2")]), into: other).token)
                try await log.expect([StoreCommit(token: next, author: .import)])
            }
        }
    }

    @Test("writes that take no token are not announced; the next one that does is")
    func writesWithoutTokens() async throws {
        try await withTemporaryDirectory { dir in
            let store = try QuakeStore(directory: dir)
            let feed = feedJSON([featureJSON(id: "us1")])
            let first = try #require(try await importJSON(feed, into: store).token)
            // A short poll: the files these writes touch are looked at, and the head read, often.
            try await consuming(store.commits(after: first, pollInterval: .milliseconds(20))) { log in
                #expect(try await importJSON(feed, into: store).token == nil)
                #expect(try await store.delete(ids: ["us9"]).token == nil)
                #expect(try await store.applyRetention(maxAge: .seconds(3_000_000_000)) == nil)
                try await store.acknowledge(client: "watcher", token: first)
                // Removes the head's own history row; the head stays where it is.
                let purge = try await store.purgeHistory(olderThan: .zero, now: Date().addingTimeInterval(60))
                #expect(purge.removed == 1)
                try await Task.sleep(for: .seconds(1))
                #expect(log.commits.isEmpty)
                #expect(try store.head() == first)

                let next = try #require(try await importJSON(feedJSON([featureJSON(id: "us2")]), into: store).token)
                try await log.expect([StoreCommit(token: next, author: .import)])
            }
        }
    }

    @Test("commits before the consumer reads give one element, the newest; tokens strictly increase")
    func coalescing() async throws {
        try await withTemporaryDirectory { dir in
            let store = try QuakeStore(directory: dir)
            let start = try store.head()
            var iterator = store.commits(after: start, pollInterval: Self.slowPoll).makeAsyncIterator()
            let imported = try #require(
                try await importJSON(feedJSON([featureJSON(id: "us1"), featureJSON(id: "us2")]), into: store).token)
            let more = try #require(try await importJSON(feedJSON([featureJSON(id: "us3")]), into: store).token)
            let deleted = try #require(try await store.delete(ids: ["us1"]).token)
            #expect(start < imported && imported < more && more < deleted)

            let clock = ContinuousClock()
            let began = clock.now
            // `after` is behind the head: the first element comes at once.
            let coalesced = try await iterator.next()
            #expect(coalesced == StoreCommit(token: deleted, author: .delete))
            let last = try #require(try await importJSON(feedJSON([featureJSON(id: "us4")]), into: store).token)
            let following = try await iterator.next()
            #expect(following == StoreCommit(token: last, author: .import))
            #expect(clock.now - began < Self.patience)
        }
    }

    @Test("a commit of this process is announced from its signal without reading the store; another store's commit right after it still is")
    func carriedCommits() async throws {
        try await withTemporaryDirectory { dir in
            let store = try QuakeStore(directory: dir)
            let other = try QuakeStore(path: store.path)
            defer { try? other.close() }
            let start = try store.head()
            var iterator = store.commits(after: start, pollInterval: .milliseconds(20)).makeAsyncIterator()
            // The first look reads the head: the store's first commit comes from that read.
            let imported = try #require(try await importJSON(feedJSON([featureJSON(id: "us1")]), into: store).token)
            #expect(try await iterator.next() == StoreCommit(token: imported, author: .import))
            #expect(iterator.headReads == 1)

            // The next is carried by the signal: the same commit, with its author, and no read.
            let deleted = try #require(try await store.delete(ids: ["us1"]).token)
            let carried = try #require(try await iterator.next())
            #expect(carried == StoreCommit(token: deleted, author: .delete))
            #expect(carried.committedAt != nil)
            #expect(iterator.headReads == 1)

            // A commit through the other store, at once: the files are looked at again and the
            // head read, although the last commit was announced without a look.
            let more = try #require(try await importJSON(feedJSON([featureJSON(id: "us2")]), into: other).token)
            #expect(try await iterator.next() == StoreCommit(token: more, author: .import))
            #expect(iterator.headReads > 1)

            // A write whose changes cancel out carries no newer head: nothing is announced for
            // it, and the next real commit is.
            #expect(try await store.delete(ids: ["us9"]).token == nil)
            let last = try #require(try await importJSON(feedJSON([featureJSON(id: "us3")]), into: store).token)
            #expect(try await iterator.next() == StoreCommit(token: last, author: .import))
        }
    }

    @Test("under a stream of writes, tokens strictly increase, each with its author, ending at the head")
    func concurrentWrites() async throws {
        try await withTemporaryDirectory { dir in
            let store = try QuakeStore(directory: dir)
            let other = try QuakeStore(path: store.path)
            defer { try? other.close() }
            let start = try store.head()
            try await consuming(store.commits(after: start)) { log in
                // Through both stores, so both ways of noticing commits take part.
                var authors: [HistoryToken: HistoryAuthor] = [:]
                for round in 0..<15 {
                    let writer = round.isMultiple(of: 2) ? store : other
                    let id = "us\(round)"
                    let imported = try #require(
                        try await importJSON(feedJSON([featureJSON(id: id)]), into: writer).token)
                    authors[imported] = .import
                    if round.isMultiple(of: 3) {
                        authors[try #require(try await writer.delete(ids: [id]).token)] = .delete
                    }
                }
                let head = try store.head()
                let seen = try await log.waitFor(within: Self.patience) { $0.last?.token == head }
                #expect(seen.last?.token == head)
                #expect(zip(seen, seen.dropFirst()).allSatisfy { $0.token < $1.token })
                for commit in seen {
                    #expect(commit.author != nil && commit.author == authors[commit.token], "\(commit)")
                }
            }
        }
    }

    @Test("without `after`, iteration starts at the head when the first next() reads it")
    func startsWhereIterationStarts() async throws {
        try await withTemporaryDirectory { dir in
            let store = try QuakeStore(directory: dir)
            _ = try #require(try await importJSON(feedJSON([featureJSON(id: "us1")]), into: store).token)
            let commits = store.commits(pollInterval: Self.slowPoll)
            // Made after `commits()` was called, before it is iterated: not announced either.
            let beforeIteration = try #require(
                try await importJSON(feedJSON([featureJSON(id: "us2")]), into: store).token)
            try await withThrowingTaskGroup(of: [HistoryToken].self) { group in
                // Writes until the iterator announces one; the first only after a pause, by when
                // the iterator has (almost always) read its starting head.
                group.addTask {
                    var tokens: [HistoryToken] = []
                    try? await Task.sleep(for: .milliseconds(300))
                    var round = 0
                    while !Task.isCancelled {
                        round += 1
                        let feed = feedJSON([featureJSON(id: "nc\(round)")])
                        do {
                            if let token = try await importJSON(feed, into: store).token { tokens.append(token) }
                        } catch {
                            if Task.isCancelled { break }  // an import cut short by the end of the test
                            throw error
                        }
                        try? await Task.sleep(for: .milliseconds(50))
                    }
                    return tokens
                }
                var iterator = commits.makeAsyncIterator()
                let next = try await iterator.next()
                let first = try #require(next)
                group.cancelAll()
                let written = try #require(try await group.next())
                #expect(first.token > beforeIteration)
                #expect(written.contains(first.token))
                #expect(first.author == .import)
            }
        }
    }

    @Test("cancelling the consuming task ends the iteration promptly")
    func cancellation() async throws {
        try await withTemporaryDirectory { dir in
            let store = try QuakeStore(directory: dir)
            let log = CommitLog()
            let clock = ContinuousClock()
            let waited = try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask {
                    for try await commit in store.commits(after: 0, pollInterval: Self.slowPoll) {
                        log.append(commit)
                    }
                    log.end()
                }
                // One commit seen: the consumer is iterating, and then waits for the next one.
                _ = try #require(try await importJSON(feedJSON([featureJSON(id: "us1")]), into: store).token)
                #expect(try await log.waitFor(count: 1, within: Self.patience).count == 1)
                try await Task.sleep(for: .milliseconds(100))
                let began = clock.now
                group.cancelAll()
                try await group.waitForAll()
                return clock.now - began
            }
            #expect(log.ended)
            #expect(waited < Self.patience)

            // A task cancelled before it starts iterating gets nil from its first next().
            let first = try await withThrowingTaskGroup(of: StoreCommit?.self) { group in
                group.cancelAll()
                group.addTask {
                    var iterator = store.commits(after: 0, pollInterval: Self.slowPoll).makeAsyncIterator()
                    return try await iterator.next()
                }
                return try await group.next()!
            }
            #expect(first == nil)
        }
    }
}

/// What a consuming task has seen: the commits in order, and whether its iteration ended.
final class CommitLog: Sendable {
    private struct State {
        var commits: [StoreCommit] = []
        var ended = false
    }
    private let state = NIOLockedValueBox(State())

    var commits: [StoreCommit] { state.withLockedValue { $0.commits } }
    var ended: Bool { state.withLockedValue { $0.ended } }

    func append(_ commit: StoreCommit) {
        state.withLockedValue { $0.commits.append(commit) }
    }

    func end() {
        state.withLockedValue { $0.ended = true }
    }

    /// Waits until `done` holds for the commits seen (or the iteration ended, or `timeout`
    /// passed), and returns them.
    func waitFor(within timeout: Duration, until done: ([StoreCommit]) -> Bool) async throws -> [StoreCommit] {
        let deadline = ContinuousClock.now + timeout
        while true {
            let (commits, ended) = state.withLockedValue { ($0.commits, $0.ended) }
            if done(commits) || ended || ContinuousClock.now >= deadline { return commits }
            try await Task.sleep(for: .milliseconds(2))
        }
    }

    /// Waits until `count` commits were seen (or `timeout` passed).
    func waitFor(count: Int, within timeout: Duration) async throws -> [StoreCommit] {
        try await waitFor(within: timeout) { $0.count >= count }
    }

    /// Waits until as many commits as `expected` were seen (or `timeout` passed), then expects
    /// exactly those.
    func expect(
        _ expected: [StoreCommit], within timeout: Duration = CommitsTests.patience,
        sourceLocation: SourceLocation = #_sourceLocation
    ) async throws {
        let seen = try await waitFor(count: expected.count, within: timeout)
        #expect(seen == expected, sourceLocation: sourceLocation)
    }
}

/// Runs `body` while a child task iterates `commits` into a log; cancels the iteration when
/// `body` returns and waits for it to end.
func consuming<T>(_ commits: StoreCommits, _ body: (CommitLog) async throws -> T) async throws -> T {
    let log = CommitLog()
    return try await withThrowingTaskGroup(of: Void.self) { group in
        group.addTask {
            for try await commit in commits { log.append(commit) }
            log.end()
        }
        do {
            let result = try await body(log)
            group.cancelAll()
            try await group.waitForAll()
            #expect(log.ended)
            return result
        } catch {
            group.cancelAll()
            throw error
        }
    }
}
