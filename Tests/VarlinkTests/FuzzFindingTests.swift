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
}
