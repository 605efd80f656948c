import AsyncHTTPClient
import Foundation
import NIOHTTP1
import QuakeFeed
import QuakeHTTP
import QuakeHTTPQuery
import QuakeModel
import QuakeStore
import QuakeTestSupport
import Testing

/// The USGS summary feeds over real HTTP, checked against the fixture as JSONSerialization reads it.
@Suite struct SummaryFeedTests {
    @Test("every one of the 20 feed paths holds the quakes of its window and level, newest first, counted in metadata")
    func everyFeed() async throws {
        let fixture = try FixtureFeed(Catalog.week)
        try await Catalog.with { catalog in
            var nonEmpty = 0
            for feed in SummaryFeed.all {
                let reply = try await catalog.get(feed.path)
                #expect(reply.status == 200, "\(feed.path): \(reply.text)")
                #expect(reply.header("Content-Type") == "application/json")
                let parsed = try ParsedFeed(reply.body)
                let expected = fixture.feed(feed, now: Catalog.weekGenerated)
                #expect(parsed.ids == expected, "\(feed.path)")
                #expect(parsed.skipped == 0)
                #expect(parsed.metadata.count == expected.count, "\(feed.path)")
                #expect(parsed.metadata.status == 200)
                #expect(parsed.metadata.generated == Catalog.weekGenerated)
                #expect(parsed.metadata.url == catalog.base + feed.path)
                #expect(parsed.metadata.title?.contains("Past \(feed.period.rawValue.capitalized)") == true)
                if !expected.isEmpty { nonEmpty += 1 }
            }
            // The fixture has quakes in every window and level (3 significant ones in the week).
            #expect(nonEmpty >= 17, "too few feeds with quakes to test anything: \(nonEmpty)")
            #expect(fixture.feed(SummaryFeed(level: .significant, period: .week), now: Catalog.weekGenerated).count == 3)
            #expect(fixture.feed(SummaryFeed(level: .all, period: .hour), now: Catalog.weekGenerated).count > 0)
        }
    }

    @Test("a feature carries the USGS's properties, geometry and id as the USGS wrote them")
    func featureFidelity() async throws {
        let fixture = try FixtureFeed(Catalog.week)
        try await Catalog.with { catalog in
            let reply = try await catalog.get("/feeds/all_week.geojson")
            let root = try #require(try JSONSerialization.jsonObject(with: Data(reply.body)) as? [String: Any])
            #expect(root["type"] as? String == "FeatureCollection")
            let metadata = try #require(root["metadata"] as? [String: Any])
            #expect(Set(metadata.keys).isSuperset(of: ["generated", "url", "title", "status", "api", "count"]))
            let bbox = try #require(root["bbox"] as? [NSNumber])
            #expect(bbox.count == 6)
            let features = try #require(root["features"] as? [[String: Any]])
            #expect(features.count == fixture.features.count)
            let byID = Dictionary(uniqueKeysWithValues: fixture.features.map { ($0.id, $0) })
            let usgsKeys: Set<String> = [
                "mag", "place", "time", "updated", "tz", "url", "detail", "felt", "cdi", "mmi", "alert", "status",
                "tsunami", "sig", "net", "code", "ids", "sources", "types", "nst", "dmin", "rms", "gap", "magType",
                "type", "title",
            ]
            var compared = 0
            for feature in features {
                #expect(feature["type"] as? String == "Feature")
                let id = try #require(feature["id"] as? String)
                let original = try #require(byID[id])
                let properties = try #require(feature["properties"] as? [String: Any])
                #expect(Set(properties.keys) == usgsKeys, "a store without sources has no contributors")
                for key in usgsKeys {
                    let mine = properties[key]
                    let theirs = original.properties[key]
                    if let a = mine as? NSNumber, let b = theirs as? NSNumber {
                        #expect(abs(a.doubleValue - b.doubleValue) <= 1e-9 * max(1, abs(b.doubleValue)), "\(id).\(key)")
                    } else if let a = mine as? String {
                        #expect(a == theirs as? String, "\(id).\(key)")
                    } else {
                        #expect(mine is NSNull && (theirs == nil || theirs is NSNull), "\(id).\(key): \(String(describing: mine))")
                    }
                }
                let geometry = try #require(feature["geometry"] as? [String: Any])
                #expect(geometry["type"] as? String == "Point")
                let coordinates = (geometry["coordinates"] as? [NSNumber] ?? []).map(\.doubleValue)
                #expect(coordinates.count == 3)
                for (a, b) in zip(coordinates, original.coordinates) { #expect(abs(a - b) <= 1e-9 * max(1, abs(b)), "\(id)") }
                compared += 1
            }
            #expect(compared == fixture.features.count)
            let lons = fixture.features.map(\.lon)
            #expect(bbox[0].doubleValue == lons.min() && bbox[3].doubleValue == lons.max())
        }
    }

    @Test("the ETag follows the store: a conditional GET of an unchanged feed is a 304, after a change a 200 with a new tag")
    func entityTags() async throws {
        let fixture = try FixtureFeed(Catalog.week)
        try await Catalog.with { catalog in
            let first = try await catalog.get("/feeds/all_day.geojson")
            #expect(first.status == 200)
            let tag = try #require(first.header("ETag"))
            #expect(tag.hasPrefix("W/\""))
            let again = try await catalog.get("/feeds/all_day.geojson", headers: [("If-None-Match", tag)])
            #expect(again.status == 304)
            #expect(again.body.isEmpty)
            #expect(again.header("ETag") == tag)
            #expect(try await catalog.get("/feeds/all_day.geojson", headers: [("If-None-Match", "\"other\", \(tag)")]).status == 304)
            #expect(try await catalog.get("/feeds/all_day.geojson", headers: [("If-None-Match", "\"other\"")]).status == 200)
            // Another path, or another query, is another answer with another tag.
            let week = try await catalog.get("/feeds/all_week.geojson", headers: [("If-None-Match", tag)])
            #expect(week.status == 200)
            #expect(week.header("ETag") != tag)
            let filtered = try await catalog.get("/feeds/all_day.geojson?minmagnitude=2", headers: [("If-None-Match", tag)])
            #expect(filtered.status == 200)
            #expect(filtered.header("ETag") != tag)
            // HEAD: the same head, no body.
            let head = try await catalog.get("/feeds/all_day.geojson", method: .HEAD)
            #expect(head.status == 200 && head.body.isEmpty && head.header("ETag") == tag)

            // The store changes: the newest quake of the day is deleted.
            let expected = fixture.feed(SummaryFeed(level: .all, period: .day), now: Catalog.weekGenerated)
            _ = try await catalog.store.delete(ids: [expected[0]])
            let changed = try await catalog.get("/feeds/all_day.geojson", headers: [("If-None-Match", tag)])
            #expect(changed.status == 200)
            let newTag = try #require(changed.header("ETag"))
            #expect(newTag != tag)
            let parsed = try ParsedFeed(changed.body)
            #expect(parsed.ids == Array(expected.dropFirst()))
            #expect(parsed.metadata.count == expected.count - 1)
            #expect(try await catalog.get("/feeds/all_day.geojson", headers: [("If-None-Match", newTag)]).status == 304)
        }
    }

    @Test("a feed whose window slides past a quake, the store unchanged, gets a new ETag")
    func slidingWindow() async throws {
        let fixture = try FixtureFeed(Catalog.week)
        let hour = SummaryFeed(level: .all, period: .hour)
        let expected = fixture.feed(hour, now: Catalog.weekGenerated)
        let oldest = try #require(fixture.features.first { $0.id == expected.last })
        // One millisecond after the oldest quake of the hour left the window.
        let later = QuakeTime.date(oldest.time + 3_600_000 + 1)
        var tags: [String] = []
        for now in [Catalog.weekNow, later] {
            try await Catalog.with(now: now) { catalog in
                let reply = try await catalog.get(hour.path)
                #expect(try ParsedFeed(reply.body).ids == fixture.feed(hour, now: QuakeTime.milliseconds(now)))
                tags.append(try #require(reply.header("ETag")))
            }
        }
        #expect(fixture.feed(hour, now: QuakeTime.milliseconds(later)).count == expected.count - 1)
        // Different stores have different ids, so compare the tags' token and count parts.
        #expect(tags[0].split(separator: "-")[1] != tags[1].split(separator: "-")[1])
    }

    @Test("gzip when the request takes it: the same document, compressed")
    func gzip() async throws {
        try await Catalog.with { catalog in
            let plain = try await catalog.get("/feeds/all_week.geojson")
            #expect(plain.header("Content-Encoding") == nil)
            let compressed = try await catalog.get("/feeds/all_week.geojson", headers: [("Accept-Encoding", "gzip")])
            #expect(compressed.status == 200)
            #expect(compressed.header("Content-Encoding") == "gzip")
            #expect(Array(compressed.body.prefix(2)) == [0x1f, 0x8b])
            #expect(compressed.body.count * 4 < plain.body.count, "\(compressed.body.count) of \(plain.body.count)")
            #expect(compressed.header("Vary") == "Accept-Encoding")
            // Decompressed by the client: the very same bytes (the clock is fixed).
            try await withHTTPClient(decompression: true, readTimeout: .seconds(60)) { client in
                let inflated = try await Catalog.get(
                    client, catalog.base + "/feeds/all_week.geojson", headers: [("Accept-Encoding", "gzip")])
                #expect(inflated.body == plain.body)
            }
            // A 304 has no body to compress.
            let tag = try #require(plain.header("ETag"))
            let notModified = try await catalog.get(
                "/feeds/all_week.geojson", headers: [("Accept-Encoding", "gzip"), ("If-None-Match", tag)])
            #expect(notModified.status == 304 && notModified.body.isEmpty)
        }
    }

    @Test("minmagnitude, and latitude, longitude and maxradiuskm together, narrow a feed")
    func parameters() async throws {
        let fixture = try FixtureFeed(Catalog.week)
        let week = SummaryFeed(level: .all, period: .week)
        let all = fixture.feed(week, now: Catalog.weekGenerated)
        let byID = Dictionary(uniqueKeysWithValues: fixture.features.map { ($0.id, $0) })
        try await Catalog.with { catalog in
            let strong = try ParsedFeed(try await catalog.get("/feeds/all_week.geojson?minmagnitude=4.2").body)
            let expectedStrong = all.filter { (byID[$0]?.mag ?? -.infinity) >= 4.2 }
            #expect(strong.ids == expectedStrong)
            #expect(!expectedStrong.isEmpty && expectedStrong.count < all.count)
            // The feed's own level still holds: 4.5_week with minmagnitude=2 is 4.5_week.
            let level = try ParsedFeed(try await catalog.get("/feeds/4.5_week.geojson?minmagnitude=2").body)
            #expect(level.ids == fixture.feed(SummaryFeed(level: .m45, period: .week), now: Catalog.weekGenerated))

            // 500 km around Anchorage.
            let near = try ParsedFeed(
                try await catalog.get("/feeds/all_week.geojson?latitude=61.2&longitude=-149.9&maxradiuskm=500").body)
            let expectedNear = all.filter { id in
                let f = byID[id]!
                return FixtureFeed.distanceKm(f.lat, f.lon, 61.2, -149.9) <= 500
            }
            #expect(near.ids == expectedNear)
            #expect(!expectedNear.isEmpty && expectedNear.count < all.count)
            #expect(near.metadata.count == expectedNear.count)

            for (query, named) in [
                ("minmagnitude=big", "minmagnitude"), ("latitude=61.2&longitude=-149.9", "maxradiuskm"),
                ("latitude=91&longitude=0&maxradiuskm=10", "latitude"), ("maxradiuskm=-1&latitude=0&longitude=0", "maxradiuskm"),
            ] {
                let reply = try await catalog.get("/feeds/all_week.geojson?" + query)
                #expect(reply.status == 400, "\(query)")
                #expect(reply.text.hasPrefix("Error 400: Bad Request\n"), "\(query)")
                #expect(reply.text.contains(named), "\(query): \(reply.text)")
            }
        }
    }

    @Test("other paths are 404, other methods 405, and extra routes are served beside the catalog")
    func routing() async throws {
        let routes: [String: HTTPHandler] = [
            "/metrics": { _, writer in try await writer.respond(.ok, body: "quaked_up 1\n") }
        ]
        try await Catalog.with(routes: routes) { catalog in
            let metrics = try await catalog.get("/metrics")
            #expect(metrics.status == 200 && metrics.text == "quaked_up 1\n")
            #expect(try await catalog.get("/feeds/all_year.geojson").status == 404)
            #expect(try await catalog.get("/feeds/5.0_day.geojson").status == 404)
            #expect(try await catalog.get("/").status == 404)
            let post = try await catalog.get("/feeds/all_day.geojson", method: .POST)
            #expect(post.status == 405)
            #expect(post.header("Allow") == "GET, HEAD")
        }
    }
}
