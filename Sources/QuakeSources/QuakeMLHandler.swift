import Foundation
import QuakeModel

#if canImport(FoundationXML)
import FoundationXML
#endif

/// The XMLParser delegate behind ``QuakeMLReader``: runs on the reader's parser thread only,
/// keeps the element path and the current `<event>`, and hands each finished event's item (or
/// problem) to the ``QuakeMLChannel``.
///
/// Elements are matched by local name in QuakeML's namespaces (BED 1.2, QuakeML 1.2, QuakeML
/// 1.0, their real-time variants, or none); elements of any other namespace (`ingv:`, `iris:`,
/// `catalog:`, `anss:`) are skipped with everything inside them, and unknown QuakeML elements
/// (a stray `<script/>`, picks, amplitudes) are never read. An event is an `event` child of an
/// `eventParameters`.
final class QuakeMLHandler: NSObject, XMLParserDelegate {
    static let namespaces: Set<String> = [
        "", "http://quakeml.org/xmlns/bed/1.2", "http://quakeml.org/xmlns/quakeml/1.2",
        "http://quakeml.org/xmlns/quakeml/1.0", "http://quakeml.org/xmlns/bed-rt/1.2",
        "http://quakeml.org/xmlns/quakeml-rt/1.2",
    ]
    static let maxText = 4096

    private let source: String
    private let channel: QuakeMLChannel
    private var stack: [String] = []
    private var foreignDepth = 0
    private(set) var rootSeen = false
    private var version10 = false
    private var geonet = false
    private var eventStart: Int?
    private var event = QuakeMLEvent()
    private var currentDescription: (type: String?, text: String?)?
    private var keepOrigin = false
    private var keepMagnitude = false
    private var text = ""
    private(set) var failed = false

    init(source: String, channel: QuakeMLChannel) {
        self.source = source
        self.channel = channel
    }

    func fail(_ parser: XMLParser, _ kind: SourceError.Kind, _ message: String) {
        guard !failed else { return }
        failed = true
        let path = stack.isEmpty ? nil : stack.joined(separator: "/")
        channel.fail(
            SourceError(
                kind, message, source: source, line: parser.lineNumber, column: parser.columnNumber, path: path))
        parser.abortParsing()
    }

    func parser(
        _ parser: XMLParser, didStartElement name: String, namespaceURI: String?, qualifiedName: String?,
        attributes: [String: String]
    ) {
        if failed { return }
        if foreignDepth > 0 {
            foreignDepth += 1
            return
        }
        let namespace = namespaceURI ?? ""
        if !rootSeen {
            rootSeen = true
            if name.lowercased() == "html" {
                return fail(parser, .htmlPage, "the service answered with an HTML page, not QuakeML: check the URL")
            }
            guard name == "quakeml", Self.namespaces.contains(namespace) else {
                return fail(
                    parser, .notQuakeML,
                    "the root element is <\(qualifiedName ?? name)> in namespace \"\(namespace)\", not QuakeML's "
                        + "<quakeml>: check that the URL asks for format=xml (QuakeML)")
            }
            version10 = namespace.hasSuffix("/quakeml/1.0")
        } else if !Self.namespaces.contains(namespace) {
            foreignDepth = 1
            return
        }
        stack.append(name)
        text = ""
        guard let start = eventStart else {
            let publicID = attributes["publicID"]
            if name == "event", stack.count >= 2, stack[stack.count - 2] == "eventParameters" {
                eventStart = stack.count - 1
                event = QuakeMLEvent()
                event.publicID = publicID
                event.line = parser.lineNumber
                for (key, value) in attributes {
                    if key.hasSuffix(":eventsource") { event.catalogSource = value }
                    if key.hasSuffix(":eventid") { event.catalogID = value }
                }
                if publicID?.hasPrefix("smi:geonet.org.nz/") == true { geonet = true }
            } else if name == "eventParameters", publicID?.hasPrefix("smi:geonet.org.nz/") == true {
                geonet = true
            }
            return
        }
        guard stack.count - 1 - start == 1 else { return }
        switch name {
        case "origin":
            keepOrigin = event.origins.count < QuakeMLEvent.maxKept
            if keepOrigin { event.origins.append(.init(publicID: attributes["publicID"])) } else { event.dropped = true }
        case "magnitude":
            keepMagnitude = event.magnitudes.count < QuakeMLEvent.maxKept
            if keepMagnitude {
                event.magnitudes.append(.init(publicID: attributes["publicID"]))
            } else {
                event.dropped = true
            }
        case "description": currentDescription = (nil, nil)
        default: break
        }
    }

    func parser(_ parser: XMLParser, foundCharacters string: String) {
        if failed || foreignDepth > 0 || eventStart == nil || text.utf8.count >= Self.maxText { return }
        text += string
    }

    func parser(_ parser: XMLParser, foundCDATA block: Data) {
        self.parser(parser, foundCharacters: String(decoding: block, as: UTF8.self))
    }

    func parser(_ parser: XMLParser, didEndElement name: String, namespaceURI: String?, qualifiedName: String?) {
        if failed { return }
        if foreignDepth > 0 {
            foreignDepth -= 1
            return
        }
        guard !stack.isEmpty else { return }
        defer {
            stack.removeLast()
            text = ""
        }
        guard let start = eventStart else { return }
        let value = text.trimmingCharacters(in: .whitespacesAndNewlines)
        switch stack.count - 1 - start {
        case 0:
            eventStart = nil
            finishEvent()
        case 1:
            switch name {
            case "type": event.type = value
            case "preferredOriginID": event.preferredOriginID = value
            case "preferredMagnitudeID": event.preferredMagnitudeID = value
            case "description":
                if let currentDescription, event.descriptions.count < 16 { event.descriptions.append(currentDescription) }
                currentDescription = nil
            default: break
            }
        case 2:
            switch stack[start + 1] {
            case "creationInfo": set(&event.creationInfo, name, value)
            case "description":
                if name == "type" { currentDescription?.type = value }
                if name == "text" { currentDescription?.text = value }
            case "origin" where keepOrigin:
                if name == "evaluationMode" { event.origins[event.origins.count - 1].evaluationMode = value }
                if name == "evaluationStatus" { event.origins[event.origins.count - 1].evaluationStatus = value }
            case "magnitude" where keepMagnitude:
                if name == "type" { event.magnitudes[event.magnitudes.count - 1].type = value }
            default: break
            }
        case 3:
            let middle = stack[start + 2]
            switch stack[start + 1] {
            case "origin" where keepOrigin:
                let last = event.origins.count - 1
                if middle == "creationInfo" { set(&event.origins[last].creationInfo, name, value) }
                guard name == "value" else { break }
                switch middle {
                case "time": event.origins[last].time = value
                case "latitude": event.origins[last].latitude = value
                case "longitude": event.origins[last].longitude = value
                case "depth": event.origins[last].depth = value
                default: break
                }
            case "magnitude" where keepMagnitude:
                let last = event.magnitudes.count - 1
                if middle == "creationInfo" { set(&event.magnitudes[last].creationInfo, name, value) }
                if middle == "mag" && name == "value" { event.magnitudes[last].value = value }
            default: break
            }
        default: break
        }
    }

    private func set(_ info: inout QuakeMLEvent.CreationInfo, _ name: String, _ value: String) {
        switch name {
        case "agencyID": info.agencyID = value
        case "agencyURI": info.agencyURI = value
        case "creationTime": info.time = value
        case "modificationTime": info.modificationTime = value
        case "author": info.author = value
        default: break
        }
    }

    private func finishEvent() {
        let id = QuakeMLEvent.agencyID(
            publicID: event.publicID, catalogSource: event.catalogSource, catalogID: event.catalogID)
        if event.dropped {
            channel.skip(
                SourceProblem(
                    .tooLarge, "the event has more than \(QuakeMLEvent.maxKept) origins or magnitudes",
                    source: source, id: id, line: event.line, path: "event"))
        } else {
            switch event.item(source: source, depthInKilometres: version10 && geonet) {
            case .success(let item): channel.emit(item)
            case .failure(let problem): channel.skip(problem)
            }
        }
        event = QuakeMLEvent()
    }

    /// libxml2's warnings (codes of `xmlerror.h`) and namespace errors (200 and up), which
    /// leave the document readable; every other error rejects it.
    static let harmless: Set<Int> = [27, 93, 97, 98, 99, 100, 102, 106, 107]

    func parser(_ parser: XMLParser, parseErrorOccurred error: any Error) {
        let code = (error as NSError).code
        if Self.harmless.contains(code) || code >= 200 { return }
        fail(
            parser, .malformedXML,
            "not well-formed XML (libxml2 error \(code): \(Self.message(code))): the answer is not QuakeML or was cut short")
    }

    /// At the end of the parse: a document without a root, or cut inside it, that libxml2 let
    /// through (it ignores an answer shorter than 4 bytes).
    func finish(_ parser: XMLParser) {
        if failed { return }
        if !rootSeen {
            fail(parser, .malformedXML, "no root element: the answer is not XML")
        } else if !stack.isEmpty || foreignDepth > 0 {
            fail(parser, .malformedXML, "the document ends inside <\(stack.last ?? "?")>: it was cut short")
        }
    }

    static func message(_ code: Int) -> String {
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
        default: "see libxml2's xmlerror.h"
        }
    }
}
