/// Object keys packed little-endian into a UInt64 (keys of up to 8 bytes), so the decoder
/// dispatches on an integer instead of comparing strings. The keys of the quake's fields are
/// `FieldKey`'s, generated from QuakeModel's declaration; these are the format's own and those
/// the decoder gives a rule of its own. Longer keys it needs get codes no key
/// packs to: a single byte that never occurs in UTF-8 (a small code like 1 is the key "\u0001").
enum Key {
    static let id: UInt64 = 0x6469  // "id"
    static let type: UInt64 = 0x6570_7974  // "type"
    static let geometry: UInt64 = 0x7972_7465_6d6f_6567  // "geometry"
    static let properties: UInt64 = 0xFF  // "properties" (10 bytes)
    static let coordinates: UInt64 = 0xFE  // "coordinates" (11 bytes)
    static let generated: UInt64 = 0xFD  // "generated" (9 bytes)
    static let time: UInt64 = 0x656d_6974  // "time"
    static let url: UInt64 = 0x6c_7275  // "url"
    static let status: UInt64 = 0x7375_7461_7473  // "status"
    static let ids: UInt64 = 0x73_6469  // "ids"
    static let title: UInt64 = 0x65_6c74_6974  // "title"
    static let features: UInt64 = 0x7365_7275_7461_6566  // "features"
    static let metadata: UInt64 = 0x6174_6164_6174_656d  // "metadata"
    static let api: UInt64 = 0x69_7061  // "api"
    static let count: UInt64 = 0x74_6e75_6f63  // "count"
}

/// Decoding of the feed's own objects (features, metadata) on top of `JSONReader`.
extension JSONReader {
    /// Reads an object key (the reader is at its opening quote) and the colon after it;
    /// returns the key's code (see `Key`), 0 for keys the feed format does not use.
    @inline(__always) mutating func key() throws(ReadStop) -> UInt64 {
        try expectKey()
        let s = try scanString()
        try expectColon()
        let n = s.end - s.start
        if s.escaped {
            unescape(s.start, s.end)
            // NUL (only possible through \u0000) would be ambiguous with the packing's zero padding.
            guard scratch.count <= 8, !scratch.contains(0) else { return longKeyCode(s) }
            return scratch.reversed().reduce(0) { $0 << 8 | UInt64($1) }
        }
        if n > 8 { return longKeyCode(s) }
        // Load 8 bytes around the key and mask off the neighbours: no per-byte loop.
        if s.start + 8 <= end {
            let w = p.loadUnaligned(fromByteOffset: s.start, as: UInt64.self)
            return n == 8 ? w : w & ((1 << (UInt64(n) * 8)) - 1)
        }
        if s.end >= 8 {
            let w = p.loadUnaligned(fromByteOffset: s.end - 8, as: UInt64.self)
            return n == 0 ? 0 : w >> (UInt64(8 - n) * 8)
        }
        var code: UInt64 = 0
        for k in (s.start..<s.end).reversed() { code = code << 8 | UInt64(byte(k)) }
        return code
    }

    private mutating func longKeyCode(_ s: (start: Int, end: Int, escaped: Bool)) -> UInt64 {
        if stringEquals(s, "properties") { return Key.properties }
        if stringEquals(s, "coordinates") { return Key.coordinates }
        if stringEquals(s, "generated") { return Key.generated }
        return 0
    }

    /// Decodes one element of `features` (at `i`, after whitespace), its texts appended to
    /// `arena`. `depth` is the element's depth.
    ///
    /// Of a repeated key the last one wins: a repeated `properties` or `geometry` replaces the
    /// earlier one whole (as `featureIdentity` reads it too), a repeated field its earlier value.
    /// A known field with a value of the wrong type makes the feature invalid even if it is given
    /// again.
    mutating func feature(depth: Int) throws(ReadStop) -> DecodedElement {
        let c = try nextNonWS()
        guard c == UInt8(ascii: "{") else {
            try skipValue(depth: depth)
            return .skipped(.notAnObject, detail: "feature: expected an object, found \(jsonTypeName(c))")
        }
        try enter(depth)
        i &+= 1
        var f = FeatureRecord()
        var id: TextSpan?
        var idProblem = "id: missing"
        var time: Int64?
        var timeProblem = "properties.time: missing"
        var invalid: String?  // the first invalid field, in document order
        if try nextNonWS() == UInt8(ascii: "}") {
            i &+= 1
        } else {
            repeat {
                switch try key() {
                case Key.id:
                    let v = try nextNonWS()
                    id = nil
                    if v == UInt8(ascii: "\"") {
                        let s = try scanString()
                        if s.end > s.start { id = text(s) } else { idProblem = "id: empty string" }
                    } else {
                        try skipValue(depth: depth + 1)
                        idProblem = "id: expected a string, found \(jsonTypeName(v))"
                    }
                case Key.type:
                    let v = try nextNonWS()
                    if v == UInt8(ascii: "\"") {
                        let s = try scanString()
                        if !stringEquals(s, "Feature") && invalid == nil {
                            invalid = "type: expected \"Feature\", found \"\(string(s))\""
                        }
                    } else {
                        try skipValue(depth: depth + 1)
                        if invalid == nil { invalid = "type: expected \"Feature\", found \(jsonTypeName(v))" }
                    }
                case Key.properties:
                    let v = try nextNonWS()
                    f.removeProperties()
                    time = nil
                    timeProblem = "properties.time: missing"
                    if v == UInt8(ascii: "{") {
                        try properties(&f, &time, &timeProblem, &invalid, depth: depth + 1)
                    } else {
                        try skipValue(depth: depth + 1)
                        if v != UInt8(ascii: "n") {
                            timeProblem = "properties: expected an object or null, found \(jsonTypeName(v))"
                        }
                    }
                case Key.geometry:
                    f.lon = nil; f.lat = nil; f.depth = nil
                    let v = try nextNonWS()
                    if v == UInt8(ascii: "{") {
                        try geometry(&f, &invalid, depth: depth + 1)
                    } else {
                        try skipValue(depth: depth + 1)
                        if v != UInt8(ascii: "n") && invalid == nil {
                            invalid = "geometry: expected an object or null, found \(jsonTypeName(v))"
                        }
                    }
                default:
                    try skipValue(depth: depth + 1)
                }
            } while try !endOfObject()
        }
        guard let id else { return .skipped(.missingID, detail: idProblem) }
        guard let time else { return .skipped(.missingTime, detail: timeProblem) }
        if let invalid { return .skipped(.invalidField, detail: invalid) }
        f.id = id
        f.time = time
        f.hasAliases = arena.withUnsafeBytes {
            FeedFeature.idsListOthers(FeatureRecord.bytes(f.ids, in: $0), id: FeatureRecord.bytes(f.id, in: $0))
        }
        return .record(f)
    }

    /// The `properties` object (at its `{`).
    private mutating func properties(
        _ f: inout FeatureRecord, _ time: inout Int64?, _ timeProblem: inout String, _ invalid: inout String?,
        depth: Int
    ) throws(ReadStop) {
        try enter(depth)
        i &+= 1
        if try nextNonWS() == UInt8(ascii: "}") { i &+= 1; return }
        repeat {
            let key = try key()
            switch key {
            case Key.time:
                time = nil
                let v = try nextNonWS()
                if v == UInt8(ascii: "-") || (v >= UInt8(ascii: "0") && v <= UInt8(ascii: "9")) {
                    let n = try scanNumber()
                    // Strict: an integer literal, not 1.7e12 or 1700000000000.0.
                    if n.isInteger, let t = int64(n) {
                        time = t
                    } else {
                        timeProblem =
                            n.isInteger
                            ? "properties.time: integer out of range"
                            : "properties.time: expected an integer, found a number with a fraction or exponent"
                    }
                } else {
                    try skipValue(depth: depth + 1)
                    timeProblem =
                        v == UInt8(ascii: "n")
                        ? "properties.time: null" : "properties.time: expected an integer, found \(jsonTypeName(v))"
                }
            case Key.status:
                f.status = try text("status", &invalid, depth)
                // Old data says "REVIEWED"; skip the Unicode lower-casing when nothing changes.
                let needsLowercasing = arena.withUnsafeBytes { arena in
                    FeatureRecord.bytes(f.status, in: arena).contains {
                        ($0 >= UInt8(ascii: "A") && $0 <= UInt8(ascii: "Z")) || $0 >= 0x80
                    }
                }
                if needsLowercasing {
                    let lowered = arena.withUnsafeBytes { FeatureRecord.string(f.status, in: $0)! }.lowercased()
                    f.status = append(lowered.utf8)
                }
            default:
                // Every other declared field, by its kind; anything else is skipped.
                if try !declaredProperty(key, &f, &invalid, depth) { try skipValue(depth: depth + 1) }
            }
        } while try !endOfObject()
    }

    /// A property value that must be a number or null. `depth` is the enclosing object's.
    @inline(__always) mutating func double(
        _ name: StaticString, _ invalid: inout String?, _ depth: Int
    ) throws(ReadStop) -> Double? {
        let v = try nextNonWS()
        if v == UInt8(ascii: "-") || (v >= UInt8(ascii: "0") && v <= UInt8(ascii: "9")) {
            return double(try scanNumber())
        }
        try wrongType(v, name, "a number or null", &invalid, depth)
        return nil
    }

    /// A property value that must be an integer (or an integral number) or null.
    @inline(__always) mutating func integer(
        _ name: StaticString, _ invalid: inout String?, _ depth: Int
    ) throws(ReadStop) -> Int64? {
        let v = try nextNonWS()
        if v == UInt8(ascii: "-") || (v >= UInt8(ascii: "0") && v <= UInt8(ascii: "9")) {
            let n = try scanNumber()
            if let value = int64(n) { return value }
            if invalid == nil {
                invalid =
                    "properties.\(name): expected an integer or null, found "
                    + (n.isInteger ? "an integer out of range" : "a number with a fraction")
            }
            return nil
        }
        try wrongType(v, name, "an integer or null", &invalid, depth)
        return nil
    }

    /// A property value that must be a string or null, appended to `arena`.
    @inline(__always) mutating func text(
        _ name: StaticString, _ invalid: inout String?, _ depth: Int
    ) throws(ReadStop) -> TextSpan {
        let v = try nextNonWS()
        if v == UInt8(ascii: "\"") { return text(try scanString()) }
        try wrongType(v, name, "a string or null", &invalid, depth)
        return .null
    }

    /// Skips a property value that is null (fine) or of the wrong type (recorded in `invalid`).
    private mutating func wrongType(
        _ v: UInt8, _ name: StaticString, _ expected: String, _ invalid: inout String?, _ depth: Int
    ) throws(ReadStop) {
        try skipValue(depth: depth + 1)
        if v != UInt8(ascii: "n") && invalid == nil {
            invalid = "properties.\(name): expected \(expected), found \(jsonTypeName(v))"
        }
    }

    /// The `geometry` object (at its `{`): `coordinates` must be [lon, lat] or [lon, lat, depth],
    /// each a number or null.
    private mutating func geometry(_ f: inout FeatureRecord, _ invalid: inout String?, depth: Int) throws(ReadStop) {
        try enter(depth)
        i &+= 1
        var problem: String? = "geometry.coordinates: missing"
        if try nextNonWS() == UInt8(ascii: "}") {
            i &+= 1
        } else {
            repeat {
                guard try key() == Key.coordinates else { try skipValue(depth: depth + 1); continue }
                f.lon = nil; f.lat = nil; f.depth = nil
                problem = "geometry.coordinates: expected an array of 2 or 3 numbers"
                guard try nextNonWS() == UInt8(ascii: "[") else { try skipValue(depth: depth + 1); continue }
                try enter(depth + 1)
                i &+= 1
                var count = 0
                var allNumbers = true
                if try nextNonWS() == UInt8(ascii: "]") {
                    i &+= 1
                } else {
                    repeat {
                        let v = try nextNonWS()
                        var value: Double?
                        if v == UInt8(ascii: "-") || (v >= UInt8(ascii: "0") && v <= UInt8(ascii: "9")) {
                            value = double(try scanNumber())
                        } else {
                            try skipValue(depth: depth + 2)
                            if v != UInt8(ascii: "n") { allNumbers = false }
                        }
                        switch count {
                        case 0: f.lon = value
                        case 1: f.lat = value
                        case 2: f.depth = value
                        default: break
                        }
                        count += 1
                    } while try !endOfArray()
                }
                problem = allNumbers && (count == 2 || count == 3) ? nil : problem
            } while try !endOfObject()
        }
        if let problem {
            f.lon = nil; f.lat = nil; f.depth = nil
            if invalid == nil { invalid = problem }
        }
    }

    /// The top-level `metadata` value (at `i`): known fields of the right type, others ignored.
    /// Of a repeated field the last one wins, null or of the wrong type too (then it is nil).
    mutating func metadata(depth: Int) throws(ReadStop) -> FeedMetadata {
        var m = FeedMetadata()
        guard try nextNonWS() == UInt8(ascii: "{") else {
            try skipValue(depth: depth)
            return m
        }
        try enter(depth)
        i &+= 1
        if try nextNonWS() == UInt8(ascii: "}") { i &+= 1; return m }
        repeat {
            let k = try key()
            let v = try nextNonWS()
            if v == UInt8(ascii: "\"") && (k == Key.url || k == Key.title || k == Key.api) {
                let s = string(try scanString())
                switch k {
                case Key.url: m.url = s
                case Key.title: m.title = s
                default: m.api = s
                }
            } else if (v == UInt8(ascii: "-") || (v >= UInt8(ascii: "0") && v <= UInt8(ascii: "9")))
                && (k == Key.generated || k == Key.status || k == Key.count)
            {
                let n = int64(try scanNumber())
                switch k {
                case Key.generated: m.generated = n
                case Key.status: m.status = n.flatMap { Int(exactly: $0) }
                default: m.count = n.flatMap { Int(exactly: $0) }
                }
            } else {
                try skipValue(depth: depth + 1)
                switch k {
                case Key.url: m.url = nil
                case Key.title: m.title = nil
                case Key.api: m.api = nil
                case Key.generated: m.generated = nil
                case Key.status: m.status = nil
                case Key.count: m.count = nil
                default: break
                }
            }
        } while try !endOfObject()
        return m
    }
}

extension JSONReader {
    /// Validates one element of `features` (at `i`, after whitespace) without decoding it, and
    /// reads what finding its stored row takes: the `id` (when a non-empty string; the last one
    /// if repeated, as `feature` decodes it) and whether `properties.ids` lists other ids.
    mutating func featureIdentity(depth: Int) throws(ReadStop) -> (id: String?, hasAliases: Bool) {
        guard try nextNonWS() == UInt8(ascii: "{") else {
            try skipValue(depth: depth)
            return (nil, false)
        }
        try enter(depth)
        i &+= 1
        var id: String?
        var ids: (start: Int, end: Int, escaped: Bool)?
        if try nextNonWS() == UInt8(ascii: "}") {
            i &+= 1
            return (nil, false)
        }
        repeat {
            switch try key() {
            case Key.id:
                id = nil
                if try nextNonWS() == UInt8(ascii: "\"") {
                    let s = try scanString()
                    if s.end > s.start { id = string(s) }
                } else {
                    try skipValue(depth: depth + 1)
                }
            case Key.properties:
                ids = nil
                guard try nextNonWS() == UInt8(ascii: "{") else {
                    try skipValue(depth: depth + 1)
                    continue
                }
                try enter(depth + 1)
                i &+= 1
                if try nextNonWS() == UInt8(ascii: "}") {
                    i &+= 1
                    continue
                }
                repeat {
                    guard try key() == Key.ids else {
                        try skipValue(depth: depth + 2)
                        continue
                    }
                    // Anything but a string (null) is no ids, as `feature` decodes it.
                    guard try nextNonWS() == UInt8(ascii: "\"") else {
                        try skipValue(depth: depth + 2)
                        ids = nil
                        continue
                    }
                    ids = try scanString()
                } while try !endOfObject()
            default:
                try skipValue(depth: depth + 1)
            }
        } while try !endOfObject()
        // At the end: `id` usually follows `properties`.
        guard let ids, let id else { return (id, false) }
        let hasAliases =
            ids.escaped
            ? FeedFeature.idsListOthers(string(ids), id: id)
            : id.utf8.withContiguousStorageIfAvailable {
                FeedFeature.idsListOthers(
                    UnsafeRawBufferPointer(start: p + ids.start, count: ids.end - ids.start),
                    id: UnsafeRawBufferPointer($0))
            } ?? FeedFeature.idsListOthers(string(ids), id: id)
        return (id, hasAliases)
    }
}

extension FeatureRecord {
    /// Back to no properties (the geometry's fields stay): a repeated `properties` replaces the
    /// earlier one.
    mutating func removeProperties() {
        let (lon, lat, depth) = (self.lon, self.lat, self.depth)
        self = FeatureRecord()
        (self.lon, self.lat, self.depth) = (lon, lat, depth)
    }
}
