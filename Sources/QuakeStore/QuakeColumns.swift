import Foundation
import GRDB
import GRDBSQLite
import QuakeFeed
import QuakeModel

/// The mapping between ``FeedFeature`` and a row of the `quakes` table: one column per field of
/// QuakeModel's ``QuakeRecord/fields``, in its order, named as the field.
///
/// The per-row code (``values(of:)``, the row readers, the binding and the in-place comparison)
/// is generated from the declaration (the QuakeModelGenerator plugin), unrolled as it runs once
/// per feature on the import's hot path. `QuakeColumnsTests` checks it against the schema and
/// round-trips every field.
enum QuakeColumns {
    /// Column names in table order.
    static let names: [String] = QuakeRecord.names
    /// The REAL columns: their values are floats on the wire (FieldValue's `float`).
    static let realColumns = QuakeRecord.fields.filter { $0.kind == .real }.map(\.name)
    static let list = names.joined(separator: ", ")
    static let placeholders = Array(repeating: "?", count: names.count).joined(separator: ", ")
    /// `mag = ?2, place = ?3, ...` for every column but `id` (which is `?1`), numbered as in
    /// ``bindAndStep(_:arena:hash:_:)``.
    static let assignments = names.enumerated().dropFirst().map { "\($1) = ?\($0 + 1)" }.joined(separator: ", ")
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
        tombstone.sources = String.fromDatabaseValue(value("sources"))
        return tombstone
    }

    /// ``changes(from:to:)`` for rows as column values in table order.
    static func changes(from old: [DatabaseValue], to new: [DatabaseValue]) -> [FieldChange] {
        var changes: [FieldChange] = []
        for i in new.indices where new[i] != old[i] {
            changes.append(
                FieldChange(field: names[i], old: FieldValue(old[i], field: names[i]), new: FieldValue(new[i], field: names[i])))
        }
        return changes
    }
}

extension QuakeColumns {
    /// The parameter number of `feedHash` in ``bindAndStep(_:arena:hash:_:)``, after the columns.
    static let feedHashParameter = Int32(names.count + 1)
    /// The column of `feedHash` in a row selected as `\(list), feedHash` (0-based).
    static let feedHashColumn = Int32(names.count)

    /// Binds every column of `q` (parameters 1...n, table order) and `hash` as `feedHash`
    /// (parameter n + 1), and steps `s` once.
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
        bind(q, text: text, integer: int, real: real)
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
        return matches(q, text: text, integer: int, real: real)
    }
}
