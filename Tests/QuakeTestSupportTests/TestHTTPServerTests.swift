import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import QuakeTestSupport
import Testing

/// Real AsyncHTTPClient requests against the real `FeedTestServer`.
extension TestDoubles {
    @Suite struct TestHTTPServerTests {
        static let fixture = Fixtures.usgs("abruzzi__earthquake-viz__all_day.geojson")

        // MARK: Helpers

        private func get(
            _ client: HTTPClient,
            _ url: String,
            method: HTTPMethod = .GET,
            headers: [(String, String)] = []
        ) async throws -> (HTTPClientResponse, [UInt8]) {
            var request = HTTPClientRequest(url: url)
            request.method = method
            for (name, value) in headers { request.headers.add(name: name, value: value) }
            let response = try await client.execute(request, timeout: .seconds(30))
            let body = try await response.body.collect(upTo: 256 * 1024 * 1024)
            return (response, Array(body.readableBytesView))
        }

        private func fixtureBytes() throws -> [UInt8] {
            [UInt8](try Data(contentsOf: Self.fixture))
        }

        // MARK: Tests

        @Test func servesFixtureByteIdentical() async throws {
            let expected = try fixtureBytes()
            #expect(expected.count > 1000)
            try await FeedTestServer.withServer { server in
                server.setResponses("/feed", [.feed(Self.fixture)])
                try await withHTTPClient { client in
                    let (response, body) = try await get(client, server.url("/feed"))
                    #expect(response.status == .ok)
                    #expect(body == expected)
                    #expect(response.headers.first(name: "Content-Length") == "\(expected.count)")
                    #expect(response.headers.first(name: "Content-Encoding") == nil)
                    #expect(response.headers.first(name: "Last-Modified") == TestResponse.defaultLastModified)
                    #expect(response.headers.first(name: "Cache-Control") == "public, max-age=60")
                    #expect(response.headers.first(name: "Content-Type") == "application/json")
                }
                let log = server.requests("/feed")
                #expect(log.count == 1)
                #expect(log.first?.method == "GET")
                #expect(log.first?.uri == "/feed")
            }
        }

        @Test func conditionalRequestsGet304() async throws {
            let expected = try fixtureBytes()
            try await FeedTestServer.withServer { server in
                server.setResponses("/feed", [.feed(Self.fixture, etag: "\"v1\"")])
                try await withHTTPClient { client in
                    let url = server.url("/feed")
                    let lastModified = TestResponse.defaultLastModified

                    let (byDate, byDateBody) = try await get(
                        client, url, headers: [("If-Modified-Since", lastModified)])
                    #expect(byDate.status == .notModified)
                    #expect(byDateBody.isEmpty)
                    #expect(byDate.headers.first(name: "ETag") == "\"v1\"")

                    let (byTag, byTagBody) = try await get(client, url, headers: [("If-None-Match", "\"v1\"")])
                    #expect(byTag.status == .notModified)
                    #expect(byTagBody.isEmpty)

                    let (otherDate, otherDateBody) = try await get(
                        client, url, headers: [("If-Modified-Since", "Mon, 01 Jan 2024 00:00:00 GMT")]
                    )
                    #expect(otherDate.status == .ok)
                    #expect(otherDateBody == expected)

                    // If-None-Match wins over a matching If-Modified-Since.
                    let (staleTag, _) = try await get(
                        client, url, headers: [("If-None-Match", "\"v0\""), ("If-Modified-Since", lastModified)]
                    )
                    #expect(staleTag.status == .ok)
                }
                let log = server.requests("/feed")
                #expect(log.count == 4)
                #expect(log.first?.header("If-Modified-Since") == TestResponse.defaultLastModified)
                #expect(log.dropFirst().first?.header("if-none-match") == "\"v1\"")
            }
        }

        @Test func conditionalCanBeDisabled() async throws {
            try await FeedTestServer.withServer { server in
                var response = TestResponse.feed(Self.fixture)
                response.conditional = false
                server.setResponses("/feed", [response])
                try await withHTTPClient { client in
                    let (reply, _) = try await get(
                        client, server.url("/feed"), headers: [("If-Modified-Since", TestResponse.defaultLastModified)]
                    )
                    #expect(reply.status == .ok)
                }
            }
        }

        @Test func gzipWhenAcceptedRawBody() async throws {
            let expected = try fixtureBytes()
            try await FeedTestServer.withServer { server in
                server.setResponses("/feed", [.feed(Self.fixture)])
                try await withHTTPClient { client in
                    let (response, body) = try await get(
                        client, server.url("/feed"), headers: [("Accept-Encoding", "gzip")])
                    #expect(response.status == .ok)
                    #expect(response.headers.first(name: "Content-Encoding") == "gzip")
                    #expect(response.headers.first(name: "Content-Length") == nil)
                    #expect(Array(body.prefix(2)) == [0x1f, 0x8b])
                    #expect(body.count < expected.count / 2)

                    // Without Accept-Encoding, or when the response opts out, the body is plain.
                    let (plain, plainBody) = try await get(client, server.url("/feed"))
                    #expect(plain.headers.first(name: "Content-Encoding") == nil)
                    #expect(plainBody == expected)
                    server.setResponses("/feed", [TestResponse.feed(Self.fixture).uncompressed()])
                    let (optedOut, optedOutBody) = try await get(
                        client, server.url("/feed"), headers: [("Accept-Encoding", "gzip")]
                    )
                    #expect(optedOut.headers.first(name: "Content-Encoding") == nil)
                    #expect(optedOutBody == expected)
                }
                #expect(server.requests("/feed").first?.header("Accept-Encoding") == "gzip")
                #expect(server.requests("/feed").dropFirst().first?.header("Accept-Encoding") == nil)
            }
        }

        @Test func gzipDecompressedByClient() async throws {
            let expected = try fixtureBytes()
            try await FeedTestServer.withServer { server in
                server.setResponses("/feed", [.feed(Self.fixture)])
                try await withHTTPClient(decompression: true) { client in
                    let (response, body) = try await get(client, server.url("/feed"))
                    #expect(response.status == .ok)
                    #expect(response.headers.first(name: "Content-Encoding") == "gzip")
                    #expect(body == expected)
                }
                let acceptEncoding = server.requests("/feed").first?.header("Accept-Encoding") ?? ""
                #expect(acceptEncoding.contains("gzip"))
            }
        }

        @Test func errorStatusesAndRetryAfter() async throws {
            try await FeedTestServer.withServer { server in
                server.setResponses("/broken", [.status(500)])
                server.setResponses("/busy", [.tooManyRequests(retryAfter: "2")])
                try await withHTTPClient { client in
                    let (broken, _) = try await get(client, server.url("/broken"))
                    #expect(broken.status == .internalServerError)
                    let (busy, _) = try await get(client, server.url("/busy"))
                    #expect(busy.status == .tooManyRequests)
                    #expect(busy.headers.first(name: "Retry-After") == "2")
                    let (missing, _) = try await get(client, server.url("/nowhere"))
                    #expect(missing.status == .notFound)
                }
                #expect(server.requestCount("/nowhere") == 1)
            }
        }

        @Test func scriptRunsInOrderAndLastRepeats() async throws {
            try await FeedTestServer.withServer { server in
                server.setResponses("/feed", [.status(500), .text("ok")])
                try await withHTTPClient { client in
                    let statuses = try await [
                        get(client, server.url("/feed")).0.status,
                        get(client, server.url("/feed?second")).0.status,
                        get(client, server.url("/feed")).0.status,
                    ]
                    #expect(statuses == [.internalServerError, .ok, .ok])
                    let (_, body) = try await get(client, server.url("/feed"))
                    #expect(String(decoding: body, as: UTF8.self) == "ok")
                }
                #expect(server.requestCount("/feed") == 4)
                #expect(server.requests("/feed")[1].uri == "/feed?second")
            }
        }

        @Test func truncatedBodyMakesClientFail() async throws {
            let expectedLength = try fixtureBytes().count
            try await FeedTestServer.withServer { server in
                server.setResponses("/feed", [TestResponse.feed(Self.fixture).truncated(afterBytes: 1000)])
                server.setResponses("/gz", [TestResponse.feed(Self.fixture).truncated(afterBytes: 1000)])
                try await withHTTPClient { client in
                    // The head arrives with the full length; collecting the body must fail.
                    var request = HTTPClientRequest(url: server.url("/feed"))
                    request.method = .GET
                    let response = try await client.execute(request, timeout: .seconds(30))
                    #expect(response.headers.first(name: "Content-Length") == "\(expectedLength)")
                    await #expect(throws: (any Error).self) {
                        _ = try await response.body.collect(upTo: 10 * 1024 * 1024)
                    }
                    await #expect(throws: (any Error).self) {
                        _ = try await get(client, server.url("/gz"), headers: [("Accept-Encoding", "gzip")])
                    }
                }
            }
        }

        @Test func stallMakesClientWithReadTimeoutFail() async throws {
            try await FeedTestServer.withServer { server in
                server.setResponses("/body", [TestResponse.feed(Self.fixture).stalled(afterBytes: 100)])
                server.setResponses("/head", [TestResponse.feed(Self.fixture).with(.stallBeforeHead)])
                try await withHTTPClient(readTimeout: .milliseconds(300)) { client in
                    let start = ContinuousClock.now
                    await #expect(throws: (any Error).self) {
                        _ = try await get(client, server.url("/body"))
                    }
                    await #expect(throws: (any Error).self) {
                        _ = try await get(client, server.url("/head"))
                    }
                    #expect(ContinuousClock.now - start < .seconds(10))
                }
                #expect(server.requestCount("/body") == 1)
                #expect(server.requestCount("/head") == 1)
            }
        }

        @Test func shutdownEndsStalledConnections() async throws {
            let server = try await FeedTestServer.start()
            server.setResponses("/feed", [TestResponse.generated(byteCount: 1000).stalled(afterBytes: 10)])
            try await withHTTPClient { client in
                let pending = Task { try await get(client, server.url("/feed")) }
                try await server.waitForRequests("/feed", count: 1, timeout: .seconds(10))
                try await Task.sleep(for: .milliseconds(50))
                try await server.shutdown()
                await #expect(throws: (any Error).self) { _ = try await pending.value }
            }
        }

        @Test func generatedBodyHasExactLength() async throws {
            let count = 3_000_001
            try await FeedTestServer.withServer { server in
                server.setResponses("/big", [.generated(byteCount: count)])
                try await withHTTPClient { client in
                    let (response, body) = try await get(client, server.url("/big"))
                    #expect(response.status == .ok)
                    #expect(body.count == count)
                    #expect(body.first == UInt8(ascii: " ") && body.last == UInt8(ascii: " "))
                }
            }
        }

        @Test func slowBodyIsDripFed() async throws {
            try await FeedTestServer.withServer { server in
                server.setResponses(
                    "/slow", [TestResponse.text("0123456789abcdefghij").slow(chunkSize: 5, delay: .milliseconds(50))])
                try await withHTTPClient { client in
                    let start = ContinuousClock.now
                    let (_, body) = try await get(client, server.url("/slow"))
                    #expect(String(decoding: body, as: UTF8.self) == "0123456789abcdefghij")
                    #expect(ContinuousClock.now - start >= .milliseconds(190))
                }
            }
        }

        @Test func headRequestHasNoBody() async throws {
            let expectedLength = try fixtureBytes().count
            try await FeedTestServer.withServer { server in
                server.setResponses("/feed", [.feed(Self.fixture)])
                try await withHTTPClient { client in
                    let (response, body) = try await get(client, server.url("/feed"), method: .HEAD)
                    #expect(response.status == .ok)
                    #expect(body.isEmpty)
                    #expect(response.headers.first(name: "Content-Length") == "\(expectedLength)")
                }
                #expect(server.requests("/feed").first?.method == "HEAD")
            }
        }

        @Test func concurrentRequestsAndKeepAlive() async throws {
            let expected = try fixtureBytes()
            try await FeedTestServer.withServer { server in
                server.setResponses("/feed", [.feed(Self.fixture)])
                try await withHTTPClient { client in
                    try await withThrowingTaskGroup(of: [UInt8].self) { group in
                        for _ in 0..<12 {
                            group.addTask { try await get(client, server.url("/feed")).1 }
                        }
                        for try await body in group {
                            #expect(body == expected)
                        }
                    }
                    // Sequential requests on the same client reuse kept-alive connections.
                    for _ in 0..<5 {
                        let (_, body) = try await get(client, server.url("/feed"))
                        #expect(body == expected)
                    }
                }
                #expect(server.requestCount("/feed") == 17)
            }
        }

        @Test func survivesClientDisconnectMidway() async throws {
            try await FeedTestServer.withServer { server in
                server.setResponses("/huge", [.generated(byteCount: 200 * 1024 * 1024)])
                server.setResponses("/small", [.text("fine")])
                try await withHTTPClient { client in
                    let response = try await client.execute(
                        HTTPClientRequest(url: server.url("/huge")), timeout: .seconds(30))
                    var received = 0
                    for try await chunk in response.body {
                        received += chunk.readableBytes
                        if received > 100_000 { break }  // abandons the body: AHC closes the connection
                    }
                    #expect(received > 100_000)
                    let (_, body) = try await get(client, server.url("/small"))
                    #expect(String(decoding: body, as: UTF8.self) == "fine")
                }
            }
        }

        @Test func waitForRequests() async throws {
            try await FeedTestServer.withServer { server in
                server.setResponses("/feed", [.text("{}")])
                try await withHTTPClient { client in
                    let later = Task {
                        try await Task.sleep(for: .milliseconds(100))
                        _ = try await get(client, server.url("/feed"))
                    }
                    try await server.waitForRequests("/feed", count: 1, timeout: .seconds(10))
                    #expect(server.requestCount("/feed") == 1)
                    try await later.value
                    await #expect(throws: FeedTestServerError.self) {
                        try await server.waitForRequests("/feed", count: 2, timeout: .milliseconds(100))
                    }
                }
            }
        }

        @Test func largeFileStreamsInBoundedMemory() async throws {
            let blockSize = 1024 * 1024
            let blocks = 64
            var block = [UInt8](repeating: 0, count: blockSize)
            for index in block.indices { block[index] = UInt8(truncatingIfNeeded: index % 251) }
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("feedtestserver-\(UUID())")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(at: directory) }
            let file = directory.appendingPathComponent("large.geojson")
            #expect(FileManager.default.createFile(atPath: file.path, contents: nil))
            let handle = try FileHandle(forWritingTo: file)
            let blockData = Data(block)
            for _ in 0..<blocks { try handle.write(contentsOf: blockData) }
            try handle.close()
            let pattern = ByteBuffer(bytes: block)

            try await FeedTestServer.withServer { server in
                server.setResponses("/large", [.feed(file)])
                try await withHTTPClient { client in
                    let baseline = residentBytes()
                    var peak = baseline
                    let response = try await client.execute(
                        HTTPClientRequest(url: server.url("/large")), timeout: .seconds(120))
                    #expect(response.status == .ok)
                    var position = 0
                    var mismatch = false
                    var nextSample = 0
                    for try await part in response.body {
                        var chunk = part
                        while chunk.readableBytes > 0 {
                            let offset = position % blockSize
                            let length = min(chunk.readableBytes, blockSize - offset)
                            if chunk.readSlice(length: length) != pattern.getSlice(at: offset, length: length) {
                                mismatch = true
                            }
                            position += length
                        }
                        if position >= nextSample {
                            peak = max(peak, residentBytes())
                            nextSample = position + 2 * blockSize
                        }
                    }
                    #expect(position == blockSize * blocks)
                    #expect(!mismatch)
                    // Memory is not asserted here: other tests share this process. The daemon's own
                    // bounded memory is measured by quake-bench and in process-level tests.
                    _ = (peak, baseline)
                }
            }
        }
    }
}

/// The process's resident set size in bytes (Linux; 0 elsewhere).
private func residentBytes() -> Int {
    guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return 0 }
    for line in status.split(separator: "\n") where line.hasPrefix("VmRSS:") {
        let digits = line.filter(\.isNumber)
        return (Int(digits) ?? 0) * 1024
    }
    return 0
}
