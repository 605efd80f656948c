import Foundation
import QuakeProtocol
import QuakeStore
import QuakeTestSupport
import Testing
import Varlink

/// io.quaked held to systemd's sd-varlink rules against a real daemon, and called method by method
/// by two independent Varlink implementations: the Python `varlink` package and a Go client on
/// bindings Debian's varlink-go-interface-generator makes from the interface file.
extension EndToEnd {
    @Suite("Varlink conformance", .serialized)
    struct ConformanceTests {
        static let day = Fixtures.usgs("abruzzi__earthquake-viz__all_day.geojson")
        static let week = Fixtures.usgs("abruzzi__earthquake-viz__all_week.geojson")

        /// A daemon whose history has inserts, updates (with field values of every type) and a
        /// delete: what the peers must decode.
        func withRichDaemon(_ body: (DaemonHarness) async throws -> Void) async throws {
            try await withTemporaryDirectory { dir in
                let daemon = try await DaemonHarness(in: dir, ["--feed", Self.day.absoluteString, "--interval", "1h"])
                try await waitUntil(timeout: .seconds(20)) { try await daemon.getStatus().headToken == 1 }
                let once = try await ChildProcess.run(
                    BuiltProducts.path("quaked"),
                    ["--once", "--feed", Self.week.absoluteString, "--state-directory", daemon.stateDirectory.path])
                #expect(once.status == 0, "\(once.stderr)")
                let id = try daemon.withStore { try $0.allQuakes().first!.id }
                let deleted = try await daemon.result(IOQuaked.Delete.self, .init(ids: [id]))
                #expect(deleted.error == nil, "\(deleted)")
                try await body(daemon)
                #expect(try await daemon.stop() == 0)
            }
        }

        @Test(
            "strictness: unknown fields at any depth, non-object parameters and wrong types are InvalidParameter naming the field",
            arguments: [
                (#"{"method":"io.quaked.GetStatus","parameters":{"bogus":1}}"#, "bogus"),
                (#"{"method":"io.quaked.Get","parameters":{"id":"x","bogus":1}}"#, "bogus"),
                (#"{"method":"io.quaked.Refresh","parameters":{"feed":"all_day","bogus":1}}"#, "bogus"),
                (#"{"method":"io.quaked.Query","parameters":{"near":{"bogus":1,"lat":1,"lon":2,"radiusKm":3}}}"#, "near.bogus"),
                (#"{"method":"org.varlink.service.GetInfo","parameters":{"x":1}}"#, "x"),
                (#"{"method":"io.quaked.GetStatus","parameters":[]}"#, "parameters"),
                (#"{"method":"io.quaked.GetStatus","parameters":5}"#, "parameters"),
                (#"{"method":"io.quaked.GetStatus","parameters":"x"}"#, "parameters"),
                (#"{"method":"io.quaked.Query","parameters":{"limit":1.5}}"#, "limit"),
                (#"{"method":"io.quaked.FetchHistory","parameters":{"after":"0"}}"#, "after"),
                (#"{"method":"io.quaked.FetchHistory","parameters":{}}"#, "after"),
                (#"{"method":"io.quaked.Query","parameters":{"order":"size"}}"#, "order"),
                (#"{"method":"io.quaked.Delete","parameters":{"ids":["a",1]}}"#, "ids[1]"),
                (#"{"method":"io.quaked.Query","parameters":{"near":{"lat":91,"lon":0,"radiusKm":1}}}"#, "near.lat"),
                (#"{"method":"io.quaked.Backfill","parameters":{"start":"2024-01-01"}}"#, "start"),
                (#"{"method":"io.quaked.Backfill","parameters":{"start":1,"box":{"minLat":1}}}"#, "box.maxLat"),
                (#"{"method":"io.quaked.Backfill","parameters":{"start":10,"end":5}}"#, "end"),
                (#"{"method":"io.quaked.Backfill","parameters":{"start":1,"catalog":"ftp://x/"}}"#, "catalog"),
                (#"{"method":"io.quaked.BackfillCancel","parameters":{}}"#, "id"),
            ])
        func strictness(frame: String, parameter: String) async throws {
            try await withTemporaryDirectory { dir in
                let daemon = try await DaemonHarness(in: dir, ["--feed", Self.day.absoluteString, "--interval", "1h"])
                let client = try UnixSocketClient(path: daemon.socketPath)
                try client.send(Array(frame.utf8) + [0])
                let reply = try #require(try client.receive(timeout: .seconds(10)))
                let object = try JSONSerialization.jsonObject(with: Data(reply.utf8)) as? [String: Any]
                #expect(object?["error"] as? String == "org.varlink.service.InvalidParameter", "\(reply)")
                #expect((object?["parameters"] as? [String: Any])?["parameter"] as? String == parameter, "\(reply)")
                #expect(object?.keys.sorted() == ["error", "parameters"], "no continues on an error")
                // The connection is still usable.
                let status = try client.call(IOQuaked.GetStatus.self, .init())
                #expect(!status.storeId.isEmpty)
                let exit = try await daemon.stop()
                #expect(exit == 0, "quaked exited \(exit):\n\(daemon.process.stderr)")
            }
        }

        @Test("oneway together with more is a protocol error: InvalidParameter naming oneway, then the connection closes")
        func onewayWithMore() async throws {
            try await withTemporaryDirectory { dir in
                let daemon = try await DaemonHarness(in: dir, ["--feed", Self.day.absoluteString, "--interval", "1h"])
                let other = try UnixSocketClient(path: daemon.socketPath)
                let client = try UnixSocketClient(path: daemon.socketPath)
                try client.send(Array(#"{"method":"io.quaked.Subscribe","more":true,"oneway":true}"#.utf8) + [0])
                let reply = try #require(try client.receive(timeout: .seconds(10)))
                #expect(reply.contains(#""parameter":"oneway""#), "\(reply)")
                #expect(try client.receive(timeout: .seconds(10)) == nil, "the daemon closed the connection")
                // A plain oneway call gets no reply at all; the next call's reply is the next one.
                try other.send(Array(#"{"method":"io.quaked.GetStatus","oneway":true}"#.utf8) + [0])
                let info = try other.call(OrgVarlinkService.GetInfo.self, .init())
                #expect(info.product == "quaked")
                #expect(try await daemon.stop() == 0)
            }
        }

        @Test("the Python varlink client calls every method and reads every reply")
        func pythonClient() async throws {
            try await withRichDaemon { daemon in
                let script = Fixtures.packageRoot.appendingPathComponent("Tests/Peers/python_varlink_client.py").path
                let result = try await ChildProcess.run(
                    "/usr/bin/env", [PeerTools.python, script, "unix:\(daemon.socketPath)"])
                #expect(result.status == 0, "\(result.stdout) \(result.stderr)")
                let summary = try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any]
                let ok = Set(summary?["ok"] as? [String] ?? [])
                #expect(
                    ok == [
                        "GetStatus", "Refresh", "FetchHistory", "FetchHistory:more", "Acknowledge", "Snapshot", "Query", "Get",
                        "Get:NoSuchQuake", "GetReports", "GetReports:NoSuchQuake", "Delete", "Reload", "Subscribe",
                        "Metrics", "Backfill", "BackfillStatus", "BackfillStatus:NoSuchBackfill", "BackfillCancel",
                    ], "\(result.stdout)")
                let changes = (summary?["seen"] as? [String: Any])?["changes"] as? [String: Int] ?? [:]
                #expect(changes["insert"] ?? 0 > 0)
                #expect(changes["update"] ?? 0 > 0, "the history holds updates with field values")
                #expect(changes["delete"] ?? 0 > 0)
                let seen = summary?["seen"] as? [String: Any]
                #expect((seen?["streamedPages"] as? Int ?? 0) >= 1, "\(result.stdout)")
            }
        }

        @Test("a Go client on varlink-go bindings generated from the interface calls every method and decodes every reply")
        func goClient() async throws {
            try await withTemporaryDirectory { tools in
                let build = try await ChildProcess.run("/bin/bash", [PeerTools.goClientBuildScript, tools.path])
                try #require(build.status == 0, "building the Go client failed: \(build.stderr)")
                try await withRichDaemon { daemon in
                    let result = try await ChildProcess.run(
                        PeerTools.goClient(in: tools), ["--socket", daemon.socketPath])
                    #expect(result.status == 0, "\(result.stdout) \(result.stderr)")
                    let summary = try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any]
                    #expect((summary?["errors"] as? [Any])?.isEmpty == true, "\(result.stdout)")
                    let ok = (summary?["ok"] as? [String] ?? []).map { $0.split(separator: ":").first.map(String.init) ?? $0 }
                    for method in [
                        "GetInfo", "GetInterfaceDescription", "GetStatus", "Refresh", "Subscribe", "FetchHistory",
                        "Acknowledge", "Snapshot", "Query", "Get", "GetReports", "Delete", "Reload", "Metrics",
                        "Backfill", "BackfillStatus", "BackfillCancel",
                    ] {
                        #expect(ok.contains(method), "\(method) not called: \(result.stdout)")
                    }
                    let seen = summary?["seen"] as? [String: Any]
                    let changes = seen?["changes"] as? [String: Int] ?? [:]
                    #expect(changes["update"] ?? 0 > 0 && changes["delete"] ?? 0 > 0 && changes["insert"] ?? 0 > 0)
                    let values = seen?["fieldValues"] as? [String: Int] ?? [:]
                    #expect(values["float"] ?? 0 > 0 && values["int"] ?? 0 > 0, "typed field values decoded: \(values)")
                }
            }
        }
    }
}
