import QuakeClient
import QuakeProtocol
import ArgumentParser
import Foundation

/// Where an export goes: stdout, or a file written beside its final name and renamed into place
/// when complete, so `-o FILE` never leaves half an export under FILE.
public final class ExportSink {
    private let fd: Int32
    private let temporaryPath: String?
    private let finalPath: String?
    private(set) public var bytesWritten = 0

    public init(path: String?) throws {
        guard let path else {
            fd = STDOUT_FILENO
            temporaryPath = nil
            finalPath = nil
            return
        }
        let url = URL(fileURLWithPath: path)
        let temporary = url.deletingLastPathComponent()
            .appendingPathComponent(".\(url.lastPathComponent).partial-\(getpid())").path
        let opened = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard opened >= 0 else {
            throw QuakectlError(
                QuakectlError.failure,
                "cannot write \(path) (\(String(cString: strerror(errno)))); choose a writable path with -o.")
        }
        fd = opened
        temporaryPath = temporary
        finalPath = path
    }

    public func write(_ bytes: inout [UInt8]) throws {
        var offset = 0
        while offset < bytes.count {
            let n = bytes[offset...].withUnsafeBytes { Foundation.write(fd, $0.baseAddress, $0.count) }
            if n < 0 {
                if errno == EINTR { continue }
                // The reader went away (`quakectl export ... | head`): stop quietly, as if by
                // SIGPIPE (128 + 13), without an error message.
                if errno == EPIPE { throw ExitCode(141) }
                throw QuakectlError(
                    QuakectlError.failure, "writing the export failed: \(String(cString: strerror(errno))).")
            }
            offset += n
        }
        bytesWritten += bytes.count
        bytes.removeAll(keepingCapacity: true)
    }

    /// Closes the file and moves it to its name.
    public func finish() throws {
        guard let temporaryPath, let finalPath else { return }
        guard fsync(fd) == 0 || errno == EINVAL else {
            throw QuakectlError(
                QuakectlError.failure, "writing \(finalPath) failed: \(String(cString: strerror(errno))).")
        }
        close(fd)
        guard rename(temporaryPath, finalPath) == 0 else {
            let reason = String(cString: strerror(errno))
            unlink(temporaryPath)
            throw QuakectlError(QuakectlError.failure, "cannot move the export to \(finalPath): \(reason).")
        }
    }

    /// Removes a partial file after a failure.
    public func abandon() {
        guard let temporaryPath else { return }
        close(fd)
        unlink(temporaryPath)
    }
}
