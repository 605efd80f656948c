import Foundation
import NIOCore
import QuakeFeed
import QuakeProtocol
import QuakeStore
import QuakeTestSupport
import Testing
import Varlink

@testable import QuakeDaemon

/// FetchHistory's reply is written straight from stored rows (stored JSON passes through) with the
/// generated member writers. These hold that path to the generated types: decoded strictly, it must
/// be exactly the reply built value by value from the store's decoded history, and byte for byte
/// what the generated encoder writes for it (but for the stored JSON's own key order).
@Suite("FetchHistory encoding")
struct FetchHistoryEncodingTests {
    @Test(
        "the pass-through reply decodes strictly and equals the reply built from decoded values",
        arguments: [nil, QuakeFilter(minMagnitude: 1.2), QuakeFilter(region: .box(minLat: 30, maxLat: 40, minLon: -125, maxLon: -115))])
    func passThroughMatchesTheInterface(filter: QuakeFilter?) async throws {
        try await withTemporaryDirectory { dir in
            let store = try QuakeStore(directory: dir)
            defer { try? store.close() }
            _ = try await store.importFile(Fixtures.usgs("abruzzi__earthquake-viz__all_day.geojson"))
            _ = try await store.importFile(Fixtures.usgs("abruzzi__earthquake-viz__all_week.geojson"))
            let ids = try store.allQuakes().prefix(2).map(\.id)
            _ = try await store.delete(ids: ids)
            _ = try await store.applyRetention(maxAge: .seconds(86400 * 365 * 50))
            // Magnitudes moved across 1.2, and places across the box: enters and leaves.
            let week = try FeedDocument(contentsOf: Fixtures.usgs("abruzzi__earthquake-viz__all_week.geojson"))
            let moved = try week.features.prefix(40).map { feature -> String in
                var f = feature
                var properties = f["properties"] as! [String: Any]
                properties["mag"] = ((properties["mag"] as? Double) ?? 1) < 1.2 ? 2.5 : 0.5
                properties["updated"] = ((properties["updated"] as? Int) ?? 0) + 1000
                f["properties"] = properties
                var geometry = f["geometry"] as! [String: Any]
                let coordinates = geometry["coordinates"] as! [Double]
                geometry["coordinates"] = [-120, coordinates[1] > 35 ? 20 : 35, coordinates[2]]
                f["geometry"] = geometry
                return String(decoding: try JSONSerialization.data(withJSONObject: f), as: UTF8.self)
            }
            _ = try await store.importFeed(source: "test://moved") { sink in
                try await sink.send(Array(#"{"type":"FeatureCollection","features":[\#(moved.joined(separator: ","))]}"#.utf8))
            }

            var after: HistoryToken = 0
            var kinds: Set<IOQuaked.ChangeKind> = []
            while true {
                var writer = IOQuaked.FetchHistory.ReplyWriter(filtered: filter != nil)
                let summary = try store.visitHistory(after: after, limit: 2, maxChanges: 500, filter: filter, &writer)
                let frame = writer.finish(summary)
                #expect(frame.last == 0, "a whole frame, NUL-terminated")
                let reply = try VarlinkReply(parsing: Array(frame.dropLast()))
                #expect(reply.error == nil && !reply.continues)
                let decoded = try IOQuaked.FetchHistory.Reply.decode(json: reply.parameters)
                let page = try store.history(after: after, limit: 2, maxChanges: 500, filter: filter)
                let expected = IOQuaked.FetchHistory.Reply(
                    storeId: page.storeID, headToken: Int(page.head), oldestToken: Int(try store.oldestToken()),
                    transactions: page.transactions.map { Self.transaction($0, filtered: filter != nil) }, hasMore: page.hasMore,
                    nextAfter: Int(page.nextAfter))
                #expect(decoded == expected)
                // And the generated encoder writes the same value.
                #expect(try IOQuaked.FetchHistory.Reply.decode(json: expected.jsonBytes) == decoded)
                // Byte for byte: every member is where the interface declares it and written as the
                // generated encoder writes it; only the stored JSON passed through (`fields`,
                // `tombstone`: the store's form, its own key order) is written again to compare.
                let rewritten = try Self.rewritingStoredJSON(reply.parameters)
                let expectedBytes = decoded.jsonBytes
                let same = rewritten == expectedBytes
                #expect(same, "first difference: \(Self.difference(rewritten, expectedBytes))")
                #expect(Array(frame) == Array(#"{"parameters":"#.utf8) + reply.parameters + [UInt8(ascii: "}"), 0])
                // The frame joined into the buffer that is sent is the same.
                var again = IOQuaked.FetchHistory.ReplyWriter(filtered: filter != nil)
                _ = try store.visitHistory(after: after, limit: 2, maxChanges: 500, filter: filter, &again)
                let joined = Array(buffer: again.frame(summary)) == Array(frame)
                #expect(joined)
                kinds.formUnion(decoded.transactions.flatMap { $0.changes.map(\.kind) })
                after = page.nextAfter
                if !page.hasMore { break }
            }
            #expect(kinds == (filter == nil ? [.insert, .update, .delete] : [.insert, .update, .delete, .enter, .leave]))
        }
    }

    /// The page writer writes a quake once from its row and copies that object for the page's
    /// other changes to it (the page is one read transaction: the quake as it is now). Several
    /// transactions in one page naming the same quakes, one of them deleted by the last and so
    /// without a quake in every change, must give exactly the reply built from decoded values,
    /// each change carrying its own quake.
    @Test("a quake named by several of a page's transactions is written each time as it is now, and only for itself")
    func repeatedQuakesInOnePage() async throws {
        try await withTemporaryDirectory { dir in
            let store = try QuakeStore(directory: dir)
            defer { try? store.close() }
            func feature(_ id: String, mag: Double, updated: Int, place: String) -> String {
                #"{"type":"Feature","properties":{"mag":\#(mag),"place":"\#(place)","time":1700000000000,"updated":\#(updated),"status":"automatic","net":"bn","code":"\#(id)","ids":",bn\#(id),","type":"earthquake","title":"M \#(mag)"},"geometry":{"type":"Point","coordinates":[10,45,7]},"id":"bn\#(id)"}"#
            }
            let rounds: [[String]] = [
                [feature("1", mag: 2.0, updated: 1, place: "one"), feature("2", mag: 3.0, updated: 1, place: "two")],
                [feature("1", mag: 2.5, updated: 2, place: "one"), feature("3", mag: 4.0, updated: 2, place: "three")],
                [feature("1", mag: 2.6, updated: 3, place: "one, moved"), feature("2", mag: 3.1, updated: 3, place: "two")],
            ]
            for (n, round) in rounds.enumerated() {
                _ = try await store.importFeed(source: "test://round\(n)") { sink in
                    try await sink.send(Array(#"{"type":"FeatureCollection","features":[\#(round.joined(separator: ","))]}"#.utf8))
                }
            }
            _ = try await store.delete(ids: ["bn3"])
            var writer = IOQuaked.FetchHistory.ReplyWriter()
            let summary = try store.visitHistory(after: 0, limit: 10, &writer)
            let frame = writer.finish(summary)
            let decoded = try IOQuaked.FetchHistory.Reply.decode(json: try VarlinkReply(parsing: Array(frame.dropLast())).parameters)
            let page = try store.history(after: 0, limit: 10)
            #expect(decoded.transactions.count == 4 && !decoded.hasMore)
            #expect(decoded.transactions == page.transactions.map { Self.transaction($0, filtered: false) })
            let changes = decoded.transactions.flatMap(\.changes)
            // bn1 in three transactions, bn2 in two: each time the quake as stored now.
            for id in ["bn1", "bn2"] {
                let quakes = changes.filter { $0.quakeId == id }.map(\.quake)
                #expect(quakes.count == (id == "bn1" ? 3 : 2))
                #expect(quakes.allSatisfy { $0 == (try? store.quake(id: id)).flatMap { $0 }.map(IOQuaked.Quake.init) })
            }
            #expect(changes.first { $0.quakeId == "bn1" }?.quake?.place == "one, moved")
            // bn3, deleted by the page's last transaction: no quake in any of its changes.
            #expect(changes.filter { $0.quakeId == "bn3" }.allSatisfy { $0.quake == nil })
        }
    }

    /// The reply's parameters with each change's stored `fields` and `tombstone` decoded and
    /// written again by the generated encoder; every other byte as it was.
    static func rewritingStoredJSON(_ parameters: [UInt8]) throws -> [UInt8] {
        var json = JSONScanner(parameters)
        var out = JSONWriter()
        func copy(_ json: inout JSONScanner, _ out: inout JSONWriter) throws {
            out.raw(json.slice(try json.skipValue()))
        }
        func object(
            _ json: inout JSONScanner, _ out: inout JSONWriter,
            _ member: (String, inout JSONScanner, inout JSONWriter) throws -> Void
        ) throws {
            try json.beginObject()
            out.beginObject()
            while let key = try json.nextKey() {
                out.key(key)
                try member(key, &json, &out)
            }
            out.endObject()
        }
        func array(
            _ json: inout JSONScanner, _ out: inout JSONWriter, _ element: (inout JSONScanner, inout JSONWriter) throws -> Void
        ) throws {
            try json.beginArray()
            out.beginArray()
            while try json.nextElement() {
                out.separator()
                try element(&json, &out)
            }
            out.endArray()
        }
        try object(&json, &out) { key, json, out in
            guard key == "transactions" else { return try copy(&json, &out) }
            try array(&json, &out) { json, out in
                try object(&json, &out) { key, json, out in
                    guard key == "changes" else { return try copy(&json, &out) }
                    try array(&json, &out) { json, out in
                        try object(&json, &out) { key, json, out in
                            let stored = Array(json.slice(try json.skipValue()))
                            switch key {
                            case "fields": try [IOQuaked.FieldChange].decode(json: stored).write(to: &out)
                            case "tombstone": try IOQuaked.Tombstone.decode(json: stored).write(to: &out)
                            default: out.raw(stored)
                            }
                        }
                    }
                }
            }
        }
        return out.bytes
    }

    static func difference(_ a: [UInt8], _ b: [UInt8]) -> String {
        guard let i = zip(a, b).enumerated().first(where: { $0.element.0 != $0.element.1 })?.offset else {
            return a.count == b.count ? "none" : "lengths \(a.count) and \(b.count)"
        }
        let context = { (x: [UInt8]) in String(decoding: x[max(0, i - 120)..<min(x.count, i + 60)], as: UTF8.self) }
        return "at \(i):\n\(context(a))\n\(context(b))"
    }

    /// The reference mapping, field by field through the store's decoded types.
    static func transaction(_ t: HistoryTransaction, filtered: Bool) -> IOQuaked.Transaction {
        func value(_ v: FieldValue) -> IOQuaked.FieldValue? {
            switch v {
            case .null: nil
            case .integer(let i): .init(int: Int(i))
            case .real(let d): .init(float: d)
            case .text(let s): .init(string: s)
            case .contributors(let json): .init(contributors: try? [IOQuaked.Contributor].decode(json: Array(json.utf8)))
            }
        }
        return IOQuaked.Transaction(
            token: Int(t.token), author: IOQuaked.Author(t.author), timestamp: Int(t.timestamp), source: t.source,
            inserted: t.inserted, updated: t.updated, deleted: t.deleted, entered: filtered ? t.entered : nil,
            left: filtered ? t.left : nil,
            changes: t.changes.map { c in
                IOQuaked.Change(
                    quakeId: c.quakeId, kind: IOQuaked.ChangeKind(c.kind),
                    fields: c.fields?.map { IOQuaked.FieldChange(field: $0.field, old: value($0.old), new: value($0.new)) },
                    tombstone: c.tombstone.map {
                        IOQuaked.Tombstone(
                            id: $0.id, code: $0.code, mag: $0.mag, place: $0.place, time: Int($0.time), lat: $0.lat,
                            lon: $0.lon, depth: $0.depth, type: $0.type, alert: $0.alert, status: $0.status,
                            tsunami: $0.tsunami.map(Int.init), sig: $0.sig.map(Int.init), sources: $0.sources)
                    }, reason: c.reason.map(IOQuaked.DeleteReason.init), supersededBy: c.supersededBy,
                    quake: c.quake.map(IOQuaked.Quake.init))
            })
    }
}
