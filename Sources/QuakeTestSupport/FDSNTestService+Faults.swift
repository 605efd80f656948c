extension FDSNTestService {
    /// A misbehaviour of the service for one request (queued with ``enqueueFaults(_:)``) or for every
    /// request (``failAlways``, ``countFault``).
    public enum Fault: Sendable {
        /// 429 Too Many Requests with `Retry-After: seconds`, instead of the answer.
        case tooManyRequests(retryAfter: Int)
        /// 503 Service Unavailable, with `Retry-After: seconds` or without one, instead of the answer.
        case serviceUnavailable(retryAfter: Int?)
        /// The real answer, with its full `Content-Length` announced, cut after `afterBytes` body bytes
        /// (then the connection closes; see ``TestResponse/Behavior/truncate(afterBytes:)``).
        case truncated(afterBytes: Int)
        /// The real answer, its body drip-fed in `chunkSize`-byte pieces with `delay` before each.
        case slow(chunkSize: Int, delay: Duration)
        /// The real answer's head and first `afterBytes` body bytes, then nothing until the client gives up.
        case stalled(afterBytes: Int)
        /// Nothing at all, not even the head, until the client gives up.
        case stalledBeforeHead
        /// This response instead of the answer (e.g. `.status(500)`, or an HTML page with 200).
        case response(TestResponse)
        /// The real answer, changed by `transform` (any status, headers, body or behaviour).
        case transform(@Sendable (TestResponse) -> TestResponse)

        /// 200 with an HTML page instead of JSON, as a proxy or a maintenance page would answer.
        public static func html(
            status: Int = 200, _ page: String = "<html><body><h1>Service temporarily unavailable</h1></body></html>\n"
        ) -> Fault {
            .response(TestResponse(status: status, body: .bytes(Array(page.utf8)), contentType: "text/html"))
        }

        /// 200 with an HTML "service maintenance" page (`text/html`) instead of the answer, as an FDSN
        /// service behind a portal answers while it is down.
        public static func maintenancePage(status: Int = 200) -> Fault {
            html(
                status: status,
                "<!DOCTYPE html>\n<html><head><title>Service maintenance</title></head>\n<body><h1>Service "
                    + "maintenance</h1><p>The event service is down for maintenance. Please try again later.</p>"
                    + "</body></html>\n")
        }

        /// The real answer (QuakeML) cut in the middle of an element name, the first origin's (else the
        /// first event's), and delivered whole with the cut length: the HTTP is complete, the XML is not
        /// well-formed. An answer without a body (204) becomes 200 with such a cut document.
        public static func malformedXML() -> Fault {
            .transform { answer in
                guard case .bytes(let body) = answer.body, answer.status == 200 else {
                    let cut =
                        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<q:quakeml xmlns:q=\"http://quakeml.org/"
                        + "xmlns/quakeml/1.2\" xmlns=\"http://quakeml.org/xmlns/bed/1.2\">\n<eventParameters publicID="
                        + "\"smi:fdsnws.test/eventParameters\">\n<event publicID=\"smi:fdsnws.test/event/cut\">\n  <ori"
                    return TestResponse(body: .bytes(Array(cut.utf8)), contentType: "application/xml")
                }
                let end = firstRange(of: "<origin ", in: body) ?? firstRange(of: "<event ", in: body)
                var cut = answer
                cut.body = .bytes(Array(body[..<min(body.count, (end?.lowerBound ?? body.count / 2) + 4)]))
                return cut
            }
        }

        /// The real answer (FDSN text) with every event line made `columns` columns long (columns beyond
        /// dropped, missing ones empty); the header line is left as it was.
        public static func wrongColumnCount(_ columns: Int = 12) -> Fault {
            .transform { answer in
                guard case .bytes(let body) = answer.body else { return answer }
                let lines = body.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false)
                var changed: [UInt8] = []
                for (number, line) in lines.enumerated() {
                    if number > 0 { changed.append(UInt8(ascii: "\n")) }
                    guard let first = line.first, first != UInt8(ascii: "#") else {
                        changed.append(contentsOf: line)
                        continue
                    }
                    var fields = line.split(separator: UInt8(ascii: "|"), omittingEmptySubsequences: false)
                    fields = Array(fields.prefix(columns))
                    while fields.count < columns { fields.append([]) }
                    changed.append(contentsOf: Array(fields.joined(separator: [UInt8(ascii: "|")])))
                }
                var response = answer
                response.body = .bytes(changed)
                return response
            }
        }

        private static func firstRange(of text: String, in body: [UInt8]) -> Range<Int>? {
            let needle = Array(text.utf8)
            guard body.count >= needle.count else { return nil }
            for start in 0...(body.count - needle.count) where body[start] == needle[0] {
                if body[start..<start + needle.count].elementsEqual(needle) { return start..<start + needle.count }
            }
            return nil
        }

        /// The response this fault gives in place of `answer`.
        func apply(to answer: () -> TestResponse) -> TestResponse {
            switch self {
            case .tooManyRequests(let seconds):
                var response = TestResponse.status(429, body: "Error 429: Too Many Requests\n")
                response.retryAfter = "\(seconds)"
                return response
            case .serviceUnavailable(let seconds):
                var response = TestResponse.status(503, body: "Error 503: Service Unavailable\n")
                response.retryAfter = seconds.map { "\($0)" }
                return response
            case .truncated(let afterBytes): return answer().truncated(afterBytes: afterBytes)
            case .slow(let chunkSize, let delay): return answer().slow(chunkSize: chunkSize, delay: delay)
            case .stalled(let afterBytes): return answer().stalled(afterBytes: afterBytes)
            case .stalledBeforeHead: return answer().with(.stallBeforeHead)
            case .response(let response): return response
            case .transform(let transform): return transform(answer())
            }
        }
    }

    // MARK: Misbehaviour

    /// When set, `count` answers this function of the true count instead (e.g. `{ $0 / 2 }`).
    public var countLies: (@Sendable (Int) -> Int)? {
        get { state.withLockedValue { $0.countLies } }
        set { state.withLockedValue { $0.countLies = newValue } }
    }

    /// When set, every `count` request gets this fault (until cleared).
    public var countFault: Fault? {
        get { state.withLockedValue { $0.countFault } }
        set { state.withLockedValue { $0.countFault = newValue } }
    }

    /// When set, every `query` request that finds no one-shot fault queued gets this fault (until cleared).
    public var failAlways: Fault? {
        get { state.withLockedValue { $0.failAlways } }
        set { state.withLockedValue { $0.failAlways = newValue } }
    }

    /// When set, every `query` answer that is otherwise delivered normally is drip-fed: `chunkSize`
    /// bytes at a time, `delay` before each (until cleared).
    public var slowMode: (chunkSize: Int, delay: Duration)? {
        get { state.withLockedValue { $0.slowMode } }
        set { state.withLockedValue { $0.slowMode = newValue } }
    }

    /// Queues one-shot faults: the next `query` requests get them in order, one each, whatever their
    /// parameters; after them, requests are answered normally again (or get ``failAlways``).
    public func enqueueFaults(_ faults: [Fault]) {
        state.withLockedValue { $0.faults.append(contentsOf: faults) }
    }

    /// How many one-shot faults are still queued.
    public var pendingFaults: Int { state.withLockedValue { $0.faults.count } }

    /// Drops the queued one-shot faults, ``failAlways``, ``slowMode`` and ``countFault``.
    public func clearFaults() {
        state.withLockedValue {
            $0.faults = []
            $0.failAlways = nil
            $0.slowMode = nil
            $0.countFault = nil
        }
    }
}
