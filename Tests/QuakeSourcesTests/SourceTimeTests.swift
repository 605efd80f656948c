import QuakeModel
import QuakeSources
import Testing

@Suite struct SourceTimeTests {
    @Test func variants() {
        let base: Int64 = 1_619_889_723_000  // 2021-05-01T17:22:03Z
        #expect(SourceTime.milliseconds("2021-05-01T17:22:03Z") == base)
        #expect(SourceTime.milliseconds("2021-05-01T17:22:03") == base)
        #expect(SourceTime.milliseconds("2021-05-01 17:22:03") == base)
        #expect(SourceTime.milliseconds("2021-05-01T17:22:03.430") == base + 430)
        #expect(SourceTime.milliseconds("2021-05-01T17:22:03.4Z") == base + 400)
        #expect(SourceTime.milliseconds("2021-05-01T17:22:03.43Z") == base + 430)
        #expect(SourceTime.milliseconds("2021-05-01T17:22:03.430000Z") == base + 430)
        #expect(SourceTime.milliseconds("2021-05-01T17:22:03.4305Z") == base + 431)
        #expect(SourceTime.milliseconds("2021-05-01T17:22:03.4304999Z") == base + 430)
        #expect(SourceTime.milliseconds("2021-05-01T17:22:03.9996Z") == base + 1000)
        #expect(SourceTime.milliseconds("2021-05-01T17:22:03+00:00") == base)
        #expect(SourceTime.milliseconds("2021-05-01T19:22:03+02:00") == base)
        #expect(SourceTime.milliseconds("2021-05-01T16:52:03-0030") == base)
        #expect(SourceTime.milliseconds(" 2021-05-01T17:22:03Z\n") == base)
        #expect(SourceTime.milliseconds(Array("2021-05-01T17:22:03Z".utf8)) == base)
        #expect(SourceTime.milliseconds("1960-05-22T19:11:14.00000") == -303_281_326_000)
        #expect(SourceTime.milliseconds("2024-02-29T00:00:00Z") == 1_709_164_800_000)
    }

    @Test func rejects() {
        for text in [
            "", "2021", "2021-05-01", "2021-05-01T17:22", "2021-13-01T00:00:00", "2021-02-29T00:00:00",
            "2021-05-01T24:00:00", "2021-05-01T17:60:00", "2021-05-01T17:22:03.", "2021-05-01T17:22:03Zx",
            "2021-05-01T17:22:03+2", "2021-05-01T17:22:03 UTC", "２０２１-05-01T17:22:03",
        ] {
            #expect(SourceTime.milliseconds(text) == nil, "\(text)")
        }
    }
}
