/// Where the line-formatting functions (``ChangeText/appendLine(_:before:_:now:to:)`` and the
/// ``Formatting`` pieces it is made of) write their text: a `String`, or ``OutputBytes`` for
/// text that goes straight to a file descriptor.
protocol TextOutput {
    static func += (text: inout Self, piece: String)
    /// Appends `count` spaces (none for a count below 1).
    mutating func appendSpaces(_ count: Int)
}

extension String: TextOutput {
    mutating func appendSpaces(_ count: Int) {
        // Whole strings of spaces: appending a `Unicode.Scalar` at a time goes through the slow path.
        var count = count
        while count > 0 {
            let n = min(count, Self.spaces.count - 1)
            self += Self.spaces[n]
            count -= n
        }
    }

    /// Strings of 0 to 64 spaces.
    private static let spaces = (0...64).map { String(repeating: " ", count: $0) }
}

/// Text built as UTF-8 bytes, for writing out: a catch-up's `watch` prints a line per change,
/// 100,000 of them, each of a dozen pieces. Appending a piece to a `String` keeps its count,
/// its ASCII flag and its capacity checks piece by piece, which was most of the printing's
/// time; appending to bytes is a copy.
struct OutputBytes: TextOutput {
    var bytes: [UInt8] = []

    init(capacity: Int = 0) {
        bytes.reserveCapacity(capacity)
    }

    static func += (text: inout OutputBytes, piece: String) {
        var piece = piece
        piece.withUTF8 { text.bytes.append(contentsOf: $0) }
    }

    mutating func appendSpaces(_ count: Int) {
        if count > 0 { bytes.append(contentsOf: repeatElement(UInt8(ascii: " "), count: count)) }
    }

    var isEmpty: Bool { bytes.isEmpty }
}
