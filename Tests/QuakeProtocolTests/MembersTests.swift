import Foundation
import QuakeProtocol
import Testing
import Varlink
import VarlinkIDL

/// The generated `Members` writers: appended in declaration order they write the bytes of the
/// value's own `write(to:)`, and their names are the interface's.
@Suite("Generated member writers")
struct MembersTests {
    /// A stored row of scalars, as a database gives them.
    struct Row: JSONScalarRow {
        var values: [JSONScalar]
        func scalar(at index: Int) -> JSONScalar { values[index] }
    }

    static let quake = IOQuaked.Quake(
        id: "us7000abcd", mag: 4.5, place: "10 km \"N\" of Somewhere\n", time: 1_700_000_000_000, updated: nil,
        tz: -300, url: nil, detail: nil, felt: 3, cdi: 2.7, mmi: nil, alert: "green", status: "reviewed", tsunami: 0,
        sig: 312, net: "us", code: "7000abcd", ids: ",us7000abcd,", sources: ",us,", types: ",origin,", nst: nil,
        dmin: 0.012, rms: 0.5, gap: 33, magType: "mww", type: "earthquake", title: "M 4.5", lon: -120.5, lat: 35.25,
        depth: 10)

    /// The quake as a row (texts in buffers of their own, as SQLite's are): a nil is a null.
    static func row(_ q: IOQuaked.Quake) -> (Row, [UnsafeMutableRawBufferPointer]) {
        var values: [JSONScalar] = []
        var buffers: [UnsafeMutableRawBufferPointer] = []
        for child in Mirror(reflecting: q).children {
            if let v = child.value as? Int {
                values.append(.integer(Int64(v)))
            } else if let v = child.value as? Double {
                values.append(.real(v))
            } else if let v = child.value as? String {
                let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: v.utf8.count, alignment: 1)
                buffer.copyBytes(from: Array(v.utf8))
                buffers.append(buffer)
                values.append(.text(UnsafeRawBufferPointer(buffer)))
            } else {
                values.append(.null)
            }
        }
        return (Row(values: values), buffers)
    }

    @Test("a row of scalars writes the struct's bytes, and its columns are the members in order")
    func rowMembers() throws {
        let q = Self.quake
        #expect(IOQuaked.Quake.Members.names == Mirror(reflecting: q).children.map { $0.label! })
        let (row, buffers) = Self.row(q)
        defer { for buffer in buffers { buffer.deallocate() } }
        var writer = JSONWriter()
        IOQuaked.Quake.Members.begin(to: &writer)
        IOQuaked.Quake.Members.appendMembers(from: row, to: &writer)
        IOQuaked.Quake.Members.end(to: &writer)
        #expect(writer.bytes == q.jsonBytes)
        #expect(try IOQuaked.Quake.decode(json: writer.bytes) == q)

        // As a change's member, beside members before and after it.
        let change = IOQuaked.Change(quakeId: q.id, kind: .insert, quake: q)
        var w = JSONWriter()
        IOQuaked.Change.Members.begin(to: &w)
        IOQuaked.Change.Members.appendQuakeId(q.id, to: &w)
        IOQuaked.Change.Members.appendKind(.insert, to: &w)
        IOQuaked.Change.Members.appendFields(nil as [IOQuaked.FieldChange]?, to: &w)
        IOQuaked.Change.Members.appendTombstone(json: nil, to: &w)
        IOQuaked.Change.Members.appendReason(nil, to: &w)
        IOQuaked.Change.Members.appendSupersededBy(utf8: nil, to: &w)
        let object = IOQuaked.Change.Members.appendQuake(from: row, to: &w)
        IOQuaked.Change.Members.end(to: &w)
        #expect(w.bytes == change.jsonBytes)
        // What it returns is where the quake's own object lies: passed through, the same change.
        #expect(Array(w.bytes[object]) == q.jsonBytes)
    }

    @Test("a streamed array, members inserted before it later, and pass-through JSON: the value's bytes")
    func streamedTransaction() throws {
        let changes = [
            IOQuaked.Change(
                quakeId: "a", kind: .update,
                fields: [.init(field: "mag", old: .init(float: 4.5), new: .init(float: 3.9))], quake: Self.quake),
            IOQuaked.Change(
                quakeId: "b", kind: .delete,
                tombstone: .init(id: "b", code: "b", mag: 1, place: nil, time: 5, lat: 1, lon: 2, depth: 3),
                reason: .superseded, supersededBy: "c"),
        ]
        let transaction = IOQuaked.Transaction(
            token: 7, author: .import, timestamp: 1_700_000_000_123, source: "https://example.org/feed",
            inserted: 0, updated: 1, deleted: 1, entered: 0, left: 0, changes: changes)
        let reply = IOQuaked.FetchHistory.Reply(
            storeId: "s", headToken: 9, oldestToken: 0, transactions: [transaction, transaction], hasMore: true,
            nextAfter: 7)

        typealias T = IOQuaked.Transaction.Members
        var w = JSONWriter()
        IOQuaked.FetchHistory.Reply.Members.begin(to: &w)
        let transactionsStart = w.bytes.count
        IOQuaked.FetchHistory.Reply.Members.beginTransactions(to: &w)
        for t in reply.transactions {
            T.beginElement(to: &w)
            T.appendToken(t.token, to: &w)
            T.appendAuthor(t.author, to: &w)
            T.appendTimestamp(t.timestamp, to: &w)
            T.appendSource(t.source, to: &w)
            let countsStart = w.bytes.count
            T.beginChanges(to: &w)
            for c in t.changes {
                IOQuaked.Change.Members.beginElement(to: &w)
                IOQuaked.Change.Members.appendQuakeId(c.quakeId, to: &w)
                IOQuaked.Change.Members.appendKind(c.kind, to: &w)
                // Stored JSON in the interface's form passes through.
                let fields = c.fields.map { $0.jsonBytes }
                fields.map { bytes in bytes.withUnsafeBytes { IOQuaked.Change.Members.appendFields(json: $0, to: &w) } }
                IOQuaked.Change.Members.appendTombstone(c.tombstone, to: &w)
                IOQuaked.Change.Members.appendReason(c.reason, to: &w)
                IOQuaked.Change.Members.appendSupersededBy(c.supersededBy, to: &w)
                IOQuaked.Change.Members.appendQuake(c.quake, to: &w)
                IOQuaked.Change.Members.end(to: &w)
            }
            T.endChanges(to: &w)
            // The counts are known once the changes are written; they go where they belong.
            w.insert(at: countsStart) { w in
                T.appendInserted(t.inserted, to: &w)
                T.appendUpdated(t.updated, to: &w)
                T.appendDeleted(t.deleted, to: &w)
                T.appendEntered(t.entered, to: &w)
                T.appendLeft(t.left, to: &w)
            }
            T.end(to: &w)
        }
        IOQuaked.FetchHistory.Reply.Members.endTransactions(to: &w)
        IOQuaked.FetchHistory.Reply.Members.appendHasMore(reply.hasMore, to: &w)
        IOQuaked.FetchHistory.Reply.Members.appendNextAfter(reply.nextAfter, to: &w)
        IOQuaked.FetchHistory.Reply.Members.end(to: &w)
        w.insert(at: transactionsStart) { w in
            IOQuaked.FetchHistory.Reply.Members.appendStoreId(reply.storeId, to: &w)
            IOQuaked.FetchHistory.Reply.Members.appendHeadToken(reply.headToken, to: &w)
            IOQuaked.FetchHistory.Reply.Members.appendOldestToken(reply.oldestToken, to: &w)
        }
        #expect(String(decoding: w.bytes, as: UTF8.self) == String(decoding: reply.jsonBytes, as: UTF8.self))
    }

    @Test("inserting nothing, at an object's start and after a member")
    func insertion() {
        var w = JSONWriter()
        w.beginObject()
        let start = w.bytes.count
        w.key("b")
        w.int(2)
        let middle = w.bytes.count
        w.key("d")
        w.int(4)
        w.endObject()
        w.insert(at: middle) { $0.key("c"); $0.int(3) }
        w.insert(at: start) { $0.key("a"); $0.int(1) }
        w.insert(at: start) { _ in }
        #expect(String(decoding: w.bytes, as: UTF8.self) == #"{"a":1,"b":2,"c":3,"d":4}"#)
        var empty = JSONWriter()
        empty.beginObject()
        let at = empty.bytes.count
        empty.endObject()
        empty.insert(at: at) { $0.key("only"); $0.bool(true) }
        #expect(String(decoding: empty.bytes, as: UTF8.self) == #"{"only":true}"#)
    }

    @Test("every struct of the interface has its members' writer, named as the interface names them")
    func everyStruct() throws {
        let interface = try VarlinkInterface(parsing: IOQuaked.interfaceDescription)
        let source = SwiftGenerator(
            interface: interface, text: IOQuaked.interfaceDescription, namespace: "IOQuaked", runtimeModule: "Varlink",
            sourceName: "io.quaked.varlink"
        ).generate()
        for type in interface.types {
            guard case .structure(let fields) = type.shape else { continue }
            for field in fields {
                let append = "append" + field.name.prefix(1).uppercased() + field.name.dropFirst()
                #expect(source.contains("public static func \(append)("), "\(type.name).\(field.name)")
                #expect(source.contains("writer.member(#\"\"\(field.name)\":\"#)"), "\(type.name).\(field.name)")
            }
        }
        #expect(IOQuaked.Transaction.Members.names.last == "changes")
        #expect(IOQuaked.FetchHistory.Reply.Members.names == ["storeId", "headToken", "oldestToken", "transactions", "hasMore", "nextAfter"])
    }
}
