import Foundation
import QuakeFeed
import QuakeProtocol
import QuakeStore
import Varlink

// The one place where store and daemon types become io.quaked's generated wire types. Store types
// never go on the wire themselves: a change to the schema or the importer cannot change the
// protocol by accident, and the interface file stays the protocol's only definition.

extension IOQuaked.Quake {
    init(_ q: FeedFeature) {
        self.init(
            id: q.id, mag: q.mag, place: q.place, time: Int(q.time), updated: q.updated.map(Int.init),
            tz: q.tz.map(Int.init), url: q.url, detail: q.detail, felt: q.felt.map(Int.init), cdi: q.cdi, mmi: q.mmi,
            alert: q.alert, status: q.status, tsunami: q.tsunami.map(Int.init), sig: q.sig.map(Int.init), net: q.net,
            code: q.code, ids: q.ids, sources: q.sources, types: q.types, nst: q.nst.map(Int.init), dmin: q.dmin,
            rms: q.rms, gap: q.gap, magType: q.magType, type: q.type, title: q.title, lon: q.lon, lat: q.lat,
            depth: q.depth)
    }
}

extension IOQuaked.ChangeKind {
    init(_ kind: ChangeKind) {
        switch kind {
        case .insert: self = .insert
        case .update: self = .update
        case .delete: self = .delete
        case .enter: self = .enter
        case .leave: self = .leave
        }
    }
}

extension QuakeFilter {
    /// The filter of a call, or nil for none (or one that lets everything through). A malformed
    /// or impossible one is InvalidParameter naming the field (`filter.box.minLat`).
    static func from(_ filter: IOQuaked.Filter?) throws -> QuakeFilter? {
        guard let filter else { return nil }
        do {
            let parsed = try QuakeFilter(filter)
            return parsed.isEmpty ? nil : parsed
        } catch let invalid as Invalid {
            throw OrgVarlinkService.InvalidParameter(parameter: "filter." + invalid.field)
        }
    }
}

extension IOQuaked.Tombstone {
    init(_ t: Tombstone) {
        self.init(
            id: t.id, code: t.code, mag: t.mag, place: t.place, time: Int(t.time), lat: t.lat, lon: t.lon, depth: t.depth,
            type: t.type, alert: t.alert, status: t.status, tsunami: t.tsunami.map(Int.init), sig: t.sig.map(Int.init))
    }
}

extension IOQuaked.DeleteReason {
    init(_ reason: DeleteReason) {
        switch reason {
        case .superseded: self = .superseded
        case .expired: self = .expired
        case .deletedByUser: self = .deletedByUser
        case .deletedUpstream: self = .deletedUpstream
        }
    }
}

extension IOQuaked.Author {
    init(_ author: HistoryAuthor) {
        switch author {
        case .import: self = .import
        case .delete: self = .delete
        case .retention: self = .retention
        case .backfill: self = .backfill
        case .catalog: self = .catalog
        }
    }
}

extension IOQuaked.ImportCounts {
    init(_ report: ImportReport) {
        self.init(
            inserted: report.inserted, updated: report.updated, unchanged: report.unchanged, stale: report.stale,
            superseded: report.superseded, deleted: report.deleted, skipped: report.skippedTotal,
            expired: report.expired, deletedSkipped: report.skipped[ImportReport.deletedReason] ?? 0,
            bytes: report.bytes, durationMs: report.durationMs, token: report.token.map(Int.init))
    }
}

extension IOQuaked.PullResult {
    init(_ result: PullResult) {
        switch result {
        case .imported: self = .imported
        case .notModified: self = .notModified
        case .failed: self = .failed
        }
    }
}

extension IOQuaked.PullResult {
    init(_ outcome: FeedStatus.Outcome) {
        switch outcome {
        case .imported: self = .imported
        case .notModified: self = .notModified
        case .failed: self = .failed
        }
    }
}

extension IOQuaked.FeedStatus {
    init(_ status: FeedStatus) {
        self.init(
            name: status.name, url: status.url, lastAttempt: status.lastAttempt.map(Self.milliseconds),
            lastSuccess: status.lastSuccess.map(Self.milliseconds), lastResult: status.lastResult.map(IOQuaked.PullResult.init),
            httpStatus: status.httpStatus, durationMs: status.durationMs, lastError: status.lastError,
            consecutiveFailures: status.consecutiveFailures, nextPull: status.nextPull.map(Self.milliseconds),
            lastImport: status.lastReport.map(IOQuaked.ImportCounts.init))
    }

    static func milliseconds(_ date: Date) -> Int { Int((date.timeIntervalSince1970 * 1000).rounded()) }
}

extension IOQuaked.RefreshResult {
    init(status: FeedStatus, result: PullResult) {
        var counts: IOQuaked.ImportCounts?
        var error: String?
        switch result {
        case .imported(let report, _): counts = IOQuaked.ImportCounts(report)
        case .notModified: break
        case .failed(let reason): error = reason
        }
        self.init(feed: status.name, result: IOQuaked.PullResult(result), counts: counts, error: error)
    }
}

extension IOQuaked.FetchHistory {
    /// Writes FetchHistory's reply straight from the stored rows, as ``QuakeStore`` visits them:
    /// each change's `fields` and `tombstone` are stored in the interface's form and go out as
    /// they are, and the quake's columns are written from SQLite's own buffers (no string, no
    /// intermediate value per change). This writes the shapes of the Reply, Transaction, Change
    /// and Quake by hand; `FetchHistoryEncodingTests` decodes its output with the generated
    /// strict decoder and compares it with the reply built value by value, so a field that drifts
    /// from io.quaked.varlink fails there. The page's scalars come last, once the page is read.
    struct ReplyWriter: StoredHistoryVisitor {
        private(set) var writer = JSONWriter(capacity: 1 << 16)
        /// `"mag":` and so on, the quake's field names (which are its column names), in one buffer:
        /// no array per field to retain and release on the hot path.
        static let quakeKeys: (bytes: [UInt8], ranges: [Range<Int>]) = {
            var bytes: [UInt8] = []
            var ranges: [Range<Int>] = []
            for name in StoredChangeRow.quakeColumns {
                let start = bytes.count
                bytes += Array("\"\(name)\":".utf8)
                ranges.append(start..<bytes.count)
            }
            return (bytes, ranges)
        }()

        /// Whether the reply is of a filtered read (its transactions then say what entered and left).
        let filtered: Bool

        /// Starts the reply inside its Varlink frame, so the finished bytes are sent as they are.
        init(filtered: Bool = false) {
            self.filtered = filtered
            VarlinkReply.beginFrame(&writer)
            writer.beginObject()
            writer.key("transactions")
            writer.beginArray()
        }

        /// Room for the whole page at once (a change is about a kilobyte): no regrowth, no copies.
        mutating func beginPage(changeCount: Int) {
            writer.bytes.reserveCapacity(writer.bytes.count + changeCount * 1200 + 256)
        }

        /// Where the transaction being written starts, for ``dropTransaction()``.
        private var transactionStart = 0

        mutating func beginTransaction(_ t: StoredTransactionHeader) {
            transactionStart = writer.bytes.count
            writer.separator()
            writer.beginObject()
            writer.key("token")
            writer.int(Int(t.token))
            writer.key("author")
            IOQuaked.Author(t.author).write(to: &writer)
            writer.key("timestamp")
            writer.int(Int(t.timestamp))
            if let source = t.source {
                writer.key("source")
                writer.string(source)
            }
            writer.key("changes")
            writer.beginArray()
        }

        mutating func visitChange(_ c: StoredChangeRow) {
            writer.separator()
            writer.beginObject()
            writer.key("quakeId")
            writer.string(utf8: c.quakeID)
            writer.key("kind")
            IOQuaked.ChangeKind(c.kind).write(to: &writer)
            if let fields = c.fieldsJSON {
                writer.key("fields")
                writer.raw(fields)
            }
            if let tombstone = c.leaveTombstone {
                writer.key("tombstone")
                IOQuaked.Tombstone(tombstone).write(to: &writer)
            } else if let tombstone = c.tombstoneJSON {
                writer.key("tombstone")
                writer.raw(tombstone)
            }
            if let reason = c.reason {
                writer.key("reason")
                IOQuaked.DeleteReason(reason).write(to: &writer)
            }
            if let supersededBy = c.supersededBy {
                writer.key("supersededBy")
                writer.string(utf8: supersededBy)
            }
            if c.hasQuake {
                writer.key("quake")
                writer.beginObject()
                let keys = Self.quakeKeys
                keys.bytes.withUnsafeBytes { keyBytes in
                    for (index, range) in keys.ranges.enumerated() {
                        let value = c.quake(index)
                        if case .null = value { continue }
                        writer.separator()
                        writer.raw(UnsafeRawBufferPointer(rebasing: keyBytes[range]))
                        switch value {
                        case .null: break
                        case .integer(let value): writer.int(Int(value))
                        case .real(let value): writer.double(value)
                        case .text(let bytes): writer.string(utf8: bytes)
                        }
                    }
                }
                writer.endObject()
            }
            writer.endObject()
        }

        mutating func endTransaction(_ counts: StoredTransactionCounts) {
            writer.endArray()
            writer.key("inserted")
            writer.int(counts.inserted)
            writer.key("updated")
            writer.int(counts.updated)
            writer.key("deleted")
            writer.int(counts.deleted)
            if counts.entered + counts.left > 0 || filtered {
                writer.key("entered")
                writer.int(counts.entered)
                writer.key("left")
                writer.int(counts.left)
            }
            writer.endObject()
        }

        mutating func dropTransaction() {
            writer.bytes.removeSubrange(transactionStart...)
        }



        /// The whole reply frame (NUL-terminated), with the page's scalars.
        mutating func finish(_ page: StoredHistorySummary) -> [UInt8] {
            writer.endArray()
            writer.key("storeId")
            writer.string(page.storeID)
            writer.key("headToken")
            writer.int(Int(page.head))
            writer.key("oldestToken")
            writer.int(Int(page.oldest))
            writer.key("hasMore")
            writer.bool(page.hasMore)
            writer.key("nextAfter")
            writer.int(Int(page.nextAfter))
            writer.endObject()
            VarlinkReply.endFrame(&writer)
            return writer.bytes
        }
    }
}
