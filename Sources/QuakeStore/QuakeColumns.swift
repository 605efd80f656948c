import Foundation
import GRDB
import GRDBSQLite
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
    /// The REAL columns: their values are floats on the wire (FieldValue's `float`).
    static let realColumns = ["mag", "cdi", "mmi", "dmin", "rms", "gap", "lon", "lat", "depth"]
    static let list = names.joined(separator: ", ")
    static let placeholders = Array(repeating: "?", count: names.count).joined(separator: ", ")
    /// `mag = ?2, place = ?3, ...` for every column but `id` (which is `?1`), numbered as in
    /// ``bindAndStep(_:_:)``.
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
    /// The fields whose values differ from `old` to `new`, in table order, as history records them.
    static func changes(from old: FeedFeature, to new: FeedFeature) -> [FieldChange] {
        changes(from: values(of: old), to: values(of: new))
    }

    /// The tombstone of a row given as column values in table order.
    static func tombstone(id: String, values: [DatabaseValue]) -> Tombstone {
        func value(_ name: String) -> DatabaseValue { values[names.firstIndex(of: name)!] }
        var tombstone = Tombstone(
            id: id, code: String.fromDatabaseValue(value("code")), mag: Double.fromDatabaseValue(value("mag")),
            place: String.fromDatabaseValue(value("place")), time: Int64.fromDatabaseValue(value("time")) ?? 0)
        tombstone.lat = Double.fromDatabaseValue(value("lat"))
        tombstone.lon = Double.fromDatabaseValue(value("lon"))
        tombstone.depth = Double.fromDatabaseValue(value("depth"))
        tombstone.type = String.fromDatabaseValue(value("type"))
        tombstone.alert = String.fromDatabaseValue(value("alert"))
        tombstone.status = String.fromDatabaseValue(value("status"))
        tombstone.tsunami = Int64.fromDatabaseValue(value("tsunami"))
        tombstone.sig = Int64.fromDatabaseValue(value("sig"))
        return tombstone
    }

    /// ``changes(from:to:)`` for rows as column values in table order.
    static func changes(from old: [DatabaseValue], to new: [DatabaseValue]) -> [FieldChange] {
        var changes: [FieldChange] = []
        for i in new.indices where new[i] != old[i] {
            changes.append(FieldChange(field: names[i], old: FieldValue(old[i]), new: FieldValue(new[i])))
        }
        return changes
    }
}

extension QuakeColumns {
    /// The parameter number of `feedHash` in ``bindAndStep(_:arena:hash:_:)``, after the 30 columns.
    static let feedHashParameter: Int32 = 31

    /// Binds every column of `q` (parameters 1...30, table order) and `hash` as `feedHash`
    /// (parameter 31), and steps `s` once.
    ///
    /// Every parameter is bound (NULL included), so nothing is left over from the previous row.
    /// The texts are bound where they are, in `arena`, without a copy (SQLITE_STATIC): the
    /// caller keeps them there until the step is done.
    static func bindAndStep(_ q: FeatureRecord, arena: UnsafeRawBufferPointer, hash: UInt64, _ s: RawStatement) throws {
        let h = s.handle
        sqlite3_reset(h)
        @inline(__always) func real(_ i: Int32, _ v: Double?) {
            if let v { sqlite3_bind_double(h, i, v) } else { sqlite3_bind_null(h, i) }
        }
        @inline(__always) func int(_ i: Int32, _ v: Int64?) {
            if let v { sqlite3_bind_int64(h, i, v) } else { sqlite3_bind_null(h, i) }
        }
        @inline(__always) func text(_ i: Int32, _ span: TextSpan) {
            if span.isNull {
                sqlite3_bind_null(h, i)
            } else {
                s.bindStatic(i, FeatureRecord.bytes(span, in: arena))
            }
        }
        text(1, q.id)
        real(2, q.mag)
        text(3, q.place)
        sqlite3_bind_int64(h, 4, q.time)
        int(5, q.updated)
        int(6, q.tz)
        text(7, q.url)
        text(8, q.detail)
        int(9, q.felt)
        real(10, q.cdi)
        real(11, q.mmi)
        text(12, q.alert)
        text(13, q.status)
        int(14, q.tsunami)
        int(15, q.sig)
        text(16, q.net)
        text(17, q.code)
        text(18, q.ids)
        text(19, q.sources)
        text(20, q.types)
        int(21, q.nst)
        real(22, q.dmin)
        real(23, q.rms)
        real(24, q.gap)
        text(25, q.magType)
        text(26, q.type)
        text(27, q.title)
        real(28, q.lon)
        real(29, q.lat)
        real(30, q.depth)
        sqlite3_bind_int64(h, feedHashParameter, Int64(bitPattern: hash))
        try s.step()
    }

    /// Reads the current row of a statement that selected `\(list)`, from column `offset` on.
    static func feature(from s: RawStatement, offset: Int32 = 0) -> FeedFeature {
        feature(from: s.columns, offset: offset)
    }

    /// ``feature(from:offset:)`` for any statement's current row.
    static func feature(from statement: OpaquePointer, offset: Int32) -> FeedFeature {
        feature(from: ColumnReader(handle: statement), offset: offset)
    }

    static func feature(from s: ColumnReader, offset o: Int32) -> FeedFeature {
        var q = FeedFeature(id: s.string(o + 0) ?? "", time: s.int64(o + 3) ?? 0)
        q.mag = s.double(o + 1)
        q.place = s.string(o + 2)
        q.updated = s.int64(o + 4)
        q.tz = s.int64(o + 5)
        q.url = s.string(o + 6)
        q.detail = s.string(o + 7)
        q.felt = s.int64(o + 8)
        q.cdi = s.double(o + 9)
        q.mmi = s.double(o + 10)
        q.alert = s.string(o + 11)
        q.status = s.string(o + 12)
        q.tsunami = s.int64(o + 13)
        q.sig = s.int64(o + 14)
        q.net = s.string(o + 15)
        q.code = s.string(o + 16)
        q.ids = s.string(o + 17)
        q.sources = s.string(o + 18)
        q.types = s.string(o + 19)
        q.nst = s.int64(o + 20)
        q.dmin = s.double(o + 21)
        q.rms = s.double(o + 22)
        q.gap = s.double(o + 23)
        q.magType = s.string(o + 24)
        q.type = s.string(o + 25)
        q.title = s.string(o + 26)
        q.lon = s.double(o + 27)
        q.lat = s.double(o + 28)
        q.depth = s.double(o + 29)
        return q
    }
}

extension QuakeColumns {
    /// Whether the current row of a statement that selected `\(list)` holds exactly `q`'s values,
    /// compared in place (text bytes against the string's UTF-8), without decoding the row.
    ///
    /// `true` means the row equals `q` as ``feature(from:)`` would decode it. `false` may also mean
    /// "equal only under String's Unicode equivalence" (or a string with a NUL): callers decode the
    /// row and compare properly before treating it as changed.
    static func storedRowMatches(_ q: FeedFeature, _ s: RawStatement) -> Bool {
        let h = s.handle
        // sqlite3_column_blob, not _text: the bytes as stored, without the copy SQLite makes to
        // NUL-terminate them.
        @inline(__always) func text(_ c: Int32, _ value: String?) -> Bool {
            let type = sqlite3_column_type(h, c)
            guard type != SQLITE_NULL else { return value == nil }
            guard type == SQLITE_TEXT, var value else { return false }
            let stored = sqlite3_column_blob(h, c)
            let count = Int(sqlite3_column_bytes(h, c))
            return value.withUTF8 { utf8 in
                utf8.count == count && (count == 0 || memcmp(utf8.baseAddress!, stored!, count) == 0)
            }
        }
        @inline(__always) func int(_ c: Int32, _ value: Int64?) -> Bool {
            sqlite3_column_type(h, c) == SQLITE_NULL ? value == nil : value == sqlite3_column_int64(h, c)
        }
        @inline(__always) func real(_ c: Int32, _ value: Double?) -> Bool {
            sqlite3_column_type(h, c) == SQLITE_NULL ? value == nil : value == sqlite3_column_double(h, c)
        }
        // Most likely to differ first: `updated`, then the fields a revision usually changes.
        return int(4, q.updated) && sqlite3_column_type(h, 3) != SQLITE_NULL && q.time == sqlite3_column_int64(h, 3)
            && real(1, q.mag) && text(0, q.id) && text(2, q.place) && int(5, q.tz) && text(6, q.url)
            && text(7, q.detail) && int(8, q.felt) && real(9, q.cdi) && real(10, q.mmi) && text(11, q.alert)
            && text(12, q.status) && int(13, q.tsunami) && int(14, q.sig) && text(15, q.net) && text(16, q.code)
            && text(17, q.ids) && text(18, q.sources) && text(19, q.types) && int(20, q.nst) && real(21, q.dmin)
            && real(22, q.rms) && real(23, q.gap) && text(24, q.magType) && text(25, q.type) && text(26, q.title)
            && real(27, q.lon) && real(28, q.lat) && real(29, q.depth)
    }
}
