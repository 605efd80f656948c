#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import NIOCore

extension ByteBuffer {
    /// The offset from the reader index of the first NUL byte at or after `start` (an offset
    /// from the reader index too), or nil when the readable bytes from there hold none.
    ///
    /// memchr(3), not a byte-by-byte search of the readable bytes' view: a catch-up's replies
    /// are megabytes, and the frame decoder looks at every byte of them.
    @inlinable
    func readableOffsetOfNUL(from start: Int) -> Int? {
        withUnsafeReadableBytes { bytes -> Int? in
            guard start < bytes.count, let base = bytes.baseAddress else { return nil }
            guard let found = memchr(base + start, 0, bytes.count - start) else { return nil }
            return UnsafeRawPointer(found) - base
        }
    }
}
