import Foundation
import NIOCore
import NIOHTTP1
import QuakeHTTP
import QuakeStore
import QuakeTestSupport
import Testing

/// The router's side of streaming, without a socket in between: what it hands the writer.
@Suite struct StreamingWriterTests {
    /// Records every call; each body piece's size.
    actor RecordingWriter: HTTPResponseWriter {
        var status: HTTPResponseStatus?
        var headers = HTTPHeaders()
        var pieces: [Int] = []
        var body: [UInt8] = []
        var ended = false

        func writeHead(_ status: HTTPResponseStatus, _ headers: HTTPHeaders) async throws {
            self.status = status
            self.headers = headers
        }

        func writeBody(_ bytes: ByteBuffer) async throws {
            pieces.append(bytes.readableBytes)
            body.append(contentsOf: bytes.readableBytesView)
            // A slow client: the router waits for each piece.
            try await Task.sleep(for: .microseconds(50))
        }

        func end() async throws { ended = true }
    }

    @Test("a large answer is written in pieces of about 32 KB, however large it is")
    func pieces() async throws {
        try await withTemporaryDirectory { directory in
            let store = try QuakeStore(directory: directory)
            defer { try? store.close() }
            for name in [
                "heltond__earthquakes__query.geojson", "CsabaConsulting__DataScienceBootcampHomework__2.5_month.geojson",
                Catalog.week,
            ] {
                _ = try await store.importFile(Fixtures.usgs(name))
            }
            let router = CatalogRouter(store: store, clock: { Catalog.weekNow })
            let writer = RecordingWriter()
            try await router.respond(
                to: HTTPRequest(method: .GET, uri: "/fdsnws/event/1/query?format=geojson", headers: ["Host": "test"]),
                writer: writer)
            #expect(await writer.status == .ok)
            #expect(await writer.ended)
            #expect(await writer.headers.first(name: "Content-Length") == nil)
            let pieces = await writer.pieces
            let total = pieces.reduce(0, +)
            #expect(total > 5_000_000)
            #expect(pieces.count >= total / 40_000, "\(pieces.count) pieces for \(total) bytes")
            // Each piece is one flush of about 32 KB: at most that plus one feature.
            #expect(pieces.max() ?? 0 <= 32 * 1024 + 8 * 1024, "largest piece \(pieces.max() ?? 0)")
            let parsed = try ParsedFeed(await writer.body)
            #expect(parsed.features.count == (try store.count()))
        }
    }
}
