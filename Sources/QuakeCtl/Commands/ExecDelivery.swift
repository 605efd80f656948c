import Foundation
import QuakeClient
import QuakeProtocol
import Subprocess
import Varlink
import QuakeModel

#if canImport(Glibc)
    import Glibc
#endif

/// `watch --exec CMD`: runs CMD once for each change the watch sends, in order, and returns only
/// when it exited 0, retrying with backoff until then (or until the watch is stopped, which
/// leaves the change undelivered: it comes again on the next run). The watch commits a change to
/// its cache only after this returns, so with `--name` delivery is at least once across restarts
/// of quakectl and of quaked.
struct ExecDelivery: Sendable {
    /// Run with `/bin/sh -c`.
    let command: String
    /// Each run's limit; a run that takes longer is stopped (SIGTERM, then SIGKILL 5 s later).
    let timeout: Duration
    let stop: WatchStop
    /// `--name`: failures are reported to quaked (GetStatus shows them).
    let clientName: String?
    /// Where quaked is (a socket, or ssh to another host).
    let endpoint: QuakedEndpoint
    let cache: QuakeCache
    /// `--tz` (default the local zone): the zone of `QUAKE_TIME_LOCAL`.
    var timeZone: TimeZone = .current
    var initialBackoff: Duration = .seconds(1)
    var maxBackoff: Duration = .seconds(300)

    /// Why one run of CMD did not succeed.
    struct RunFailure: Error, CustomStringConvertible {
        var description: String
    }

    /// Delivers one change: runs CMD until it exits 0. Throws CancellationError when the watch
    /// is stopped first.
    func deliver(_ change: IOQuaked.Change, line: String, token: Int, storeId: String, before: IOQuaked.Quake?)
        async throws
    {
        try await deliverOne(
            line: line, token: token,
            values: Self.values(change, token: token, storeId: storeId, before: before, timeZone: timeZone))
    }

    /// One change: its line on stdin, its `QUAKE_*` variables, `QUAKED_DELIVERY=change`.
    private func deliverOne(line: String, token: Int, values: [String: String]) async throws {
        var values = values
        values["QUAKED_DELIVERY"] = OutboxPlan.Kind.change.rawValue
        values["QUAKED_COUNT"] = "1"
        let what = "\(values["QUAKE_KIND"] ?? "change") \(values["QUAKE_ID"] ?? "") at token \(token)"
        try await deliver(stdin: line + "\n", environment: values, what: what)
    }

    /// Delivers changes from the outbox (`--batch`, `--quiet-hours`): one change as above, or a
    /// batch or digest as one JSON array on stdin, with `QUAKED_DELIVERY`, `QUAKED_COUNT`,
    /// `QUAKED_FIRST_TOKEN`, `QUAKED_TOKEN` (the last) and `QUAKED_STORE` (the `QUAKE_*`
    /// variables are for single changes only).
    func deliver(_ delivery: OutboxPlan.Delivery) async throws {
        guard let first = delivery.entries.first, let last = delivery.entries.last else { return }
        if delivery.kind == .change, delivery.entries.count == 1 {
            try await deliverOne(line: first.line, token: first.token, values: first.environment)
            return
        }
        let values = [
            "QUAKED_DELIVERY": delivery.kind.rawValue,
            "QUAKED_COUNT": String(delivery.entries.count),
            "QUAKED_FIRST_TOKEN": String(first.token),
            "QUAKED_TOKEN": String(last.token),
            "QUAKED_STORE": last.storeId,
        ]
        let stdin = "[\n" + delivery.entries.map(\.line).joined(separator: ",\n") + "\n]\n"
        let count = delivery.entries.count
        let what =
            "the \(delivery.kind.rawValue) of \(count) change\(count == 1 ? "" : "s") (tokens \(first.token) to \(last.token))"
        try await deliver(stdin: stdin, environment: values, what: what)
    }

    /// Runs CMD with `stdin` and the variables until it exits 0, reporting failures (`what` says
    /// what was being delivered).
    private func deliver(stdin: String, environment values: [String: String], what: String) async throws {
        var environment: [Environment.Key: String?] = [:]
        for (key, value) in values { environment[Environment.Key(stringLiteral: key)] = value }
        var backoff = initialBackoff
        var attempt = 1
        while true {
            do {
                try await runOnce(stdin: Array(stdin.utf8), environment: environment)
                if attempt > 1, let clientName {
                    // Delivered after failing: clear the error quaked shows.
                    await report(clientName, nil)
                }
                return
            } catch let failure as RunFailure {
                let message = "--exec failed for \(what) (attempt \(attempt)): \(failure)"
                Console.err("quakectl: \(message); retrying in \(Self.seconds(backoff)).\n")
                if let clientName { await report(clientName, message) }
            }
            try await pause(backoff)
            backoff = min(backoff * 2, maxBackoff)
            attempt += 1
        }
    }

    /// Sleeps, waking early (with CancellationError) when the watch is stopped.
    private func pause(_ duration: Duration) async throws {
        let until = ContinuousClock.now + duration
        while ContinuousClock.now < until {
            if stop.isRequested { throw CancellationError() }
            try? await Task.sleep(for: min(.milliseconds(100), until - ContinuousClock.now))
        }
        if stop.isRequested { throw CancellationError() }
    }

    /// Tells quaked what failed (best effort: a daemon that is away hears of it next time).
    private func report(_ client: String, _ error: String?) async {
        guard let token = try? cache.position()?.token else { return }
        _ = try? await QuakedConnection.with(endpoint) { connection in
            try await connection.acknowledge(client: client, token: token, error: error.map { String($0.prefix(1000)) })
        }
    }

    /// One run: CMD in its own process group (a Ctrl-C at the terminal reaches quakectl, which
    /// lets the run finish, not CMD), the change on stdin, its output on quakectl's stderr.
    private func runOnce(stdin: [UInt8], environment: [Environment.Key: String?]) async throws {
        let command = command
        let timeout = timeout
        let status: TerminationStatus = try await withThrowingTaskGroup(of: TerminationStatus?.self) { group in
            group.addTask {
                var options = PlatformOptions()
                options.processGroupID = 0
                options.teardownSequence = [.gracefulShutDown(allowedDurationToNextStep: .seconds(5))]
                do {
                    return try await run(
                        .path("/bin/sh"), arguments: ["-c", command], environment: .inherit.updating(environment),
                        platformOptions: options, input: .array(stdin), output: .currentStandardError,
                        error: .currentStandardError
                    ).terminationStatus
                } catch is CancellationError {
                    return nil
                } catch {
                    throw RunFailure(description: "cannot run /bin/sh: \(error)")
                }
            }
            group.addTask {
                try await Task.sleep(for: timeout)
                return nil
            }
            defer { group.cancelAll() }
            // The first to finish: the run, or the timeout (which cancels the run: teardown).
            guard let first = try await group.next(), let status = first else {
                throw RunFailure(description: "timed out after \(Self.seconds(timeout)) (--exec-timeout)")
            }
            return status
        }
        switch status {
        case .exited(0): return
        case .exited(let code): throw RunFailure(description: "exited with status \(code)")
        case .signaled(let signal): throw RunFailure(description: "killed by signal \(signal)")
        }
    }

    /// CMD's environment: the change's values (what an update, enter or leave changed a field to;
    /// else the quake as stored now, its tombstone, or the cache's row), the token and the store.
    /// A value the change does not have is empty. `QUAKE_TIME` is UTC, `QUAKE_TIME_LOCAL` the same
    /// instant in `timeZone` (`--tz`) with its offset; `QUAKE_DEPTH` is in kilometres whatever
    /// `--units` says, and `QUAKE_PLACE` is the place as stored. `QUAKE_AGENCY` is the agency of the
    /// preferred report (`net`, upper-cased: `US`), `QUAKE_AGENCIES` every contributing agency
    /// (``Formatting/agencies(net:sources:)``: `US+AK`, `EMSC+INGV`).
    static func values(
        _ change: IOQuaked.Change, token: Int, storeId: String, before: IOQuaked.Quake?, timeZone: TimeZone = .current
    ) -> [String: String]
    {
        let q = change.quake ?? before
        let t = change.tombstone
        /// The field's value after the change, when the change says.
        func new(_ field: String) -> IOQuaked.FieldValue?? {
            change.fields?.first { $0.field == field }.map { $0.new }
        }
        func number(_ field: String, _ fallback: Double?) -> String {
            if let changed = new(field) { return changed.flatMap { $0.float ?? $0.int.map(Double.init) }.map { String($0) } ?? "" }
            return fallback.map { String($0) } ?? ""
        }
        func text(_ field: String, _ fallback: String?) -> String {
            if let changed = new(field) { return changed?.string ?? "" }
            return fallback ?? ""
        }
        let time: Int? = new("time").map { $0?.int } ?? (q?.time ?? t?.time)
        let tsunami: Int? = new("tsunami").map { $0?.int } ?? (q?.tsunami ?? t?.tsunami)
        let net = text("net", q?.net)
        let sources = text("sources", q?.sources ?? t?.sources)
        return [
            "QUAKE_ID": change.quakeId,
            "QUAKE_KIND": change.kind.rawValue,
            "QUAKE_MAG": number("mag", q?.mag ?? t?.mag),
            "QUAKE_PLACE": text("place", q?.place ?? t?.place),
            "QUAKE_TIME": time.map(QuakeTime.iso8601) ?? "",
            "QUAKE_TIME_LOCAL": time.map { Formatting.iso8601Local($0, timeZone: timeZone) } ?? "",
            "QUAKE_LAT": number("lat", q?.lat ?? t?.lat),
            "QUAKE_LON": number("lon", q?.lon ?? t?.lon),
            "QUAKE_DEPTH": number("depth", q?.depth ?? t?.depth),
            "QUAKE_URL": text("url", q?.url),
            "QUAKE_ALERT": text("alert", q?.alert ?? t?.alert),
            "QUAKE_TSUNAMI": tsunami.map(String.init) ?? "",
            "QUAKE_AGENCY": net.uppercased(),
            "QUAKE_AGENCIES": Formatting.agencies(net: net.isEmpty ? nil : net, sources: sources) ?? "",
            "QUAKED_TOKEN": String(token),
            "QUAKED_STORE": storeId,
        ]
    }

    static func seconds(_ duration: Duration) -> String {
        let seconds = Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
        return seconds < 10 && seconds != seconds.rounded() ? String(format: "%.1f s", seconds) : "\(Int(seconds)) s"
    }
}

/// A duration on the command line, in the configuration's grammar (``QuakeDuration``: `250ms`,
/// `30s`, `5m`, `2h`, `7d`, `1w`, or seconds), and longer than zero.
enum DurationArgument {
    static func parse(_ text: String) -> Duration? {
        milliseconds(text).map { .milliseconds($0) }
    }

    /// The same duration in whole milliseconds.
    static func milliseconds(_ text: String) -> Int64? {
        QuakeDuration.milliseconds(text).flatMap { $0 > 0 ? $0 : nil }
    }
}
