import QuakeClient
import QuakeFeed
import QuakeProtocol
import Varlink
import Foundation
import Testing

@testable import QuakeCtl

/// The agencies of a quake in quakectl's output: `list`'s column, `watch`'s change lines, the
/// variables `--exec` gets, and the `--agency` and `--min-agencies` flags.
@Suite struct AgencyOutputTests {
    static let now = Date(timeIntervalSince1970: 1_800_000_000)

    static func quake(_ id: String, net: String?, sources: String?) -> IOQuaked.Quake {
        var q = IOQuaked.Quake(id: id, time: 1_799_999_000_000)
        q.mag = 4.2
        q.place = "CENTRAL ITALY"
        q.net = net
        q.sources = sources
        return q
    }

    @Test func agenciesArePreferredFirstUpperCasedAndJoined() {
        #expect(Formatting.agencies(net: "us", sources: ",us,ak,") == "US+AK")
        #expect(Formatting.agencies(net: "ingv", sources: ",emsc,ingv,") == "INGV+EMSC")
        #expect(Formatting.agencies(net: "ak", sources: ",us,AK,nc,") == "AK+US+NC")
        // Each once, whatever its case; empty entries and spaces ignored.
        #expect(Formatting.agencies(net: nil, sources: ",emsc,, EMSC ,gfz,") == "EMSC+GFZ")
        // Without sources: the net alone; with neither: nothing.
        #expect(Formatting.agencies(net: "us", sources: nil) == "US")
        #expect(Formatting.agencies(net: nil, sources: ",,") == nil)
        #expect(Formatting.agencies(net: nil, sources: nil) == nil)
    }

    @Test func longAgencyListsAreCutAtAWholeNameWithACount() {
        #expect(Formatting.fitAgencies("US+AK", 16) == "US+AK")
        #expect(Formatting.fitAgencies("US+AK+NC+CI+HV+UW+PT+AT", 16) == "US+AK+NC+CI +4")
        #expect(Formatting.fitAgencies("EMSC+INGV+GFZ+GEONET", 12) == "EMSC+INGV +2")
        #expect(Formatting.fitAgencies("EMSC+INGV+GFZ+GEONET", 20) == "EMSC+INGV+GFZ+GEONET")
    }

    @Test func listRowsCarryAnAgenciesColumnOnlyWhenSomeQuakeHasAgencies() {
        let style = OutputStyle()
        let texts: [String?] = ["US+AK", "EMSC+INGV"]
        let width = Formatting.agencyWidth(texts)
        #expect(width == 9)
        let row = Formatting.row(
            mag: 4.2, place: "CENTRAL ITALY", time: 1_799_999_000_000, id: "ev1", placeWidth: 14, style,
            now: Self.now, agencies: "US+AK", agencyWidth: width)
        #expect(row.hasSuffix("US+AK      ev1"))
        #expect(Formatting.agencyWidth([nil, nil] as [String?]) == 0)
        let plain = Formatting.row(
            mag: 4.2, place: "CENTRAL ITALY", time: 1_799_999_000_000, id: "ev1", placeWidth: 14, style,
            now: Self.now)
        #expect(
            plain
                == Formatting.row(
                    mag: 4.2, place: "CENTRAL ITALY", time: 1_799_999_000_000, id: "ev1", placeWidth: 14, style,
                    now: Self.now, agencies: nil, agencyWidth: 0))
    }

    @Test func changeLinesNameThePreferredAgency() {
        let style = OutputStyle()
        let q = Self.quake("20261127_0001", net: "emsc", sources: ",emsc,ingv,")
        let insert = ChangeText.line(IOQuaked.Change(quakeId: q.id, kind: .insert, quake: q), style, now: Self.now)
        #expect(insert.hasPrefix("new"))
        #expect(insert.hasSuffix("EMSC    20261127_0001"))
        // An update without its row takes the cached row's agency.
        let update = ChangeText.line(
            IOQuaked.Change(
                quakeId: q.id, kind: .update,
                fields: [IOQuaked.FieldChange(field: "mag", old: .init(float: 4.0), new: .init(float: 4.2))]),
            before: q, style, now: Self.now)
        #expect(update.contains("EMSC    20261127_0001  M 4.0→4.2"))
        // A delete known only by its tombstone: the column is blank, the line keeps its shape.
        let delete = ChangeText.line(
            IOQuaked.Change(
                quakeId: q.id, kind: .delete,
                tombstone: IOQuaked.Tombstone(id: q.id, mag: 4.2, time: q.time), reason: .deletedUpstream),
            style, now: Self.now)
        #expect(delete.contains("        20261127_0001  (deleted upstream)"))
        let gone = ChangeText.line(
            IOQuaked.Change(
                quakeId: q.id, kind: .delete,
                tombstone: IOQuaked.Tombstone(id: q.id, mag: 4.2, time: q.time), reason: .deletedUpstream),
            before: q, style, now: Self.now)
        #expect(gone.contains("EMSC    20261127_0001"))
    }

    @Test func anAgencyJoiningIsSummarizedAsAgencies() {
        let fields = [
            IOQuaked.FieldChange(field: "net", old: .init(string: "emsc"), new: .init(string: "ingv")),
            IOQuaked.FieldChange(field: "sources", old: .init(string: ",emsc,"), new: .init(string: ",emsc,ingv,")),
        ]
        #expect(ChangeText.fieldSummary(fields, OutputStyle()) == "agency EMSC→INGV, agencies EMSC→EMSC+INGV")
        let first = [IOQuaked.FieldChange(field: "sources", old: nil, new: .init(string: ",us,"))]
        #expect(ChangeText.fieldSummary(first, OutputStyle()) == "agencies –→US")

        // With agency and contributors (quaked following sources): the same words, once each.
        let emsc = IOQuaked.Contributor(source: "emsc", agency: "EMSC", id: "e1", time: 1, lat: 42, lon: 13, preferred: true)
        var ingv = IOQuaked.Contributor(source: "ingv", agency: "INGV", id: "i1", time: 2, lat: 42, lon: 13, preferred: true)
        var demoted = emsc
        demoted.preferred = false
        let typed =
            fields + [
                IOQuaked.FieldChange(field: "agency", old: .init(string: "EMSC"), new: .init(string: "INGV")),
                IOQuaked.FieldChange(
                    field: "contributors", old: .init(contributors: [emsc]), new: .init(contributors: [ingv, demoted])),
            ]
        #expect(ChangeText.fieldSummary(typed, OutputStyle()) == "agency EMSC→INGV, agencies EMSC→EMSC+INGV")
        // Another agency's solution revised, the preferred one unchanged: a revision.
        ingv.preferred = false
        let revised = [
            IOQuaked.FieldChange(field: "updated", old: .init(int: 1), new: .init(int: 2)),
            IOQuaked.FieldChange(
                field: "contributors", old: .init(contributors: [emsc, ingv]), new: .init(contributors: [emsc])),
        ]
        #expect(ChangeText.fieldSummary(revised, OutputStyle()) == "revised")
        // agency without net (a client of a quaked whose net says otherwise): shown as the agency.
        let agencyOnly = [IOQuaked.FieldChange(field: "agency", old: .init(string: "EMSC"), new: .init(string: "INGV"))]
        #expect(ChangeText.fieldSummary(agencyOnly, OutputStyle()) == "agency EMSC→INGV")
    }

    @Test func execGetsTheAgencyAndTheAgencies() {
        let q = Self.quake("20261127_0001", net: "ingv", sources: ",emsc,ingv,")
        let insert = ExecDelivery.values(
            IOQuaked.Change(quakeId: q.id, kind: .insert, quake: q), token: 7, storeId: "s", before: nil)
        #expect(insert["QUAKE_AGENCY"] == "INGV")
        #expect(insert["QUAKE_AGENCIES"] == "INGV+EMSC")
        // An update that changed them: the new values.
        let joined = ExecDelivery.values(
            IOQuaked.Change(
                quakeId: q.id, kind: .update,
                fields: [
                    IOQuaked.FieldChange(field: "net", old: .init(string: "emsc"), new: .init(string: "ingv")),
                    IOQuaked.FieldChange(
                        field: "sources", old: .init(string: ",emsc,"), new: .init(string: ",emsc,ingv,")),
                ]),
            token: 8, storeId: "s", before: Self.quake(q.id, net: "emsc", sources: ",emsc,"))
        #expect(joined["QUAKE_AGENCY"] == "INGV")
        #expect(joined["QUAKE_AGENCIES"] == "INGV+EMSC")
        // A delete: the tombstone's sources.
        let deleted = ExecDelivery.values(
            IOQuaked.Change(
                quakeId: q.id, kind: .delete,
                tombstone: IOQuaked.Tombstone(id: q.id, time: q.time, sources: ",us,ak,"), reason: .expired),
            token: 9, storeId: "s", before: nil)
        #expect(deleted["QUAKE_AGENCY"] == "")
        #expect(deleted["QUAKE_AGENCIES"] == "US+AK")
        // A USGS quake: its contributing networks.
        let usgs = ExecDelivery.values(
            IOQuaked.Change(
                quakeId: "us1", kind: .insert, quake: Self.quake("us1", net: "us", sources: ",us,ak,")),
            token: 10, storeId: "s", before: nil)
        #expect(usgs["QUAKE_AGENCY"] == "US")
        #expect(usgs["QUAKE_AGENCIES"] == "US+AK")
    }

    @Test func agencyFlagsBecomeTheFilter() throws {
        let options = try FilterOptions.parse(["--agency", "INGV", "--agency", "emsc,Ingv", "--min-agencies", "2"])
        let filter = try #require(try options.filter())
        #expect(filter.agencies == ["emsc", "ingv"])
        #expect(filter.minAgencies == 2)
        let local = try options.localFilter()
        #expect(local.agencies == ["emsc", "ingv"])
        #expect(local.minAgencies == 2)
        #expect(throws: (any Error).self) { try FilterOptions.parse(["--min-agencies", "0"]).filter() }
        #expect(throws: (any Error).self) { try FilterOptions.parse(["--agency", ","]).filter() }
        #expect(FilterOptions.flag(for: "minAgencies") == "--min-agencies")
        #expect(FilterOptions.flag(for: "agencies") == "--agency")
    }
}
