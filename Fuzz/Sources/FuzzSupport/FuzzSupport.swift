import CLibFuzzer

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A fuzz target's `main`: runs libFuzzer with the command line's options on `testOneInput`
/// (which must also be exported as `LLVMFuzzerTestOneInput`, which libFuzzer's own `main`
/// refers to).
///
/// A target's main.swift ends with this: SwiftPM links an executable's `main` to its main.swift
/// (`--defsym main=<module>_main`), which takes precedence over the `main` libFuzzer brings.
public func runFuzzer(_ testOneInput: @convention(c) (UnsafePointer<UInt8>?, Int) -> CInt) -> Never {
    var argc = CommandLine.argc
    var argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = CommandLine.unsafeArgv
    exit(LLVMFuzzerRunDriver(&argc, &argv, testOneInput))
}

/// Stops the fuzzer with `message` when `condition` is false: libFuzzer reports the abort as a
/// crash and saves the input that caused it.
@inline(__always)
public func check(_ condition: Bool, _ message: @autoclosure () -> String) {
    if !condition { fail(message()) }
}

/// Reports an invariant the input broke, and aborts (libFuzzer saves the input).
public func fail(_ message: String) -> Never {
    var text = "fuzz check failed: \(message)\n"
    text.withUTF8 { _ = write(2, $0.baseAddress, $0.count) }
    abort()
}

/// The input as an array (libFuzzer may pass a null pointer for an empty input).
public func bytes(_ start: UnsafePointer<UInt8>?, _ count: Int) -> [UInt8] {
    guard let start, count > 0 else { return [] }
    return Array(UnsafeBufferPointer(start: start, count: count))
}

/// A small deterministic generator (SplitMix64) seeded from the input, for what a target derives
/// from it besides the bytes themselves: where to cut it into chunks, which limits to use. The
/// same input always gives the same choices, so every finding reproduces.
public struct Choices {
    private var state: UInt64

    public init(seed bytes: some Collection<UInt8>) {
        // FNV-1a of the input.
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in bytes { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
        state = hash
    }

    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// A number in `range`.
    public mutating func next(in range: ClosedRange<Int>) -> Int {
        range.lowerBound + Int(next() % UInt64(range.count))
    }

    /// Sizes of consecutive chunks that add up to `count`: mostly small (so that values straddle
    /// boundaries), sometimes a single byte, sometimes empty, sometimes large; at most about 256
    /// of them (more only slow the fuzzer down).
    public mutating func chunkSizes(_ count: Int) -> [Int] {
        var sizes: [Int] = []
        var left = count
        let style = next() % 4
        let small = max(1, count / 256)
        while left > 0 {
            let size: Int
            switch style {
            case 0: size = small
            case 1: size = small == 1 ? next(in: 0...8) : next(in: small...8 * small)
            case 2: size = next(in: small...64 * small)
            default: size = next() % 8 == 0 ? next(in: 0...4) : next(in: 1...max(1, count / 2))
            }
            sizes.append(min(size, left))
            left -= min(size, left)
        }
        return sizes
    }

    /// `bytes` cut into chunks (see ``chunkSizes(_:)``).
    public mutating func chunks(_ bytes: [UInt8]) -> [ArraySlice<UInt8>] {
        var start = 0
        return chunkSizes(bytes.count).map { size in
            defer { start += size }
            return bytes[start..<start + size]
        }
    }
}

/// `bytes` for a message: printable ASCII as is, anything else escaped.
public func show(_ bytes: some Collection<UInt8>) -> String {
    var text = ""
    for byte in bytes.prefix(300) {
        if byte >= 0x20 && byte < 0x7F && byte != UInt8(ascii: "\\") {
            text.unicodeScalars.append(Unicode.Scalar(byte))
        } else {
            text += "\\x" + String(byte, radix: 16)
        }
    }
    return bytes.count > 300 ? text + "..." : text
}
