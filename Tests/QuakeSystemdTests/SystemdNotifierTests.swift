import Glibc
import QuakeSystemd
import Testing

/// The notifier on its own. What systemd receives from quaked and quakectl, through a real
/// NOTIFY_SOCKET, is checked end to end by QuakeDaemonTests' SystemdTests and QuakeCtlTests'
/// WatchLivenessTests (the variable is per process, so it is set only for children there).
@Suite struct SystemdNotifierTests {
    @Test func outsideSystemdEveryNotificationIsANoOpThatSaysSo() throws {
        let notifier = SystemdNotifier()
        // Run as a notify service itself (a CI runner might be), the tests must not tell it
        // anything: then only whether the notifier sees the socket is checked.
        guard getenv("NOTIFY_SOCKET") == nil else {
            #expect(notifier.isEnabled == (getenv("NOTIFY_SOCKET")!.pointee != 0))
            return
        }
        #expect(!notifier.isEnabled)
        #expect(notifier.watchdogInterval == nil)
        #expect(!notifier.ready())
        #expect(!notifier.status("two\nlines"))
        #expect(!notifier.watchdog())
        #expect(!notifier.reloading())
        #expect(!notifier.stopping())
    }

    @Test func monotonicMicrosecondsIsClockMonotonicInMicroseconds() throws {
        func clock() -> UInt64 {
            var now = timespec()
            clock_gettime(CLOCK_MONOTONIC, &now)
            return UInt64(now.tv_sec) * 1_000_000 + UInt64(now.tv_nsec) / 1_000
        }
        let before = clock()
        let first = SystemdNotifier.monotonicMicroseconds()
        usleep(20_000)
        let second = SystemdNotifier.monotonicMicroseconds()
        let after = clock()
        #expect(before <= first && second <= after)
        #expect(second - first >= 20_000, "a 20 ms sleep is at least 20,000 µs")
    }
}
