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
    /// `mag = ?, place = ?, ...` for every column but `id`, in order.
    static let assignments = names.dropFirst().map { "\($0) = ?" }.joined(separator: ", ")

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
