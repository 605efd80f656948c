import NIOCore
import NIOEmbedded
import Testing

@testable import Varlink

/// What fuzzing found (scripts/fuzz, Fuzz/), each with its reproducer.
@Suite("Fuzzing findings: Varlink")
struct VarlinkFuzzFindingTests {
    // varlink-message: a message over the limit passed when its NUL came in the same read, and
    // was refused when it came in a later one.
    @Test("NUL framing: a message over the limit is refused whether or not its NUL is in the same read")
    func frameOverLimit() throws {
        let cuts = [["{\"a\":1}\0", "0123456789\0"], ["{\"a\":1}\00123456789\0"], ["{\"a\":1}\00123456789", "\0"]]
        for reads in cuts {
            let channel = EmbeddedChannel(handler: ByteToMessageHandler(NULFrameDecoder(maxMessageSize: 8)))
            var refused = false
            for read in reads where !refused {
                do {
                    try channel.writeInbound(ByteBuffer(string: read))
                } catch is NULFrameDecoder.MessageTooLarge {
                    refused = true
                }
            }
            #expect(refused, "\(reads)")
            var first = try #require(try channel.readInbound(as: ByteBuffer.self))
            #expect(first.readString(length: first.readableBytes) == "{\"a\":1}")
            #expect(try channel.readInbound(as: ByteBuffer.self) == nil)
            _ = try? channel.finish()
        }
    }

    // varlink-message: the deadline was not restarted for a message that began in the read that
    // ended the one before, so it inherited that one's deadline.
    @Test("a message begun in the read that ends the one before gets a deadline of its own")
    func deadlinePerMessage() throws {
        let channel = EmbeddedChannel()
        try channel.pipeline.syncOperations.addHandler(
            MessageLimitsHandler(maxMessageSize: 1024, deadline: .seconds(10), replies: ServerTests.replies))
        try channel.writeInbound(ByteBuffer(string: "{\"a\""))
        channel.embeddedEventLoop.advanceTime(by: .seconds(9))
        try channel.writeInbound(ByteBuffer(string: ":1}\0{\"b\""))
        channel.embeddedEventLoop.advanceTime(by: .seconds(9))
        #expect(try channel.readOutbound(as: ByteBuffer.self) == nil, "the second message has until 19 s")
        try channel.writeInbound(ByteBuffer(string: ":2}\0"))
        channel.embeddedEventLoop.advanceTime(by: .seconds(60))
        #expect(try channel.readOutbound(as: ByteBuffer.self) == nil)
        var messages: [String] = []
        while var message = try channel.readInbound(as: ByteBuffer.self) {
            messages.append(message.readString(length: message.readableBytes) ?? "")
        }
        #expect(messages == ["{\"a\"", ":1}\0{\"b\"", ":2}\0"], "every read is passed on")
        _ = try? channel.finish()
    }
}
