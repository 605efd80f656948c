import Foundation
import NIOCore
import QuakeFeed
import QuakeModel
import QuakeProtocol
import QuakeStore
import Varlink

// The one place where store and daemon types become io.quaked's generated wire types. Store types
// never go on the wire themselves: a change to the schema or the importer cannot change the
// protocol by accident, and the interface file stays the protocol's only definition.

// IOQuaked.Quake from and to FeedFeature is generated into QuakeProtocol from QuakeModel's
// declaration of the quake record.

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
            type: t.type, alert: t.alert, status: t.status, tsunami: t.tsunami.map(Int.init), sig: t.sig.map(Int.init),
            sources: t.sources)
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
            lastImport: status.lastReport.map(IOQuaked.ImportCounts.init), errorKind: status.failure?.kind.rawValue,
            retryAfter: status.failure?.retryAfter.map(Self.milliseconds))
    }

    static func milliseconds(_ date: Date) -> Int { Int(QuakeTime.milliseconds(date)) }
}

extension IOQuaked.SourceStatus {
    init(_ state: SourceState) {
        self.init(
            name: state.name, position: state.position.map(Int.init), lastAttempt: state.lastAttempt.map(Int.init),
            lastSuccess: state.lastSuccess.map(Int.init), lastError: state.lastError, lastQuery: state.lastQuery,
            reports: state.reportCount)
    }
}

extension IOQuaked.Report {
    init(_ report: SourceReport, preferred: Bool) {
        self.init(
            source: report.source, agency: report.agency, id: report.id, time: Int(report.time), lat: report.latitude,
            lon: report.longitude, depth: report.depth, mag: report.magnitude, magType: report.magnitudeType,
            place: report.place, type: report.eventType, status: report.evaluationStatus?.rawValue,
            mode: report.evaluationMode?.rawValue, updated: report.updated.map(Int.init), preferred: preferred)
    }
}

extension QuakeStore {
    /// GetStatus's `sources`: every source the store has state for, by name; nil when there is
    /// none, so that a store without sources answers as before.
    func interfaceSources() throws -> [IOQuaked.SourceStatus]? {
        let states = try sourceStates()
        return states.isEmpty ? nil : states.map(IOQuaked.SourceStatus.init)
    }

    /// GetReports' reply: the event's reports, the preferred (the store's first) marked. An id
    /// the store does not hold is NoSuchQuake; a stored quake without reports has an empty list.
    func interfaceReports(ofEvent id: String) throws -> [IOQuaked.Report] {
        let reports = try reports(ofEvent: id)
        if reports.isEmpty, try quake(id: id) == nil { throw IOQuaked.NoSuchQuake(id: id) }
        return reports.enumerated().map { IOQuaked.Report($0.element, preferred: $0.offset == 0) }
    }
}

extension IOQuaked.ReloadFailed {
    /// A rejected configuration: its reason in words and, when known, where the value found
    /// wrong was set.
    init(_ error: QuakedError) {
        self.init(reason: error.description, place: error.place)
    }
}

extension IOQuaked.RefreshResult {
    init(status: FeedStatus, result: PullResult) {
        var counts: IOQuaked.ImportCounts?
        var error: String?
        switch result {
        case .imported(let report, _): counts = IOQuaked.ImportCounts(report)
        case .notModified: break
        case .failed(let failure): error = failure.description
        }
        self.init(feed: status.name, result: IOQuaked.PullResult(result), counts: counts, error: error)
    }
}

extension IOQuaked.FetchHistory {
    /// Writes FetchHistory's reply straight from the stored rows, as ``QuakeStore`` visits them,
    /// through the writers generated from io.quaked.varlink (`Members` of the Reply, Transaction,
    /// Change and Quake): every member's name, JSON type and place comes from the interface file,
    /// none is written here. Each change's `fields` and `tombstone` are stored in the interface's
    /// form and pass through; the quake's columns are written from SQLite's own buffers (no string,
    /// no intermediate value per change). Members known only once what follows them has been read
    /// (a filtered transaction's counts; the page's head and oldest token) are put where the
    /// interface declares them, so the bytes are exactly those of the generated encoder for the
    /// same reply (`FetchHistoryEncodingTests`).
    struct ReplyWriter: StoredHistoryVisitor {
        private typealias Reply = IOQuaked.FetchHistory.Reply.Members
        private typealias Transaction = IOQuaked.Transaction.Members
        private typealias Change = IOQuaked.Change.Members

        private(set) var writer = JSONWriter(capacity: 1 << 16)
        /// Whether the reply is of a filtered read (its transactions then say what entered and left).
        let filtered: Bool
        /// Where the reply's members before `transactions` go, once the page has been read.
        private let transactionsStart: Int
        /// Where the transaction being written starts, for ``dropTransaction()``.
        private var transactionStart = 0
        /// Where a filtered transaction's counts go, once its changes have been judged.
        private var changesStart = 0
        /// Each quake's JSON object as this page first wrote it. A page is read in one read
        /// transaction and carries each quake as it is now, so a quake changed in several of the
        /// page's transactions is the same object each time: written once from its row, then
        /// copied (a catch-up's page of thousands of changes often names each quake several times).
        private var quakeObjects: [String: [UInt8]] = [:]

        /// The store's quake columns are the interface's Quake members, in its order: checked once.
        private static let columnsAreMembers: Void = precondition(
            StoredChangeRow.quakeColumns == IOQuaked.Quake.Members.names,
            "the quakes table's columns are not io.quaked's Quake members")

        /// Starts the reply inside its Varlink frame, so the finished bytes are sent as they are.
        init(filtered: Bool = false) {
            Self.columnsAreMembers
            self.filtered = filtered
            VarlinkReply.beginFrame(&writer)
            Reply.begin(to: &writer)
            transactionsStart = writer.bytes.count
            Reply.beginTransactions(to: &writer)
        }

        /// Room for the whole page at once (a change is about a kilobyte): no regrowth, no copies.
        mutating func beginPage(changeCount: Int) {
            writer.bytes.reserveCapacity(writer.bytes.count + changeCount * 1200 + 256)
        }

        mutating func beginTransaction(_ t: StoredTransactionHeader) {
            transactionStart = writer.bytes.count
            Transaction.beginElement(to: &writer)
            Transaction.appendToken(Int(t.token), to: &writer)
            Transaction.appendAuthor(IOQuaked.Author(t.author), to: &writer)
            Transaction.appendTimestamp(Int(t.timestamp), to: &writer)
            Transaction.appendSource(t.source, to: &writer)
            // An unfiltered read sends every change: the stored counts are the transaction's.
            if !filtered { Self.appendCounts(t.counts, filtered: false, to: &writer) }
            changesStart = writer.bytes.count
            Transaction.beginChanges(to: &writer)
        }

        mutating func visitChange(_ c: StoredChangeRow) {
            Change.beginElement(to: &writer)
            Change.appendQuakeId(utf8: c.quakeID, to: &writer)
            Change.appendKind(IOQuaked.ChangeKind(c.kind), to: &writer)
            Change.appendFields(json: c.fieldsJSON, to: &writer)
            if let tombstone = c.leaveTombstone {
                Change.appendTombstone(IOQuaked.Tombstone(tombstone), to: &writer)
            } else {
                Change.appendTombstone(json: c.tombstoneJSON, to: &writer)
            }
            Change.appendReason(c.reason.map(IOQuaked.DeleteReason.init), to: &writer)
            Change.appendSupersededBy(utf8: c.supersededBy, to: &writer)
            if c.hasQuake { appendQuake(c) }
            Change.end(to: &writer)
        }

        /// The change's `quake` member: from the row the first time the page names the quake,
        /// as the page wrote it then every other time.
        private mutating func appendQuake(_ c: StoredChangeRow) {
            let id = String(decoding: c.quakeID, as: UTF8.self)
            if let object = quakeObjects[id] {
                object.withUnsafeBytes { Change.appendQuake(json: $0, to: &writer) }
                return
            }
            let object = Change.appendQuake(from: QuakeRow(row: c), to: &writer)
            quakeObjects[id] = Array(writer.bytes[object])
        }

        mutating func endTransaction(_ counts: StoredTransactionCounts) {
            Transaction.endChanges(to: &writer)
            if filtered {
                writer.insert(at: changesStart) { Self.appendCounts(counts, filtered: true, to: &$0) }
            }
            Transaction.end(to: &writer)
        }

        mutating func dropTransaction() {
            writer.bytes.removeSubrange(transactionStart...)
        }

        /// A transaction's counts; `entered` and `left` only for a filtered read.
        private static func appendCounts(_ counts: StoredTransactionCounts, filtered: Bool, to writer: inout JSONWriter) {
            Transaction.appendInserted(counts.inserted, to: &writer)
            Transaction.appendUpdated(counts.updated, to: &writer)
            Transaction.appendDeleted(counts.deleted, to: &writer)
            Transaction.appendEntered(filtered ? counts.entered : nil, to: &writer)
            Transaction.appendLeft(filtered ? counts.left : nil, to: &writer)
        }

        /// Ends the reply and its frame; returns the members that go before `transactions`.
        private mutating func end(_ page: StoredHistorySummary, continues: Bool = false) -> ArraySlice<UInt8> {
            Reply.endTransactions(to: &writer)
            Reply.appendHasMore(page.hasMore, to: &writer)
            Reply.appendNextAfter(Int(page.nextAfter), to: &writer)
            Reply.end(to: &writer)
            VarlinkReply.endFrame(&writer, continues: continues)
            return writer.insertion(at: transactionsStart) { writer in
                Reply.appendStoreId(page.storeID, to: &writer)
                Reply.appendHeadToken(Int(page.head), to: &writer)
                Reply.appendOldestToken(Int(page.oldest), to: &writer)
            }
        }

        /// The whole reply frame (NUL-terminated), with the page's scalars.
        mutating func finish(_ page: StoredHistorySummary) -> [UInt8] {
            let head = end(page)
            writer.bytes.insert(contentsOf: head, at: transactionsStart)
            return writer.bytes
        }

        /// The same frame as ``finish(_:)``, joined into the buffer that is sent (nothing moved
        /// twice); with `continues`, a reply of a call made with more that is not the last.
        mutating func frame(_ page: StoredHistorySummary, continues: Bool = false) -> ByteBuffer {
            let head = end(page, continues: continues)
            var buffer = ByteBuffer()
            buffer.reserveCapacity(writer.bytes.count + head.count)
            buffer.writeBytes(writer.bytes[..<transactionsStart])
            buffer.writeBytes(head)
            buffer.writeBytes(writer.bytes[transactionsStart...])
            return buffer
        }
    }

    /// A visited row's quake columns, for the generated `Quake.Members.appendMembers(from:to:)`.
    private struct QuakeRow: JSONScalarRow {
        let row: StoredChangeRow

        @inline(__always) func scalar(at index: Int) -> JSONScalar {
            switch row.quake(index) {
            case .null: .null
            case .integer(let value): .integer(value)
            case .real(let value): .real(value)
            case .text(let bytes): .text(bytes)
            }
        }
    }
}
