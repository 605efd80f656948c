import QuakeClient
import QuakeProtocol
import Varlink
import Foundation
import QuakeCtl
import QuakeTestSupport
import Testing

/// Failures a person or a script must be able to act on: the exit code and one sentence.
extension ClientEndToEnd {
    @Suite struct FailureTests {
        @Test func aFailedPullMakesRefreshFailWithTheReason() async throws {
            let missing = URL(fileURLWithPath: "/nonexistent/quakes.geojson")
            try await withQuaked(feeds: [TestFeeds.day, missing]) { daemon in
                let result = try await quakectl(["refresh", "--socket", daemon.socketPath])
                #expect(result.status == 1)
                #expect(result.stdout == "no changes\n")
                #expect(result.stderr.hasPrefix("quakectl: the pull failed (\(missing.absoluteString): "))
                let one = try await quakectl([
                    "refresh", "--feed", TestFeeds.day.absoluteString, "--socket", daemon.socketPath,
                ])
                #expect(one.status == 0, "\(one.stderr)")
            }
        }

        @Test func aRejectedReloadExits1() async throws {
            try await withTemporaryDirectory { dir in
                let config = dir.appendingPathComponent("quaked.conf")
                try "history-max-age = 7d\n".write(to: config, atomically: true, encoding: .utf8)
                try await withQuaked(arguments: ["--config", config.path]) { daemon in
                    #expect(try await quakectl(["reload", "--socket", daemon.socketPath]).status == 0)
                    try "history-max-age = banana\n".write(to: config, atomically: true, encoding: .utf8)
                    let rejected = try await quakectl(["reload", "--socket", daemon.socketPath])
                    #expect(rejected.status == 1)
                    #expect(rejected.stderr.hasPrefix("quakectl: quaked rejected the configuration: "))
                    #expect(rejected.stderr.contains("history-max-age"))
                    #expect(rejected.stderr.hasSuffix("the running configuration stays in force.\n"))
                }
            }
        }

        @Test(.enabled(if: getuid() == 0 && FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv")))
        func permissionDeniedExits77() async throws {
            try await withQuaked { daemon in
                let asNobody = ["--reuid=65534", "--regid=65534", "--clear-groups", BuiltProducts.path("quakectl")]
                // The socket's directory and mode keep strangers out...
                let status = try await ChildProcess.run(
                    "/usr/bin/setpriv", asNobody + ["status", "--socket", daemon.socketPath])
                #expect(status.status == 77, "\(status.stderr)")
                #expect(status.stderr.contains("permission denied"))
                // ...and a user who may connect may still not delete.
                chmod(daemon.directory.path, 0o755)
                chmod(daemon.socketPath, 0o666)
                #expect(
                    try await ChildProcess.run(
                        "/usr/bin/setpriv", asNobody + ["status", "--socket", daemon.socketPath]
                    )
                    .status == 0)
                let delete = try await ChildProcess.run(
                    "/usr/bin/setpriv", asNobody + ["delete", "x", "--socket", daemon.socketPath])
                #expect(delete.status == 77)
                #expect(delete.stderr.contains("admin group"))
            }
        }
    }
}
