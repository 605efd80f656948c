import Foundation
import QuakeClient
import QuakeProtocol
import QuakeTestSupport
import Testing

/// A quakectl against an older quaked, one that answers FetchHistory once even when called with
/// `more` (as every quaked did before the call streamed its pages): the watch asks again after
/// each page's `nextAfter`, and every change is printed once.
@Suite struct OlderQuakedTests {
    /// The older quaked, in Python: Subscribe, Snapshot (nothing stored), Acknowledge, and
    /// FetchHistory with one transaction a page, each reply the call's only one (no continues),
    /// whatever `more` says. Each FetchHistory call's after and more flag go to stdout.
    static let olderQuaked = #"""
        store, head = "older-store", 3
        def transaction(token):
            quake = {"id": "old%d" % token, "time": 1741132800000 + token, "mag": 4.0 + token, "place": "Place %d" % token}
            return {"token": token, "author": "import", "timestamp": 1741132800000, "inserted": 1, "updated": 0,
                    "deleted": 0, "changes": [{"quakeId": quake["id"], "kind": "insert", "quake": quake}]}
        def answer(call):
            method, parameters = call.get("method"), call.get("parameters", {})
            if method == "io.quaked.Subscribe":
                return {"parameters": {"event": "subscribed", "storeId": store, "headToken": head}, "continues": True}
            if method == "io.quaked.Snapshot":
                return {"parameters": {"storeId": store, "token": 0, "quakes": []}}
            if method == "io.quaked.FetchHistory":
                after = parameters["after"]
                print("fetch after=%d more=%s" % (after, bool(call.get("more"))), flush=True)
                page = [transaction(after + 1)] if after < head else []
                return {"parameters": {"storeId": store, "headToken": head, "oldestToken": 1,
                                       "transactions": page, "hasMore": after + 1 < head,
                                       "nextAfter": min(after + 1, head)}}
            if method == "io.quaked.Acknowledge":
                return {"parameters": {}}
        """#

    @Test("watch against a quaked that answers FetchHistory with more once: it asks again after each page, every change printed once")
    func watchAsksAgain() async throws {
        try await withTemporaryDirectory { dir in
            let (server, socket) = try await startPythonQuaked(Self.olderQuaked, named: "older-quaked", in: dir)
            defer { server.signal(SIGTERM) }

            let cache = dir.appendingPathComponent("watch.sqlite").path
            let watch = try startQuakectl(["watch", "--json", "--socket", socket, "--cache", cache])
            defer { watch.signal(SIGKILL) }
            try await waitUntil(timeout: .seconds(30)) {
                guard watch.isRunning else { throw TestFailure("watch exited: \(watch.stderr)") }
                let cache = try QuakeCache(path: cache)
                defer { try? cache.close() }
                return try cache.position()?.token == 3
            }
            let output = try WatchOutput(watch.stdout)
            #expect(output.changes.map(\.quakeId) == ["old1", "old2", "old3"], "\(watch.stdout)")
            // One call after each page, each made with more and answered once.
            let fetches = server.stdout.split(separator: "\n").filter { $0.hasPrefix("fetch ") }
            #expect(fetches == ["fetch after=0 more=True", "fetch after=1 more=True", "fetch after=2 more=True"])
        }
    }
}
