// Fuzzes the query parameters of QuakeHTTP's catalog service (docs/http.md), which QuakeHTTPQuery
// reads: the FDSN event service's `/fdsnws/event/1/query?...` (FDSNQuery) and a summary feed's
// `minmagnitude`, `latitude`, `longitude` and `maxradiuskm` (SummaryFeed.selection), both read
// from the input as the query string of a request, through the percent-decoding HTTPRequest reads
// its query with (QueryString.items). It must never crash or hang, and:
// - a rejected query is a ParameterError (never another error) whose text names a parameter:
//   one the query gave (FDSN: as it was written; a feed: in lower case, first), or one the
//   service takes, or the malformed %-escape;
// - an accepted FDSN query holds only values in range: magnitudes -10 to 12 with min <= max,
//   a box's latitudes -90 to 90 (south <= north) and longitudes -180 to 180, a circle's centre in
//   range and radius 0 to 180 degrees (maxradiuskm 0 to 20001.6), minradius inside it, limit 1 or
//   more, offset 0 or more, starttime <= endtime, nodata 204 or 404, a non-empty eventid;
// - acceptance and the selection do not depend on the order of the parameters nor on the (ASCII)
//   case of their names, and the items written back (percent-encoded) read the same;
// - an accepted feed query keeps the feed's own window and level, and its magnitude and circle
//   are in range; a query of only the feed's four parameters that a feed of all quakes accepts,
//   the FDSN service accepts with the same magnitude and circle.

import FuzzSupport
import QuakeFeed
import QuakeHTTPQuery

/// An FDSN query's outcome: what it selects, or the error's text.
struct FDSNOutcome: Equatable {
    var accepted: Bool
    var selection: String = ""
    var format: String = ""
    var noData = 0
    var message = ""
}

func fdsn(_ items: [(name: String, value: String)]?) -> (FDSNQuery?, FDSNOutcome) {
    do {
        let query = try FDSNQuery(items)
        return (
            query,
            FDSNOutcome(
                accepted: true, selection: "\(query.selection)", format: query.format.rawValue, noData: query.noData)
        )
    } catch let error as ParameterError {
        return (nil, FDSNOutcome(accepted: false, message: error.message))
    } catch {
        fail("FDSNQuery threw something other than a ParameterError: \(error)")
    }
}

/// Percent-encodes everything but unreserved characters (so `+`, `&`, `=` and `%` survive).
func encoded(_ text: String) -> String {
    var out = ""
    for byte in text.utf8 {
        let c = Unicode.Scalar(byte)
        if (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A)
            || "-._~".unicodeScalars.contains(c)
        {
            out.unicodeScalars.append(c)
        } else {
            let hex = String(byte, radix: 16, uppercase: true)
            out += "%" + (hex.count == 1 ? "0" : "") + hex
        }
    }
    return out
}

func queryString(_ items: [(name: String, value: String)]) -> String {
    items.map { encoded($0.name) + "=" + encoded($0.value) }.joined(separator: "&")
}

let canonicalNames = FDSNQuery.parameters.map(\.name)

/// `text` with a-z in upper case and nothing else changed (Unicode's case mapping turns some
/// letters into ASCII ones, "ſ" into "S", which no parameter name is).
func asciiUppercased(_ text: String) -> String {
    String(decoding: text.utf8.map { $0 >= 0x61 && $0 <= 0x7A ? $0 - 0x20 : $0 }, as: UTF8.self)
}
let malformedEscape = "The query string has a malformed %-escape."

func checkAccepted(_ query: FDSNQuery, _ input: String) {
    let selection = query.selection
    let filter = selection.filter
    func inRange(_ value: Double?, _ range: ClosedRange<Double>, _ what: String) {
        if let value { check(value.isFinite && range.contains(value), "\(what) \(value) accepted: \(input)") }
    }
    inRange(filter.minMagnitude, -10...12, "minmagnitude")
    inRange(filter.maxMagnitude, -10...12, "maxmagnitude")
    if let minimum = filter.minMagnitude, let maximum = filter.maxMagnitude {
        check(minimum <= maximum, "maxmagnitude below minmagnitude accepted: \(input)")
    }
    if let since = filter.since, let until = selection.until {
        check(since <= until, "endtime before starttime accepted: \(input)")
    }
    switch filter.region {
    case nil:
        check(selection.minDistanceKm == nil, "minradius without a circle: \(input)")
    case .box(let minLat, let maxLat, let minLon, let maxLon)?:
        inRange(minLat, -90...90, "minlatitude")
        inRange(maxLat, -90...90, "maxlatitude")
        inRange(minLon, -180...180, "minlongitude")
        inRange(maxLon, -180...180, "maxlongitude")
        check(minLat <= maxLat, "a box with its north south of its south: \(input)")
        check(selection.minDistanceKm == nil, "minradius with a box: \(input)")
    case .circle(let lat, let lon, let radiusKm)?:
        inRange(lat, -90...90, "latitude")
        inRange(lon, -180...180, "longitude")
        inRange(radiusKm, 0...(180 * FDSNQuery.kmPerDegree), "the circle's radius (km)")
        if let inner = selection.minDistanceKm {
            check(inner > 0 && inner <= radiusKm, "minradius \(inner) km outside the circle \(radiusKm) km: \(input)")
        }
    case .polygons?:
        fail("a polygon from a query: \(input)")
    }
    if let limit = selection.limit { check(limit >= 1, "limit \(limit) accepted: \(input)") }
    check(selection.offset >= 0, "offset \(selection.offset) accepted: \(input)")
    check(query.noData == 204 || query.noData == 404, "nodata \(query.noData) accepted: \(input)")
    if let id = selection.eventID { check(!id.isEmpty, "an empty eventid accepted: \(input)") }
    check(selection.requirePosition, "an FDSN selection that does not require a position: \(input)")
}

func checkRejected(_ message: String, _ items: [(name: String, value: String)]?, _ input: String) {
    check(!message.isEmpty, "an empty error: \(input)")
    guard let items else {
        check(message == malformedEscape, "a malformed escape reported as '\(message)': \(input)")
        return
    }
    let named =
        items.contains { !$0.name.isEmpty && message.contains($0.name) }
        || canonicalNames.contains { message.contains($0) }
    check(named, "the error '\(message)' names no parameter: \(input)")
}

let feedParameters = Set(SummaryFeed.parameters)
let now: Int64 = 1_780_000_000_000

@_cdecl("LLVMFuzzerTestOneInput")
func fuzzHTTPQuery(_ start: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    let input = bytes(start, count)
    var choices = Choices(seed: input)
    // A target has no space, no '#', and is one line; anything else is left as the fuzzer wrote it.
    let text = String(decoding: input, as: UTF8.self)
    let shown = show(input)
    // What HTTPRequest.queryItems makes of `/fdsnws/event/1/query?TEXT` (and of a feed's path with it).
    let items = QueryString.items(text)

    // FDSN.
    let (query, outcome) = fdsn(items)
    if let query {
        checkAccepted(query, shown)
    } else {
        checkRejected(outcome.message, items, shown)
    }
    if let items {
        // The order of the parameters and the case of their names change nothing but the text of an error.
        let reversed = fdsn(items.reversed()).1
        check(reversed.accepted == outcome.accepted, "reversed, accepted \(reversed.accepted): \(shown)")
        if outcome.accepted {
            check(reversed == outcome, "reversed:\n\(reversed)\nas given:\n\(outcome)\ninput: \(shown)")
        }
        let upper = fdsn(items.map { (asciiUppercased($0.name), $0.value) }).1
        check(upper.accepted == outcome.accepted, "names in upper case, accepted \(upper.accepted): \(shown)")
        if outcome.accepted {
            check(upper == outcome, "names in upper case:\n\(upper)\nas given:\n\(outcome)\ninput: \(shown)")
        }
        // Written back, percent-encoded, the items read the same.
        let again = QueryString.items(queryString(items))
        check(
            again.map { $0.map { [$0.name, $0.value] } } == items.map { [$0.name, $0.value] },
            "re-encoded items differ: \(shown)")
        check(fdsn(again).1 == outcome, "re-encoded, the query reads otherwise: \(shown)")
    }

    // A summary feed, chosen by the input.
    let level = SummaryFeed.Level.allCases[choices.next(in: 0...SummaryFeed.Level.allCases.count - 1)]
    let period = SummaryFeed.Period.allCases[choices.next(in: 0...SummaryFeed.Period.allCases.count - 1)]
    for feed in [SummaryFeed(level: level, period: period), SummaryFeed(level: .all, period: period)] {
        do {
            let selection = try feed.selection(items, now: now)
            let filter = selection.filter
            check(filter.since == now - feed.period.seconds * 1000, "the feed's window moved: \(shown)")
            check(filter.minSignificance == feed.level.minSignificance, "the feed's significance changed: \(shown)")
            if let floor = feed.level.minMagnitude {
                check((filter.minMagnitude ?? -.infinity) >= floor, "below the feed's level: \(shown)")
            }
            if let m = filter.minMagnitude, feed.level.minMagnitude == nil || m != feed.level.minMagnitude {
                check(m.isFinite && (-10...12).contains(m), "minmagnitude \(m) accepted: \(shown)")
            }
            switch filter.region {
            case nil: break
            case .circle(let lat, let lon, let radiusKm)?:
                check((-90...90).contains(lat) && (-180...180).contains(lon), "centre \(lat),\(lon) accepted: \(shown)")
                check((0...20_001.6).contains(radiusKm), "maxradiuskm \(radiusKm) accepted: \(shown)")
            default:
                fail("a feed region other than a circle: \(shown)")
            }
            // The same four parameters, and only those, mean the same to the FDSN service.
            if feed.level == .all, let items, items.allSatisfy({ feedParameters.contains($0.name.lowercased()) }) {
                guard let fdsnQuery = query else {
                    fail("the feed accepts what the FDSN service rejects (\(outcome.message)): \(shown)")
                }
                check(fdsnQuery.selection.filter.minMagnitude == filter.minMagnitude, "minmagnitude differs: \(shown)")
                check(fdsnQuery.selection.filter.region == filter.region, "the circle differs: \(shown)")
            }
        } catch let error as ParameterError {
            let message = error.message
            let named =
                message == "the query string has a malformed %-escape"
                || message.hasPrefix("latitude, longitude and maxradiuskm go together")
                || (items ?? []).contains {
                    // The feed names a parameter as given (twice) or in lower case, as it reads it.
                    feedParameters.contains($0.name.lowercased())
                        && (message.hasPrefix($0.name) || message.hasPrefix($0.name.lowercased()))
                }
            check(named, "the feed's error '\(message)' names no parameter: \(shown)")
        } catch {
            fail("the feed threw something other than a ParameterError: \(error)")
        }
    }
    return 0
}

runFuzzer(fuzzHTTPQuery)
