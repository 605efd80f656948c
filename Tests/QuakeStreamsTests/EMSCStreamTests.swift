import Foundation
import QuakeModel
import QuakeStreams
import Testing

private let wsID = "20210502_0000100"
private let petrinjaID = "20201229_0000078"
private let goseismicID = "20201230_0000082"

private struct CatchUpUnavailable: Error, CustomStringConvertible {
    var description: String { "the FDSN service answered 503" }
}

private struct StoreRefused: Error, CustomStringConvertible {
    var description: String { "the store refused the write" }
}

/// EMSCStream against a real websocket server on 127.0.0.1 sending the real EMSC messages, with
/// faults: bad frames and messages, abrupt and clean closes, unanswered pings, refused
/// connections, a failing catch-up and delivery, a full buffer.
@Suite(.timeLimit(.minutes(2))) struct EMSCStreamTests {
    /// Every bad frame and message between good ones is counted and skipped with its reason;
    /// the good ones arrive in order, on the one connection.
    @Test func badInputIsSkippedAndGoodMessagesArriveInOrder() async throws {
        let server = try await WebSocketTestServer.start()
        defer { server.shutdown() }
        var notUTF8 = Array(EMSCFixtures.goseismic.utf8)
        let region = Array("CENTRAL CALIFORNIA".utf8)
        let at = try #require(notUTF8.firstRange(of: region))
        notUTF8.insert(0xFF, at: at.lowerBound + 3)
        // Over the 4 KiB limit, in frames under it.
        let oversized = EMSCFixtures.wsTest + String(repeating: " ", count: 5000)
        try await withStream(testConfiguration(server.url, maxMessageBytes: 4096)) { stream, recorder in
            let connection = try await server.connection(0)
            try await eventually("the catch-up") { stream.status.state == .streaming }
            try await connection.send(EMSCFixtures.wsTest)
            try await connection.sendBinary(Array(EMSCFixtures.petrinja.utf8))
            try await connection.send(EMSCFixtures.petrinja)
            try await connection.sendText(bytes: notUTF8)
            try await connection.send("this is not JSON")
            try await connection.send(EMSCFixtures.documentedExample)
            try await connection.send(
                message(EMSCFixtures.wsTest, replacing: #""action":"create""#, with: #""action":"delete""#))
            try await connection.send(message(EMSCFixtures.wsTest, id: ""))
            try await connection.send(
                message(message(EMSCFixtures.wsTest, id: "20210502_0000101"), replacing: #""lat":-30.07"#, with: #""lat":-130.07"#))
            let text = EMSCFixtures.goseismic
            let third = text.index(text.startIndex, offsetBy: text.count / 3)
            let twoThirds = text.index(third, offsetBy: text.count / 3)
            try await connection.sendFragments([
                String(text[..<third]), String(text[third..<twoThirds]), String(text[twoThirds...]),
            ])
            try await connection.sendStrayContinuation(EMSCFixtures.wsTest)
            let chunk = oversized.count / 3
            try await connection.sendFragments([
                String(oversized.prefix(chunk)), String(oversized.dropFirst(chunk).prefix(chunk)),
                String(oversized.dropFirst(2 * chunk)),
            ])
            try await connection.send(message(EMSCFixtures.wsTest, id: "20210502_0000200"))
            try await connection.send(message(EMSCFixtures.goseismic, id: "20201230_0000083"))

            try await eventually("every message") { stream.status.counters.messages == 13 }
            try await eventually("the deliveries") { recorder.deliveredIDs.count == 5 }
            #expect(
                recorder.log == [
                    .catchUp(connection: 1, attempt: 1), .item(wsID), .item(petrinjaID), .item(goseismicID),
                    .item("20210502_0000200"), .item("20201230_0000083"),
                ])
            let bad = recorder.badMessages
            #expect(
                bad.map(\.kind) == [
                    .binary, .notUTF8, .notAMessage, .notAMessage, .notAMessage, .eventSkipped, .eventSkipped,
                    .fragmentation, .tooLarge,
                ])
            #expect(bad.count == 9)
            if bad.count == 9 {
                // Petrinja's message, its newlines shown as spaces.
                #expect(bad[0].excerpt.hasPrefix(#"{   "action": "create",   "data": {"#))
                #expect(bad[0].excerpt.hasSuffix("…"))
                #expect(bad[2].excerpt == "this is not JSON")
                #expect(bad[3].reason.contains("trailing comma"))
                #expect(bad[4].reason.contains(#"expected "create" or "update", found "delete""#))
                #expect(bad[5].reason.contains("no id"))
                #expect(bad[6].reason.contains("20210502_0000101") && bad[6].reason.contains("latitude"))
                #expect(bad[8].reason.contains("over 4096 bytes"))
                #expect(bad[8].excerpt.hasSuffix("…"))
            }
            let counters = stream.status.counters
            #expect(counters.badMessages == 9)
            #expect(counters.reports == 5)
            #expect(counters.delivered == 5)
            #expect(counters.reconnects == 0)
            #expect(counters.catchUps == 1)
            #expect(stream.status.lastMessageTime != nil)
            #expect(server.connections.count == 1)
            #expect(!connection.isClosed)
            #expect(server.upgradeRequests == ["/standing_order/websocket"])
            // The first report whole, as EMSCMessageReader reads it.
            #expect(
                recorder.items.first
                    == .report(
                        SourceReport(
                            source: "emsc", id: wsID, agency: "GUC", time: 1_619_959_564_000, latitude: -30.07,
                            longitude: -71.53, depth: 38, magnitude: 2.7, magnitudeType: "ml",
                            place: "OFFSHORE COQUIMBO, CHILE", eventType: "earthquake", updated: 1_619_960_460_000)))
        }
    }

    /// Catch-up on the first connect and on every reconnect (after an abrupt close and after the
    /// server's close frame); messages sent during a catch-up are delivered after it, and one
    /// sent just before an abrupt close is not lost.
    @Test func catchUpOnEveryConnectionAndNothingSentDuringItIsLost() async throws {
        let server = try await WebSocketTestServer.start()
        defer { server.shutdown() }
        let catchUp: @Sendable (EMSCStream.CatchUp, EMSCStream) async throws -> Void = { request, stream in
            let connection = try await server.connection(request.connection - 1)
            switch request.connection {
            case 1:
                try await connection.send(EMSCFixtures.wsTest)
                try await connection.send(EMSCFixtures.petrinja)
                try await eventually("two reports buffered") { stream.status.counters.reports >= 2 }
            case 2:
                try await connection.send(EMSCFixtures.goseismic)
                try await eventually("a report buffered") { stream.status.counters.reports >= 4 }
            default:
                break
            }
        }
        try await withStream(testConfiguration(server.url), catchUp: catchUp) { stream, recorder in
            try await eventually("the first deliveries") { recorder.deliveredIDs.count == 2 }
            #expect(recorder.log == [.catchUp(connection: 1, attempt: 1), .item(wsID), .item(petrinjaID)])

            let first = try await server.connection(0)
            try await first.send(message(EMSCFixtures.wsTest, id: "before-the-close"))
            await first.closeAbruptly()
            try await eventually("the second connection's delivery") { recorder.deliveredIDs.count == 4 }

            let second = try await server.connection(1)
            try await second.write(.connectionClose, .init(bytes: [0x03, 0xE9]))  // 1001 going away
            let third = try await server.connection(2)
            try await eventually("the third catch-up") { stream.status.counters.catchUps == 3 }
            try await third.send(message(EMSCFixtures.petrinja, id: "after-the-close-frame"))
            try await eventually("the last delivery") { recorder.deliveredIDs.count == 5 }

            #expect(
                recorder.log == [
                    .catchUp(connection: 1, attempt: 1), .item(wsID), .item(petrinjaID), .item("before-the-close"),
                    .catchUp(connection: 2, attempt: 1), .item(goseismicID),
                    .catchUp(connection: 3, attempt: 1), .item("after-the-close-frame"),
                ])
            let counters = stream.status.counters
            #expect(counters.reconnects == 2)
            #expect(counters.catchUps == 3)
            #expect(counters.badMessages == 0)
            #expect(server.connections.count == 3)
        }
    }

    /// A connection whose pings go unanswered is found dead and replaced; the catch-up runs
    /// again. While pongs come, the connection is kept.
    @Test func unansweredPingsEndTheConnection() async throws {
        let server = try await WebSocketTestServer.start()
        defer { server.shutdown() }
        try await withStream(testConfiguration(server.url, pingInterval: .milliseconds(300))) { stream, recorder in
            let first = try await server.connection(0)
            try await eventually("the catch-up") { stream.status.state == .streaming }
            try await first.send(EMSCFixtures.wsTest)
            // Pongs answered: several pings, one connection.
            try await eventually("pings") { first.pings >= 3 }
            #expect(server.connections.count == 1)
            #expect(!first.isClosed)

            first.answersPings = false
            let second = try await server.connection(1)
            try await eventually("the dead connection closed by the client") { first.isClosed }
            try await eventually("the second catch-up") { stream.status.counters.catchUps == 2 }
            try await second.send(EMSCFixtures.petrinja)
            try await eventually("the second delivery") { recorder.deliveredIDs.count == 2 }
            #expect(
                recorder.log == [
                    .catchUp(connection: 1, attempt: 1), .item(wsID), .catchUp(connection: 2, attempt: 1),
                    .item(petrinjaID),
                ])
            #expect(stream.status.counters.reconnects == 1)
            #expect(recorder.events.contains(.disconnected(connection: 1, reason: stream.status.lastError ?? "")))
        }
    }

    /// While connections are refused, the stream waits after each try, the delays growing and
    /// never over the cap; once the server listens again it connects, catches up once and streams.
    @Test func refusedConnectionsBackOffWithinTheCapThenConnect() async throws {
        let server = try await WebSocketTestServer.start()
        defer { server.shutdown() }
        await server.stopListening()
        let backoff = ReconnectBackoff(initialDelay: .milliseconds(10), maxDelay: .milliseconds(80))
        try await withStream(testConfiguration(server.url, backoff: backoff)) { stream, recorder in
            try await eventually("six refused connections") { recorder.waits.count >= 6 }
            #expect(stream.status.counters.catchUps == 0)
            #expect(recorder.catchUps.isEmpty)
            try await server.listen()
            let connection = try await server.connection(0)
            try await eventually("the catch-up") { stream.status.state == .streaming }
            try await connection.send(EMSCFixtures.goseismic)
            try await eventually("the delivery") { recorder.deliveredIDs == [goseismicID] }

            let waits = recorder.waits
            let tries = stream.status.connection
            #expect(waits.count == tries - 1)
            #expect(waits.map(\.attempt) == Array(1..<tries))
            for wait in waits {
                #expect(wait.delay >= .zero)
                #expect(wait.delay <= backoff.ceiling(attempt: wait.attempt))
                #expect(wait.delay <= backoff.maxDelay)
            }
            #expect(recorder.catchUps == [.catchUp(connection: tries, attempt: 1)])
            #expect(stream.status.counters.reconnects == tries - 1)
            #expect(server.connections.count == 1)
        }
    }

    /// A catch-up that fails is tried again on the same connection; what the socket sent
    /// meanwhile is delivered after the catch-up that succeeds.
    @Test func failedCatchUpIsRetriedWithMessagesBuffered() async throws {
        let server = try await WebSocketTestServer.start()
        defer { server.shutdown() }
        let catchUp: @Sendable (EMSCStream.CatchUp, EMSCStream) async throws -> Void = { request, stream in
            let connection = try await server.connection(0)
            switch request.attempt {
            case 1:
                try await connection.send(EMSCFixtures.wsTest)
                try await eventually("a report buffered") { stream.status.counters.reports >= 1 }
                throw CatchUpUnavailable()
            case 2:
                try await connection.send(EMSCFixtures.petrinja)
                try await eventually("two reports buffered") { stream.status.counters.reports >= 2 }
                throw CatchUpUnavailable()
            default:
                break
            }
        }
        try await withStream(testConfiguration(server.url), catchUp: catchUp) { stream, recorder in
            try await eventually("the deliveries") { recorder.deliveredIDs.count == 2 }
            #expect(
                recorder.log == [
                    .catchUp(connection: 1, attempt: 1), .catchUp(connection: 1, attempt: 2),
                    .catchUp(connection: 1, attempt: 3), .item(wsID), .item(petrinjaID),
                ])
            let counters = stream.status.counters
            #expect(counters.catchUpFailures == 2)
            #expect(counters.catchUps == 1)
            #expect(counters.reconnects == 0)
            #expect(server.connections.count == 1)
            #expect(recorder.events.contains(.catchUpFailed(connection: 1, error: "the FDSN service answered 503")))
        }
    }

    /// A delivery that fails gives the connection up: the next one catches up again (which is
    /// what brings the undelivered report back), and delivers what comes after.
    @Test func failedDeliveryReconnectsAndCatchesUpAgain() async throws {
        let server = try await WebSocketTestServer.start()
        defer { server.shutdown() }
        let failures = Counter()
        let deliver: @Sendable ([SourceItem]) async throws -> Void = { _ in
            if failures.increment() == 1 { throw StoreRefused() }
        }
        try await withStream(testConfiguration(server.url), deliver: deliver) { stream, recorder in
            let first = try await server.connection(0)
            try await eventually("the catch-up") { stream.status.state == .streaming }
            try await first.send(EMSCFixtures.wsTest)
            let second = try await server.connection(1)
            try await eventually("the second catch-up") { stream.status.counters.catchUps == 2 }
            try await second.send(EMSCFixtures.petrinja)
            try await eventually("the delivery") { recorder.deliveredIDs.count == 1 }
            #expect(
                recorder.log == [
                    .catchUp(connection: 1, attempt: 1), .catchUp(connection: 2, attempt: 1), .item(petrinjaID),
                ])
            #expect(stream.status.counters.delivered == 1)
            #expect(stream.status.counters.reconnects == 1)
            try await eventually("the first connection closed") { first.isClosed }
            let reasons = recorder.events.compactMap {
                if case .disconnected(1, let reason) = $0 { reason } else { nil }
            }
            #expect(reasons.count == 1 && reasons[0].contains("the delivery failed (the store refused the write)"))
        }
    }

    /// More items than the buffer holds during a catch-up: the connection is given up with its
    /// buffer (nothing of it delivered, so the stored position does not move past them), and
    /// the next connection catches up again.
    @Test func fullBufferGivesTheConnectionUp() async throws {
        let server = try await WebSocketTestServer.start()
        defer { server.shutdown() }
        let catchUp: @Sendable (EMSCStream.CatchUp, EMSCStream) async throws -> Void = { request, stream in
            guard request.connection == 1 else { return }
            let connection = try await server.connection(0)
            for fixture in EMSCFixtures.good { try await connection.send(fixture) }
            // Counted once the buffer has taken or refused it: the third overflows.
            try await eventually("three reports") { stream.status.counters.reports >= 3 }
        }
        try await withStream(testConfiguration(server.url, maxPendingItems: 2), catchUp: catchUp) {
            stream, recorder in
            let second = try await server.connection(1)
            try await eventually("the second catch-up") { stream.status.counters.catchUps == 2 }
            try await second.send(EMSCFixtures.goseismic)
            try await eventually("the delivery") { recorder.deliveredIDs.count == 1 }
            #expect(
                recorder.log == [
                    .catchUp(connection: 1, attempt: 1), .catchUp(connection: 2, attempt: 1), .item(goseismicID),
                ])
            #expect(stream.status.counters.reconnects == 1)
            let reasons = recorder.events.compactMap {
                if case .disconnected(1, let reason) = $0 { reason } else { nil }
            }
            #expect(reasons.count == 1 && reasons[0].contains("over 2 items"))
        }
    }

    /// A server that accepts and never answers the upgrade, or closes during it: each try is
    /// given up after the handshake timeout and tried again; cancelling ends `run` even in the
    /// middle of an upgrade (WSClient alone would wait for it forever).
    @Test(arguments: [false, true]) func stalledUpgradesAreGivenUp(closes: Bool) async throws {
        let server = try await StallingServer.start(closes: closes)
        defer { server.shutdown() }
        var configuration = testConfiguration(server.url)
        configuration.handshakeTimeout = .milliseconds(200)
        let recorder = Recorder()
        let stream = EMSCStream(configuration, onEvent: { recorder.record($0) })
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { await stream.run(catchUp: { _ in }, deliver: { _ in }) }
            try await eventually("three tries") { server.connectionsAccepted >= 3 && recorder.waits.count >= 2 }
            let reasons = recorder.events.compactMap {
                if case .disconnected(_, let reason) = $0 { reason } else { nil }
            }
            #expect(reasons.count >= 2)
            #expect(reasons.allSatisfy { $0 == "no websocket upgrade within 0.2 seconds" })
            #expect(!recorder.events.contains { if case .connected = $0 { true } else { false } })
            #expect(stream.status.counters.catchUps == 0)
            // Cancelled while an upgrade is pending.
            try await eventually("an upgrade pending") {
                stream.status.state == .connecting && server.connectionsAccepted == stream.status.connection
            }
            let cancelled = ContinuousClock.now
            group.cancelAll()
            try await group.waitForAll()
            #expect(cancelled.duration(to: .now) < .seconds(10))
            #expect(stream.status.state == .stopped)
        }
    }

    /// Cancelling `run` ends it and closes the connection.
    @Test func cancellingStopsTheStream() async throws {
        let server = try await WebSocketTestServer.start()
        defer { server.shutdown() }
        let stream = EMSCStream(testConfiguration(server.url))
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { await stream.run(catchUp: { _ in }, deliver: { _ in }) }
            let connection = try await server.connection(0)
            try await eventually("streaming") { stream.status.state == .streaming }
            group.cancelAll()
            try await group.waitForAll()
            #expect(stream.status.state == .stopped)
            try await eventually("the connection closed") { connection.isClosed }
        }
    }
}

@Suite struct ReconnectBackoffTests {
    @Test func ceilingsDoubleUpToTheCap() {
        let backoff = ReconnectBackoff(initialDelay: .milliseconds(100), maxDelay: .seconds(1))
        #expect(
            (1...7).map { backoff.ceiling(attempt: $0) } == [
                .milliseconds(100), .milliseconds(200), .milliseconds(400), .milliseconds(800), .seconds(1),
                .seconds(1), .seconds(1),
            ])
        #expect(backoff.ceiling(attempt: 0) == .milliseconds(100))
        #expect(backoff.ceiling(attempt: 10_000) == .seconds(1))
    }

    @Test func fullJitterSpansZeroToTheCeiling() {
        let backoff = ReconnectBackoff(initialDelay: .seconds(1), maxDelay: .seconds(60))
        #expect(backoff.delay(attempt: 3, random: 0) == .zero)
        #expect(backoff.delay(attempt: 3, random: 1) == .seconds(4))
        #expect(backoff.delay(attempt: 3, random: 0.5) == .seconds(2))
        #expect(backoff.delay(attempt: 40, random: 1) == .seconds(60))
        #expect(backoff.delay(attempt: 2, random: .nan) == .seconds(2))
        for attempt in 1...40 {
            let delay = backoff.delay(attempt: attempt)
            #expect(delay >= .zero && delay <= backoff.ceiling(attempt: attempt))
        }
    }

    @Test func defaults() {
        let configuration = EMSCStream.Configuration(url: "wss://www.seismicportal.eu/standing_order/websocket", source: "emsc")
        #expect(configuration.pingInterval == .seconds(15))
        #expect(configuration.backoff == ReconnectBackoff(initialDelay: .seconds(1), maxDelay: .seconds(60)))
    }
}
