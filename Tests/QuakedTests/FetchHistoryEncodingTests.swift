import Foundation
import QuakeProtocol
import QuakeStore
import QuakeTestSupport
import Testing
import Varlink

@testable import QuakeDaemon

/// FetchHistory's reply is written straight from stored rows (stored JSON passes through). These
/// hold that hand-written path to the generated types: decoded strictly, it must be exactly the
/// reply built value by value from the store's decoded history.
@Suite("FetchHistory encoding")
struct FetchHistoryEncodingTests {
    @Test("the pass-through reply decodes strictly and equals the reply built from decoded values")
    func passThroughMatchesTheInterface() async throws {
        try await withTemporaryDirectory { dir in
            let store = try QuakeStore(directory: dir)
            defer { try? store.close() }
            _ = try await store.importFile(Fixtures.usgs("abruzzi__earthquake-viz__all_day.geojson"))
            _ = try await store.importFile(Fixtures.usgs("abruzzi__earthquake-viz__all_week.geojson"))
            let ids = try store.allQuakes().prefix(2).map(\.id)
            _ = try await store.delete(ids: ids)
            _ = try await store.applyRetention(maxAge: .seconds(86400 * 365 * 50))

            var after: HistoryToken = 0
            var kinds: Set<IOQuaked.ChangeKind> = []
            while true {
                var writer = IOQuaked.FetchHistory.ReplyWriter()
                let summary = try store.visitHistory(after: after, limit: 2, maxChanges: 500, &writer)
                let frame = writer.finish(summary)
                #expect(frame.last == 0, "a whole frame, NUL-terminated")
                let reply = try VarlinkReply(parsing: Array(frame.dropLast()))
                #expect(reply.error == nil && !reply.continues)
                let decoded = try IOQuaked.FetchHistory.Reply.decode(json: reply.parameters)
                let page = try store.history(after: after, limit: 2, maxChanges: 500)
                let expected = IOQuaked.FetchHistory.Reply(
                    storeId: page.storeID, headToken: Int(page.head), oldestToken: Int(try store.oldestToken()),
                    transactions: page.transactions.map(Self.transaction), hasMore: page.hasMore,
                    nextAfter: Int(page.nextAfter))
                #expect(decoded == expected)
                // And the generated encoder writes the same value (the bytes may order keys differently).
                #expect(try IOQuaked.FetchHistory.Reply.decode(json: expected.jsonBytes) == decoded)
                kinds.formUnion(decoded.transactions.flatMap { $0.changes.map(\.kind) })
                after = page.nextAfter
                if !page.hasMore { break }
            }
            #expect(kinds == [.insert, .update, .delete])
        }
    }

    /// The reference mapping, field by field through the store's decoded types.
    static func transaction(_ t: HistoryTransaction) -> IOQuaked.Transaction {
        func value(_ v: FieldValue) -> IOQuaked.FieldValue? {
            switch v {
            case .null: nil
            case .integer(let i): .init(int: Int(i))
            case .real(let d): .init(float: d)
            case .text(let s): .init(string: s)
            }
        }
        return IOQuaked.Transaction(
            token: Int(t.token), author: IOQuaked.Author(t.author), timestamp: Int(t.timestamp), source: t.source,
            inserted: t.inserted, updated: t.updated, deleted: t.deleted,
            changes: t.changes.map { c in
                IOQuaked.Change(
                    quakeId: c.quakeId, kind: IOQuaked.ChangeKind(c.kind),
                    fields: c.fields?.map { IOQuaked.FieldChange(field: $0.field, old: value($0.old), new: value($0.new)) },
                    tombstone: c.tombstone.map {
                        IOQuaked.Tombstone(id: $0.id, code: $0.code, mag: $0.mag, place: $0.place, time: Int($0.time))
                    }, reason: c.reason.map(IOQuaked.DeleteReason.init), supersededBy: c.supersededBy,
                    quake: c.quake.map(IOQuaked.Quake.init))
            })
    }
}
