import Foundation
import QuakeProtocol
import QuakeTestSupport
import Testing

/// An installed quakectl against a newer quaked: replies with fields its interface does not have
/// yet (Varlink lets an interface gain optional fields) are read, the new fields ignored.
@Suite struct UnknownFieldTests {
    /// A quaked from the future, in Python: every reply carries members this quakectl has never
    /// heard of, at the top, inside structs and inside array elements, of every JSON shape.
    static let newerQuaked = #"""
        odd = {"nested": {"list": [1, {"deep": "a \"}]\" {["}], "none": None}, "text": "\\\"{}", "n": -1.5e3}
        status = {
            "version": "9.9.9", "storeId": "future-store", "headToken": 42, "oldestToken": 7,
            "quakeCount": 1234, "databaseBytes": 4096, "feeds": [], "subscribers": 2,
            "clients": [{"name": "alice", "token": 40, "lag": 2, "lastSeen": 1741132800000,
                         "priority": "high", "extra": odd}],
            "sources": [{"name": "ingv", "reports": 12345, "agencyCodes": ["INGV", "RM"], "health": odd}],
            "federation": odd, "peers": [odd, [odd], "x"], "uptimeSeconds": 99,
        }
        quake = {"id": "new1", "time": 1741132809120, "mag": 4.4, "place": "Somewhere",
                 "agency": "INGV",
                 "contributors": [{"source": "ingv", "id": "x1", "time": 1741132809120, "lat": 42.5, "lon": 13.25,
                                   "preferred": True, "weight": 0.5, "extra": odd}],
                 "ranking": ["ingv", "emsc", {"name": "usgs", "weight": 0.5}]}
        def answer(call):
            method = call.get("method")
            if method == "io.quaked.GetStatus":
                return {"parameters": status, "annotation": odd}
            if method == "io.quaked.Get" and call["parameters"]["id"] == "new1":
                return {"parameters": {"quake": quake, "servedBy": "replica-2"}}
            if method == "io.quaked.Get":
                return {"error": "io.quaked.NoSuchQuake",
                        "parameters": {"id": call["parameters"]["id"], "suggestions": ["new1"], "why": odd}}
        """#

    @Test("status, show and an error reply from a quaked whose replies carry fields quakectl does not know")
    func newerQuaked() async throws {
        try await withTemporaryDirectory { dir in
            let (server, socket) = try await startPythonQuaked(Self.newerQuaked, named: "newer-quaked", in: dir)
            defer { server.signal(SIGTERM) }

            let status = try await quakectl(["status", "--socket", socket])
            #expect(status.status == 0, "\(status.stderr)")
            #expect(status.stderr.isEmpty, "\(status.stderr)")
            for text in ["quaked 9.9.9", "future-store", "1,234", "alice", "ingv", "12,345 reports"] {
                #expect(status.stdout.contains(text), "\(text) in \(status.stdout)")
            }

            // --json prints what this quakectl knows, the unknown members left out.
            let json = try await quakectl(["status", "--json", "--socket", socket])
            #expect(json.status == 0, "\(json.stderr)")
            let object = try #require(
                try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any], "\(json.stdout)")
            #expect(object["headToken"] as? Int == 42 && object["quakeCount"] as? Int == 1234)
            #expect(object["federation"] == nil && object["peers"] == nil)
            let clients = try #require(object["clients"] as? [[String: Any]])
            #expect(clients.first?["name"] as? String == "alice" && clients.first?["priority"] == nil)

            let shown = try await quakectl(["show", "new1", "--socket", socket])
            #expect(shown.status == 0, "\(shown.stderr)")
            #expect(shown.stdout.contains("Somewhere"), "\(shown.stdout)")
            // Known members of a known type keep their place, an unknown member inside one skipped.
            #expect(shown.stdout.contains("ingv x1 (preferred)"), "\(shown.stdout)")

            // An error reply's parameters with extra members: still the typed error.
            let missing = try await quakectl(["show", "gone1", "--socket", socket])
            #expect(missing.status != 0)
            #expect(missing.stderr.contains("gone1"), "\(missing.stderr)")
            #expect(!missing.stderr.contains("cannot be read"), "\(missing.stderr)")
        }
    }
}
