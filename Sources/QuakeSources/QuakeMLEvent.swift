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

    var publicID: String?
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
        if let catalogID, !catalogID.isEmpty {
            let source = catalogSource ?? ""
            return catalogID.hasPrefix(source) ? catalogID : source + catalogID
        }
        guard let whole = publicID, !whole.isEmpty else { return nil }
        let text = whole.replacingOccurrences(of: "&amp;", with: "&")
        let parts = text.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)
        if parts.count == 2 {
            for parameter in parts[1].split(whereSeparator: { $0 == "&" || $0 == ";" }) {
                let pair = parameter.split(separator: "=", maxSplits: 1)
                guard pair.count == 2 else { continue }
                let key = pair[0].lowercased()
                if (key == "eventid" || key == "evid") && !pair[1].isEmpty { return String(pair[1]) }
            }
        }
        var path = parts[0]
        if let colon = path.firstIndex(of: ":"), !path[..<colon].contains("/") {
            path = path[path.index(after: colon)...]
        }
        var tail = path.split(separator: "/").last ?? ""
        if let equals = tail.lastIndex(of: "=") { tail = tail[tail.index(after: equals)...] }
        return tail.isEmpty ? whole : String(tail)
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
    func item(source: String, depthInKilometres: Bool) -> Result<SourceItem, SourceProblem> {
        let id = Self.agencyID(publicID: publicID, catalogSource: catalogSource, catalogID: catalogID)
        func problem(_ kind: SourceProblem.Kind, _ message: String, _ path: String?) -> SourceProblem {
            SourceProblem(kind, message, source: source, id: id, line: line, path: path)
        }
        guard let id else { return .failure(problem(.noID, "the event has no publicID", "event")) }
        let origin = origins.first { $0.publicID != nil && $0.publicID == preferredOriginID } ?? origins.first
        let magnitude =
            magnitudes.first { $0.publicID != nil && $0.publicID == preferredMagnitudeID } ?? magnitudes.first
        let updated = [creationInfo, origin?.creationInfo, magnitude?.creationInfo]
            .compactMap { $0.flatMap { ($0.modificationTime ?? $0.time).flatMap(SourceTime.milliseconds) } }
            .max()
        var eventType = type.map { $0.replacingOccurrences(of: "_", with: " ") }
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
