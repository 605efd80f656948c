/// History's `{"contributors":[...]}` value written straight from the store's canonical text
/// (``QuakeModel/Contributor/json(_:)``: keys in the interface's order, nil members left out),
/// without decoding it into `Contributor` values and writing them again: each object's members are
/// found as byte ranges and copied in the encoder's order (keys sorted).
///
/// Only for text the byte copy gives exactly what decoding and writing would (strings without
/// escapes, numbers whose text is the one a `Double`'s description gives, see
/// ``isShortestPlainReal(_:)``, each key once, the required ones present); anything else returns
/// false with `out` unchanged, and the caller takes the decoding path. A three-agency import
/// writes both values of every `contributors` change: the decoding was 6% of its time.
enum ContributorsTranscoder {
    /// The members in the encoder's order (sorted), with what each holds.
    private enum Kind { case text, real, integer, boolean }
    private static let members: [(name: [UInt8], kind: Kind, required: Bool)] = [
        (Array("agency".utf8), .text, false), (Array("depth".utf8), .real, false), (Array("id".utf8), .text, true),
        (Array("lat".utf8), .real, true), (Array("lon".utf8), .real, true), (Array("mag".utf8), .real, false),
        (Array("magType".utf8), .text, false), (Array("preferred".utf8), .boolean, true),
        (Array("source".utf8), .text, true), (Array("status".utf8), .text, false),
        (Array("time".utf8), .integer, true), (Array("updated".utf8), .integer, false),
    ]

    /// Appends `{"contributors":[...]}` for the canonical text `json`; false (and `out` as it was)
    /// when the text is not one the copy is exact for.
    static func write(_ json: String, to out: inout [UInt8]) -> Bool {
        var json = json
        let start = out.count
        let written = json.withUTF8 { bytes in transcode(bytes, to: &out) }
        if !written { out.removeSubrange(start...) }
        return written
    }

    private static func transcode(_ b: UnsafeBufferPointer<UInt8>, to out: inout [UInt8]) -> Bool {
        var i = 0
        let n = b.count
        func take(_ byte: UInt8) -> Bool {
            guard i < n, b[i] == byte else { return false }
            i += 1
            return true
        }
        guard take(UInt8(ascii: "[")) else { return false }
        out.append(contentsOf: #"{"contributors":["#.utf8)
        if take(UInt8(ascii: "]")) {
            guard i == n else { return false }
            out.append(contentsOf: "]}".utf8)
            return true
        }
        var ranges = [Range<Int>?](repeating: nil, count: members.count)
        var first = true
        repeat {
            guard take(UInt8(ascii: "{")) else { return false }
            for k in ranges.indices { ranges[k] = nil }
            repeat {
                // A key: no escapes (every member's name is plain).
                guard take(UInt8(ascii: "\"")) else { return false }
                let keyStart = i
                while i < n, b[i] != UInt8(ascii: "\""), b[i] != UInt8(ascii: "\\") { i += 1 }
                guard i < n, b[i] == UInt8(ascii: "\"") else { return false }
                let key = UnsafeBufferPointer(rebasing: b[keyStart..<i])
                i += 1
                guard take(UInt8(ascii: ":")),
                    let m = members.firstIndex(where: { $0.name.elementsEqual(key) }), ranges[m] == nil
                else { return false }
                let valueStart = i
                switch members[m].kind {
                case .text:
                    guard take(UInt8(ascii: "\"")) else { return false }
                    // No escapes and no control characters: what history writes as a plain string.
                    while i < n, b[i] != UInt8(ascii: "\""), b[i] != UInt8(ascii: "\\"), b[i] >= 0x20 { i += 1 }
                    guard take(UInt8(ascii: "\"")) else { return false }
                case .real, .integer:
                    while i < n, b[i] == UInt8(ascii: "-") || b[i] == UInt8(ascii: ".")
                        || (b[i] >= UInt8(ascii: "0") && b[i] <= UInt8(ascii: "9"))
                    {
                        i += 1
                    }
                    let token = UnsafeBufferPointer(rebasing: b[valueStart..<i])
                    let valid = members[m].kind == .integer ? isPlainInteger(token) : isShortestPlainReal(token)
                    guard valid else { return false }
                case .boolean:
                    if b[i...].starts(with: "true".utf8) {
                        i += 4
                    } else if b[i...].starts(with: "false".utf8) {
                        i += 5
                    } else {
                        return false
                    }
                }
                ranges[m] = valueStart..<i
            } while take(UInt8(ascii: ","))
            guard take(UInt8(ascii: "}")) else { return false }
            for (m, member) in members.enumerated() where member.required && ranges[m] == nil { return false }
            if !first { out.append(UInt8(ascii: ",")) }
            first = false
            var firstMember = true
            for (m, member) in members.enumerated() {
                guard let range = ranges[m] else { continue }
                out.append(contentsOf: (firstMember ? #"{""# : #",""#).utf8)
                firstMember = false
                out.append(contentsOf: member.name)
                out.append(contentsOf: #"":"#.utf8)
                out.append(contentsOf: UnsafeBufferPointer(rebasing: b[range]))
            }
            out.append(UInt8(ascii: "}"))
        } while take(UInt8(ascii: ","))
        guard take(UInt8(ascii: "]")), i == n else { return false }
        out.append(contentsOf: "]}".utf8)
        return true
    }

    /// `0|-?[1-9][0-9]{0,17}`: what `String(Int64)` writes, short enough to be one.
    static func isPlainInteger(_ t: UnsafeBufferPointer<UInt8>) -> Bool {
        var digits = t[...]
        let negative = digits.first == UInt8(ascii: "-")
        if negative { digits = digits.dropFirst() }
        guard let lead = digits.first, digits.count <= 18,
            digits.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") })
        else { return false }
        return lead != UInt8(ascii: "0") || (digits.count == 1 && !negative)
    }

    /// Whether `t` is exactly the text history writes for the `Double` it denotes: that value's
    /// `description` without a trailing `.0`, written without an exponent. The grammar
    /// `-?(0|[1-9][0-9]*)(\.[0-9]*[1-9])?` first; then a text of at most 15 significant digits, an
    /// integral part of at most 15 digits and, below 1, at most three zeros after the point is
    /// that text (no shorter text denotes the same `Double`, so it is the shortest, the one
    /// `description` gives, and `description` writes such values without an exponent: 0.0001
    /// plainly, 0.00001 as `1e-05`). Any other (the store's texts of full-precision values, 16
    /// or 17 digits) is checked by converting it and writing it back.
    static func isShortestPlainReal(_ t: UnsafeBufferPointer<UInt8>) -> Bool {
        var rest = t[...]
        if rest.first == UInt8(ascii: "-") { rest = rest.dropFirst() }
        let isDigit = { (c: UInt8) in c >= UInt8(ascii: "0") && c <= UInt8(ascii: "9") }
        let integral = rest.prefix(while: isDigit)
        guard let lead = integral.first, lead != UInt8(ascii: "0") || integral.count == 1 else { return false }
        rest = rest.dropFirst(integral.count)
        var significant = lead == UInt8(ascii: "0") ? 0 : integral.count
        var zeros = 0
        if !rest.isEmpty {
            guard rest.first == UInt8(ascii: "."), rest.count >= 2 else { return false }
            let fraction = rest.dropFirst()
            guard fraction.allSatisfy(isDigit), fraction.last != UInt8(ascii: "0") else { return false }
            if significant == 0 {
                zeros = fraction.prefix(while: { $0 == UInt8(ascii: "0") }).count
                significant = fraction.count - zeros
            } else {
                significant += fraction.count
            }
        }
        if significant <= 15, integral.count <= 15, zeros <= 3 { return true }
        let text = String(decoding: t, as: UTF8.self)
        return Double(text).flatMap(HistoryRecorder.realText) == text
    }
}
