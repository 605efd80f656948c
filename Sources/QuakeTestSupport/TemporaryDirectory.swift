import Foundation

/// A fresh directory under the system temp directory, removed when `body` returns.
public func withTemporaryDirectory<T>(
    _ body: (URL) async throws -> T
) async throws -> T {
    let url = try makeTemporaryDirectory()
    defer { try? FileManager.default.removeItem(at: url) }
    return try await body(url)
}

/// Creates a fresh, uniquely named directory (mode 0700) and returns it. The caller removes it.
public func makeTemporaryDirectory(prefix: String = "quaked-test") throws -> URL {
    var template = Array((NSTemporaryDirectory() + "/\(prefix).XXXXXX").utf8CString)
    guard let path = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
        throw POSIXError(.init(rawValue: errno) ?? .EIO)
    }
    return URL(fileURLWithPath: String(cString: path), isDirectory: true)
}
