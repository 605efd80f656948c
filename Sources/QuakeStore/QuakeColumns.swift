import GRDB
import QuakeFeed

/// The mapping between ``FeedFeature`` and a row of the `quakes` table.
///
/// Written out by hand rather than through Codable or key paths because it runs once per feature
/// on the import's hot path. `QuakeColumnsTests` checks it against the schema and round-trips every
/// field, so the list and the two functions cannot drift apart silently.
enum QuakeColumns {
    /// Column names in table order.
    static let names: [String] = [
        "id", "mag", "place", "time", "updated", "tz", "url", "detail", "felt", "cdi", "mmi", "alert",
        "status", "tsunami", "sig", "net", "code", "ids", "sources", "types", "nst", "dmin", "rms", "gap",
        "magType", "type", "title", "lon", "lat", "depth",
    ]
    static let list = names.joined(separator: ", ")
    static let placeholders = Array(repeating: "?", count: names.count).joined(separator: ", ")
    /// `mag = ?2, place = ?3, ...` for every column but `id` (which is `?1`), numbered as in
    /// ``bind(_:to:first:)``.
    static let assignments = names.enumerated().dropFirst().map { "\($1) = ?\($0 + 1)" }.joined(separator: ", ")

    static func values(of q: FeedFeature) -> [DatabaseValue] {
        [
            q.id.databaseValue, q.mag.databaseValue, q.place.databaseValue, q.time.databaseValue,
            q.updated.databaseValue, q.tz.databaseValue, q.url.databaseValue, q.detail.databaseValue,
            q.felt.databaseValue, q.cdi.databaseValue, q.mmi.databaseValue, q.alert.databaseValue,
            q.status.databaseValue, q.tsunami.databaseValue, q.sig.databaseValue, q.net.databaseValue,
            q.code.databaseValue, q.ids.databaseValue, q.sources.databaseValue, q.types.databaseValue,
            q.nst.databaseValue, q.dmin.databaseValue, q.rms.databaseValue, q.gap.databaseValue,
            q.magType.databaseValue, q.type.databaseValue, q.title.databaseValue, q.lon.databaseValue,
            q.lat.databaseValue, q.depth.databaseValue,
        ]
    }

    /// Decodes a row selected with `SELECT \(list)`, column by column in table order, starting
    /// at column `offset`.
    static func feature(from row: Row, offset o: Int = 0) -> FeedFeature {
        var q = FeedFeature(id: row[o], time: row[o + 3])
        q.mag = row[o + 1]
        q.place = row[o + 2]
        q.updated = row[o + 4]
        q.tz = row[o + 5]
        q.url = row[o + 6]
        q.detail = row[o + 7]
        q.felt = row[o + 8]
        q.cdi = row[o + 9]
        q.mmi = row[o + 10]
        q.alert = row[o + 11]
        q.status = row[o + 12]
        q.tsunami = row[o + 13]
        q.sig = row[o + 14]
        q.net = row[o + 15]
        q.code = row[o + 16]
        q.ids = row[o + 17]
        q.sources = row[o + 18]
        q.types = row[o + 19]
        q.nst = row[o + 20]
        q.dmin = row[o + 21]
        q.rms = row[o + 22]
        q.gap = row[o + 23]
        q.magType = row[o + 24]
        q.type = row[o + 25]
        q.title = row[o + 26]
        q.lon = row[o + 27]
        q.lat = row[o + 28]
        q.depth = row[o + 29]
        return q
    }
}

extension QuakeColumns {
    /// Binds every column of `q`, in table order, to parameters `first`, `first + 1`, ...
    static func bind(_ q: FeedFeature, to s: RawStatement, first: Int32 = 1) {
        let i = first
        s.bind(i, q.id)
        s.bind(i + 1, q.mag)
        s.bind(i + 2, q.place)
        s.bind(i + 3, q.time)
        s.bind(i + 4, q.updated)
        s.bind(i + 5, q.tz)
        s.bind(i + 6, q.url)
        s.bind(i + 7, q.detail)
        s.bind(i + 8, q.felt)
        s.bind(i + 9, q.cdi)
        s.bind(i + 10, q.mmi)
        s.bind(i + 11, q.alert)
        s.bind(i + 12, q.status)
        s.bind(i + 13, q.tsunami)
        s.bind(i + 14, q.sig)
        s.bind(i + 15, q.net)
        s.bind(i + 16, q.code)
        s.bind(i + 17, q.ids)
        s.bind(i + 18, q.sources)
        s.bind(i + 19, q.types)
        s.bind(i + 20, q.nst)
        s.bind(i + 21, q.dmin)
        s.bind(i + 22, q.rms)
        s.bind(i + 23, q.gap)
        s.bind(i + 24, q.magType)
        s.bind(i + 25, q.type)
        s.bind(i + 26, q.title)
        s.bind(i + 27, q.lon)
        s.bind(i + 28, q.lat)
        s.bind(i + 29, q.depth)
    }

    /// Reads the current row of a statement that selected `\(list)`.
    static func feature(from s: RawStatement) -> FeedFeature {
        var q = FeedFeature(id: s.string(0) ?? "", time: s.int64(3) ?? 0)
        q.mag = s.double(1)
        q.place = s.string(2)
        q.updated = s.int64(4)
        q.tz = s.int64(5)
        q.url = s.string(6)
        q.detail = s.string(7)
        q.felt = s.int64(8)
        q.cdi = s.double(9)
        q.mmi = s.double(10)
        q.alert = s.string(11)
        q.status = s.string(12)
        q.tsunami = s.int64(13)
        q.sig = s.int64(14)
        q.net = s.string(15)
        q.code = s.string(16)
        q.ids = s.string(17)
        q.sources = s.string(18)
        q.types = s.string(19)
        q.nst = s.int64(20)
        q.dmin = s.double(21)
        q.rms = s.double(22)
        q.gap = s.double(23)
        q.magType = s.string(24)
        q.type = s.string(25)
        q.title = s.string(26)
        q.lon = s.double(27)
        q.lat = s.double(28)
        q.depth = s.double(29)
        return q
    }
}
