import CLibXML2
import Foundation
import QuakeModel

/// What libxml2 holds as ``QuakeMLReader``'s SAX2 callbacks' opaque `ctx`: an unretained
/// `Unmanaged` reference to this final class (the reader owns both it and the parser context,
/// and frees the context first), which owns the parse state. The state lives behind a pointer of
/// its own so that the callbacks mutate it without the runtime's exclusivity checks on a class's
/// stored properties (a seventh of the reader's time when it was the class's).
final class QuakeMLHandler {
    let state: UnsafeMutablePointer<QuakeMLParseState>

    init(source: String) {
        state = .allocate(capacity: 1)
        state.initialize(to: QuakeMLParseState(source: source))
    }

    deinit {
        state.pointee.text.deallocate()
        state.deinitialize(count: 1)
        state.deallocate()
    }
}

/// The state behind ``QuakeMLReader``'s libxml2 SAX2 callbacks: the element path, the current
/// `<event>`, the text of the leaf being read, and the items, problems and failure made during
/// one `xmlParseChunk`. It runs on the thread that called `consume`; nothing in it throws, so no
/// Swift error ever unwinds through libxml2: a failure is recorded, the callbacks do nothing
/// more, and the reader stops the parser when `xmlParseChunk` returns.
///
/// Names are matched as bytes: the local name against the dozen-odd element names read, the
/// namespace URI against QuakeML's (BED 1.2, QuakeML 1.2, QuakeML 1.0, their real-time variants,
/// or none); elements of any other namespace (`ingv:`, `iris:`, `catalog:`, `anss:`) are skipped
/// with everything inside them, and unknown QuakeML elements (a stray `<script/>`, picks,
/// amplitudes) are never read. Text is kept only inside the leaves whose values are read, cut at
/// ``maxText`` bytes, trimmed over its bytes; a `String` is made only for a value kept. An event
/// is an `event` child of an `eventParameters`.
struct QuakeMLParseState {
    static let namespaces: [StaticString] = [
        "http://quakeml.org/xmlns/bed/1.2", "http://quakeml.org/xmlns/quakeml/1.2",
        "http://quakeml.org/xmlns/quakeml/1.0", "http://quakeml.org/xmlns/bed-rt/1.2",
        "http://quakeml.org/xmlns/quakeml-rt/1.2",
    ]
    static let maxText = 4096

    /// The element names read, as codes.
    enum Name: UInt8 {
        case other, quakeml, eventParameters, event, origin, magnitude, description, creationInfo, type, text
        case preferredOriginID, preferredMagnitudeID, evaluationMode, evaluationStatus, time, latitude, longitude
        case depth, mag, value, agencyID, agencyURI, creationTime, modificationTime, author
    }

    /// Whose creationInfo a value is.
    enum Owner: UInt8 { case event, origin, magnitude }
    enum InfoField: UInt8 { case agencyID, agencyURI, creationTime, modificationTime, author }

    /// Where the text of an element goes when it ends.
    enum Target: Equatable {
        case none
        case eventType, preferredOrigin, preferredMagnitude, descriptionType, descriptionText
        case originMode, originStatus, magnitudeType
        case originTime, originLatitude, originLongitude, originDepth, magnitudeValue
        case info(Owner, InfoField)
    }

    struct Entry {
        var name: Name
        var target: Target
        /// The local name, interned in the parser context's dictionary (valid while it lives):
        /// read only for an error's element path.
        var localname: UnsafePointer<UInt8>
    }

    let source: String
    /// The parser context (owned by the reader), for line and column numbers.
    var context: xmlParserCtxtPtr?

    private var stack: [Entry] = []
    private var foreignDepth = 0
    private(set) var rootSeen = false
    private var version10 = false
    private var geonet = false
    private var eventStart: Int?
    private var event = QuakeMLEvent()
    private var currentDescription: (type: String?, text: String?)?
    private var keepOrigin = false
    private var keepMagnitude = false
    /// The text of the current leaf: at most `maxText` bytes.
    /// Freed by ``QuakeMLHandler``.
    let text = UnsafeMutablePointer<UInt8>.allocate(capacity: QuakeMLParseState.maxText)
    private var textCount = 0
    /// The last namespace URI checked, and whether it is QuakeML's (libxml2 interns them).
    private var lastURI: UnsafePointer<UInt8>?
    private var lastURIAllowed = false

    /// Made by the current `xmlParseChunk`, taken by the reader after it.
    var items: [SourceItem] = []
    var newProblems: [SourceProblem] = []
    private(set) var failure: SourceError?
    /// Whether `failure` is set (checked by every callback: cheaper than the optional).
    private(set) var failed = false

    init(source: String) {
        self.source = source
    }

    // MARK: the callbacks' work

    mutating func startElement(
        _ localname: UnsafePointer<UInt8>, _ prefix: UnsafePointer<UInt8>?, _ uri: UnsafePointer<UInt8>?,
        _ attributeCount: Int,
        _ attributes: UnsafeMutablePointer<UnsafePointer<UInt8>?>?
    ) {
        if failed { return }
        if foreignDepth > 0 {
            foreignDepth += 1
            return
        }
        if !rootSeen {
            rootSeen = true
            if equalsLowercased(localname, "html") {
                return fail(.htmlPage, "the service answered with an HTML page, not QuakeML: check the URL")
            }
            guard Self.name(localname) == .quakeml, allowed(uri) else {
                let namespace = uri.map { String(cString: $0) } ?? ""
                return fail(
                    .notQuakeML,
                    "the root element is <\(qualifiedName(prefix, localname))> in namespace \"\(namespace)\", not QuakeML's "
                        + "<quakeml>: check that the URL asks for format=xml (QuakeML)")
            }
            version10 = uri.map { hasSuffix($0, "/quakeml/1.0") } ?? false
        } else if !allowed(uri) {
            foreignDepth = 1
            return
        }
        let name = Self.name(localname)
        textCount = 0
        guard let start = eventStart else {
            if name == .event, stack.last?.name == .eventParameters {
                eventStart = stack.count
                event.reset()
                var publicID: [UInt8]?
                Self.forEachAttribute(attributeCount, attributes) { name, prefixed, value in
                    if !prefixed && Self.equals(name, "publicID") { publicID = decodeAmpersands(value) }
                    if prefixed && Self.equals(name, "eventsource") { event.catalogSource = attributeString(value) }
                    if prefixed && Self.equals(name, "eventid") { event.catalogID = attributeString(value) }
                }
                event.line = line()
                if let publicID {
                    event.publicID = publicID
                    if publicID.starts(with: Self.geonetPrefix) { geonet = true }
                }
            } else if name == .eventParameters {
                Self.forEachAttribute(attributeCount, attributes) { name, prefixed, value in
                    if !prefixed && Self.equals(name, "publicID") && value.starts(with: Self.geonetPrefix) {
                        geonet = true
                    }
                }
            }
            stack.append(Entry(name: name, target: .none, localname: localname))
            return
        }
        var target = Target.none
        switch stack.count - start {
        case 1:
            switch name {
            case .origin:
                keepOrigin = event.origins.count < QuakeMLEvent.maxKept
                if keepOrigin {
                    event.origins.append(.init(publicID: Self.publicIDAttribute(attributeCount, attributes)))
                } else {
                    event.dropped = true
                }
            case .magnitude:
                keepMagnitude = event.magnitudes.count < QuakeMLEvent.maxKept
                if keepMagnitude {
                    event.magnitudes.append(.init(publicID: Self.publicIDAttribute(attributeCount, attributes)))
                } else {
                    event.dropped = true
                }
            case .description: currentDescription = (nil, nil)
            case .type: target = .eventType
            case .preferredOriginID: target = .preferredOrigin
            case .preferredMagnitudeID: target = .preferredMagnitude
            default: break
            }
        case 2:
            switch stack[start + 1].name {
            case .creationInfo: target = Self.info(.event, name)
            case .description:
                if name == .type { target = .descriptionType }
                if name == .text { target = .descriptionText }
            case .origin where keepOrigin:
                if name == .evaluationMode { target = .originMode }
                if name == .evaluationStatus { target = .originStatus }
            case .magnitude where keepMagnitude:
                if name == .type { target = .magnitudeType }
            default: break
            }
        case 3:
            let middle = stack[start + 2].name
            switch stack[start + 1].name {
            case .origin where keepOrigin:
                if middle == .creationInfo {
                    target = Self.info(.origin, name)
                } else if name == .value {
                    switch middle {
                    case .time: target = .originTime
                    case .latitude: target = .originLatitude
                    case .longitude: target = .originLongitude
                    case .depth: target = .originDepth
                    default: break
                    }
                }
            case .magnitude where keepMagnitude:
                if middle == .creationInfo { target = Self.info(.magnitude, name) }
                if middle == .mag && name == .value { target = .magnitudeValue }
            default: break
            }
        default: break
        }
        stack.append(Entry(name: name, target: target, localname: localname))
    }

    mutating func characters(_ bytes: UnsafePointer<UInt8>, _ count: Int) {
        guard !failed, foreignDepth == 0, let top = stack.last, top.target != .none else { return }
        let n = min(count, Self.maxText - textCount)
        guard n > 0 else { return }
        (text + textCount).update(from: bytes, count: n)
        textCount += n
    }

    mutating func endElement() {
        if failed { return }
        if foreignDepth > 0 {
            foreignDepth -= 1
            return
        }
        guard let top = stack.popLast() else { return }
        defer { textCount = 0 }
        guard let start = eventStart else { return }
        let level = stack.count - start
        if level == 0 {
            eventStart = nil
            finishEvent()
            return
        }
        if level == 1 && top.name == .description {
            if let currentDescription, event.descriptions.count < 16 { event.descriptions.append(currentDescription) }
            currentDescription = nil
        }
        if top.target == .none { return }
        let value = self.value()
        switch top.target {
        case .none: break
        case .eventType: event.type = value
        case .preferredOrigin: event.preferredOriginID = value
        case .preferredMagnitude: event.preferredMagnitudeID = value
        case .descriptionType: currentDescription?.type = value
        case .descriptionText: currentDescription?.text = value
        case .originMode: event.origins[event.origins.count - 1].evaluationMode = value
        case .originStatus: event.origins[event.origins.count - 1].evaluationStatus = value
        case .magnitudeType: event.magnitudes[event.magnitudes.count - 1].type = value
        case .originTime: event.origins[event.origins.count - 1].time = value
        case .originLatitude: event.origins[event.origins.count - 1].latitude = value
        case .originLongitude: event.origins[event.origins.count - 1].longitude = value
        case .originDepth: event.origins[event.origins.count - 1].depth = value
        case .magnitudeValue: event.magnitudes[event.magnitudes.count - 1].value = value
        case .info(let owner, let field):
            switch owner {
            case .event: Self.set(&event.creationInfo, field, value)
            case .origin: Self.set(&event.origins[event.origins.count - 1].creationInfo, field, value)
            case .magnitude: Self.set(&event.magnitudes[event.magnitudes.count - 1].creationInfo, field, value)
            }
        }
    }

    /// libxml2's structured error callback. Its warnings (codes of `xmlerror.h`) and namespace
    /// errors (200 and up, but for I/O and encoding errors) leave the document readable; every
    /// other error rejects it.
    mutating func error(_ error: UnsafePointer<xmlError>) {
        let code = Int(error.pointee.code)
        let domain = UInt32(bitPattern: error.pointee.domain)
        let inputError = domain == XML_FROM_IO.rawValue || domain == XML_FROM_I18N.rawValue
        if error.pointee.level == XML_ERR_WARNING || Self.harmless.contains(code) || (code >= 200 && !inputError) {
            return
        }
        var detail = error.pointee.message.map { String(cString: $0) } ?? ""
        detail = String(
            detail.split(whereSeparator: { $0 == "\n" || $0 == "\r" }).joined(separator: "; ")
                .trimmingCharacters(in: .whitespaces))
        if let first = detail.first, first.isUppercase, detail.dropFirst().first?.isLowercase == true {
            detail = first.lowercased() + detail.dropFirst()
        }
        // What the code means, where libxml2's own words (`document is empty` for text before
        // the root) say something else.
        if let meaning = Self.message(code), !detail.lowercased().hasPrefix(meaning) {
            detail = detail.isEmpty ? meaning : "\(meaning): \(detail)"
        }
        fail(
            .malformedXML,
            "not well-formed XML (libxml2 error \(code): \(detail)): the answer is not QuakeML or was cut short")
    }

    /// At the end of the document: one without a root, or cut inside it, that libxml2 let through.
    mutating func finishDocument() {
        if failure != nil { return }
        if !rootSeen {
            fail(.malformedXML, "no root element: the answer is not XML")
        } else if !stack.isEmpty || foreignDepth > 0 {
            let last = stack.last.map { String(cString: $0.localname) } ?? "?"
            fail(.malformedXML, "the document ends inside <\(last)>: it was cut short")
        }
    }

    /// Records the first failure; the callbacks do nothing after it.
    mutating func fail(_ kind: SourceError.Kind, _ message: String) {
        guard !failed else { return }
        failed = true
        let path = stack.isEmpty ? nil : stack.map { String(cString: $0.localname) }.joined(separator: "/")
        failure = SourceError(kind, message, source: source, line: line(), column: column(), path: path)
    }

    // MARK: helpers

    mutating private func finishEvent() {
        let id = event.agencyID()
        if event.dropped {
            newProblems.append(
                SourceProblem(
                    .tooLarge, "the event has more than \(QuakeMLEvent.maxKept) origins or magnitudes",
                    source: source, id: id, line: event.line, path: "event"))
        } else {
            switch event.item(source: source, id: id, depthInKilometres: version10 && geonet) {
            case .success(let item): items.append(item)
            case .failure(let problem): newProblems.append(problem)
            }
        }
        event.reset()
    }

    /// The current leaf's text, trimmed: ASCII whitespace over the bytes; when a non-ASCII
    /// character is left at either end, Foundation's `whitespacesAndNewlines` (rare).
    private func value() -> String {
        var start = 0
        var end = textCount
        while start < end, isXMLSpace(text[start]) { start += 1 }
        while end > start, isXMLSpace(text[end - 1]) { end -= 1 }
        let string = String(decoding: UnsafeBufferPointer(start: text + start, count: end - start), as: UTF8.self)
        if end > start && (text[start] >= 0x80 || text[end - 1] >= 0x80) {
            return string.trimmingCharacters(in: .whitespacesAndNewlines)
        }
        return string
    }

    private func line() -> Int? {
        guard let context else { return nil }
        return Int(xmlSAX2GetLineNumber(UnsafeMutableRawPointer(context)))
    }

    private func column() -> Int? {
        guard let context else { return nil }
        return Int(xmlSAX2GetColumnNumber(UnsafeMutableRawPointer(context)))
    }

    /// An element's qualified name, for a message.
    private func qualifiedName(_ prefix: UnsafePointer<UInt8>?, _ localname: UnsafePointer<UInt8>) -> String {
        (prefix.map { String(cString: $0) + ":" } ?? "") + String(cString: localname)
    }

    mutating private func allowed(_ uri: UnsafePointer<UInt8>?) -> Bool {
        guard let uri else { return true }
        if uri == lastURI { return lastURIAllowed }
        lastURI = uri
        lastURIAllowed = uri.pointee == 0 || Self.namespaces.contains { Self.equals(uri, $0) }
        return lastURIAllowed
    }

    private static func forEachAttribute(
        _ count: Int, _ attributes: UnsafeMutablePointer<UnsafePointer<UInt8>?>?,
        _ body: (_ name: UnsafePointer<UInt8>, _ prefixed: Bool, _ value: UnsafeBufferPointer<UInt8>) -> Void
    ) {
        guard let attributes else { return }
        for i in 0..<count {
            // localname, prefix, URI, value, end
            guard let name = attributes[5 * i], let value = attributes[5 * i + 3], let end = attributes[5 * i + 4]
            else { continue }
            body(name, attributes[5 * i + 1] != nil, UnsafeBufferPointer(start: value, count: end - value))
        }
    }

    private static func publicIDAttribute(_ count: Int, _ attributes: UnsafeMutablePointer<UnsafePointer<UInt8>?>?) -> String? {
        var publicID: String?
        Self.forEachAttribute(count, attributes) { name, prefixed, value in
            if !prefixed && Self.equals(name, "publicID") { publicID = attributeString(value) }
        }
        return publicID
    }

    static let geonetPrefix = Array("smi:geonet.org.nz/".utf8)

    static func name(_ p: UnsafePointer<UInt8>) -> Name {
        let n = strlen(p)
        func eq(_ s: StaticString) -> Bool { s.utf8CodeUnitCount == n && memcmp(p, s.utf8Start, n) == 0 }
        switch n {
        case 3: return eq("mag") ? .mag : .other
        case 4: return eq("type") ? .type : eq("text") ? .text : eq("time") ? .time : .other
        case 5: return eq("value") ? .value : eq("event") ? .event : eq("depth") ? .depth : .other
        case 6: return eq("origin") ? .origin : eq("author") ? .author : .other
        case 7: return eq("quakeml") ? .quakeml : .other
        case 8: return eq("latitude") ? .latitude : eq("agencyID") ? .agencyID : .other
        case 9: return eq("longitude") ? .longitude : eq("magnitude") ? .magnitude : eq("agencyURI") ? .agencyURI : .other
        case 11: return eq("description") ? .description : .other
        case 12: return eq("creationInfo") ? .creationInfo : eq("creationTime") ? .creationTime : .other
        case 14: return eq("evaluationMode") ? .evaluationMode : .other
        case 15: return eq("eventParameters") ? .eventParameters : .other
        case 16:
            return eq("evaluationStatus") ? .evaluationStatus : eq("modificationTime") ? .modificationTime : .other
        case 17: return eq("preferredOriginID") ? .preferredOriginID : .other
        case 20: return eq("preferredMagnitudeID") ? .preferredMagnitudeID : .other
        default: return .other
        }
    }

    static func equals(_ p: UnsafePointer<UInt8>, _ s: StaticString) -> Bool {
        strlen(p) == s.utf8CodeUnitCount && memcmp(p, s.utf8Start, s.utf8CodeUnitCount) == 0
    }

    static func info(_ owner: Owner, _ name: Name) -> Target {
        switch name {
        case .agencyID: .info(owner, .agencyID)
        case .agencyURI: .info(owner, .agencyURI)
        case .creationTime: .info(owner, .creationTime)
        case .modificationTime: .info(owner, .modificationTime)
        case .author: .info(owner, .author)
        default: .none
        }
    }

    static func set(_ info: inout QuakeMLEvent.CreationInfo, _ field: InfoField, _ value: String) {
        switch field {
        case .agencyID: info.agencyID = value
        case .agencyURI: info.agencyURI = value
        case .creationTime: info.time = value
        case .modificationTime: info.modificationTime = value
        case .author: info.author = value
        }
    }

    /// libxml2's warnings and errors (codes of `xmlerror.h`) that leave the document readable.
    static let harmless: Set<Int> = [27, 93, 97, 98, 99, 100, 102, 106, 107]

    /// What an error code means, in words that hold whatever libxml2's message says.
    static func message(_ code: Int) -> String? {
        switch code {
        case 3, 4: "start tag expected, '<' not found"
        case 5: "extra content at the end of the document, or premature end of data"
        case 9: "invalid character"
        case 23: "entity reference without ';'"
        case 26: "undeclared entity"
        case 31, 32: "unknown or unsupported encoding"
        case 38: "'<' in an attribute value"
        case 39, 40, 41, 43, 44: "attribute value not quoted or not finished"
        case 42: "attribute given twice"
        case 45: "comment not finished"
        case 63: "CDATA section not finished"
        case 65: "space required"
        case 68: "name required"
        case 73: "'>' required"
        case 76: "opening and ending tag mismatch"
        case 77: "premature end of data in tag"
        case 81: "bytes that are not in the declared encoding"
        case 85: "elements not well balanced"
        case 86: "extra content after the root element"
        case 89: "entity reference loop"
        default: nil
        }
    }
}

private func isXMLSpace(_ c: UInt8) -> Bool { c == 0x20 || c == 0x0A || c == 0x09 || c == 0x0D }

private func equalsLowercased(_ p: UnsafePointer<UInt8>, _ s: StaticString) -> Bool {
    let n = strlen(p)
    guard n == s.utf8CodeUnitCount else { return false }
    for i in 0..<n {
        let c = p[i]
        if (c >= 0x41 && c <= 0x5A ? c + 0x20 : c) != s.utf8Start[i] { return false }
    }
    return true
}

private func hasSuffix(_ p: UnsafePointer<UInt8>, _ s: StaticString) -> Bool {
    let n = strlen(p)
    return n >= s.utf8CodeUnitCount && memcmp(p + (n - s.utf8CodeUnitCount), s.utf8Start, s.utf8CodeUnitCount) == 0
}

/// An attribute value as libxml2 hands it without entity substitution: `&` comes as `&#38;`
/// (the other predefined entities come replaced).
func attributeString(_ value: UnsafeBufferPointer<UInt8>) -> String {
    String(decoding: decodeAmpersands(value), as: UTF8.self)
}

func decodeAmpersands(_ value: UnsafeBufferPointer<UInt8>) -> [UInt8] {
    collapsing(Array("&#38;".utf8), toAmpersandIn: value)
}

/// `bytes` with every `escape` (an escaped `&`: `&#38;` as libxml2 hands attribute values over
/// without entity substitution, `&amp;` left in a double-escaped id) made a plain `&` again.
func collapsing<Bytes: RandomAccessCollection<UInt8>>(_ escape: [UInt8], toAmpersandIn bytes: Bytes) -> [UInt8]
where Bytes.Index == Int {
    guard bytes.contains(0x26) else { return Array(bytes) }
    var out: [UInt8] = []
    out.reserveCapacity(bytes.count)
    var i = bytes.startIndex
    while i < bytes.endIndex {
        if bytes[i] == 0x26, bytes.endIndex - i >= escape.count, bytes[i..<i + escape.count].elementsEqual(escape) {
            out.append(0x26)
            i += escape.count
        } else {
            out.append(bytes[i])
            i += 1
        }
    }
    return out
}
