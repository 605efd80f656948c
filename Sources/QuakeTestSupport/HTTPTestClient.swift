import AsyncHTTPClient
import NIOCore

/// Runs `body` with a real AsyncHTTPClient for talking to the test servers, and shuts it down
/// after, whether `body` threw or not. It decodes nothing unless asked (tests look at the bytes as
/// sent); it gives up connecting after 5 s, and reading after `readTimeout` (none by default).
public func withHTTPClient<R>(
    decompression: Bool = false,
    readTimeout: TimeAmount? = nil,
    _ body: (HTTPClient) async throws -> R
) async throws -> R {
    var configuration = HTTPClient.Configuration(decompression: decompression ? .enabled(limit: .none) : .disabled)
    configuration.timeout = .init(connect: .seconds(5), read: readTimeout)
    let client = HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: configuration)
    do {
        let result = try await body(client)
        try await client.shutdown()
        return result
    } catch {
        try? await client.shutdown()
        throw error
    }
}
