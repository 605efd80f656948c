import CLibXML2
import Foundation
import QuakeModel

/// Reads a QuakeML document (1.2, and the 1.0/1.0.1 that EMSC's and GeoNet's older services
/// send) as it arrives in chunks, and produces one ``SourceItem`` per `<event>`, in order.
///
/// A real XML parser reads it: libxml2's SAX2 push parser, driven directly on the caller's
/// thread (`xmlParseChunk` in ``consume(_:_:)``, callbacks on UTF-8 bytes, names matched as
/// bytes, strings made only for the values kept: see `QuakeMLHandler`). Network access and
/// entity substitution are off: a document's own entities are undeclared references, so an
/// entity-expansion bomb is an error, never expanded. libxml2 gets the document in pieces of
/// exactly ``pieceBytes`` at the same offsets however it is chunked (the result, errors
/// included, never depends on the chunking: libxml2 converts a non-UTF-8 encoding a whole push
/// at a time, and so would see a bad byte sooner or later); `consume` parses each piece it
/// completes and calls `body` with the events it completed, so an event comes out once the
/// piece it ends in is full, or at `finish`. Memory stays flat
/// whatever the document's size: only the current event is kept, and element texts are cut at
/// 4096 bytes. The parser context is made with the first non-blank byte (an empty answer makes
/// none) and freed with the reader.
///
/// What each event gives (the full rules are on `QuakeMLEvent.item` and `QuakeMLEvent.agencyID`):
/// - id: ComCat's `catalog:eventsource` + `catalog:eventid` when present (`us7000abcd`); else
///   the `publicID`'s `eventid=`/`evid=` query value (`...query?eventId=26359881` gives
///   `26359881`); else its last path segment (`smi:org.gfz-potsdam.de/geofon/gfz2021inzw` gives
///   `gfz2021inzw`, `smi:ISC/evid=7453151` gives `7453151`);
/// - the origin and magnitude `preferredOriginID`/`preferredMagnitudeID` name, else the first;
///   origin time, latitude, longitude, depth (metres in QuakeML 1.2 and 1.0, so divided by 1000;
///   GeoNet's QuakeML 1.0.1, ids under `smi:geonet.org.nz/`, wrote km and is taken as is);
///   magnitude value and type; the origin's evaluation mode and status (unknown text: nil);
/// - place: the description of type `region name`, `Flinn-Engdahl region` or `earthquake name`;
///   agency: `creationInfo/agencyID` of the origin, event or magnitude, else an `agencyURI`'s
///   tail, else the origin's `author`; updated: the latest `modificationTime` (else
///   `creationTime`) of those three;
/// - event type `not existing` or `deleted`: a ``SourceItem/retraction(source:id:updated:)``.
///
/// Threads: none of its own. `consume` and `finish` parse on the calling thread and return when
/// the chunk is parsed, as `FeedParser` does; calling them from a task is safe.
///
/// When `body` throws, its error propagates and the reader stays usable: the next call first
/// delivers the items not yet delivered and parses the rest of that chunk.
///
/// Errors: a ``SourceError`` rejects the whole answer (malformed or truncated XML, with
/// libxml2's message, line and column; an HTML page; a root other than `quakeml`); once thrown,
/// the reader keeps throwing it. An event that cannot be imported (no origin, impossible
/// coordinates, a bad time, no id) is skipped: ``skippedCount`` counts them and ``problems``
/// keeps the first ``SourceProblem/keptLimit``. An empty or all-blank answer (an FDSN service's
/// HTTP 204, "no events") yields no items and no error.
///
/// Not for concurrent use (not `Sendable`): one task feeds it. Dropping it unfinished frees its
/// libxml2 context.
public final class QuakeMLReader {
    /// The largest piece handed to libxml2 at once (and so the most a piece's items queue up).
    public static let pieceBytes = 64 * 1024

    public let source: String
    /// Events skipped so far, and the first ``SourceProblem/keptLimit`` of their problems.
    public private(set) var skippedCount = 0
    public private(set) var problems: [SourceProblem] = []
    /// Bytes consumed so far.
    public private(set) var bytesConsumed = 0

    /// The callbacks' state; libxml2 holds it unretained as the context's user data.
    private let handler: QuakeMLHandler
    /// libxml2's push parser context, made with the first non-blank byte; freed in deinit.
    private var context: xmlParserCtxtPtr?
    private var started = false
    private var finished = false
    private var head: [UInt8] = []
    /// The piece being filled: libxml2 gets the document in pieces of exactly `pieceBytes` (the
    /// last one shorter), whatever the chunks, so that chunking never changes what it reports.
    private var piece: [UInt8] = []
    private var failure: SourceError?
    private var queued: [SourceItem] = []
    private var queuedIndex = 0
    /// What was left of a chunk when `body` threw.
    private var leftover: ArraySlice<UInt8> = []
    private static let headBytes = 4096

    public init(source: String) {
        self.source = source
        self.handler = QuakeMLHandler(source: source)
    }

    deinit {
        guard let context else { return }
        // A document with a DTD that declares entities makes libxml2 keep them in a document of
        // its own (ctxt->myDoc, even with no tree built), which xmlFreeParserCtxt leaves alone.
        if let document = context.pointee.myDoc {
            context.pointee.myDoc = nil
            xmlFreeDoc(document)
        }
        xmlFreeParserCtxt(context)
    }

    /// Parses `chunk`; calls `body` for each event completed by it. Throws ``SourceError``, or
    /// what `body` throws (the reader then stays usable).
    public func consume(_ chunk: [UInt8], _ body: (SourceItem) throws -> Void) throws {
        if let failure { throw failure }
        precondition(!finished, "QuakeMLReader.consume after finish")
        bytesConsumed += chunk.count
        var rest = chunk[...]
        if !started {
            let n = min(rest.count, Self.headBytes - head.count)
            head += rest.prefix(n)
            rest = rest.dropFirst(n)
            guard try start(complete: false) else { return }
            leftover = rest
            try pushHead(body)
        } else {
            // Kept before anything can throw, so a throwing `body` never loses the chunk.
            leftover = leftover.isEmpty ? rest : ArraySlice(Array(leftover) + rest)
        }
        try flush(body)
        var pending = leftover
        leftover = []
        try feed(&pending, body)
    }

    /// Adds `rest` to the piece being filled, handing each full piece to the parser and
    /// delivering its items; when `body` throws, what is left of `rest` waits in `leftover` for
    /// the next call.
    private func feed(_ rest: inout ArraySlice<UInt8>, _ body: (SourceItem) throws -> Void) throws {
        while !rest.isEmpty {
            let n = min(rest.count, Self.pieceBytes - piece.count)
            piece += rest.prefix(n)
            rest = rest.dropFirst(n)
            guard piece.count == Self.pieceBytes else { continue }
            parse(piece[...], terminate: false)
            piece.removeAll(keepingCapacity: true)
            do {
                try deliver(body)
            } catch let error where !(error is SourceError) {
                leftover = rest
                throw error
            }
        }
        leftover = []
    }

    /// Ends the document: throws if it was cut short, calls `body` for the last events.
    public func finish(_ body: (SourceItem) throws -> Void) throws {
        if let failure { throw failure }
        try flush(body)
        var pending = leftover
        leftover = []
        try feed(&pending, body)
        guard !finished else { return }
        if !started {
            guard try start(complete: true) else {
                finished = true
                return
            }
            try pushHead(body)
        }
        finished = true
        parse(piece[...], terminate: false)
        piece = []
        parse([], terminate: true)
        handler.state.pointee.finishDocument()
        try deliver(body)
    }

    /// Makes the parser once the head says the answer is not blank and not HTML, and feeds it
    /// the head; false while it cannot tell yet (or, complete, when it is blank).
    private func start(complete: Bool) throws -> Bool {
        let blank = head.allSatisfy { [0x20, 0x09, 0x0A, 0x0D].contains($0) }
        if blank && (complete || head.count < Self.headBytes) { return false }
        switch looksLikeHTML(head, complete: complete || head.count >= Self.headBytes) {
        case nil: return false
        case true?:
            let error = SourceError(
                .htmlPage, "the service answered with an HTML page, not QuakeML: check the URL", source: source,
                line: 1, byteOffset: 0)
            failure = error
            throw error
        case false?: break
        }
        started = true
        _ = Self.libxml2Initialized
        var sax = xmlSAXHandler()
        sax.initialized = XML_SAX2_MAGIC
        sax.startElementNs = quakeMLStartElement
        sax.endElementNs = quakeMLEndElement
        sax.characters = quakeMLCharacters
        sax.cdataBlock = quakeMLCharacters
        sax.serror = quakeMLError
        let userData = Unmanaged.passUnretained(handler).toOpaque()
        guard let context = xmlCreatePushParserCtxt(&sax, userData, nil, 0, nil) else {
            let error = SourceError(.malformedXML, "libxml2 could not make a parser (out of memory)", source: source)
            failure = error
            throw error
        }
        // No network, no entity substitution, no DTD loading, libxml2's default size limits
        // (no XML_PARSE_HUGE); warnings and errors come to the structured handler only.
        xmlCtxtUseOptions(context, Int32(XML_PARSE_NONET.rawValue))
        self.context = context
        handler.state.pointee.context = context
        return true
    }

    /// xmlInitParser, once per process (it is not safe to race).
    private static let libxml2Initialized: Bool = {
        xmlInitParser()
        return true
    }()

    /// Starts the first piece with the head (at most `headBytes`, less than a piece).
    private func pushHead(_ body: (SourceItem) throws -> Void) throws {
        piece.reserveCapacity(Self.pieceBytes)
        piece += head
        head = []
    }

    private func parse(_ piece: ArraySlice<UInt8>, terminate: Bool) {
        guard let context, handler.state.pointee.failure == nil else { return }
        // The errors libxml2 raises without the parser context (an encoding's conversion
        // failing, "input conversion failed due to input error") go to the thread's structured
        // handler: ours while it parses (libxml2's, on stderr, otherwise), then the caller's again.
        let savedHandler = __xmlStructuredError().pointee
        let savedContext = __xmlStructuredErrorContext().pointee
        xmlSetStructuredErrorFunc(Unmanaged.passUnretained(handler).toOpaque(), quakeMLError)
        defer { xmlSetStructuredErrorFunc(savedContext, savedHandler) }
        piece.withUnsafeBufferPointer { buffer in
            buffer.withMemoryRebound(to: CChar.self) { chars in
                _ = xmlParseChunk(context, chars.baseAddress, Int32(chars.count), terminate ? 1 : 0)
            }
        }
        if handler.state.pointee.failure == nil && !terminate && context.pointee.instate == XML_PARSER_EOF {
            // Halted without a word through the handlers (libxml2 does so when it cannot push
            // the bytes into its input buffer).
            handler.state.pointee.fail(
                .malformedXML,
                "not well-formed XML (libxml2 stopped reading, error \(context.pointee.errNo)): the answer is not "
                    + "QuakeML or was cut short")
        }
        // Stopped here, outside libxml2's own frames, once a callback has recorded a failure.
        if handler.state.pointee.failure != nil { xmlStopParser(context) }
    }

    /// Calls `body` with the items a throwing `body` left undelivered.
    private func flush(_ body: (SourceItem) throws -> Void) throws {
        while queuedIndex < queued.count {
            let item = queued[queuedIndex]
            queuedIndex += 1
            try body(item)
        }
        queued.removeAll(keepingCapacity: true)
        queuedIndex = 0
    }

    /// Takes what the last piece made: counts its problems, throws its failure, delivers its items.
    private func deliver(_ body: (SourceItem) throws -> Void) throws {
        let newProblems = handler.state.pointee.newProblems
        if !newProblems.isEmpty {
            handler.state.pointee.newProblems.removeAll()
            skippedCount += newProblems.count
            problems += newProblems.prefix(max(0, SourceProblem.keptLimit - problems.count))
        }
        if let error = handler.state.pointee.failure {
            failure = error
            finished = true
            handler.state.pointee.items.removeAll()
            throw error
        }
        if queued.isEmpty {
            swap(&queued, &handler.state.pointee.items)
        } else {
            queued += handler.state.pointee.items
            handler.state.pointee.items.removeAll(keepingCapacity: true)
        }
        try flush(body)
    }
}

// libxml2's SAX2 callbacks: C function pointers, so free functions that find the handler in
// `ctx` (the context's user data). None of them can throw.

private func quakeMLStartElement(
    _ ctx: UnsafeMutableRawPointer?, _ localname: UnsafePointer<xmlChar>?, _ prefix: UnsafePointer<xmlChar>?,
    _ uri: UnsafePointer<xmlChar>?, _ namespaceCount: Int32, _ namespaces: UnsafeMutablePointer<UnsafePointer<xmlChar>?>?,
    _ attributeCount: Int32, _ defaultedCount: Int32, _ attributes: UnsafeMutablePointer<UnsafePointer<xmlChar>?>?
) {
    guard let ctx, let localname else { return }
    Unmanaged<QuakeMLHandler>.fromOpaque(ctx)._withUnsafeGuaranteedRef {
        $0.state.pointee.startElement(localname, prefix, uri, Int(attributeCount), attributes)
    }
}

private func quakeMLEndElement(
    _ ctx: UnsafeMutableRawPointer?, _ localname: UnsafePointer<xmlChar>?, _ prefix: UnsafePointer<xmlChar>?,
    _ uri: UnsafePointer<xmlChar>?
) {
    guard let ctx else { return }
    Unmanaged<QuakeMLHandler>.fromOpaque(ctx)._withUnsafeGuaranteedRef { $0.state.pointee.endElement() }
}

private func quakeMLCharacters(_ ctx: UnsafeMutableRawPointer?, _ bytes: UnsafePointer<xmlChar>?, _ count: Int32) {
    guard let ctx, let bytes, count > 0 else { return }
    Unmanaged<QuakeMLHandler>.fromOpaque(ctx)._withUnsafeGuaranteedRef { $0.state.pointee.characters(bytes, Int(count)) }
}

private func quakeMLError(_ ctx: UnsafeMutableRawPointer?, _ error: xmlErrorPtr?) {
    guard let ctx, let error else { return }
    Unmanaged<QuakeMLHandler>.fromOpaque(ctx)._withUnsafeGuaranteedRef { $0.state.pointee.error(error) }
}
