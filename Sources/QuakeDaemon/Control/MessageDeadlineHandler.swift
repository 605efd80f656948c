import NIOCore

/// Fails a connection whose started message does not end (with its NUL) within a deadline, so a
/// client that sends half a message and stalls cannot hold a connection and its buffer forever.
/// Idle connections between messages are not affected.
final class MessageDeadlineHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    struct MessageTimeout: Error {
        var seconds: Int64
    }

    private let deadline: TimeAmount
    private var timer: Scheduled<Void>?

    init(deadline: TimeAmount) {
        self.deadline = deadline
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let buffer = unwrapInboundIn(data)
        // Bytes after the last NUL are a message still in progress.
        let view = buffer.readableBytesView
        let endsMidMessage = view.last.map { $0 != 0 } ?? false
        if endsMidMessage {
            if timer == nil {
                let loopBound = NIOLoopBound(context, eventLoop: context.eventLoop)
                let seconds = deadline.nanoseconds / 1_000_000_000
                timer = context.eventLoop.scheduleTask(in: deadline) {
                    loopBound.value.fireErrorCaught(MessageTimeout(seconds: seconds))
                }
            }
        } else {
            timer?.cancel()
            timer = nil
        }
        context.fireChannelRead(data)
    }

    func channelInactive(context: ChannelHandlerContext) {
        timer?.cancel()
        timer = nil
        context.fireChannelInactive()
    }
}
