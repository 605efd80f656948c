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
        }
    }
}

extension IOQuaked.DeleteReason {
    init(_ reason: DeleteReason) {
        switch reason {
        case .superseded: self = .superseded
        case .expired: self = .expired
        case .deletedByUser: self = .deletedByUser
        }
    }
}

extension IOQuaked.Author {
    init(_ author: HistoryAuthor) {
        switch author {
        case .import: self = .import
        case .delete: self = .delete
        case .retention: self = .retention
        }
    }
}

extension IOQuaked.ImportCounts {
    init(_ report: ImportReport) {
        self.init(
            inserted: report.inserted, updated: report.updated, unchanged: report.unchanged, stale: report.stale,
            superseded: report.superseded, skipped: report.skippedTotal, bytes: report.bytes,
            durationMs: report.durationMs, token: report.token.map(Int.init))
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
    /// The reply's JSON text, written straight from the stored rows: each change's `fields` and
    /// `tombstone` are stored in the interface's form and go out as they are, without a decode and
    /// an encode per change. This writes the shapes of FetchHistory's Reply, Transaction and Change
    /// by hand; `FetchHistoryEncodingTests` decodes its output with the generated strict decoder,
    /// so a field that drifts from io.quaked.varlink fails there.
    static func encodedReply(_ page: StoredHistoryPage) -> [UInt8] {
        let changeCount = page.transactions.reduce(0) { $0 + $1.changes.count }
        var w = JSONWriter(capacity: 256 + changeCount * 1024)
        w.beginObject()
        w.key("storeId")
        w.string(page.storeID)
        w.key("headToken")
        w.int(Int(page.head))
        w.key("oldestToken")
        w.int(Int(page.oldest))
        w.key("transactions")
        w.beginArray()
        for t in page.transactions {
            w.separator()
            w.beginObject()
            w.key("token")
            w.int(Int(t.token))
            w.key("author")
            IOQuaked.Author(t.author).write(to: &w)
            w.key("timestamp")
            w.int(Int(t.timestamp))
            if let source = t.source {
                w.key("source")
                w.string(source)
            }
            w.key("inserted")
            w.int(t.inserted)
            w.key("updated")
            w.int(t.updated)
            w.key("deleted")
            w.int(t.deleted)
            w.key("changes")
            w.beginArray()
            for c in t.changes {
                w.separator()
                w.beginObject()
                w.key("quakeId")
                w.string(c.quakeId)
                w.key("kind")
                IOQuaked.ChangeKind(c.kind).write(to: &w)
                if let fields = c.fieldsJSON {
                    w.key("fields")
                    w.raw(fields.utf8)
                }
                if let tombstone = c.tombstoneJSON {
                    w.key("tombstone")
                    w.raw(tombstone.utf8)
                }
                if let reason = c.reason {
                    w.key("reason")
                    IOQuaked.DeleteReason(reason).write(to: &w)
                }
                if let supersededBy = c.supersededBy {
                    w.key("supersededBy")
                    w.string(supersededBy)
                }
                if let quake = c.quake {
                    w.key("quake")
                    IOQuaked.Quake(quake).write(to: &w)
                }
                w.endObject()
            }
            w.endArray()
            w.endObject()
        }
        w.endArray()
        w.key("hasMore")
        w.bool(page.hasMore)
        w.key("nextAfter")
        w.int(Int(page.nextAfter))
        w.endObject()
        return w.bytes
    }
}
