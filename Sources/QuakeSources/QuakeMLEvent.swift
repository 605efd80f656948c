import Foundation
import QuakeModel

/// What ``QuakeMLReader`` collects of one `<event>` while it streams through it, and the rules
/// that turn it into a ``SourceItem``.
struct QuakeMLEvent {
    struct CreationInfo {
        var agencyID: String?
        var agencyURI: String?
        var time: String?
        var modificationTime: String?
        var author: String?
    }
    struct Origin {
        var publicID: String?
        var time: String?
        var latitude: String?
        var longitude: String?
        var depth: String?
        var evaluationMode: String?
        var evaluationStatus: String?
        var creationInfo = CreationInfo()
    }
    struct Magnitude {
        var publicID: String?
        var value: String?
        var type: String?
        var creationInfo = CreationInfo()
    }

    /// Origins and magnitudes kept per event; more are dropped (unless preferred) and reported.
    static let maxKept = 256

    /// The `publicID` attribute's bytes (`&` decoded), when there is one.
    var publicID: [UInt8]?
    var catalogSource: String?
    var catalogID: String?
    var type: String?
    var preferredOriginID: String?
    var preferredMagnitudeID: String?
    var creationInfo = CreationInfo()
    var descriptions: [(type: String?, text: String?)] = []
    var origins: [Origin] = []
    var magnitudes: [Magnitude] = []
    var dropped = false
    var line: Int?

    /// Empties it for the next event, keeping the arrays' storage.
    mutating func reset() {
        publicID = nil
        catalogSource = nil
        catalogID = nil
        type = nil
        preferredOriginID = nil
        preferredMagnitudeID = nil
        creationInfo = CreationInfo()
        descriptions.removeAll(keepingCapacity: true)
        origins.removeAll(keepingCapacity: true)
        magnitudes.removeAll(keepingCapacity: true)
        dropped = false
        line = nil
    }

    /// This event's id: ``agencyID(publicID:catalogSource:catalogID:)``.
    func agencyID() -> String? {
        if let catalogID, !catalogID.isEmpty {
            let source = catalogSource ?? ""
            return catalogID.hasPrefix(source) ? catalogID : source + catalogID
        }
        guard let publicID, !publicID.isEmpty else { return nil }
        return Self.agencyID(publicID: publicID)
    }

    /// The agency's own id for the event, by these rules in order:
    /// 1. ComCat's `catalog:eventsource` and `catalog:eventid` attributes (any prefix bound to
    ///    the catalog namespace): `us` + `7000abcd` gives `us7000abcd` (the id alone when it
    ///    already starts with the source);
    /// 2. `publicID` (with a doubled escape `&amp;` read as `&`): a query parameter `eventid`
    ///    (any case) or `evid` gives its value (`...query?eventid=26359881&format=quakeml` gives
    ///    `26359881`);
    /// 3. otherwise the last segment of the path after the scheme (`smi:`, `quakeml:`), and in a
    ///    `key=value` segment the value: `smi:org.gfz-potsdam.de/geofon/gfz2021inzw` gives
    ///    `gfz2021inzw`, `quakeml:eu.emsc/event/20120404_0000041` gives `20120404_0000041`,
    ///    `smi:ISC/evid=7453151` gives `7453151`;
    /// 4. a publicID with no usable tail is the id whole. No publicID at all: no id.
    static func agencyID(publicID: String?, catalogSource: String?, catalogID: String?) -> String? {
        var event = QuakeMLEvent()
        event.publicID = publicID.map { Array($0.utf8) }
        event.catalogSource = catalogSource
        event.catalogID = catalogID
        return event.agencyID()
    }

    /// Rules 2 to 4 of ``agencyID(publicID:catalogSource:catalogID:)``, over the UTF-8 bytes.
    static func agencyID(publicID whole: [UInt8]) -> String {
        let text = collapsing(Array("&amp;".utf8), toAmpersandIn: whole)
        let question = text.firstIndex(of: 0x3F)
        if let question {
            // The query: parameters split at `&` and `;`, each `key=value` (non-empty key).
            var p = question + 1
            while p <= text.count {
                var q = p
                while q < text.count, text[q] != 0x26, text[q] != 0x3B { q += 1 }
                // A parameter p..<q; `split(separator: "=", maxSplits: 1)` without empty pieces.
                var k = p
                while k < q, text[k] == 0x3D { k += 1 }
                if k < q {
                    var e = k
                    while e < q, text[e] != 0x3D { e += 1 }
                    if e + 1 < q, isIDKey(text[k..<e]) {
                        return String(decoding: text[(e + 1)..<q], as: UTF8.self)
                    }
                }
                p = q + 1
            }
        }
        var path = text[..<(question ?? text.count)]
        if let colon = path.firstIndex(of: 0x3A), !path[..<colon].contains(0x2F) {
            path = path[(colon + 1)...]
        }
        var end = path.endIndex
        while end > path.startIndex, path[end - 1] == 0x2F { end -= 1 }
        var begin = end
        while begin > path.startIndex, path[begin - 1] != 0x2F { begin -= 1 }
        var tail = path[begin..<end]
        if let equals = tail.lastIndex(of: 0x3D) { tail = tail[(equals + 1)...] }
        return String(decoding: tail.isEmpty ? whole[...] : tail, as: UTF8.self)
    }

    private static func isIDKey(_ key: ArraySlice<UInt8>) -> Bool {
        func lower(_ c: UInt8) -> UInt8 { c >= 0x41 && c <= 0x5A ? c + 0x20 : c }
        return key.lazy.map(lower).elementsEqual("eventid".utf8) || key.lazy.map(lower).elementsEqual("evid".utf8)
    }

    /// The item this event makes, or why it is skipped.
    ///
    /// - Preferred origin and magnitude: the ones `preferredOriginID`/`preferredMagnitudeID`
    ///   name, else the first.
    /// - Event `type` `not existing` or `deleted` is a retraction (it needs no origin);
    ///   `null` (NERIES) or empty is no type; `_` is read as a space (ComCat's `quarry_blast`).
    /// - Depth: metres in QuakeML 1.2 and 1.0, divided by 1000; GeoNet's QuakeML 1.0.1
    ///   (`smi:geonet.org.nz/` ids) wrote kilometres and is taken as is.
    /// - Agency: `agencyID` of the origin, else the event, else the magnitude; else the last
    ///   segment of `agencyURI` in the same order (`smi:smi-registry/organization/EMSC`: `EMSC`);
    ///   else the origin's `author` (the ISC bulletin names only authors: `ISC`, `IDC`).
    /// - Updated: the latest of the event's, the origin's and the magnitude's creationInfo
    ///   times (each its `modificationTime`, else its `creationTime`); one that does not parse
    ///   is ignored.
    /// - Place: the description of type `region name`, else `Flinn-Engdahl region`, else
    ///   `earthquake name`.
    func item(source: String, id: String?, depthInKilometres: Bool) -> Result<SourceItem, SourceProblem> {
        func problem(_ kind: SourceProblem.Kind, _ message: String, _ path: String?) -> SourceProblem {
            SourceProblem(kind, message, source: source, id: id, line: line, path: path)
        }
        guard let id else { return .failure(problem(.noID, "the event has no publicID", "event")) }
        let origin = origins.first { $0.publicID != nil && $0.publicID == preferredOriginID } ?? origins.first
        let magnitude =
            magnitudes.first { $0.publicID != nil && $0.publicID == preferredMagnitudeID } ?? magnitudes.first
        func instant(_ info: CreationInfo?) -> Int64? {
            (info?.modificationTime ?? info?.time).flatMap { SourceTime.milliseconds($0) }
        }
        let updated = [instant(creationInfo), instant(origin?.creationInfo), instant(magnitude?.creationInfo)]
            .reduce(nil) { (latest: Int64?, next: Int64?) in next.map { max($0, latest ?? $0) } ?? latest }
        var eventType = type.map { $0.utf8.contains(0x5F) ? String($0.map { $0 == "_" ? " " : $0 }) : $0 }
        if eventType == "null" || eventType == "" { eventType = nil }
        if eventType == "not existing" || eventType == "deleted" {
            return .success(.retraction(source: source, id: id, updated: updated))
        }
        guard let origin else { return .failure(problem(.noOrigin, "the event has no origin", "event/origin")) }
        guard let timeText = origin.time, let time = SourceTime.milliseconds(timeText) else {
            return .failure(
                problem(.badTime, "origin time \(quoted(origin.time)) is not an ISO 8601 instant", "origin/time/value"))
        }
        guard let latitude = origin.latitude.flatMap(finite), (-90...90).contains(latitude) else {
            return .failure(
                problem(.badCoordinates, "latitude \(quoted(origin.latitude)) is not in -90...90", "origin/latitude/value"))
        }
        guard let longitude = origin.longitude.flatMap(finite), (-180...180).contains(longitude) else {
            return .failure(
                problem(
                    .badCoordinates, "longitude \(quoted(origin.longitude)) is not in -180...180",
                    "origin/longitude/value"))
        }
        let depth = origin.depth.flatMap(finite).map { depthInKilometres ? $0 : $0 / 1000 }
        let infos = [origin.creationInfo, creationInfo, magnitude?.creationInfo ?? CreationInfo()]
        let agency =
            infos.lazy.compactMap { nonEmpty($0.agencyID) }.first
            ?? infos.lazy.compactMap { nonEmpty($0.agencyURI)?.split(separator: "/").last.map(String.init) }.first
            ?? nonEmpty(origin.creationInfo.author)
        let place = ["region name", "Flinn-Engdahl region", "earthquake name"].lazy.compactMap { wanted in
            descriptions.first { $0.type == wanted && nonEmpty($0.text) != nil }?.text
        }.first
        return .success(
            .report(
                SourceReport(
                    source: source, id: id, agency: agency, time: time, latitude: latitude, longitude: longitude,
                    depth: depth, magnitude: magnitude?.value.flatMap(finite), magnitudeType: nonEmpty(magnitude?.type),
                    place: place, eventType: eventType,
                    evaluationMode: origin.evaluationMode.flatMap(SourceReport.EvaluationMode.init(rawValue:)),
                    evaluationStatus: origin.evaluationStatus.flatMap(SourceReport.EvaluationStatus.init(rawValue:)),
                    updated: updated)))
    }
}

/// A finite number written in decimal (`Double`'s own parser also takes `nan`, `inf` and hex).
func finite(_ text: String) -> Double? {
    guard !text.isEmpty, text.utf8.allSatisfy({ ($0 >= 0x30 && $0 <= 0x39) || $0 == 0x2E || $0 == 0x2D || $0 == 0x2B || $0 == 0x65 || $0 == 0x45 }),
        let value = Double(text), value.isFinite
    else { return nil }
    return value
}

func nonEmpty(_ text: String?) -> String? {
    guard let text, !text.isEmpty else { return nil }
    return text
}

func quoted(_ text: String?) -> String {
    guard let text else { return "(missing)" }
    return "\"\(text.count > 40 ? String(text.prefix(40)) + "..." : text)\""
}
