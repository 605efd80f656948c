import Foundation
import QuakeModel

#if canImport(FoundationXML)
import FoundationXML
#endif

/// Reads a QuakeML document (1.2, and the 1.0/1.0.1 that EMSC's and GeoNet's older services
/// send) as it arrives in chunks, and produces one ``SourceItem`` per `<event>`, in order.
///
/// A real XML parser reads it: FoundationXML's `XMLParser` (libxml2's push parser underneath),
/// running on a thread of the reader's own and pulling the chunks through an `InputStream` that
/// blocks until ``consume(_:_:)`` hands it the next piece. `consume` waits until the parser has
/// taken the whole chunk, then calls `body` with the events completed meanwhile, on the
/// caller's thread. Memory stays flat whatever the document's size: chunks go over in pieces
/// of at most ``pieceBytes``, only the current event is kept, and element texts are cut at
/// 4096 bytes. `consume` blocks its thread while the parser works, as a synchronous parser
/// would; the parser thread starts with the first non-blank byte, so an empty answer starts
/// none.
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
/// Threads: `consume` and `finish` block the calling thread while the parser thread works on
/// the chunk, as a synchronous parser would use it; they wait only for that thread, never for
/// Swift's cooperative pool, so calling them from a task is safe (as with `FeedParser`).
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
/// Not for concurrent use: one task feeds it. Dropping it unfinished ends its thread.
public final class QuakeMLReader {
    /// The largest piece the parser thread is handed at once.
    public static let pieceBytes = 64 * 1024

    public let source: String
    /// Events skipped so far, and the first ``SourceProblem/keptLimit`` of their problems.
    public private(set) var skippedCount = 0
    public private(set) var problems: [SourceProblem] = []
    /// Bytes consumed so far.
    public private(set) var bytesConsumed = 0

    /// Held by the parser thread while it runs, and by nothing else once the reader is gone (a
    /// test watches it through a weak reference to see the thread end).
    let channel = QuakeMLChannel()
    private var started = false
    private var finished = false
    private var head: [UInt8] = []
    private var failure: SourceError?
    private var queued: [SourceItem] = []
    private var queuedIndex = 0
    /// What was left of a chunk when `body` threw.
    private var leftover: ArraySlice<UInt8> = []
    private static let headBytes = 4096

    public init(source: String) {
        self.source = source
    }

    deinit {
        if started && !finished { channel.cancel() }
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

    /// Hands `rest` to the parser a piece at a time, delivering each piece's items; when `body`
    /// throws, what is left of `rest` waits in `leftover` for the next call.
    private func feed(_ rest: inout ArraySlice<UInt8>, _ body: (SourceItem) throws -> Void) throws {
        while !rest.isEmpty {
            let piece = Array(rest.prefix(Self.pieceBytes))
            rest = rest.dropFirst(piece.count)
            do {
                try deliver(channel.push(piece), body)
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
        try deliver(channel.close(), body)
    }

    /// Starts the parser thread once the head says the answer is not blank and not HTML, and
    /// feeds it the head; false while it cannot tell yet (or, complete, when it is blank).
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
        let channel = self.channel
        let source = self.source
        let thread = Thread {
            let handler = QuakeMLHandler(source: source, channel: channel)
            let parser = XMLParser(stream: QuakeMLInputStream(channel: channel))
            parser.shouldProcessNamespaces = true
            parser.shouldResolveExternalEntities = false
            parser.delegate = handler
            let parsed = parser.parse()
            handler.finish(parser)
            if !parsed && !handler.failed {
                let message = parser.parserError.map { ($0 as NSError).localizedDescription } ?? "unknown error"
                channel.fail(
                    SourceError(
                        .malformedXML, "not well-formed XML (\(message)): the answer is not QuakeML or was cut short",
                        source: source, line: parser.lineNumber, column: parser.columnNumber))
            }
            withExtendedLifetime(handler) {}
            channel.parserDone()
        }
        thread.stackSize = 4 << 20
        thread.name = "quakeml-reader"
        thread.start()
        return true
    }

    private func pushHead(_ body: (SourceItem) throws -> Void) throws {
        let first = head
        head = []
        try deliver(channel.push(first), body)
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

    private func deliver(
        _ result: (items: [SourceItem], problems: [SourceProblem], failure: SourceError?),
        _ body: (SourceItem) throws -> Void
    ) throws {
        skippedCount += result.problems.count
        problems += result.problems.prefix(max(0, SourceProblem.keptLimit - problems.count))
        if let error = result.failure {
            failure = error
            if !finished {
                finished = true
                channel.cancel()
            }
            throw error
        }
        queued += result.items
        try flush(body)
    }
}
