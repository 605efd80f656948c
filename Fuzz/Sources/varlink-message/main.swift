// Fuzzes what a Varlink connection does with the bytes a peer sends: the input is a byte stream,
// cut into reads at places derived from it, with time passing between reads.
// - NULFrameDecoder (as the client uses it): the frames are the stream's NUL-separated messages,
//   and a message longer than the limit is an error, however the stream is cut.
// - MessageLimitsHandler in front of the decoder (as the server uses them): no message longer than
//   the limit, nor any byte after it, is passed on; the limit's error reply is written exactly
//   when some message is too long or too slow (a message has `deadline` from the read that
//   brought its first byte).
// - Each frame parsed as a call and as a reply: a parsed call's own frame parses back to it; the
//   parameters decode as each method's strict generated type (round trip); a reply frame decoded
//   straight into each method's reply type agrees with the parsed reply.
// MessageLimitsHandler is internal to Varlink, hence the testable import.

import FuzzSupport
import NIOCore
import NIOEmbedded
import QuakeProtocol
import VarlinkFuzzSupport

@testable import Varlink

@_cdecl("LLVMFuzzerTestOneInput")
func fuzzVarlinkMessage(_ start: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    let input = bytes(start, count)
    var choices = Choices(seed: input)
    let limit = choices.next() % 2 == 0 ? choices.next(in: 0...64) : 1 << 20
    let frames = checkFrameDecoder(input, chunks: choices.chunks(input), limit: limit)
    checkLimitsHandler(input, choices: &choices)
    for frame in frames.prefix(8) { checkMessage(frame) }
    return 0
}

/// The NUL-separated messages of `input` up to the first longer than `limit` (the trailing
/// unterminated one counts), and whether there is one.
func split(_ input: [UInt8], limit: Int) -> (frames: [[UInt8]], tooLarge: Bool) {
    var frames: [[UInt8]] = []
    var start = 0
    while let nul = input[start...].firstIndex(of: 0) {
        if nul - start > limit { return (frames, true) }
        frames.append(Array(input[start..<nul]))
        start = nul + 1
    }
    return (frames, input.count - start > limit)
}

func checkFrameDecoder(_ input: [UInt8], chunks: [ArraySlice<UInt8>], limit: Int) -> [[UInt8]] {
    let channel = EmbeddedChannel(handler: ByteToMessageHandler(NULFrameDecoder(maxMessageSize: limit)))
    var frames: [[UInt8]] = []
    var tooLarge = false
    func drain() {
        while let frame = try? channel.readInbound(as: ByteBuffer.self) {
            frames.append(Array(frame.readableBytesView))
        }
    }
    for chunk in chunks where !tooLarge {
        do {
            try channel.writeInbound(ByteBuffer(bytes: chunk))
        } catch is NULFrameDecoder.MessageTooLarge {
            tooLarge = true
        } catch {
            fail("NULFrameDecoder threw \(error)")
        }
        drain()
    }
    if !tooLarge {
        do {
            _ = try channel.finish()
        } catch is NULFrameDecoder.MessageTooLarge {
            tooLarge = true
        } catch {
            fail("NULFrameDecoder.finish threw \(error)")
        }
        drain()
    } else {
        _ = try? channel.finish()
    }
    let expected = split(input, limit: limit)
    check(
        frames == expected.frames && tooLarge == expected.tooLarge,
        "NULFrameDecoder(\(limit)) on \(show(input)) in chunks \(chunks.map(\.count)): \(frames.count) frames, "
            + "tooLarge \(tooLarge); expected \(expected.frames.count) frames, tooLarge \(expected.tooLarge)")
    return frames
}

enum Replies {
    static let limits = VarlinkServer.LimitReplies(
        messageTooLarge: { Array("too large \($0)".utf8) },
        messageTimeout: { Array("timeout \($0)".utf8) },
        tooManyConnections: { _ in [] })
}

/// The server's front of the pipeline, MessageLimitsHandler then the frame decoder, against a
/// model of what it must do.
func checkLimitsHandler(_ input: [UInt8], choices: inout Choices) {
    let limit = choices.next(in: 0...64)
    let deadline = 10
    let chunks = choices.chunks(input)
    let channel = EmbeddedChannel()
    try! channel.pipeline.syncOperations.addHandler(
        MessageLimitsHandler(maxMessageSize: limit, deadline: .seconds(Int64(deadline)), replies: Replies.limits))
    try! channel.pipeline.syncOperations.addHandler(
        ByteToMessageHandler(NULFrameDecoder(maxMessageSize: limit + 1)))

    // The model: the message in progress, since when (the read that brought its first byte).
    var pending = 0
    var since = 0
    var now = 0
    var expectedReply: [UInt8]?
    var passed = 0  // bytes passed on
    for chunk in chunks {
        let wait = choices.next(in: 0...4)
        channel.embeddedEventLoop.advanceTime(by: .seconds(Int64(wait)))
        now += wait
        if expectedReply == nil && pending > 0 && now >= since + deadline {
            expectedReply = Replies.limits.messageTimeout(deadline)
        }
        do {
            try channel.writeInbound(ByteBuffer(bytes: chunk))
        } catch {
            // Closed, some time after its error reply.
            check(expectedReply != nil, "MessageLimitsHandler: writeInbound threw \(error)")
        }
        guard expectedReply == nil else { continue }
        // A read with a message too long is refused whole.
        var longest = 0
        var p = pending
        var s = since
        for byte in chunk {
            if byte == 0 {
                longest = max(longest, p)
                p = 0
            } else {
                if p == 0 { s = now }
                p += 1
            }
        }
        longest = max(longest, p)
        if longest > limit {
            expectedReply = Replies.limits.messageTooLarge(limit)
        } else {
            passed += chunk.count
            pending = p
            since = s
        }
    }
    channel.embeddedEventLoop.advanceTime(by: .seconds(Int64(2 * deadline)))
    if expectedReply == nil && pending > 0 { expectedReply = Replies.limits.messageTimeout(deadline) }

    var frames: [[UInt8]] = []
    while let frame = try? channel.readInbound(as: ByteBuffer.self) { frames.append(Array(frame.readableBytesView)) }
    var written: [[UInt8]] = []
    while let reply = try? channel.readOutbound(as: ByteBuffer.self) { written.append(Array(reply.readableBytesView)) }
    _ = try? channel.finish()

    let expectedFrames = split(Array(input[..<passed]), limit: Int.max).frames
    let context = "limit \(limit), chunks \(chunks.map(\.count)), input \(show(input))"
    check(
        frames == expectedFrames,
        "MessageLimitsHandler: \(frames.count) frames passed on, expected \(expectedFrames.count); \(context)")
    check(
        written == (expectedReply.map { [$0] } ?? []),
        "MessageLimitsHandler wrote \(written.map { show($0) }), expected \(expectedReply.map { show($0) } ?? "nothing"); \(context)"
    )
}

/// One frame as a call and as a reply.
func checkMessage(_ frame: [UInt8]) {
    if let call = try? VarlinkCall(parsing: frame) {
        var own = call.frame()
        check(own.last == 0, "VarlinkCall.frame() does not end with NUL")
        own.removeLast()
        do {
            var expected = call
            expected.upgrade = false  // not written
            let again = try VarlinkCall(parsing: own)
            check(again == expected, "VarlinkCall \(show(frame)) written as \(show(own)) parses as \(again)")
        } catch {
            fail("VarlinkCall \(show(frame)) written as \(show(own)) does not parse: \(error)")
        }
        if call.method.contains(".") {
            check(call.interface + "." + call.member == call.method, "interface and member of \(call.method)")
        }
        for method in methods { _ = method.parameters(call.parameters) }
    }
    let reply = try? VarlinkReply(parsing: frame)
    for method in methods { method.replyFrame(frame, reply) }
    if let reply, let name = reply.error {
        // The interface's typed errors: decoded, or a parameter error, or not this interface's.
        _ = try? IOQuaked.Failure(VarlinkCallError(name: name, parameters: reply.parameters))
    }
}

runFuzzer(fuzzVarlinkMessage)
