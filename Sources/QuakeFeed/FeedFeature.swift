#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

// FeedFeature itself, one stored property per declared field, is generated from QuakeModel's
// QuakeRecord.fields (the QuakeModelGenerator plugin).
extension FeedFeature {
    /// Whether an `ids` list (UTF-8, like ",us7000abcd,ak0001,") names any id other than `id`,
    /// the feature's own: some non-empty entry differs from it. Most features list only
    /// themselves (",us7000abcd,"); for them this is one comparison. The one rule the parser,
    /// the records and the import share.
    public static func idsListOthers(_ ids: UnsafeRawBufferPointer, id: UnsafeRawBufferPointer) -> Bool {
        let comma = UInt8(ascii: ",")
        var start = 0
        while start < ids.count {
            var end = start
            while end < ids.count && ids[end] != comma { end += 1 }
            if end > start && !equal(UnsafeRawBufferPointer(rebasing: ids[start..<end]), id) { return true }
            start = end + 1
        }
        return false
    }

    private static func equal(_ a: UnsafeRawBufferPointer, _ b: UnsafeRawBufferPointer) -> Bool {
        a.count == b.count && (a.isEmpty || memcmp(a.baseAddress!, b.baseAddress!, a.count) == 0)
    }

    /// ``idsListOthers(_:id:)`` for strings (`false` for nil).
    public static func idsListOthers(_ ids: String?, id: String) -> Bool {
        guard var ids else { return false }
        var id = id
        return ids.withUTF8 { ids in
            id.withUTF8 { idsListOthers(UnsafeRawBufferPointer(ids), id: UnsafeRawBufferPointer($0)) }
        }
    }

    /// The other ids `ids` lists: every entry but the feature's own, once each, in feed order.
    /// Each is an id the same event was (or is also) known by.
    public var otherIDs: [String] {
        var seen: Set<String> = [id]
        return aliasIDs.filter { seen.insert($0).inserted }
    }

    /// The ids listed in `ids`, without empty entries, in feed order.
    public var aliasIDs: [String] {
        guard let ids else { return [] }
        // ASCII (every id seen): split over the bytes, as splitting the Characters would.
        if ids.utf8.allSatisfy({ $0 < 0x80 }) {
            return ids.utf8.split(separator: UInt8(ascii: ","), omittingEmptySubsequences: true)
                .map { String(Substring($0)) }
        }
        return ids.split(separator: ",", omittingEmptySubsequences: true).map(String.init)
    }
}

/// Why a feature in a feed was not imported.
public enum SkipReason: String, Sendable, CaseIterable, Codable, Comparable {
    /// The element of `features` is not a JSON object.
    case notAnObject = "not-an-object"
    /// The feature has no `id`, or its `id` is not a non-empty string.
    case missingID = "missing-id"
    /// `properties.time` is absent, `null` or not an integer.
    case missingTime = "missing-time"
    /// A property or the geometry has a type the feed format does not allow
    /// (for example `"mag": "4.5"` or coordinates that are not numbers).
    case invalidField = "invalid-field"

    public static func < (lhs: SkipReason, rhs: SkipReason) -> Bool { lhs.rawValue < rhs.rawValue }
}

/// What the feed parser hands to its consumer, one element of `features` at a time.
public enum FeedItem: Sendable, Hashable {
    /// A feature that decoded; `index` is its 0-based position in `features`.
    case feature(FeedFeature, index: Int)
    /// A feature that cannot be imported; `detail` says which field and why.
    case skipped(SkipReason, index: Int, detail: String)
}

extension FeedItem {
    /// The item's 0-based position in `features`.
    public var index: Int {
        switch self {
        case .feature(_, let index), .skipped(_, let index, _): index
        }
    }
}

/// One element of `features` as the parser met it: its bytes, their hash and, when decoding was
/// asked for, the decoded item. Without decoding, only the `id` (and whether `properties.ids`
/// lists other ids) has been read; the bytes have still been validated as JSON.
public struct FeedElement {
    /// The element's 0-based position in `features`.
    public let index: Int
    /// The element's bytes, from its first byte to its last. Valid only during the callback.
    public let bytes: UnsafeRawBufferPointer
    /// The document offset of the element's first byte.
    public let offset: Int
    /// ``hash(_:)`` of `bytes`: equal hashes mean (up to a 2⁻⁶⁴ chance) equal bytes, which
    /// decode to equal items.
    public let hash: UInt64
    /// The decoded element, when it was parsed with decoding; a record's texts are in `arena`.
    public let decoded: DecodedElement?
    /// Where the texts of a decoded record are. Valid only during the callback; after `consume`
    /// returns, the same bytes are in what ``FeedParser/takeArena()`` hands over.
    public let arena: UnsafeRawBufferPointer
    /// Without decoding: the feature's `id` if it is a non-empty string.
    public let id: String?
    /// Without decoding: whether `properties.ids` may list other ids than the feature's own.
    public let hasAliases: Bool

    /// The decoded element as a ``FeedItem`` (texts copied out as strings).
    public var item: FeedItem? { decoded?.item(index: index, arena: arena) }

    /// The seed of ``hash(_:)``, which names the decoder's version: a change to how bytes decode
    /// into a ``FeedItem`` must change it, or stored hashes would vouch for rows decoded the old way.
    public static let hashSeed: UInt64 = 2

    /// XXH64 of an element's bytes with ``hashSeed``.
    public static func hash(_ bytes: UnsafeRawBufferPointer) -> UInt64 {
        FeedHash.xxh64(bytes, seed: hashSeed)
    }
}
