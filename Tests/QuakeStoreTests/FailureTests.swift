import Foundation
import QuakeFeed
import QuakeTestSupport
import Testing

@testable import QuakeStore

/// Any failed import leaves rows and history exactly as they were.
@Suite("Failed imports change nothing")
struct FailureTests {
    /// A store holding one real feed, for failures to leave untouched.
    func seededStore(in dir: URL) async throws -> QuakeStore {
        let store = try QuakeStore(directory: dir)
        _ = try await store.importFile(Fixtures.usgs("rodu__quakemap__all_day.geojson"))
        return store
    }

    static let bigFixture = Fixtures.usgs("tylerhill122__leaflet-usgs__all_week.geojson")

    @Test("a file:// feed that is missing or a directory fails with its path, the reason and what to check")
    func unreadableFile() async throws {
        try await withTemporaryDirectory { dir in
            let store = try await seededStore(in: dir)
            let before = try StoreSnapshot(store)
            let missing = dir.appendingPathComponent("no-such-feed.geojson")
            let error = try await #require(throws: ImportError.self) { try await store.importFile(missing) }
            #expect(error.kind == .source)
            let text = String(describing: error)
            #expect(
                text.contains(
                    "cannot open \(missing.path): No such file or directory (check the path in the feed's file:// URL)"),
                "\(text)")
            #expect(!text.contains("NSCocoaErrorDomain"), "\(text)")
            // Said once: not wrapped in "reading the feed failed: ".
            #expect(!text.contains("reading the feed failed"), "\(text)")
            let directory = try await #require(throws: ImportError.self) { try await store.importFile(dir) }
            #expect(
                String(describing: directory).contains(
                    "cannot read \(dir.path): Is a directory (a file:// feed names a file, not a directory)"),
                "\(directory)")
            #expect(try StoreSnapshot(store) == before)
        }
    }

    @Test("a document cut short fails with its offset and stores none of its features")
    func truncatedDocument() async throws {
        try await withTemporaryDirectory { dir in
            let store = try await seededStore(in: dir)
            let before = try StoreSnapshot(store)
            let bytes = try Array(Data(contentsOf: Self.bigFixture))
            let cut = bytes.count / 2
            let error = try await #require(throws: ImportError.self) {
                try await store.importFeed(source: "test://truncated") { sink in
                    try await sink.send(Array(bytes[..<cut]))
                }
            }
            #expect(error.kind == .invalidFeed)
            #expect(error.byteOffset == cut)
            #expect(error.featureIndex != nil && error.featureIndex! > 100)
            #expect(String(describing: error).contains("unchanged"))
            #expect(try StoreSnapshot(store) == before)
        }
    }

    @Test(
        "non-JSON and wrongly typed documents fail with nothing changed",
        arguments: [
            ("<html><body>502 Bad Gateway</body></html>", FeedError.Kind.invalidJSON),
            (#"{"type":"FeatureCollection","features":{"id":"x"}}"#, .wrongType),
            (#"[{"type":"Feature"}]"#, .wrongType),
            (#"{"type":"Feature","features":[]}"#, .wrongType),
            (#"{"type":"FeatureCollection","metadata":{}}"#, .wrongType),
            (#"{"type":"FeatureCollection","features":[],}"#, .invalidJSON),
            ("{\"type\":\"FeatureCollection\",\"features\":[],\"x\":\"\u{1}\"}", .invalidJSON),
        ])
    func badDocuments(document: String, kind: FeedError.Kind) async throws {
        try await withTemporaryDirectory { dir in
            let store = try await seededStore(in: dir)
            let before = try StoreSnapshot(store)
            // A valid feature first: it must be rolled back too.
            let withFeature = document.replacingOccurrences(
                of: #""features":[]"#, with: "\"features\":[\(featureJSON(id: "zz1"))]")
            let error = try await #require(throws: ImportError.self) {
                try await importJSON(withFeature, into: store)
            }
            #expect(error.kind == .invalidFeed)
            #expect(error.byteOffset != nil)
            #expect(error.feedError?.kind == kind)
            #expect(try StoreSnapshot(store) == before)
        }
    }

    @Test("invalid UTF-8 inside a feature fails with nothing changed")
    func invalidUTF8() async throws {
        try await withTemporaryDirectory { dir in
            let store = try await seededStore(in: dir)
            let before = try StoreSnapshot(store)
            var document = Array(feedJSON([featureJSON(id: "zz1"), featureJSON(id: "zz2")]).utf8)
            let at = document.lastIndex(of: UInt8(ascii: "S"))!  // inside "Somewhere" of the second feature
            document[at] = 0xC0  // an overlong lead byte
            let bytes = document
            let error = try await #require(throws: ImportError.self) {
                try await store.importFeed(source: "test://utf8") { sink in try await sink.send(bytes) }
            }
            #expect(error.kind == .invalidFeed)
            #expect(error.byteOffset == at)
            #expect(error.featureIndex == 1)
            #expect(try StoreSnapshot(store) == before)
        }
    }

    @Test("an error from the source rolls back what was already imported")
    func sourceErrorRollsBack() async throws {
        struct ConnectionReset: Error {}
        try await withTemporaryDirectory { dir in
            let store = try await seededStore(in: dir)
            let before = try StoreSnapshot(store)
            let bytes = try Array(Data(contentsOf: Self.bigFixture))
            let error = try await #require(throws: ImportError.self) {
                try await store.importFeed(source: "test://reset") { sink in
                    try await sink.send(Array(bytes[..<(bytes.count * 3 / 4)]))
                    throw ConnectionReset()
                }
            }
            #expect(error.kind == .source)
            #expect(error.message.contains("ConnectionReset"))
            #expect(try StoreSnapshot(store) == before)
        }
    }

    @Test("a document over the size limit fails with nothing changed")
    func overSizeLimit() async throws {
        try await withTemporaryDirectory { dir in
            let store = try await seededStore(in: dir)
            let before = try StoreSnapshot(store)
            let error = try await #require(throws: ImportError.self) {
                try await store.importFile(Self.bigFixture, maxBytes: 200_000)
            }
            #expect(error.kind == .tooLarge)
            #expect(String(describing: error).contains("200000"))
            // The sink's limit (QuakeFeed's FeedSink.TooLarge), not a parser error.
            #expect(error.message == "the feed is larger than the maximum of 200000 bytes")
            #expect(error.byteOffset == 200_000 && error.feedError == nil)
            #expect((error.featureIndex ?? 0) > 0)
            #expect(try StoreSnapshot(store) == before)
        }
    }

    @Test("cancelling an import mid-document rolls it back")
    func cancellationRollsBack() async throws {
        try await withTemporaryDirectory { dir in
            let store = try await seededStore(in: dir)
            let before = try StoreSnapshot(store)
            let bytes = try Array(Data(contentsOf: Self.bigFixture))
            let halfSent = AsyncStream<Void>.makeStream()
            let task = Task {
                try await store.importFeed(source: "test://cancel") { sink in
                    try await sink.send(Array(bytes[..<(bytes.count / 2)]))
                    halfSent.continuation.yield()
                    try await Task.sleep(for: .seconds(60))  // a stalled download
                }
            }
            for await _ in halfSent.stream { break }
            task.cancel()
            let result = await task.result
            let error = try #require(throws: ImportError.self) { try result.get() }
            #expect(error.kind == .cancelled)
            #expect(try StoreSnapshot(store) == before)
        }
    }

    @Test("readers see the previous contents while an import is under way")
    func readersNeverSeeHalfAnImport() async throws {
        try await withTemporaryDirectory { dir in
            let store = try await seededStore(in: dir)
            let countBefore = try store.count()
            let bytes = try Array(Data(contentsOf: Self.bigFixture))
            let halfSent = AsyncStream<Void>.makeStream()
            let resume = AsyncStream<Void>.makeStream()
            async let report = store.importFeed(source: "test://slow") { sink in
                try await sink.send(Array(bytes[..<(bytes.count / 2)]))
                halfSent.continuation.yield()
                for await _ in resume.stream { break }
                try await sink.send(Array(bytes[(bytes.count / 2)...]))
            }
            for await _ in halfSent.stream { break }
            // The importer has had time to apply the first half inside its open transaction.
            try await Task.sleep(for: .milliseconds(300))
            #expect(try store.count() == countBefore)
            #expect(try store.head() == 1)
            // Another connection, as `sqlite3` would open it, sees the same.
            let other = try QuakeStore(path: store.path)
            #expect(try other.count() == countBefore)
            try other.close()
            resume.continuation.yield()
            let finished = try await report
            #expect(finished.token == 2)
            #expect(try store.count() == countBefore + finished.inserted - finished.superseded)
        }
    }
}
