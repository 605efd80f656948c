import Foundation
import NIOCore
import NIOHTTP1

extension FeedTestServer {
    /// Serves one connection until the client closes it, a response ends it, or the server shuts down.
    func serve(_ connection: NIOAsyncChannel<HTTPServerRequestPart, HTTPServerResponsePart>) async {
        let channel = connection.channel
        do {
            try await connection.executeThenClose { inbound, _ in
                var head: HTTPRequestHead?
                for try await part in inbound {
                    switch part {
                    case .head(let requestHead):
                        head = requestHead
                    case .body:
                        break
                    case .end:
                        guard let requestHead = head else { continue }
                        head = nil
                        let keepOpen = try await respond(to: requestHead, on: channel)
                        if !keepOpen { return }
                    }
                }
            }
        } catch {
            // Client went away, or shutdown: nothing to do, the channel is closed by executeThenClose.
        }
    }

    /// Answers one request; returns whether the connection may serve another one.
    private func respond(to request: HTTPRequestHead, on channel: any Channel) async throws -> Bool {
        let path = Self.normalize(request.uri)
        let (stamped, acceptsGzip) = AcceptEncodingNormalizer.restore(request.headers)
        let (headers, receivedAt) = ArrivalStamper.restore(stamped)
        let recorded = RecordedRequest(
            method: request.method.rawValue, uri: request.uri, path: path, headers: headers, receivedAt: receivedAt)
        let (scripted, handler): (TestResponse?, (@Sendable (RecordedRequest) -> TestResponse)?) =
            state.withLockedValue { state in
                state.log[path, default: []].append(recorded)
                guard let script = state.scripts[path] else { return (nil, state.handlers[path]) }
                let index = state.served[path, default: 0]
                state.served[path] = index + 1
                return (script[min(index, script.count - 1)], nil)
            }
        let response = scripted ?? handler?(recorded) ?? .status(404, body: "no script for \(path)\n")
        let keepAlive = request.isKeepAlive
        let isHead = request.method == .HEAD

        var head = HTTPResponseHead(version: request.version, status: HTTPResponseStatus(statusCode: response.status))
        head.headers.add(name: "Server", value: "FeedTestServer")
        if let value = response.contentType { head.headers.add(name: "Content-Type", value: value) }
        if let value = response.lastModified { head.headers.add(name: "Last-Modified", value: value) }
        if let value = response.etag { head.headers.add(name: "ETag", value: value) }
        if let value = response.cacheControl { head.headers.add(name: "Cache-Control", value: value) }
        if let value = response.retryAfter { head.headers.add(name: "Retry-After", value: value) }
        for (name, value) in response.headers { head.headers.add(name: name, value: value) }
        if !keepAlive { head.headers.replaceOrAdd(name: "Connection", value: "close") }

        if case .stallBeforeHead = response.behavior {
            try await Self.waitUntilClosed(channel)
            return false
        }

        if response.conditional, response.status == 200, Self.notModified(request: headers, response: response) {
            head.status = .notModified
            head.headers.remove(name: "Content-Type")
            try await Self.write(.head(head), on: channel)
            try await Self.write(.end(nil), on: channel)
            return keepAlive
        }

        let source: BodySource
        do {
            source = try BodySource(response.body)
        } catch {
            var failure = HTTPResponseHead(version: request.version, status: .internalServerError)
            let message = ByteBuffer(string: "FeedTestServer: \(error)\n")
            failure.headers.add(name: "Content-Length", value: "\(message.readableBytes)")
            failure.headers.add(name: "Connection", value: "close")
            try await Self.write(.head(failure), on: channel)
            try await Self.write(.body(.byteBuffer(message)), on: channel)
            try await Self.write(.end(nil), on: channel)
            return false
        }
        defer { source.close() }

        let status = head.status.code
        let mayHaveBody = !(100..<200).contains(status) && status != 204 && status != 304
        guard mayHaveBody, !isHead else {
            if mayHaveBody { head.headers.replaceOrAdd(name: "Content-Length", value: "\(source.length)") }
            try await Self.write(.head(head), on: channel)
            try await Self.write(.end(nil), on: channel)
            return keepAlive
        }

        if response.gzip && acceptsGzip {
            head.headers.add(name: compressMarker, value: "1")
            head.headers.replaceOrAdd(name: "Transfer-Encoding", value: "chunked")
        } else {
            head.headers.replaceOrAdd(name: "Content-Length", value: "\(source.length)")
        }
        try await Self.write(.head(head), on: channel)

        var limit = source.length
        var chunkSize = Self.chunkSize
        var delay: Duration?
        switch response.behavior {
        case .truncate(let afterBytes), .stall(let afterBytes):
            limit = min(max(afterBytes, 0), source.length)
        case .slow(let size, let pause):
            chunkSize = max(size, 1)
            delay = pause
        case .normal, .stallBeforeHead:
            break
        }

        var sent = 0
        while sent < limit {
            if let delay { try await Task.sleep(for: delay) }
            let count = min(chunkSize, limit - sent)
            let chunk = try await source.read(offset: sent, count: count, allocator: channel.allocator)
            try await Self.write(.body(.byteBuffer(chunk)), on: channel)
            sent += count
        }

        switch response.behavior {
        case .truncate:
            return false  // executeThenClose closes the connection; all writes so far have completed.
        case .stall:
            try await Self.waitUntilClosed(channel)
            return false
        case .normal, .slow, .stallBeforeHead:
            try await Self.write(.end(nil), on: channel)
            return keepAlive
        }
    }

    /// Whether the request's validators match the response's (RFC 9110: If-None-Match wins).
    private static func notModified(request: HTTPHeaders, response: TestResponse) -> Bool {
        let ifNoneMatch = request[canonicalForm: "If-None-Match"]
        if !ifNoneMatch.isEmpty {
            guard let etag = response.etag else { return false }
            func opaque<S: StringProtocol>(_ tag: S) -> Substring {
                let trimmed = tag.trimmingCharacters(in: .whitespaces)[...]
                return trimmed.hasPrefix("W/") ? trimmed.dropFirst(2) : trimmed
            }
            return ifNoneMatch.contains { $0 == "*" || opaque($0) == opaque(etag) }
        }
        if let since = request.first(name: "If-Modified-Since"), let lastModified = response.lastModified {
            return since.trimmingCharacters(in: .whitespaces) == lastModified
        }
        return false
    }

    /// Writes and flushes one part and waits until it is handed to the socket (this is the backpressure:
    /// at most one chunk is in flight). Cancellation (shutdown) closes the channel, failing the write.
    private static func write(_ part: HTTPServerResponsePart, on channel: any Channel) async throws {
        try await withTaskCancellationHandler {
            try await channel.writeAndFlush(part).get()
        } onCancel: {
            channel.close(promise: nil)
        }
    }

    /// Waits until the connection closes: the client gave up, or the server shuts down.
    private static func waitUntilClosed(_ channel: any Channel) async throws {
        try await withTaskCancellationHandler {
            try await channel.closeFuture.get()
        } onCancel: {
            channel.close(promise: nil)
        }
    }
}
