import Foundation
import QuakeFeed
import QuakeTestSupport
import Testing

@Suite("Real USGS feeds")
struct FixtureTests {
    /// Feature counts per fixture, as Python's json module counts them:
    /// `len(json.load(open(path))["features"])`.
    static let expectedCounts: [String: Int] = [
        "CsabaConsulting__DataScienceBootcampHomework__2.5_month.geojson": 3121,
        "NaseemaO__Leaflet-Earthquakes-dashboard__significant_month.geojson": 18,
        "RealDreammaker__Live-Earthquake-Checker__all_week.geojson": 1809,
        "ZaharAmbrozyak__mapping-global-data-sets__eq_data_1_day_m1.geojson": 158,
        "ZaharAmbrozyak__mapping-global-data-sets__eq_data_7_day_m1.geojson": 1304,
        "abruzzi__earthquake-viz__all_day.geojson": 146,
        "abruzzi__earthquake-viz__all_week.geojson": 1513,
        "brittney-joyce__Earthquake_GeoJSON__4.5_week.geojson": 71,
        "heltond__earthquakes__query.geojson": 4312,
        "johbry17__USGS-Earthquake-Map__all_week.geojson": 1734,
        "lhayesgolding__EarthquakeData__all_hour.geojson": 8,
        "lhayesgolding__EarthquakeData__significant_week.geojson": 4,
        "lhayesgolding__EarthquakeData__x.geojson": 5,
        "ptoru001__geojason__all_week.geojson": 2411,
        "rodu__quakemap__all_day.geojson": 151,
        "saintaardvark__raspishake_report__2.5_week.geojson": 300,
        "tylerhill122__leaflet-usgs__4.5_week.geojson": 102,
        "tylerhill122__leaflet-usgs__all_week.geojson": 2219,
        "utero__sismos__4.5_month.geojson": 409,
        "wbravoanoni__generar_datos__all_week.geojson": 2588,
    ]

    /// A checksum of the exact bits of every double field (mag, cdi, mmi, dmin, rms, gap, lon, lat,
    /// depth; 0 for null) in feed order, computed from Python's json module (correctly rounded):
    /// `h = rotl(h, 5) ^ bits(float(v))`. Any double off by one ulp changes it.
    static let expectedDoubleChecksums: [String: UInt64] = [
        "CsabaConsulting__DataScienceBootcampHomework__2.5_month.geojson": 0x8a10_88d6_d5f3_c51e,
        "NaseemaO__Leaflet-Earthquakes-dashboard__significant_month.geojson": 0xaacc_98ef_1477_750a,
        "RealDreammaker__Live-Earthquake-Checker__all_week.geojson": 0x87d6_d528_3f8e_be3a,
        "ZaharAmbrozyak__mapping-global-data-sets__eq_data_1_day_m1.geojson": 0xa92d_d2b2_2e32_8a0b,
        "ZaharAmbrozyak__mapping-global-data-sets__eq_data_7_day_m1.geojson": 0x0a3c_7004_4e24_835d,
        "abruzzi__earthquake-viz__all_day.geojson": 0xccb3_40bd_8343_28ea,
        "abruzzi__earthquake-viz__all_week.geojson": 0xcb2c_a5a6_77db_6575,
        "brittney-joyce__Earthquake_GeoJSON__4.5_week.geojson": 0x1512_bab9_3758_3ae9,
        "heltond__earthquakes__query.geojson": 0xc296_83d3_1292_531a,
        "johbry17__USGS-Earthquake-Map__all_week.geojson": 0x21fa_4957_80bd_255f,
        "lhayesgolding__EarthquakeData__all_hour.geojson": 0x0038_6eee_34c0_e0fa,
        "lhayesgolding__EarthquakeData__significant_week.geojson": 0x280d_a665_5572_2a4e,
        "lhayesgolding__EarthquakeData__x.geojson": 0x7d95_06fe_3235_1738,
        "ptoru001__geojason__all_week.geojson": 0xd311_13d0_4d87_5e66,
        "rodu__quakemap__all_day.geojson": 0x28cc_d8fa_d99a_ddd7,
        "saintaardvark__raspishake_report__2.5_week.geojson": 0xe5be_87af_a5d6_48ad,
        "tylerhill122__leaflet-usgs__4.5_week.geojson": 0x1841_4686_1caf_21c6,
        "tylerhill122__leaflet-usgs__all_week.geojson": 0x7bef_e8fc_eee7_72c1,
        "utero__sismos__4.5_month.geojson": 0x63db_d7e0_95c5_dcec,
        "wbravoanoni__generar_datos__all_week.geojson": 0xf996_f8ee_df19_7c46,
    ]

    static func doubleChecksum(_ features: [FeedFeature]) -> UInt64 {
        var h: UInt64 = 0
        for f in features {
            for v in [f.mag, f.cdi, f.mmi, f.dmin, f.rms, f.gap, f.lon, f.lat, f.depth] {
                h = (h << 5 | h >> 59) ^ (v?.bitPattern ?? 0)
            }
        }
        return h
    }

    static func bytes(_ name: String) throws -> [UInt8] {
        [UInt8](try Data(contentsOf: Fixtures.usgs(name)))
    }

    @Test("the fixture table covers every fixture")
    func tableIsComplete() {
        let names = Set(Fixtures.usgsFeeds.map(\.lastPathComponent))
        #expect(names == Set(Self.expectedCounts.keys))
    }

    @Test(
        "every fixture parses, with Python's feature count and every feature imported",
        arguments: expectedCounts.keys.sorted())
    func parsesFixture(name: String) throws {
        let result = parse(try Self.bytes(name), chunkSize: 65536)
        #expect(result.error == nil)
        #expect(result.items.count == Self.expectedCounts[name])
        #expect(result.features.count == result.items.count, "real feeds have no skipped features")
        #expect(
            result.items.enumerated().allSatisfy { offset, item in
                switch item {
                case .feature(_, let index), .skipped(_, let index, _): index == offset
                }
            })
        #expect(Self.doubleChecksum(result.features) == Self.expectedDoubleChecksums[name], "doubles are not exact")
        #expect(result.metadata.count == Self.expectedCounts[name])
        #expect(result.metadata.status == 200)
    }

    @Test(
        "any chunking gives identical items",
        arguments: [
            "lhayesgolding__EarthquakeData__x.geojson",
            "NaseemaO__Leaflet-Earthquakes-dashboard__significant_month.geojson",
            "rodu__quakemap__all_day.geojson",
        ])
    func chunkingInvariance(name: String) throws {
        let bytes = try Self.bytes(name)
        let whole = parse(bytes)
        #expect(whole.error == nil)
        #expect(whole.items.count == Self.expectedCounts[name])
        for size in [1, 3, 7, 64, 4096] {
            let chunked = parse(bytes, chunkSize: size)
            #expect(chunked == whole, "chunk size \(size)")
        }
    }

    // Doubles are left out: Foundation's JSONSerialization on Linux is off by an ulp for some
    // 17-digit numbers (e.g. -121.96433333333333); the checksum test above covers them exactly.
    @Test(
        "every string and integer field matches Foundation's JSONSerialization",
        arguments: [
            "RealDreammaker__Live-Earthquake-Checker__all_week.geojson", "heltond__earthquakes__query.geojson",
            "abruzzi__earthquake-viz__all_week.geojson",
        ])
    func matchesIndependentDecoder(name: String) throws {
        let bytes = try Self.bytes(name)
        let root = try #require(try JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any])
        let reference = try #require(root["features"] as? [[String: Any]])
        let ours = parse(bytes, chunkSize: 1000).features
        #expect(ours.count == reference.count)
        for (f, ref) in zip(ours, reference) {
            let props = try #require(ref["properties"] as? [String: Any])
            func int(_ k: String) -> Int64? { (props[k] as? NSNumber)?.int64Value }
            func str(_ k: String) -> String? { props[k] as? String }
            let coordinates = (ref["geometry"] as? [String: Any])?["coordinates"] as? [NSNumber]
            #expect(f.id == ref["id"] as? String)
            #expect(f.time == int("time"))
            #expect(
                f.updated == int("updated") && f.tz == int("tz") && f.felt == int("felt")
                    && f.tsunami == int("tsunami") && f.sig == int("sig") && f.nst == int("nst"), "\(f.id)")
            #expect(
                f.place == str("place") && f.url == str("url") && f.detail == str("detail") && f.alert == str("alert")
                    && f.status == str("status")?.lowercased() && f.net == str("net") && f.code == str("code")
                    && f.ids == str("ids") && f.sources == str("sources") && f.types == str("types")
                    && f.magType == str("magType") && f.type == str("type") && f.title == str("title"), "\(f.id)")
            #expect(
                (f.lon != nil) == (coordinates != nil) && (f.depth != nil) == ((coordinates?.count ?? 0) > 2), "\(f.id)"
            )
        }
    }

    @Test("a real feature decodes to the expected values")
    func specificFeature() throws {
        let result = parse(try Self.bytes("RealDreammaker__Live-Earthquake-Checker__all_week.geojson"), chunkSize: 777)
        guard case .feature(let f, let index) = try #require(result.items.first) else {
            Issue.record("first item is not a feature: \(String(describing: result.items.first))")
            return
        }
        #expect(index == 0)
        #expect(f.id == "hv72949527")
        #expect(f.mag == 1.86)
        #expect(f.place == "4 km SSW of Pāhala, Hawaii")
        #expect(f.time == 1_647_250_059_030)
        #expect(f.updated == 1_647_250_391_170)
        #expect(f.tz == nil)
        #expect(f.url == "https://earthquake.usgs.gov/earthquakes/eventpage/hv72949527")
        #expect(f.detail == "https://earthquake.usgs.gov/earthquakes/feed/v1.0/detail/hv72949527.geojson")
        #expect(f.felt == nil)
        #expect(f.cdi == nil)
        #expect(f.mmi == nil)
        #expect(f.alert == nil)
        #expect(f.status == "automatic")
        #expect(f.tsunami == 0)
        #expect(f.sig == 53)
        #expect(f.net == "hv")
        #expect(f.code == "72949527")
        #expect(f.ids == ",hv72949527,")
        #expect(f.aliasIDs == ["hv72949527"])
        #expect(f.sources == ",hv,")
        #expect(f.types == ",origin,phase-data,")
        #expect(f.nst == 42)
        #expect(f.dmin == nil)
        #expect(f.rms == 0.140000001)
        #expect(f.gap == 112)
        #expect(f.magType == "ml")
        #expect(f.type == "earthquake")
        #expect(f.title == "M 1.9 - 4 km SSW of Pāhala, Hawaii")
        #expect(f.lon == -155.487838745117)
        #expect(f.lat == 19.1650009155273)
        #expect(f.depth == 32.0099983215332)
        #expect(result.metadata.generated == 1_647_250_435_000)
        #expect(result.metadata.title == "USGS All Earthquakes, Past Week")
        #expect(result.metadata.api == "1.10.3")
        #expect(result.metadata.url == "https://earthquake.usgs.gov/earthquakes/feed/v1.0/summary/all_week.geojson")
    }

    @Test("upper-case status from old feeds is lower-cased")
    func statusNormalised() throws {
        let result = parse(try Self.bytes("rodu__quakemap__all_day.geojson"))
        let f = try #require(result.features.first { $0.id == "pr16308003" })  // "status":"REVIEWED"
        #expect(f.status == "reviewed")
        #expect(result.features.allSatisfy { $0.status.map { $0 == $0.lowercased() } ?? true })
    }

    @Test("ok2023slzu and tx2023slzu are separate features")
    func okAndTxBothPresent() throws {
        let result = parse(try Self.bytes("johbry17__USGS-Earthquake-Map__all_week.geojson"), chunkSize: 4096)
        var found: [String: Int] = [:]
        for case .feature(let f, let index) in result.items where f.id == "ok2023slzu" || f.id == "tx2023slzu" {
            found[f.id] = index
        }
        #expect(found == ["ok2023slzu": 722, "tx2023slzu": 724])
        #expect(result.features.first { $0.id == "ok2023slzu" }?.time == 1_695_229_799_640)
        #expect(result.features.first { $0.id == "tx2023slzu" }?.time == 1_695_229_787_203)
    }
}
