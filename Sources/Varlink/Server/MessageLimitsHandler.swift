import NIOCore

/// Enforces the control socket's message limits before any message is decoded: a message longer
/// than `maxMessageSize`, or one that does not end (with its NUL) within `deadline`, is answered
/// with the service's own error for it (``VarlinkServer/LimitReplies``) and the connection is closed.
///
/// Done here, at the front of the pipeline, so the error reply is written before the close
/// (an error thrown into the pipeline could close the channel first). Idle connections between
/// messages are not affected.
final class MessageLimitsHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private let maxMessageSize: Int
    private let deadline: TimeAmount
    /// Bytes received since the last NUL: the message in progress.
    private var pending = 0
    private var timer: Scheduled<Void>?
    private var failed = false
    private let replies: VarlinkServer.LimitReplies

    init(maxMessageSize: Int, deadline: TimeAmount, replies: VarlinkServer.LimitReplies) {
        self.maxMessageSize = maxMessageSize
        self.deadline = deadline
        self.replies = replies
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !failed else { return }  // discard everything after a violation
        let buffer = unwrapInboundIn(data)
        var start = 0
        var longest = 0
        var ended = false
        while let nul = buffer.readableOffsetOfNUL(from: start) {
            longest = max(longest, pending + (nul - start))
            pending = 0
            start = nul + 1
            ended = true
        }
        pending += buffer.readableBytes - start
        longest = max(longest, pending)
        if longest > maxMessageSize {
            fail(context: context, reply: replies.messageTooLarge(maxMessageSize))
            return
        }
        if ended {
            // The message the deadline was for is complete: one begun in this read gets its own.
            timer?.cancel()
            timer = nil
        }
        if pending > 0 && timer == nil {
            let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
            let seconds = Double(deadline.nanoseconds) / 1e9
            timer = context.eventLoop.scheduleTask(in: deadline) {
                let (handler, context) = bound.value
                handler.fail(context: context, reply: handler.replies.messageTimeout(Int(seconds.rounded(.up))))
            }
        }
        context.fireChannelRead(data)
    }

    func channelInactive(context: ChannelHandlerContext) {
        timer?.cancel()
        timer = nil
        context.fireChannelInactive()
    }

    private func fail(context: ChannelHandlerContext, reply: [UInt8]) {
        guard !failed else { return }
        failed = true
        timer?.cancel()
        timer = nil
        let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
        // A lingering close: reply, end our side, and keep reading (and dropping) until the peer
        // closes. Closing at once with its bytes unread would make the kernel reset the
        // connection, and the peer could lose the reply.
        context.writeAndFlush(wrapOutboundOut(ByteBuffer(bytes: reply))).whenComplete { _ in
            bound.value.close(mode: .output, promise: nil)
        }
        context.eventLoop.scheduleTask(in: .seconds(5)) {
            bound.value.close(promise: nil)
        }
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if failed, let event = event as? ChannelEvent, event == .inputClosed {
            context.close(promise: nil)
            return
        }
        context.fireUserInboundEventTriggered(event)
    }
}
