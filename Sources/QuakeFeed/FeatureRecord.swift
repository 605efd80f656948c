/// Where a text value of a ``FeatureRecord`` sits in its arena; `count < 0` is null.
public struct TextSpan: Sendable, Hashable {
    public var start: Int32
    public var count: Int32

    public static let null = TextSpan(start: 0, count: -1)

    public var isNull: Bool { count < 0 }
}

// FeatureRecord's stored properties, its init from a FeedFeature and feature(in:) are generated
// from QuakeModel's QuakeRecord.fields (the QuakeModelGenerator plugin).
extension FeatureRecord {
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
