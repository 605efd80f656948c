import QuakeFeed
import QuakeModel

/// Reads the text messages of EMSC's seismicportal websocket
/// (`wss://www.seismicportal.eu/standing_order/websocket`), one at a time: each is
/// `{"action": "create" | "update", "data": <GeoJSON Feature>}` and gives one ``SourceItem``
/// (the feature's rules are `EMSCFeature`'s: id `unid`, time, `lat`/`lon`, depth in km from
/// `properties.depth` or the negated third coordinate, `mag`, `magtype`, `flynn_region` as the
/// place, `auth` as the agency, `lastupdate`, `evtype` mapped to QuakeML's event types).
/// `create` and `update` give the same: a report, which replaces any older one of the same id.
///
/// The message is read as strict RFC 8259 JSON with QuakeFeed's `JSONReader` (no Foundation
/// decoder): a trailing comma, as in the example of EMSC's own documentation, is rejected,
/// naming its byte offset; the live socket sends strict JSON.
///
/// Errors: ``read(_:)`` throws a ``SourceError`` for a message that is not strict JSON
/// (`malformedJSON`, with `byteOffset`) or not of that shape (`wrongShape`, with `path`: no
/// `action` or `data`, an action other than the two, `data` or its `properties` not an object,
/// a `type` other than `Feature`). A well-formed message whose event cannot be imported (no id,
/// a bad time, impossible coordinates) gives nil and is counted (``skippedCount``, the first
/// ``SourceProblem/keptLimit`` in ``problems``). Unknown members are ignored. The reader keeps
/// no state between messages but those counts, so one error does not stop the next message.
public struct EMSCMessageReader: Sendable {
    public let source: String
    public private(set) var skippedCount = 0
    public private(set) var problems: [SourceProblem] = []

    public init(source: String) {
        self.source = source
    }

    /// The item of one websocket text message, or nil when its event was skipped.
    public mutating func read(_ message: some Collection<UInt8>) throws(SourceError) -> SourceItem? {
        let bytes = Array(message)
        let source = self.source
        let result = bytes.withUnsafeBytes { buffer -> Result<FeatureOutcome, ReadStop> in
            var r = JSONReader(buffer, base: 0, endIsDelimiter: true, maxDepth: sourceJSONMaxDepth)
            return Result { () throws(ReadStop) in try Self.message(&r, source: source) }
        }
        let outcome: FeatureOutcome
        switch result {
        case .success(let value): outcome = value
        case .failure(let error):
            let remedy = "check that this is a message of EMSC's websocket"
            switch error {
            case .failed(let e): throw sourceError(e, source: source, remedy: remedy)
            case .needMore:
                throw sourceError(
                    FeedError(.truncated, "the message ends inside a value", at: bytes.count), source: source,
                    remedy: remedy)
            }
        }
        switch outcome {
        case .item(let item): return item
        case .skipped(let problem):
            skippedCount += 1
            if problems.count < SourceProblem.keptLimit { problems.append(problem) }
            return nil
        }
    }

    private static func message(_ r: inout JSONReader, source: String) throws(ReadStop) -> FeatureOutcome {
        guard r.peekNonWS() != nil else {
            throw r.fail(.truncated, "the message is empty", at: r.i)
        }
        try r.openObject(depth: 1, path: "the message")
        var action: (value: JSONScalar, at: Int)?
        var outcome: FeatureOutcome?
        var started = false
        while let key = try r.nextKey(&started) {
            switch key {
            case "action":
                _ = r.peekNonWS()
                let at = r.i
                action = (try r.scalar(depth: 2), at)
            case "data":
                outcome = try EMSCFeature.read(&r, depth: 2, path: "data", source: source)
            default:
                try r.skipValue(depth: 2)
            }
        }
        if let c = r.peekNonWS() {
            throw r.unexpected(c, at: r.i, expected: "expected only whitespace after the message")
        }
        guard let action else {
            throw r.fail(.wrongType, "the message has no \"action\" member", at: 0)
        }
        guard action.value.string == "create" || action.value.string == "update" else {
            throw r.fail(
                .wrongType, "action: expected \"create\" or \"update\", found \(action.value.shown)", at: action.at)
        }
        guard let outcome else {
            throw r.fail(.wrongType, "the message has no \"data\" member (the event's GeoJSON feature)", at: 0)
        }
        return outcome
    }
}
