import NIOCore

/// Splits a byte stream into Varlink messages at NUL bytes.
///
/// A message longer than `maxMessageSize` (not counting its NUL) is an error (`MessageTooLarge`),
/// whether its NUL has arrived or not, so the verdict does not depend on how the stream was split
/// into reads. After it the connection is closed: the rest of the stream cannot be trusted to be
/// in step.
public struct NULFrameDecoder: ByteToMessageDecoder {
    public typealias InboundOut = ByteBuffer

    public struct MessageTooLarge: Error, Sendable {
        public var limit: Int
    }

    public let maxMessageSize: Int
    private var scanned = 0

    public init(maxMessageSize: Int = 1 << 20) {
        self.maxMessageSize = maxMessageSize
    }

    public mutating func decode(context: ChannelHandlerContext, buffer: inout ByteBuffer) throws -> DecodingState {
        if let length = buffer.readableOffsetOfNUL(from: scanned) {
            if length > maxMessageSize { throw MessageTooLarge(limit: maxMessageSize) }
            let frame = buffer.readSlice(length: length)!
            buffer.moveReaderIndex(forwardBy: 1)
            scanned = 0
            context.fireChannelRead(Self.wrapInboundOut(frame))
            return .continue
        }
        scanned = buffer.readableBytes
        if scanned > maxMessageSize { throw MessageTooLarge(limit: maxMessageSize) }
        return .needMoreData
    }

    public mutating func decodeLast(context: ChannelHandlerContext, buffer: inout ByteBuffer, seenEOF: Bool) throws
        -> DecodingState
    {
        // A partial message at EOF is dropped: the peer went away mid-message.
        while try decode(context: context, buffer: &buffer) == .continue {}
        buffer.moveReaderIndex(to: buffer.writerIndex)
        return .needMoreData
    }
}
