/// XXH64 (xxHash, 64-bit), the stable hash of a feature's bytes that lets a re-import recognise a
/// feature it has already stored without decoding it.
///
/// Stable across processes and versions (unlike Swift's `Hasher`, which is seeded per process), so
/// the value can be stored. Follows the reference algorithm; tests check it against the published
/// test vectors.
public enum FeedHash {
    private static let p1: UInt64 = 0x9E37_79B1_85EB_CA87
    private static let p2: UInt64 = 0xC2B2_AE3D_27D4_EB4F
    private static let p3: UInt64 = 0x1656_67B1_9E37_79F9
    private static let p4: UInt64 = 0x85EB_CA77_C2B2_AE63
    private static let p5: UInt64 = 0x27D4_EB2F_1656_67C5

    /// XXH64 of `bytes` with `seed`.
    public static func xxh64(_ bytes: UnsafeRawBufferPointer, seed: UInt64 = 0) -> UInt64 {
        let count = bytes.count
        guard let p = bytes.baseAddress else { return avalanche(seed &+ p5) }
        var i = 0
        var h: UInt64
        if count >= 32 {
            var v1 = seed &+ p1 &+ p2
            var v2 = seed &+ p2
            var v3 = seed
            var v4 = seed &- p1
            while i + 32 <= count {
                v1 = round(v1, p.loadUnaligned(fromByteOffset: i, as: UInt64.self).littleEndian)
                v2 = round(v2, p.loadUnaligned(fromByteOffset: i + 8, as: UInt64.self).littleEndian)
                v3 = round(v3, p.loadUnaligned(fromByteOffset: i + 16, as: UInt64.self).littleEndian)
                v4 = round(v4, p.loadUnaligned(fromByteOffset: i + 24, as: UInt64.self).littleEndian)
                i += 32
            }
            h = rotl(v1, 1) &+ rotl(v2, 7) &+ rotl(v3, 12) &+ rotl(v4, 18)
            h = merge(h, v1)
            h = merge(h, v2)
            h = merge(h, v3)
            h = merge(h, v4)
        } else {
            h = seed &+ p5
        }
        h &+= UInt64(count)
        while i + 8 <= count {
            h ^= round(0, p.loadUnaligned(fromByteOffset: i, as: UInt64.self).littleEndian)
            h = rotl(h, 27) &* p1 &+ p4
            i += 8
        }
        if i + 4 <= count {
            h ^= UInt64(p.loadUnaligned(fromByteOffset: i, as: UInt32.self).littleEndian) &* p1
            h = rotl(h, 23) &* p2 &+ p3
            i += 4
        }
        while i < count {
            h ^= UInt64(p.load(fromByteOffset: i, as: UInt8.self)) &* p5
            h = rotl(h, 11) &* p1
            i += 1
        }
        return avalanche(h)
    }

    @inline(__always) private static func rotl(_ x: UInt64, _ r: UInt64) -> UInt64 {
        (x << r) | (x >> (64 - r))
    }

    @inline(__always) private static func round(_ acc: UInt64, _ lane: UInt64) -> UInt64 {
        rotl(acc &+ lane &* p2, 31) &* p1
    }

    @inline(__always) private static func merge(_ acc: UInt64, _ v: UInt64) -> UInt64 {
        (acc ^ round(0, v)) &* p1 &+ p4
    }

    @inline(__always) private static func avalanche(_ x: UInt64) -> UInt64 {
        var h = x
        h ^= h >> 33
        h &*= p2
        h ^= h >> 29
        h &*= p3
        h ^= h >> 32
        return h
    }
}
