import Foundation
import Logging
import NIOConcurrencyHelpers
import QuakeModel
import QuakeStore
import QuakeStreams

/// The `emsc` kind (`source = NAME emsc wss://... catch-up=https://.../fdsnws/event/1/`): EMSC's
/// websocket kept open by QuakeStreams' `EMSCStream`, for as long as the source is configured.
///
/// - **Catch-up.** On every connect and reconnect, before any of the socket's messages, the
///   stream calls the catch-up: this type's FDSN run (``runOnce(_:)``, the `fdsn` kind's query
///   and readers) against `catch-up=`, asking with `updatedafter` = the source's position less
///   `overlap` (the first time: now less `since`). The position is the newest `updated` the
///   source has stored, so whatever was published while the socket was down comes back; a report
///   the socket sends again is the same report (the store keeps one per id and ignores an older
///   `updated`). `Refresh(source)` and `quaked --once` run a catch-up (join one in progress).
/// - **The socket's messages** are imported as they come, each batch the stream hands over in one
///   transaction (``importReports(_:settings:query:now:)``), filtered by `min-magnitude=` and
///   `region=`. A batch the store refuses fails the delivery: the stream drops the connection
///   and the next catch-up brings the batch back.
/// - **Status.** A disconnection is recorded as the source's error in the store
///   (`GetStatus.sources`), `the websocket is disconnected: REASON`; the next catch-up's import
///   clears it. Bad messages are logged by the stream with the source's name and counted.
/// - **Metrics** (``SourceMetrics/recordStream(_:counters:connected:lastMessage:)``): messages,
///   bad messages, reconnects, catch-ups by result, whether connected, the last message's time.
extension SourceSync {
    /// Runs the websocket until cancelled; a reload that changes the source (or the association)
    /// connects again with the new settings, and catches up.
    func streamLoop() async {
        while !Task.isCancelled {
            // A signal that came before this connection is spent by it.
            wakeup.reset()
            let settings = currentSettings
            guard let url = settings.source.endpoint else { return }
            let (events, continuation) = AsyncStream.makeStream(of: EMSCStream.Event.self)
            let stream = EMSCStream(
                .init(url: url.absoluteString, source: name, backoff: settings.backoff), logger: logger
            ) { [connectedNumber] event in
                // Set as it happens: a disconnection handled later is not recorded over a newer connection.
                if case .connected(let number) = event { connectedNumber.withLockedValue { $0 = number } }
                continuation.yield(event)
            }
            let counted = NIOLockedValueBox(EMSCStream.Counters())
            await withTaskGroup(of: Void.self) { group in
                group.addTask {
                    await stream.run(
                        catchUp: { _ in
                            if case .failed(let failure) = await self.runOnce(self.currentSettings) {
                                throw failure
                            }
                        },
                        deliver: { items in
                            defer { self.publishStreamMetrics(stream, counted: counted) }
                            try await self.deliver(items, url: url)
                        })
                }
                group.addTask {
                    for await event in events {
                        await self.handle(event, url: url)
                        self.publishStreamMetrics(stream, counted: counted)
                    }
                }
                group.addTask { await self.wakeup.wait() }
                // A reload (the wakeup), or the daemon stopping.
                await group.next()
                continuation.finish()
                group.cancelAll()
            }
            state.withLockedValue { $0.connected = false }
            metrics?.recordStream(name, connected: false)
        }
    }

    /// One batch of the socket's items, imported in one transaction. Throws what the store
    /// throws (the stream then catches up again on a new connection).
    private func deliver(_ items: [SourceItem], url: URL) async throws {
        let settings = currentSettings
        let admitted = items.filter(settings.source.admits)
        let now = Date()
        do {
            let report = try await importReports(admitted, settings: settings, query: url.absoluteString, now: now)
            state.withLockedValue {
                $0.lastSuccess = now
                $0.lastError = nil
                $0.consecutiveFailures = 0
            }
            logger.log(
                level: report.token == nil ? .debug : .info, "websocket reports imported",
                metadata: [
                    "source.items": "\(report.items)", "source.created": "\(report.created)",
                    "source.updated": "\(report.updated)", "source.deleted": "\(report.deleted)",
                    "source.ignored": "\(report.ignored)",
                ])
        } catch {
            logger.warning(
                "the store refused the websocket's reports; they come back with the next catch-up",
                metadata: ["error": "\(error)"])
            throw error
        }
    }

    /// Imports `items` as the source's reports under ``imports``, with the position the newest
    /// `updated` stored (what the store holds now, or newer in `items`).
    func importReports(
        _ items: [SourceItem], settings: Settings, query: String, now: Date
    ) async throws -> SourceImportReport {
        try await imports.withLock {
            let stored = try store.sourcePosition(name)
            let newest = items.compactMap(\.updated).max()
            let position = [stored, newest].compactMap { $0 }.max()
            let report = try await store.importSource(
                name, items: items, position: position, query: query, association: settings.association, now: now,
                expiringBefore: settings.eventRetention.map { now - $0.timeInterval })
            observeReportDelays(items, report)
            return report
        }
    }

    /// Keeps the connection's state, and records a disconnection in the store.
    private func handle(_ event: EMSCStream.Event, url: URL) async {
        switch event {
        case .connected:
            state.withLockedValue { $0.connected = true }
        case .disconnected(let number, let reason):
            state.withLockedValue { $0.connected = false }
            let message = "the websocket is disconnected: \(reason); reconnecting, then catching up"
            let now = Date()
            await imports.withLock {
                // A newer connection is already up: its catch-up decides the status.
                guard connectedNumber.withLockedValue({ $0 }) <= number else { return }
                state.withLockedValue {
                    $0.lastAttempt = now
                    $0.lastError = message
                }
                do {
                    try await store.recordSourceFailure(name, error: message, now: now)
                } catch {
                    logger.warning("cannot record the disconnection in the store", metadata: ["error": "\(error)"])
                }
            }
        case .connecting, .catchUpFinished, .catchUpFailed, .badMessage, .waiting:
            break
        }
    }

    /// Brings the source's stream series up to the stream's counters.
    private func publishStreamMetrics(_ stream: EMSCStream, counted: NIOLockedValueBox<EMSCStream.Counters>) {
        guard let metrics else { return }
        let status = stream.status
        let previous = counted.withLockedValue { counted -> EMSCStream.Counters in
            defer { counted = status.counters }
            return counted
        }
        var delta = EMSCStream.Counters()
        delta.messages = status.counters.messages - previous.messages
        delta.badMessages = status.counters.badMessages - previous.badMessages
        delta.reconnects = status.counters.reconnects - previous.reconnects
        delta.catchUps = status.counters.catchUps - previous.catchUps
        delta.catchUpFailures = status.counters.catchUpFailures - previous.catchUpFailures
        metrics.recordStream(
            name, counters: delta, connected: status.state == .catchingUp || status.state == .streaming,
            lastMessage: status.lastMessageTime)
    }
}

extension SourceItem {
    /// The report's or the retraction's `updated`.
    var updated: Int64? {
        switch self {
        case .report(let report): report.updated
        case .retraction(_, _, let updated): updated
        }
    }
}

/// An async mutual exclusion: `withLock` runs its body after every body before it has returned.
final class AsyncLock: Sendable {
    private struct State {
        var locked = false
        var waiters: [CheckedContinuation<Void, Never>] = []
    }

    private let state = NIOLockedValueBox(State())

    func withLock<T: Sendable>(_ body: () async throws -> T) async rethrows -> T {
        await acquire()
        defer { release() }
        return try await body()
    }

    private func acquire() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let now = state.withLockedValue { state -> Bool in
                if state.locked {
                    state.waiters.append(continuation)
                    return false
                }
                state.locked = true
                return true
            }
            if now { continuation.resume() }
        }
    }

    private func release() {
        let next = state.withLockedValue { state -> CheckedContinuation<Void, Never>? in
            if state.waiters.isEmpty {
                state.locked = false
                return nil
            }
            return state.waiters.removeFirst()
        }
        next?.resume()
    }
}
