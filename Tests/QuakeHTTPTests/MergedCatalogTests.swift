import Foundation
import QuakeAssociation
import QuakeFeed
import QuakeHTTP
import QuakeHTTPQuery
import QuakeModel
import QuakeStore
import QuakeTestSupport
import Testing

/// A quake two agencies reported, served back: one feature whose `ids` and `sources` name both,
/// with both solutions in `contributors`; one FDSN event.
@Suite struct MergedCatalogTests {
    @Test("an event of two agencies is one feature naming both in ids, sources and contributors, and one FDSN event")
    func mergedEvent() async throws {
        let fixture = try FixtureFeed(Catalog.week)
        // The strongest quake of the day, reported again by EMSC 3 s later and 10 km north.
        let day = fixture.feed(SummaryFeed(level: .all, period: .day), now: Catalog.weekGenerated)
        let byID = Dictionary(uniqueKeysWithValues: fixture.features.map { ($0.id, $0) })
        let usgs = try #require(day.compactMap { byID[$0] }.max { ($0.mag ?? 0) < ($1.mag ?? 0) })
        let emsc = SourceReport(
            source: "emsc", id: "20220626_0000042", agency: "EMSC", time: usgs.time + 3000, latitude: usgs.lat + 0.09,
            longitude: usgs.lon, depth: 10, magnitude: (usgs.mag ?? 4) + 0.1, magnitudeType: "mb", place: "SOMEWHERE",
            evaluationMode: .automatic, updated: usgs.time + 60_000)
        try await Catalog.with { catalog in
            _ = try await catalog.store.importSource(
                "emsc", items: [.report(emsc)], position: nil, query: nil, association: AssociationConfiguration(),
                now: Catalog.weekNow)
            let feed = try ParsedFeed(try await catalog.get("/feeds/all_day.geojson").body)
            #expect(feed.features.count == day.count, "EMSC's report joined the USGS quake: no second feature")
            let merged = try #require(feed.features.first { $0.id == usgs.id })
            #expect(merged.ids?.contains(",\(emsc.id),") == true, "\(String(describing: merged.ids))")
            #expect(merged.ids?.contains(",\(usgs.id),") == true, "\(String(describing: merged.ids))")
            let agencies = Set(QuakeImage.agencies(merged.sources ?? "").map { $0.lowercased() })
            #expect(agencies.contains("emsc"), "\(String(describing: merged.sources))")
            #expect(agencies.contains((usgs.properties["net"] as? String ?? "?").lowercased()))

            // contributors: an extra property, both solutions, read by a plain JSON reader.
            let reply = try await catalog.get("/feeds/all_day.geojson")
            let root = try #require(try JSONSerialization.jsonObject(with: Data(reply.body)) as? [String: Any])
            let features = try #require(root["features"] as? [[String: Any]])
            let feature = try #require(features.first { $0["id"] as? String == usgs.id })
            let properties = try #require(feature["properties"] as? [String: Any])
            let contributors = try #require(properties["contributors"] as? [[String: Any]], "\(properties)")
            #expect(Set(contributors.compactMap { $0["source"] as? String }) == ["usgs", "emsc"])
            #expect(contributors.filter { $0["preferred"] as? Bool == true }.count == 1)
            #expect(contributors.contains { $0["id"] as? String == emsc.id && $0["agency"] as? String == "EMSC" })
            // Features of one agency only have none, or one contributor.
            for other in features where other["id"] as? String != usgs.id {
                let list = (other["properties"] as? [String: Any])?["contributors"] as? [Any]
                #expect(list == nil || list!.count == 1)
            }

            // The FDSN service: one event for both reports.
            let start = QuakeTime.iso8601(usgs.time - 60_000).dropLast()
            let end = QuakeTime.iso8601(usgs.time + 60_000).dropLast()
            let events = try quakeMLReports(
                try await catalog.get("/fdsnws/event/1/query?starttime=\(start)&endtime=\(end)").body)
            #expect(events.filter { $0.id == usgs.id }.count == 1)
            #expect(!events.contains { $0.id == emsc.id })
            let byEventID = try quakeMLReports(try await catalog.get("/fdsnws/event/1/query?eventid=\(emsc.id)").body)
            #expect(byEventID.map(\.id) == [usgs.id], "eventid finds the event by any of its ids")
            let contributorsDocument = try await catalog.get("/fdsnws/event/1/contributors")
            #expect(contributorsDocument.text.lowercased().contains("<contributor>emsc</contributor>"), "\(contributorsDocument.text)")
        }
    }
}
