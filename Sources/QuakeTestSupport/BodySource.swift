import NIOCore
import NIOPosix

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// A body being sent: its length and its bytes, read lazily in chunks.
final class BodySource {
    private enum Storage {
        case buffer(ByteBuffer)
        case file(descriptor: CInt)
        case generated(ByteBuffer)
    }

    private let storage: Storage
    let length: Int

    init(_ body: TestResponse.Body) throws {
        switch body {
        case .empty:
            storage = .buffer(ByteBuffer())
            length = 0
        case .bytes(let bytes):
            storage = .buffer(ByteBuffer(bytes: bytes))
            length = bytes.count
        case .generated(let byteCount, let fill):
            storage = .generated(ByteBuffer(repeating: fill, count: FeedTestServer.chunkSize))
            length = max(byteCount, 0)
        case .file(let url):
            let descriptor = open(url.path, O_RDONLY | O_CLOEXEC)
            guard descriptor >= 0 else { throw BodySourceError.cannotOpen(url.path, errno) }
            var info = stat()
            guard fstat(descriptor, &info) == 0 else {
                let code = errno
                _ = closeDescriptor(descriptor)
                throw BodySourceError.cannotOpen(url.path, code)
            }
            storage = .file(descriptor: descriptor)
            length = Int(info.st_size)
        }
    }

    /// Releases the file descriptor, if any.
    func close() {
        if case .file(let descriptor) = storage { _ = closeDescriptor(descriptor) }
    }

    /// `count` bytes from `offset` (the caller stays within ``length``).
    func read(offset: Int, count: Int, allocator: ByteBufferAllocator) async throws -> ByteBuffer {
        switch storage {
        case .buffer(let buffer):
            return buffer.getSlice(at: buffer.readerIndex + offset, length: count) ?? ByteBuffer()
        case .generated(let pattern):
            return pattern.getSlice(at: pattern.readerIndex, length: count) ?? ByteBuffer()
        case .file(let descriptor):
            return try await NIOThreadPool.singleton.runIfActive {
                var buffer = allocator.buffer(capacity: count)
                var done = 0
                while done < count {
                    let got = try buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: count - done) { pointer in
                        let result = pread(descriptor, pointer.baseAddress, count - done, off_t(offset + done))
                        if result < 0 {
                            if errno == EINTR { return 0 }
                            throw BodySourceError.readFailed(errno)
                        }
                        if result == 0 { throw BodySourceError.unexpectedEndOfFile }
                        return result
                    }
                    done += got
                }
                return buffer
            }
        }
    }
}

private enum BodySourceError: Error, CustomStringConvertible {
    case cannotOpen(String, CInt)
    case readFailed(CInt)
    case unexpectedEndOfFile

    var description: String {
        switch self {
        case .cannotOpen(let path, let code): return "cannot open \(path): errno \(code)"
        case .readFailed(let code): return "read failed: errno \(code)"
        case .unexpectedEndOfFile: return "the file shrank while being sent"
        }
    }
}

/// `close(2)`, named apart from `BodySource.close()`.
private func closeDescriptor(_ descriptor: CInt) -> CInt {
    #if canImport(Glibc)
        return Glibc.close(descriptor)
    #elseif canImport(Musl)
        return Musl.close(descriptor)
    #else
        return Darwin.close(descriptor)
    #endif
}
