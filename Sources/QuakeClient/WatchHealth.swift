import NIOConcurrencyHelpers

/// Whether a ``Watcher`` is alive: hearing from quaked, and moving its cache towards quaked's
/// head. The watcher keeps it up to date as it goes; its own watchdog reads it to end a session
/// that has stalled (and reconnect), and a service reads ``isHealthy(now:)`` to decide whether
/// to send systemd `WATCHDOG=1`.
///
/// A session is alive while either holds:
/// - the cache is at the newest head quaked announced, and quaked spoke (a reply, a change or a
///   heartbeat) within ``limit``;
/// - the cache's position moved within ``limit``.
///
/// A delivery in progress (`--exec`'s command, bounded by its own timeout) pauses the stall
/// clock; between sessions (quaked unreachable, retrying with backoff) the watch is alive, as
/// restarting it would change nothing.
public final class WatchHealth: Sendable {
    /// What the watchdog found wrong.
    public enum Stall: Sendable, Equatable, CustomStringConvertible {
        /// quaked said nothing (not even a heartbeat, or no first reply) for this long.
        case silent(Duration)
        /// quaked's head moved on but the cache's position did not, for this long.
        case noProgress(Duration, position: Int, head: Int)

        public var description: String {
            switch self {
            case .silent(let duration):
                "no reply or heartbeat from quaked for \(Int(duration.components.seconds)) s"
            case .noProgress(let duration, let position, let head):
                "the cache stayed at token \(position) for \(Int(duration.components.seconds)) s while quaked's head moved to \(head)"
            }
        }
    }

    private struct State {
        var inSession = false
        /// When quaked last spoke in this session (or the session started).
        var heard: ContinuousClock.Instant = .now
        /// When the position last moved (or the session started, or the cache reached the head).
        var progressed: ContinuousClock.Instant = .now
        var head = 0
        var position = 0
        var delivering = false
    }

    private let state = NIOLockedValueBox(State())
    /// How long quaked may say nothing at all, and how long the position may stand still while
    /// the head is ahead of it.
    public let limit: Duration

    /// `heartbeatSeconds`: the heartbeat the watch asks quaked for. quaked may be silent for
    /// three heartbeats (and 5 s) before the watch gives up on the connection, and the cache may
    /// stand behind the head for as long.
    public init(heartbeatSeconds: Int) {
        limit = .seconds(heartbeatSeconds * 3 + 5)
    }

    /// A session starts: connecting, before the first reply.
    func sessionStarted(now: ContinuousClock.Instant = .now) {
        state.withLockedValue {
            $0.inSession = true
            $0.heard = now
            $0.progressed = now
            $0.delivering = false
        }
    }

    /// The session ended (the connection failed or the watch stops): alive while retrying.
    func sessionEnded() {
        state.withLockedValue { $0.inSession = false }
    }

    /// quaked spoke, announcing `head`.
    func heard(head: Int, now: ContinuousClock.Instant = .now) {
        state.withLockedValue {
            $0.heard = now
            $0.head = max($0.head, head)
        }
    }

    /// The cache's position is now `token` (applied, advanced or reset).
    func moved(to token: Int, now: ContinuousClock.Instant = .now) {
        state.withLockedValue {
            if token != $0.position { $0.progressed = now }
            $0.position = token
            if token >= $0.head { $0.progressed = now }
        }
    }

    /// The cache is at the head it was asked to reach (a catch-up that found nothing to do).
    func atHead(_ head: Int, now: ContinuousClock.Instant = .now) {
        state.withLockedValue {
            $0.head = max($0.head, head)
            $0.position = max($0.position, head)
            $0.progressed = now
        }
    }

    /// A snapshot page arrived and was staged: a reset is under way.
    func staged(now: ContinuousClock.Instant = .now) {
        state.withLockedValue {
            $0.heard = now
            $0.progressed = now
        }
    }

    func delivering(_ busy: Bool, now: ContinuousClock.Instant = .now) {
        state.withLockedValue {
            $0.delivering = busy
            // The stall clock restarts after a delivery: the command's time is not the cache's.
            if !busy { $0.progressed = now }
        }
    }

    /// What is wrong with the session now, if anything.
    public func stall(now: ContinuousClock.Instant = .now) -> Stall? {
        state.withLockedValue { state in
            guard state.inSession, !state.delivering else { return nil }
            if now - state.heard > limit { return .silent(now - state.heard) }
            if state.head > state.position, now - state.progressed > limit {
                return .noProgress(now - state.progressed, position: state.position, head: state.head)
            }
            return nil
        }
    }

    /// Whether the watch is making progress, idle at the head, or retrying a lost connection:
    /// whether a service manager's watchdog should be told all is well.
    public func isHealthy(now: ContinuousClock.Instant = .now) -> Bool {
        stall(now: now) == nil
    }
}

/// A session's watchdog found it stalled: the session's connections were closed; the watch
/// reports it once and reconnects.
public struct WatchStalled: Error, CustomStringConvertible {
    public var stall: WatchHealth.Stall
    public var description: String { "\(stall); reconnecting" }
}
