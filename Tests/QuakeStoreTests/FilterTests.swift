import Foundation
import QuakeFeed
import QuakeTestSupport
import Testing

@testable import QuakeStore

/// Filtered history: how each change is judged, on a real store.
@Suite("Filtered history")
struct FilterTests {
    static func document(_ features: [(id: String, mag: Double, updated: Int, lat: Double, lon: Double)]) -> [UInt8] {
        let items = features.map { f in
            #"{"type":"Feature","id":"\#(f.id)","properties":{"mag":\#(f.mag),"time":1700000000000,"updated":\#(f.updated),"type":"earthquake","status":"reviewed","tsunami":1},"geometry":{"type":"Point","coordinates":[\#(f.lon),\#(f.lat),10]}}"#
        }
        return Array(#"{"type":"FeatureCollection","features":[\#(items.joined(separator: ","))]}"#.utf8)
    }

    static func importDocument(_ bytes: [UInt8], into store: QuakeStore) async throws {
        _ = try await store.importFeed(source: "test://filter") { sink in try await sink.send(bytes) }
    }

    @Test("an insert of a first import, read after a later change, is judged by the quake as it was inserted")
    func deferredImages() async throws {
        try await withTemporaryDirectory { dir in
            let store = try QuakeStore(directory: dir)
            defer { try? store.close() }
            // A first import (into an empty table): its images are deferred.
            try await Self.importDocument(
                Self.document([("us1", 4.5, 1, 10, 140), ("us2", 2.0, 1, 10, 140), ("us3", 4.8, 1, 50, 0)]), into: store)
            // Later: us1 falls below the threshold, us2 rises above it, us3 is deleted.
            try await Self.importDocument(Self.document([("us1", 3.9, 2, 10, 140), ("us2", 4.4, 2, 10, 140)]), into: store)
            _ = try await store.delete(ids: ["us3"])
            let filter = QuakeFilter(minMagnitude: 4)
            let page = try store.history(after: 0, filter: filter)
            let sent = page.transactions.map { $0.changes.map { "\($0.kind.rawValue) \($0.quakeId)" } }
            #expect(sent == [["insert us1", "insert us3"], ["leave us1", "enter us2"], ["delete us3"]])
            #expect(page.transactions.first?.inserted == 2)
            // Unfiltered counts are the stored ones.
            #expect(try store.history(after: 0).transactions.first?.inserted == 3)
        }
    }

    @Test("a first import's insert, read after retention removed the quake, is sent with its delete")
    func deferredImageThenRetention() async throws {
        try await withTemporaryDirectory { dir in
            let store = try QuakeStore(directory: dir)
            defer { try? store.close() }
            try await Self.importDocument(Self.document([("us1", 4.5, 1, 10, 140)]), into: store)
            try await store.applyRetention(maxAge: .seconds(3600), now: Date(timeIntervalSince1970: 1_800_000_000))
            let page = try store.history(after: 0, filter: QuakeFilter(region: .box(minLat: 9, maxLat: 11, minLon: 139, maxLon: 141), tsunami: true))
            let sent = page.transactions.map { $0.changes.map { "\($0.kind.rawValue) \($0.quakeId)" } }
            #expect(sent == [["insert us1"], ["delete us1"]])
        }
    }

    @Test("a deferred image reads each field's old value under the member history stores it with")
    func deferredImageMembers() throws {
        var quake = FeedFeature(id: "us1", time: 1_700_000_000_000)
        (quake.mag, quake.lat, quake.lon, quake.type, quake.alert) = (4.5, 35.5, -120.25, "earthquake", "green")
        (quake.tsunami, quake.status, quake.sig, quake.sources) = (1, "reviewed", 312, ",us,")
        let values = QuakeColumns.values(of: quake)
        for field in QuakeImage.columns {
            let value = FieldValue(values[try #require(QuakeColumns.names.firstIndex(of: field))])
            // {"float":4.5}: the one member, as an update's old value is stored in atOld.
            let json = String(decoding: try JSONEncoder().encode(value), as: UTF8.self)
            let member = try #require(json.split(separator: "\"").first { $0 != "{" })
            #expect(HistoryImages.fillDeferred.contains("'$.\(field).\(member)'"), "\(field): \(json)")
        }
    }
}
