import Foundation

/// When to pull next: on the interval after a success (never before the server's cache
/// lifetime), exponentially later after failures, always with jitter so many hosts do not pull
/// in lockstep.
struct RetryPolicy: Sendable, Equatable {
    var interval: Duration
    var initialDelay: Duration
    var maxDelay: Duration
    /// The longest `Retry-After` honoured: a server asking for more is asked again after this.
    var retryAfterMax: Duration = .seconds(3600)

    /// Delay after a success. `freshFor` is what the server's Cache-Control/Expires allows.
    func delayAfterSuccess(freshFor: Duration?, jitter: Double = Double.random(in: 0...1)) -> Duration {
        var delay = interval
        if let freshFor, freshFor > delay { delay = freshFor }
        // Up to 10% of the interval, at most 5 s, always after the server's freshness.
        let spread = min(interval * 0.1, .seconds(5))
        return delay + spread * jitter
    }

    /// Delay after `failures` failures in a row (1 for the first). `retryAfter` is the server's
    /// Retry-After, honoured as a minimum up to ``retryAfterMax``.
    func delayAfterFailure(_ failures: Int, retryAfter: Duration?, jitter: Double = Double.random(in: 0...1))
        -> Duration
    {
        let exponent = min(max(failures - 1, 0), 30)
        var delay = initialDelay * Double(1 << min(exponent, 20))
        if delay > maxDelay { delay = maxDelay }
        // ±20% so that failures on many hosts spread out.
        delay = delay * (0.8 + 0.4 * jitter)
        if let retryAfter {
            let honoured = min(retryAfter, retryAfterMax)
            if honoured > delay { delay = honoured }
        }
        return delay
    }
}
