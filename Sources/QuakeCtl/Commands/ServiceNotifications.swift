import QuakeClient
import QuakeSystemd

/// What `watch` and `sync` tell systemd when they run as services (`quaked-hook@.service` and
/// `quaked-sync@.service`, `Type=notify` with `WatchdogSec=`): `READY=1` once started, and
/// `WATCHDOG=1` every half `WatchdogSec` for as long as the watch is healthy (``WatchHealth``:
/// making progress, idle at quaked's head, or retrying a lost connection). A watch that is
/// wedged stops sending it, and systemd restarts it. Outside systemd, nothing.
struct ServiceNotifications: Sendable {
    let notifier = SystemdNotifier()

    func ready() { notifier.ready() }
    func stopping() { notifier.stopping() }

    /// The keep-alive loop, or nil when systemd asked for no watchdog. Runs until cancelled.
    func keepAlive(_ health: WatchHealth) -> (@Sendable () async -> Void)? {
        guard let interval = notifier.watchdogInterval else { return nil }
        let notifier = notifier
        return {
            while !Task.isCancelled {
                if health.isHealthy() { notifier.watchdog() }
                try? await Task.sleep(for: interval)
            }
        }
    }
}
