import Logging
import NIOCore
import NIOEmbedded
import Testing

@testable import Varlink

/// The generic server and its handlers without sockets: NIO's in-memory channels.
@Suite("Varlink server")
struct ServerTests {
    static let replies = VarlinkServer.LimitReplies(
        messageTooLarge: { VarlinkReply.frame(errorName: "org.example.TooLarge", parameters: Array(#"{"limit":\#($0)}"#.utf8)) },
        messageTimeout: { VarlinkReply.frame(errorName: "org.example.Timeout", parameters: Array(#"{"seconds":\#($0)}"#.utf8)) },
        tooManyConnections: { _ in VarlinkReply.frame(errorName: "org.example.Busy", parameters: Array("{}".utf8)) })

    /// org.example.Count(n): replies n times with `more` (every reply but the last with continues).
    static let counting = VarlinkInterfaceHandler(name: "org.example", description: "interface org.example\n") {
        member, request in
        guard member == "Count" else { return false }
        struct Parameters: VarlinkValue {
            var n: Int
            init(json: inout JSONScanner) throws(VarlinkParameterError) {
                var seen: UInt64 = 0
                var n: Int?
                try json.beginObject()
                while let key = try json.nextKey() {
                    guard key == "n" else { throw VarlinkParameterError(path: [key], .unknownField) }
                    n = try json.field("n", seen: &seen, bit: 1)
                }
                guard let n else { throw VarlinkParameterError(path: ["n"], .missing) }
                self.n = n
            }
            func write(to writer: inout JSONWriter) {}
        }
        let n = try request.parameters(Parameters.self).n
        let call: VarlinkCallContext<OrgVarlinkService.GetInterfaceDescription.Reply> = request.context()
        if n > 1 { try call.requireMore() }
        for i in 1...max(n, 1) { try await call.reply(.init(description: "\(i)"), continues: i < n) }
        return true
    }

    /// Runs a server on one in-memory connection; `body` sends frames and reads replies.
    static func withConnection(
        limits: VarlinkServer.Limits = .init(), _ body: (NIOAsyncTestingChannel) async throws -> Void
    ) async throws {
        let channel = NIOAsyncTestingChannel()
        try await channel.connect(to: try SocketAddress(unixDomainSocketPath: "/in-memory"))
        let connection = try await VarlinkServer.makeConnection(channel, limits: limits, limitReplies: replies).get()
        let server = VarlinkServer(
            info: .init(vendor: "v", product: "p", version: "1", url: "u"), interfaces: [counting], limits: limits,
            limitReplies: replies, logger: Logger(label: "test"))
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { await server.serve(connection) }
            try await body(channel)
            try? await channel.close()  // the server may have closed it already
            try await group.waitForAll()
        }
    }

    static func send(_ channel: NIOAsyncTestingChannel, _ text: String) async throws {
        try await channel.writeInbound(ByteBuffer(bytes: Array(text.utf8) + [0]))
    }

    /// The next reply the server wrote, as text without its NUL.
    static func reply(_ channel: NIOAsyncTestingChannel) async throws -> String {
        var buffer = try await channel.waitForOutboundWrite(as: ByteBuffer.self)
        let bytes = buffer.readBytes(length: buffer.readableBytes) ?? []
        #expect(bytes.last == 0, "a reply ends with its NUL")
        return String(decoding: bytes.dropLast(), as: UTF8.self)
    }

    @Test("org.varlink.service is served from the given identity and interfaces")
    func serviceInterface() async throws {
        try await Self.withConnection { channel in
            // null parameters are {} (sd-varlink does the same; varlink-go sends them).
            try await Self.send(channel, #"{"method":"org.varlink.service.GetInfo","parameters":null}"#)
            let info = try VarlinkReply(parsing: Array(try await Self.reply(channel).utf8))
            let decoded = try OrgVarlinkService.GetInfo.Reply.decode(json: info.parameters)
            #expect(decoded.interfaces == ["org.varlink.service", "org.example"])
            #expect(decoded.product == "p")
            try await Self.send(
                channel, #"{"method":"org.varlink.service.GetInterfaceDescription","parameters":{"interface":"org.example"}}"#)
            #expect(try await Self.reply(channel) == #"{"parameters":{"description":"interface org.example\n"}}"#)
            try await Self.send(
                channel, #"{"method":"org.varlink.service.GetInterfaceDescription","parameters":{"interface":"org.nope"}}"#)
            #expect(
                try await Self.reply(channel)
                    == #"{"error":"org.varlink.service.InterfaceNotFound","parameters":{"interface":"org.nope"}}"#)
        }
    }

    @Test(
        "bad calls get typed errors and the connection stays usable",
        arguments: [
            (#"not json"#, #"{"error":"org.varlink.service.InvalidParameter","parameters":{"parameter":"message"}}"#),
            (#"[1]"#, #"{"error":"org.varlink.service.InvalidParameter","parameters":{"parameter":"message"}}"#),
            (#"{"parameters":{}}"#, #"{"error":"org.varlink.service.InvalidParameter","parameters":{"parameter":"method"}}"#),
            (#"{"method":"org.example.Count","parameters":[]}"#, #"{"error":"org.varlink.service.InvalidParameter","parameters":{"parameter":"parameters"}}"#),
            (#"{"method":"org.example.Count","parameters":5}"#, #"{"error":"org.varlink.service.InvalidParameter","parameters":{"parameter":"parameters"}}"#),
            (#"{"method":"org.example.Count","parameters":{"n":1},"extra":true}"#, #"{"error":"org.varlink.service.InvalidParameter","parameters":{"parameter":"extra"}}"#),
            (#"{"method":"org.example.Count","parameters":{"n":1.5}}"#, #"{"error":"org.varlink.service.InvalidParameter","parameters":{"parameter":"n"}}"#),
            (#"{"method":"org.example.Count","parameters":{"n":1,"m":2}}"#, #"{"error":"org.varlink.service.InvalidParameter","parameters":{"parameter":"m"}}"#),
            (#"{"method":"org.example.Count","parameters":{"n":2}}"#, #"{"error":"org.varlink.service.ExpectedMore","parameters":{}}"#),
            (#"{"method":"org.example.Nope"}"#, #"{"error":"org.varlink.service.MethodNotFound","parameters":{"method":"org.example.Nope"}}"#),
            (#"{"method":"org.nope.X"}"#, #"{"error":"org.varlink.service.InterfaceNotFound","parameters":{"interface":"org.nope"}}"#),
            (#"{"method":"org.varlink.service.GetInfo","parameters":{"x":1}}"#, #"{"error":"org.varlink.service.InvalidParameter","parameters":{"parameter":"x"}}"#),
            (#"{"method":"org.varlink.service.GetInterfaceDescription","parameters":null}"#, #"{"error":"org.varlink.service.InvalidParameter","parameters":{"parameter":"interface"}}"#),
            (#"{"method":"org.varlink.service.GetInfo","more":"yes"}"#, #"{"error":"org.varlink.service.InvalidParameter","parameters":{"parameter":"more"}}"#),
        ])
    func badCalls(call: String, expected: String) async throws {
        try await Self.withConnection { channel in
            try await Self.send(channel, call)
            #expect(try await Self.reply(channel) == expected)
            try await Self.send(channel, #"{"method":"org.example.Count","parameters":{"n":1}}"#)
            #expect(try await Self.reply(channel) == #"{"parameters":{"description":"1"}}"#)
        }
    }

    @Test("more: every reply but the last continues; oneway: no reply at all; oneway with more is a protocol error")
    func moreAndOneway() async throws {
        try await Self.withConnection { channel in
            try await Self.send(channel, #"{"method":"org.example.Count","parameters":{"n":3},"more":true}"#)
            #expect(try await Self.reply(channel) == #"{"parameters":{"description":"1"},"continues":true}"#)
            #expect(try await Self.reply(channel) == #"{"parameters":{"description":"2"},"continues":true}"#)
            #expect(try await Self.reply(channel) == #"{"parameters":{"description":"3"}}"#)
            try await Self.send(channel, #"{"method":"org.example.Count","parameters":{"n":1},"oneway":true}"#)
            try await Self.send(channel, #"{"method":"org.example.Nope","oneway":true}"#)
            // The next reply is the next call's: the oneway calls, even the failing one, said nothing.
            try await Self.send(channel, #"{"method":"org.example.Count","parameters":{"n":1}}"#)
            #expect(try await Self.reply(channel) == #"{"parameters":{"description":"1"}}"#)
            try await Self.send(channel, #"{"method":"org.example.Count","parameters":{"n":1},"oneway":true,"more":true}"#)
            #expect(
                try await Self.reply(channel)
                    == #"{"error":"org.varlink.service.InvalidParameter","parameters":{"parameter":"oneway"}}"#)
            // And the server ends the connection.
            try await channel.closeFuture.get()
        }
    }

    @Test("a message over the size limit is answered with the service's error and the connection closed")
    func tooLarge() async throws {
        let channel = EmbeddedChannel()
        try channel.pipeline.syncOperations.addHandler(
            MessageLimitsHandler(maxMessageSize: 16, deadline: .seconds(5), replies: Self.replies))
        try channel.writeInbound(ByteBuffer(string: "{\"method\":\"a\"}\0"))  // 14 bytes: passes
        #expect(try channel.readInbound(as: ByteBuffer.self) != nil)
        try channel.writeInbound(ByteBuffer(string: String(repeating: "x", count: 17)))
        #expect(try channel.readInbound(as: ByteBuffer.self) == nil, "the oversized message is not passed on")
        var reply = try #require(try channel.readOutbound(as: ByteBuffer.self))
        #expect(reply.readString(length: reply.readableBytes) == "{\"error\":\"org.example.TooLarge\",\"parameters\":{\"limit\":16}}\0")
        // Whatever follows is dropped.
        try channel.writeInbound(ByteBuffer(string: "{}\0"))
        #expect(try channel.readInbound(as: ByteBuffer.self) == nil)
        // The handler closed the channel itself: finish() without acceptAlreadyClosed throws
        // before it runs the loop's last tasks, and the channel is never released.
        _ = try channel.finish(acceptAlreadyClosed: true)
    }

    @Test("a message that does not end within the deadline is answered MessageTimeout; idle time between messages is free")
    func deadline() throws {
        let channel = EmbeddedChannel()
        try channel.pipeline.syncOperations.addHandler(
            MessageLimitsHandler(maxMessageSize: 1024, deadline: .seconds(10), replies: Self.replies))
        try channel.writeInbound(ByteBuffer(string: "{}\0"))
        channel.embeddedEventLoop.advanceTime(by: .seconds(60))
        #expect(try channel.readOutbound(as: ByteBuffer.self) == nil, "no deadline runs between messages")
        try channel.writeInbound(ByteBuffer(string: "{\"meth"))
        channel.embeddedEventLoop.advanceTime(by: .seconds(9))
        #expect(try channel.readOutbound(as: ByteBuffer.self) == nil)
        channel.embeddedEventLoop.advanceTime(by: .seconds(2))
        var reply = try #require(try channel.readOutbound(as: ByteBuffer.self))
        #expect(reply.readString(length: reply.readableBytes) == "{\"error\":\"org.example.Timeout\",\"parameters\":{\"seconds\":10}}\0")
        _ = try channel.finish(acceptAlreadyClosed: true)
    }

    @Test("NUL framing: messages split and joined across reads come out whole")
    func framing() throws {
        let channel = EmbeddedChannel(handler: ByteToMessageHandler(NULFrameDecoder(maxMessageSize: 100)))
        try channel.writeInbound(ByteBuffer(string: "{\"a\""))
        try channel.writeInbound(ByteBuffer(string: ":1}\0{\"b\":2}\0{"))
        var first = try #require(try channel.readInbound(as: ByteBuffer.self))
        var second = try #require(try channel.readInbound(as: ByteBuffer.self))
        #expect(first.readString(length: first.readableBytes) == "{\"a\":1}")
        #expect(second.readString(length: second.readableBytes) == "{\"b\":2}")
        #expect(try channel.readInbound(as: ByteBuffer.self) == nil)
        _ = try? channel.finish()
    }
}
