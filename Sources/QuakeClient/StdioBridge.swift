import Foundation
import NIOCore
import NIOPosix

/// `quakectl bridge`: copies bytes between standard input and output and quaked's socket, so that
/// `ssh HOST quakectl bridge` is a Varlink connection to that host's quaked (like `varlink bridge`,
/// or systemd's `ssh-exec:` transport).
///
/// Bytes are forwarded as they arrive, never parsed or gathered into messages, so a streamed
/// reply (Subscribe, Snapshot) passes through as quaked writes it. Each direction reads only while
/// the other side takes what it writes: a slow reader holds back the writer on the far side, and
/// nothing piles up here. When standard input ends, the socket's sending side is shut down and
/// the replies still due are forwarded; when quaked closes the connection, standard output is
/// closed and the bridge ends.
public enum StdioBridge {
    /// How the bridge ended badly.
    public struct Failure: Error, Sendable, CustomStringConvertible {
        public var description: String
    }

    /// Bridges `input` and `output` (dup'ed; the originals stay open) with the socket at `path`.
    /// Returns when quaked has closed the connection after a whole message (or with none).
    /// Throws ``QuakedConnectionError`` when the socket cannot be reached, and ``Failure`` when
    /// the connection ends in the middle of a message, or either side fails.
    public static func run(socketPath path: String, input: CInt = STDIN_FILENO, output: CInt = STDOUT_FILENO)
        async throws
    {
        let socket: NIOAsyncChannel<ByteBuffer, ByteBuffer>
        do {
            socket = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                .connectTimeout(QuakedConnection.connectTimeout)
                // Standard input ending shuts down only the sending side; replies still come.
                .channelOption(.allowRemoteHalfClosure, value: true)
                .connect(unixDomainSocketPath: path) { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try NIOAsyncChannel<ByteBuffer, ByteBuffer>(
                            wrappingChannelSynchronously: channel,
                            configuration: .init(isOutboundHalfClosureEnabled: true))
                    }
                }
        } catch let error as IOError {
            throw QuakedConnectionError(errno: error.errnoCode, path: path)
        } catch {
            throw QuakedConnectionError(kind: .unreachable, path: path, reason: "\(error)")
        }

        let stdio: NIOAsyncChannel<ByteBuffer, ByteBuffer>
        do {
            stdio = try await openStdio(input: input, output: output)
        } catch {
            try? await socket.channel.close()
            throw error
        }

        try await socket.executeThenClose { fromQuaked, toQuaked in
            try await stdio.executeThenClose { fromClient, toClient in
                try await withThrowingTaskGroup(of: Direction.self) { group in
                    group.addTask {
                        do {
                            for try await bytes in fromClient {
                                try await toQuaked.write(bytes)
                            }
                        } catch {
                            throw Failure(description: "copying standard input to quaked failed (\(error))")
                        }
                        toQuaked.finish()  // shutdown(SHUT_WR): quaked answers what it has, then closes
                        return .toQuaked
                    }
                    group.addTask {
                        var endsMessage = true
                        do {
                            for try await bytes in fromQuaked {
                                if let last = bytes.readableBytesView.last { endsMessage = last == 0 }
                                try await toClient.write(bytes)
                            }
                        } catch {
                            throw Failure(description: "copying quaked's replies to standard output failed (\(error))")
                        }
                        toClient.finish()
                        guard endsMessage else {
                            throw Failure(description: "quaked closed the connection in the middle of a message")
                        }
                        return .toClient
                    }
                    // quaked closing the connection ends the bridge; standard input ending only
                    // ends its direction.
                    while let finished = try await group.next() {
                        if finished == .toClient {
                            group.cancelAll()
                            return
                        }
                    }
                }
            }
        }
    }

    private enum Direction: Sendable {
        case toQuaked, toClient
    }

    /// Standard input and output as one channel, on duplicates of the descriptors (NIO closes
    /// what it owns; the originals stay for the process). They must be what epoll can wait on: a
    /// pipe, a socket or a terminal, as under ssh, not a regular file or /dev/null.
    static func openStdio(input: CInt, output: CInt) async throws -> NIOAsyncChannel<ByteBuffer, ByteBuffer> {
        let inputCopy = dup(input)
        let outputCopy = dup(output)
        guard inputCopy >= 0, outputCopy >= 0 else {
            throw Failure(description: "cannot duplicate standard input or output: \(String(cString: strerror(errno)))")
        }
        do {
            return try await NIOPipeBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                .channelOption(.allowRemoteHalfClosure, value: true)
                .takingOwnershipOfDescriptors(input: inputCopy, output: outputCopy) { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try NIOAsyncChannel<ByteBuffer, ByteBuffer>(
                            wrappingChannelSynchronously: channel,
                            configuration: .init(isOutboundHalfClosureEnabled: true))
                    }
                }
        } catch {
            // The copies are left to the process's exit: NIO may have closed them already.
            throw Failure(
                description:
                    "standard input and output must be pipes, sockets or a terminal (as ssh gives), not files (\(error))")
        }
    }
}

extension QuakedConnectionError {
    /// A failed `connect(2)` to the socket at `path`, by its errno.
    init(errno code: CInt, path: String) {
        switch code {
        case EACCES, EPERM: self.init(kind: .permissionDenied, path: path, reason: "permission denied")
        case ENOENT: self.init(kind: .unreachable, path: path, reason: "no such socket")
        case ECONNREFUSED: self.init(kind: .unreachable, path: path, reason: "nothing is listening")
        default: self.init(kind: .unreachable, path: path, reason: String(cString: strerror(code)))
        }
    }
}
