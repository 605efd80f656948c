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
