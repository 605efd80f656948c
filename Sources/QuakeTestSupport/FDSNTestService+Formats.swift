import QuakeFeed
import QuakeModel
import QuakeSources

extension FDSNTestService {
    // MARK: QuakeML and text

    /// The formats `query` answers in.
    public enum Format: String, Sendable, Hashable, CaseIterable {
        /// The USGS GeoJSON `FeatureCollection`: each event's feature as it was added.
        case geojson
        /// QuakeML 1.2 (``QuakeMLWriter``), the real service's default.
        case xml
        /// The FDSN text format (``FDSNTextWriter``, ``textLayout``'s columns).
        case text

        /// The `format` value `value` names (`quakeml` is `xml`, as at the USGS), the real service's
        /// default (`xml`) without one, or `nil` for one it does not know.
        init?(parameter value: String?) {
            guard let value else {
                self = .xml
                return
            }
            if value == "quakeml" {
                self = .xml
                return
            }
            self.init(rawValue: value)
        }
    }

    /// The authority of the QuakeML answers' resource identifiers (`smi:fdsnws.test/event/ID`).
    public static let quakeMLAuthority = "fdsnws.test"
    /// The `Catalog` column of the text answers.
    public static let textCatalog = "fdsnws-test"
    /// The source name of the reports ``report(ofFeature:)`` makes.
    public static let reportSource = "fdsn-test"

    /// The columns of the `format=text` answers (default 14: with `EventType`).
    public var textLayout: FDSNTextWriter.Layout {
        get { state.withLockedValue { $0.textLayout } }
        set { state.withLockedValue { $0.textLayout = newValue } }
    }

    /// What the QuakeML and text answers say of the event with this id (``report(ofFeature:)``), if any.
    public func item(id: String) -> SourceItem? {
        feature(id: id).flatMap(Self.report(ofFeature:))
    }

    /// A USGS feature as an agency's report, as the QuakeML and text answers write it: the feature's
    /// id; the agency its `net`; its time, coordinates (a missing latitude or longitude is NaN, which
    /// the writers leave out), `mag`, `magType`, `place`, `type` and `updated`; `status` `automatic`
    /// is evaluation mode automatic, `reviewed` is mode manual with status reviewed; the other ids of
    /// `ids` are its links. A feature whose `status` is `deleted` is a retraction (its `updated`).
    /// `nil` for bytes that are not a USGS feature.
    public static func report(ofFeature bytes: [UInt8]) -> SourceItem? {
        guard
            let decoded = try? bytes.withUnsafeBytes({ try FeedParser.decodeElement($0, index: 0, base: 0) }),
            case .record(let record) = decoded.0
        else { return nil }
        let feature = decoded.arena.withUnsafeBytes { record.feature(in: $0) }
        let status = feature.status?.lowercased()
        if status == "deleted" {
            return .retraction(source: reportSource, id: feature.id, updated: feature.updated)
        }
        let links = (feature.ids ?? "").split(separator: ",").map(String.init).filter { $0 != feature.id }
        return .report(
            SourceReport(
                source: reportSource, id: feature.id, agency: feature.net, time: feature.time,
                latitude: feature.lat ?? .nan, longitude: feature.lon ?? .nan, depth: feature.depth,
                magnitude: feature.mag, magnitudeType: feature.magType, place: feature.place,
                eventType: feature.type,
                evaluationMode: status == "automatic" ? .automatic : status == "reviewed" ? .manual : nil,
                evaluationStatus: status == "reviewed" ? .reviewed : nil, updated: feature.updated, links: links))
    }

    /// 200 with the QuakeML document of `features`, in their order.
    static func quakeML(_ features: [Stored]) -> TestResponse {
        let writer = QuakeMLWriter(authority: quakeMLAuthority)
        var body: [UInt8] = []
        body.reserveCapacity(256 + features.count * 1200)
        writer.appendHeader(to: &body)
        for stored in features {
            guard let item = report(ofFeature: stored.bytes) else { continue }
            writer.append(item, to: &body)
        }
        writer.appendFooter(to: &body)
        return TestResponse(body: .bytes(body), contentType: "application/xml")
    }

    /// 200 with the FDSN text of `features`, in their order; a deleted event is a line whose
    /// `EventType` is `not existing` (the format has no other way to say it), and no line at all in
    /// the 13 columns, which have no `EventType`.
    static func fdsnText(_ features: [Stored], layout: FDSNTextWriter.Layout) -> TestResponse {
        let writer = FDSNTextWriter(layout: layout, catalog: textCatalog)
        var body: [UInt8] = []
        body.reserveCapacity(256 + features.count * 160)
        writer.appendHeader(to: &body)
        for stored in features {
            switch report(ofFeature: stored.bytes) {
            case .report(let report)?:
                writer.append(report, to: &body)
            case .retraction? where layout == .thirteen:
                continue
            case .retraction(_, let id, let updated)?:
                let retracted = SourceReport(
                    source: reportSource, id: id, time: stored.event.time,
                    latitude: stored.event.latitude ?? .nan, longitude: stored.event.longitude ?? .nan,
                    depth: stored.event.depth, magnitude: stored.event.magnitude, eventType: "not existing",
                    updated: updated)
                writer.append(retracted, to: &body)
            case nil: continue
            }
        }
        return TestResponse(body: .bytes(body), contentType: "text/plain; charset=utf-8")
    }

    /// What an answer without events is: 204 No Content by default, 404 with an FDSN error text for
    /// `nodata=404`.
    static func noData(_ code: Int) -> TestResponse {
        code == 404
            ? TestResponse.status(404, body: "Error 404: Not Found\n\nNo data matches the selection criteria.\n")
            : TestResponse.status(204)
    }
}
