/// How long a push source waits before it connects again: capped exponential backoff with full
/// jitter. The `n`th reconnect in a row waits a uniformly random time in
/// `0 ... min(maxDelay, initialDelay · 2ⁿ⁻¹)`, so a fleet of quaked instances that lost the same
/// server spreads its reconnects over the whole window instead of arriving in waves.
///
/// The daemon's `RetryPolicy` (QuakeDaemon) is the same shape for polled sources but with ±20 %
/// jitter around the exponential delay; QuakeStreams cannot depend on QuakeDaemon, and a push
/// source reconnecting to one public server benefits from full jitter, so this is its own type.
public struct ReconnectBackoff: Sendable, Hashable {
    /// The ceiling of the first reconnect's delay.
    public var initialDelay: Duration
    /// The cap: no delay is ever longer.
    public var maxDelay: Duration

    public init(initialDelay: Duration = .seconds(1), maxDelay: Duration = .seconds(60)) {
        self.initialDelay = initialDelay
        self.maxDelay = max(maxDelay, .zero)
    }

    /// The longest delay of the `attempt`th reconnect in a row (1 for the first):
    /// `min(maxDelay, initialDelay · 2^(attempt-1))`.
    public func ceiling(attempt: Int) -> Duration {
        let exponent = min(max(attempt - 1, 0), 30)
        var ceiling = initialDelay
        for _ in 0..<exponent {
            if ceiling >= maxDelay { break }
            ceiling = ceiling * 2
        }
        return min(max(ceiling, .zero), maxDelay)
    }

    /// The delay of the `attempt`th reconnect in a row: `random` (0...1) of its ``ceiling(attempt:)``.
    public func delay(attempt: Int, random: Double = Double.random(in: 0...1)) -> Duration {
        let fraction = random.isFinite ? min(max(random, 0), 1) : 1
        return ceiling(attempt: attempt) * fraction
    }
}
