/// Finds where a JSON value ends, one chunk at a time, without validating it.
///
/// Used only while a value straddles chunk boundaries: the parser keeps the value's bytes and
/// runs the full (validating) decoder once, when this scanner says the value is complete,
/// instead of re-decoding the growing prefix on every chunk. For any valid prefix the end found
/// here is the real end; for invalid input the decoder reports the error when it runs.
struct ValueBoundary: Sendable {
    private let scalar: Bool
    private var depth = 0
    private var inString = false
    private var escaped = false

    /// `first` is the value's first byte (which `scan` will also see).
    init(first: UInt8) {
        scalar = !(first == UInt8(ascii: "\"") || first == UInt8(ascii: "{") || first == UInt8(ascii: "["))
    }

    /// Scans `bytes`, continuing from the previous call. Returns the index just past the value's
    /// last byte (for numbers and literals, the index of the delimiter), or nil if it goes on.
    mutating func scan(_ bytes: UnsafeRawBufferPointer) -> Int? {
        for (i, c) in bytes.enumerated() {
            if inString {
                if escaped {
                    escaped = false
                } else if c == UInt8(ascii: "\\") {
                    escaped = true
                } else if c == UInt8(ascii: "\"") {
                    inString = false
                    if depth == 0 { return i + 1 }
                }
            } else if scalar {
                // Every byte a number or literal can contain; anything else ends it.
                let isScalarByte =
                    (c >= UInt8(ascii: "0") && c <= UInt8(ascii: "9"))
                    || (c | 0x20 >= UInt8(ascii: "a") && c | 0x20 <= UInt8(ascii: "z"))
                    || c == UInt8(ascii: "-") || c == UInt8(ascii: "+") || c == UInt8(ascii: ".")
                if !isScalarByte { return i }
            } else {
                switch c {
                case UInt8(ascii: "\""): inString = true
                case UInt8(ascii: "{"), UInt8(ascii: "["): depth += 1
                case UInt8(ascii: "}"), UInt8(ascii: "]"):
                    depth -= 1
                    if depth <= 0 { return i + 1 }
                default: break
                }
            }
        }
        return nil
    }
}
