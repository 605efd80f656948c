/// A seeded generator (SplitMix64): the same seed gives the same cases on every machine. Every
/// randomized test and checker draws from it (the model checkers, the association schedules, the
/// chunking and round-trip tests), so a printed seed replays a failure anywhere.
public struct SeededRandom: RandomNumberGenerator, Sendable {
    private var state: UInt64

    public init(seed: UInt64) {
        state = seed
    }

    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// The seed of case `index` of a run seeded with `seed`: each case can be run on its own.
    public static func caseSeed(_ seed: UInt64, _ index: Int) -> UInt64 {
        var random = SeededRandom(seed: seed ^ (UInt64(index) &* 0xD6E8_FEB8_6659_FD93))
        return random.next()
    }
}
