import Foundation
import QuakeTestSupport
import Testing

@testable import QuakeCtl

@Suite struct GlobalOptionsTests {
    @Test(
        "global options before the command move behind it; anything else is left for the parser",
        arguments: [
            (["--socket", "/s", "list"], ["list", "--socket", "/s"]),
            (["--json", "status"], ["status", "--json"]),
            (["--socket=/s", "--absolute", "--json", "list", "--limit", "3"], ["list", "--socket=/s", "--absolute", "--json", "--limit", "3"]),
            (["list", "--socket", "/s"], ["list", "--socket", "/s"]),
            (["--host", "me@far", "--socket", "/s", "watch"], ["watch", "--host", "me@far", "--socket", "/s"]),
            (["--host=far", "status", "--json"], ["status", "--host=far", "--json"]),
            (["--help"], ["--help"]),
            (["--json", "--help", "list"], ["--json", "--help", "list"]),
            (["--socket"], ["--socket"]),
            (["--json"], ["--json"]),
            ([], []),
        ])
    func reorder(arguments: [String], expected: [String]) {
        #expect(GlobalOptions.reorder(arguments) == expected)
    }
}

extension ClientEndToEnd {
    @Suite struct GlobalOptionsEndToEnd {
        @Test func optionsBeforeTheCommandWorkLikeAfter() async throws {
            try await withQuaked { daemon in
                let before = try await quakectl(["--socket", daemon.socketPath, "--json", "status"])
                let after = try await quakectl(["status", "--socket", daemon.socketPath, "--json"])
                #expect(before.status == 0, "\(before.stderr)")
                let a = try JSONSerialization.jsonObject(with: Data(before.stdout.utf8)) as? [String: Any]
                let b = try JSONSerialization.jsonObject(with: Data(after.stdout.utf8)) as? [String: Any]
                #expect(a?["storeId"] as? String == b?["storeId"] as? String)
                #expect(a?["quakeCount"] as? Int == 146)
                let list = try await quakectl(["--socket=\(daemon.socketPath)", "list", "--limit", "2"])
                #expect(list.status == 0, "\(list.stderr)")
                #expect(list.stdout.contains("showing 2 of 146 earthquakes"))
            }
        }
    }
}
