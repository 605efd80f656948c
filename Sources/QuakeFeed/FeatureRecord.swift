/// Where a text value of a ``FeatureRecord`` sits in its arena; `count < 0` is null.
public struct TextSpan: Sendable, Hashable {
    public var start: Int32
    public var count: Int32

    public static let null = TextSpan(start: 0, count: -1)

    public var isNull: Bool { count < 0 }
}

/// A decoded feature whose texts are spans of a byte arena rather than strings: what the importer
/// reads on its hot path, with no allocation and no reference counting per field. Same fields,
/// same values as ``FeedFeature`` (``feature(in:)`` makes one).
public struct FeatureRecord: Sendable {
    public var id = TextSpan.null
    public var mag: Double?
    public var place = TextSpan.null
    public var time: Int64 = 0
    public var updated: Int64?
    public var tz: Int64?
    public var url = TextSpan.null
    public var detail = TextSpan.null
    public var felt: Int64?
    public var cdi: Double?
    public var mmi: Double?
    public var alert = TextSpan.null
    public var status = TextSpan.null
    public var tsunami: Int64?
    public var sig: Int64?
    public var net = TextSpan.null
    public var code = TextSpan.null
    public var ids = TextSpan.null
    public var sources = TextSpan.null
    public var types = TextSpan.null
    public var nst: Int64?
    public var dmin: Double?
    public var rms: Double?
    public var gap: Double?
    public var magType = TextSpan.null
    public var type = TextSpan.null
    public var title = TextSpan.null
    public var lon: Double?
    public var lat: Double?
    public var depth: Double?
    /// Whether `ids` lists other ids than the feature's own (``FeedFeature/idsListOthers(_:id:)``).
    public var hasAliases = false

    public init() {}

    /// `feature`'s values, its texts appended to `arena`.
    public init(_ feature: FeedFeature, arena: inout [UInt8]) {
        func span(_ text: String?) -> TextSpan {
            guard let text else { return .null }
            let start = arena.count
            arena.append(contentsOf: text.utf8)
            return TextSpan(start: Int32(start), count: Int32(arena.count - start))
        }
        id = span(feature.id)
        mag = feature.mag
        place = span(feature.place)
        time = feature.time
        updated = feature.updated
        tz = feature.tz
        url = span(feature.url)
        detail = span(feature.detail)
        felt = feature.felt
        cdi = feature.cdi
        mmi = feature.mmi
        alert = span(feature.alert)
        status = span(feature.status)
        tsunami = feature.tsunami
        sig = feature.sig
        net = span(feature.net)
        code = span(feature.code)
        ids = span(feature.ids)
        sources = span(feature.sources)
        types = span(feature.types)
        nst = feature.nst
        dmin = feature.dmin
        rms = feature.rms
        gap = feature.gap
        magType = span(feature.magType)
        type = span(feature.type)
        title = span(feature.title)
        lon = feature.lon
        lat = feature.lat
        depth = feature.depth
        hasAliases = FeedFeature.idsListOthers(feature.ids, id: feature.id)
    }

    /// The bytes of `span` in `arena` (empty for null).
    @inline(__always)
    public static func bytes(_ span: TextSpan, in arena: UnsafeRawBufferPointer) -> UnsafeRawBufferPointer {
        span.count <= 0
            ? UnsafeRawBufferPointer(start: nil, count: 0)
            : UnsafeRawBufferPointer(rebasing: arena[Int(span.start)..<Int(span.start + span.count)])
    }

    /// The text of `span` in `arena`, nil for null.
    public static func string(_ span: TextSpan, in arena: UnsafeRawBufferPointer) -> String? {
        span.isNull ? nil : String(decoding: bytes(span, in: arena), as: UTF8.self)
    }

    /// The same feature with its texts as strings.
    public func feature(in arena: UnsafeRawBufferPointer) -> FeedFeature {
        func s(_ span: TextSpan) -> String? { Self.string(span, in: arena) }
        var f = FeedFeature(id: s(id) ?? "", time: time)
        f.mag = mag
        f.place = s(place)
        f.updated = updated
        f.tz = tz
        f.url = s(url)
        f.detail = s(detail)
        f.felt = felt
        f.cdi = cdi
        f.mmi = mmi
        f.alert = s(alert)
        f.status = s(status)
        f.tsunami = tsunami
        f.sig = sig
        f.net = s(net)
        f.code = s(code)
        f.ids = s(ids)
        f.sources = s(sources)
        f.types = s(types)
        f.nst = nst
        f.dmin = dmin
        f.rms = rms
        f.gap = gap
        f.magType = s(magType)
        f.type = s(type)
        f.title = s(title)
        f.lon = lon
        f.lat = lat
        f.depth = depth
        return f
    }
}

/// One element of `features`, decoded: a record (texts in the decoder's arena) or a skip.
public enum DecodedElement: Sendable {
    case record(FeatureRecord)
    case skipped(SkipReason, detail: String)

    /// As a ``FeedItem`` (texts copied out of `arena`).
    public func item(index: Int, arena: UnsafeRawBufferPointer) -> FeedItem {
        switch self {
        case .record(let record): .feature(record.feature(in: arena), index: index)
        case .skipped(let reason, let detail): .skipped(reason, index: index, detail: detail)
        }
    }
}
