// Fuzzes FeedParser with whole documents, checking that what it makes of one does not depend on
// how the document is cut into chunks, nor on how it is consumed:
// - one chunk, and chunks cut at places derived from the input (values straddle boundaries),
//   give the same items, the same error, the same metadata;
// - without decoding, each element's bytes, offset and hash are right, its later decoding
//   (`FeedParser.decode`, `decodeElement`) gives what eager decoding gave, and its `id` and
//   `hasAliases` agree with the decoded record (the importer's fast path trusts them);
// - after the consumer throws, parsing resumes where it stopped;
// - the records' arena (`takeArena`) holds the same texts as the items;
// - through the import's pipeline (a FeedSink's parser fed the chunks, decoding or not chunk by
//   chunk, and its batches consumed as the import does, undecoded elements decoded from the
//   batch), the items, error and counts are the parser's, and a document over the sink's
//   maxBytes stops with FeedSink.TooLarge (SinkState is internal, hence the testable import);
// - small limits (depth, element size) only add `.tooLarge` errors, chunked or not;
// - the verdict on the JSON itself agrees with Varlink's JSONScanner (another strict parser);
// - the items and metadata of a document it accepts are the model's (Model.swift).

import FuzzSupport
@testable import QuakeFeed
import Varlink
import VarlinkFuzzSupport

@_cdecl("LLVMFuzzerTestOneInput")
func fuzzFeedParser(_ start: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    let input = bytes(start, count)
    var choices = Choices(seed: input)

    let whole = run(input, chunks: [input[...]], mode: .decode)
    checkJSONVerdict(input, whole)
    if whole.error == nil {
        let expected = model(scannerNode(input))
        check(
            whole.items == expected.items,
            "\(show(input)): the items differ from the model's:\n\(whole.items)\nthe model's:\n\(expected.items)")
        check(
            whole.metadata == expected.metadata,
            "\(show(input)): metadata \(whole.metadata), the model's \(expected.metadata)")
    }

    let chunked = run(input, chunks: choices.chunks(input), mode: .decode)
    compare(input, whole, chunked, "in chunks")

    let lazy = run(input, chunks: choices.chunks(input), mode: .lazy)
    compare(input, whole, lazy, "without decoding")

    let throwing = run(input, chunks: choices.chunks(input), mode: .throwing(every: choices.next(in: 1...3)))
    compare(input, whole, throwing, "with a consumer that throws")

    let pipeChunks = choices.chunks(input)
    let eager = pipeChunks.map { _ in choices.next() % 2 == 0 }
    let maxBytes = choices.next() % 4 == 0 ? choices.next(in: 0...input.count) : nil
    checkPipe(input, whole, runSink(pipeChunks, eager: eager, maxBytes: maxBytes), maxBytes: maxBytes)

    var limits = FeedParser.Limits()
    limits.maxDepth = choices.next(in: 1...6)
    limits.maxFeatureBytes = choices.next(in: 1...max(1, input.count))
    let small = run(input, chunks: [input[...]], limits: limits, mode: .decode)
    let smallChunked = run(input, chunks: choices.chunks(input), limits: limits, mode: .decode)
    compare(input, small, smallChunked, "in chunks with limits \(limits.maxDepth), \(limits.maxFeatureBytes)")
    // Lower limits only stop the parse earlier, with .tooLarge.
    if small.error?.kind != .tooLarge {
        compare(input, whole, small, "with limits \(limits.maxDepth), \(limits.maxFeatureBytes)")
    } else {
        check(
            Array(whole.items.prefix(small.items.count)) == small.items,
            "items with limits \(limits.maxDepth), \(limits.maxFeatureBytes) are not a prefix of those without")
    }
    return 0
}

struct Outcome {
    var items: [FeedItem] = []
    var error: FeedError?
    var metadata = FeedMetadata()
    var featureCount = 0
    var bytesConsumed = 0
}

enum Mode {
    /// Items decoded as they are parsed, and again from the arena after each `consume`.
    case decode
    /// Elements only validated; decoded afterwards from their bytes.
    case lazy
    /// Decoded, and the consumer throws after every `every`-th item.
    case throwing(every: Int)
}

struct ConsumerStop: Error {}

func run(
    _ input: [UInt8], chunks: [ArraySlice<UInt8>], limits: FeedParser.Limits = .init(), mode: Mode
) -> Outcome {
    var parser = FeedParser(limits: limits)
    var outcome = Outcome()
    do {
        for chunk in chunks {
            switch mode {
            case .decode:
                var records: [(FeatureRecord, FeedFeature)] = []
                try Array(chunk).withUnsafeBytes { chunk in
                    try parser.consume(chunk, decode: true) { element in
                        checkElement(input, element)
                        let item = element.item!
                        outcome.items.append(item)
                        if case .record(let record) = element.decoded, case .feature(let feature, _) = item {
                            records.append((record, feature))
                        }
                    }
                }
                // The arena the records point into, as the importer takes it.
                let arena = parser.takeArena()
                arena.withUnsafeBytes { arena in
                    for (record, feature) in records {
                        check(
                            record.feature(in: arena) == feature, "takeArena: a record's texts differ from its item's")
                    }
                }
            case .lazy:
                try Array(chunk).withUnsafeBytes { chunk in
                    try parser.consume(chunk, decode: false) { element in
                        checkElement(input, element)
                        outcome.items.append(checkLazy(element, limits: limits))
                    }
                }
            case .throwing(let every):
                var pending = Array(chunk)
                while true {
                    do {
                        try pending.withUnsafeBytes { chunk in
                            try parser.consume(chunk, decode: true) { element in
                                outcome.items.append(element.item!)
                                if outcome.items.count % every == 0 { throw ConsumerStop() }
                            }
                        }
                        break
                    } catch is ConsumerStop {
                        // The rest of the chunk is kept: carry on with nothing new.
                        pending = []
                    }
                }
            }
        }
        try parser.finish()
    } catch let error as FeedError {
        outcome.error = error
        // A dead parser keeps saying why.
        do {
            try parser.finish()
            fail("finish() after \(error) succeeded")
        } catch let again as FeedError {
            check(again == error, "finish() after \(error) threw \(again)")
        } catch {
            fail("finish() threw \(error)")
        }
    } catch {
        fail("unexpected error \(error)")
    }
    outcome.metadata = parser.metadata
    outcome.featureCount = parser.featureCount
    outcome.bytesConsumed = parser.bytesConsumed
    return outcome
}

/// An element's bytes are where it says, and its hash is theirs.
func checkElement(_ input: [UInt8], _ element: FeedElement) {
    let bytes = Array(element.bytes)
    check(
        element.offset >= 0 && element.offset + bytes.count <= input.count
            && Array(input[element.offset..<element.offset + bytes.count]) == bytes,
        "element \(element.index): its bytes are not the input's at offset \(element.offset)")
    check(element.hash == FeedElement.hash(element.bytes), "element \(element.index): hash")
}

/// An element parsed without decoding: decoded from its bytes, as the importer does later.
func checkLazy(_ element: FeedElement, limits: FeedParser.Limits) -> FeedItem {
    check(element.decoded == nil, "decoded without decoding")
    let item: FeedItem
    let record: (DecodedElement, arena: [UInt8])
    do {
        item = try FeedParser.decode(element.bytes, index: element.index, base: element.offset, limits: limits)
        record = try FeedParser.decodeElement(element.bytes, index: element.index, base: element.offset, limits: limits)
    } catch {
        fail("element \(element.index) was accepted by the parser but does not decode: \(error)")
    }
    check(
        record.arena.withUnsafeBytes { record.0.item(index: element.index, arena: $0) } == item,
        "decodeElement != decode")
    switch record.0 {
    case .record(let r):
        let id = record.arena.withUnsafeBytes { FeatureRecord.string(r.id, in: $0) }
        check(
            element.id == id,
            "element \(element.index): id \(String(describing: element.id)), decoded \(String(describing: id))")
        check(
            element.hasAliases == r.hasAliases,
            "element \(element.index): hasAliases \(element.hasAliases), decoded \(r.hasAliases)")
    case .skipped(let reason, _):
        if reason == .missingID {
            check(
                element.id == nil,
                "element \(element.index): id \(String(describing: element.id)) but skipped for a missing id")
        }
    }
    return item
}

/// What came out of the import's pipeline.
struct PipeOutcome {
    var items: [FeedItem] = []
    var error: (any Error)?
    var featureCount = 0
    var bytesConsumed = 0
}

/// Runs the chunks through a FeedSink's parser (its `SinkState`, called here as `send` and
/// `finish` call it, without the ChunkPipe's threads: a task per input would cost the fuzzer most
/// of its speed) and consumes the batches as the import does: `eager[i]` says whether the sink
/// decodes chunk `i` (the import's `decodeEagerly`). A batch is handed over only when its chunk
/// parsed; an error ends the document.
func runSink(_ chunks: [ArraySlice<UInt8>], eager: [Bool], maxBytes: Int?) -> PipeOutcome {
    let state = SinkState(maxBytes: maxBytes)
    var batches: [ParsedBatch] = []
    var outcome = PipeOutcome()
    do {
        for (chunk, eager) in zip(chunks, eager) where !chunk.isEmpty {
            if let batch = try state.consume(Array(chunk), decode: eager) { batches.append(batch) }
        }
        batches.append(try state.finish())
    } catch {
        outcome.error = error
    }
    for batch in batches {
        for element in batch.elements {
            switch element.content {
            case .record(let record):
                outcome.items.append(
                    batch.arena.withUnsafeBytes {
                        DecodedElement.record(record).item(index: element.index, arena: $0)
                    })
            case .skipped(let reason):
                outcome.items.append(.skipped(reason, index: element.index, detail: ""))
            case .raw(let id, let hasAliases, let bytes, let offset):
                let decoded: (DecodedElement, arena: [UInt8])
                do {
                    decoded = try batch.decode(bytes, index: element.index, offset: offset)
                } catch {
                    fail("element \(element.index) was passed on by the sink but does not decode: \(error)")
                }
                if case .record(let r) = decoded.0 {
                    let decodedID = decoded.arena.withUnsafeBytes { FeatureRecord.string(r.id, in: $0) }
                    check(
                        id == decodedID,
                        "sink: element \(element.index): id \(String(describing: id)), "
                            + "decoded \(String(describing: decodedID))")
                    check(hasAliases == r.hasAliases, "sink: element \(element.index): hasAliases")
                }
                outcome.items.append(decoded.arena.withUnsafeBytes { decoded.0.item(index: element.index, arena: $0) })
            }
        }
        outcome.featureCount = batch.featureCount
        outcome.bytesConsumed = batch.bytesConsumed
    }
    return outcome
}

/// Checks the pipeline's outcome against the parser's in one chunk (`whole`).
func checkPipe(_ input: [UInt8], _ whole: Outcome, _ piped: PipeOutcome, maxBytes: Int?) {
    var context: String { "\(show(input)) through the pipeline (maxBytes \(maxBytes.map(String.init) ?? "none"))" }
    // The pipeline passes a skip's reason on, not its detail.
    let expected = whole.items.map { item -> FeedItem in
        if case .skipped(let reason, let index, _) = item { return .skipped(reason, index: index, detail: "") }
        return item
    }
    let items = piped.items.map { item -> FeedItem in
        if case .skipped(let reason, let index, _) = item { return .skipped(reason, index: index, detail: "") }
        return item
    }
    switch piped.error {
    case nil:
        check(whole.error == nil, "\(context): accepted, the parser says \(String(describing: whole.error))")
        check(maxBytes.map { input.count <= $0 } ?? true, "\(context): \(input.count) bytes accepted")
        check(items == expected, "\(context): items differ:\n\(items)\nthe parser's:\n\(expected)")
        check(piped.featureCount == whole.featureCount, "\(context): featureCount \(piped.featureCount)")
        check(piped.bytesConsumed == input.count, "\(context): bytesConsumed \(piped.bytesConsumed)")
    case let error as FeedError:
        check(error == whole.error, "\(context): error \(error), the parser's \(String(describing: whole.error))")
        check(Array(expected.prefix(items.count)) == items, "\(context): items are not a prefix of the parser's")
    case let error as FeedSink.TooLarge:
        check(maxBytes != nil && input.count > maxBytes!, "\(context): \(error) for \(input.count) bytes")
        check(error.maxBytes == maxBytes, "\(context): \(error)")
        check(error.featureIndex <= whole.featureCount, "\(context): \(error), \(whole.featureCount) features")
        check(Array(expected.prefix(items.count)) == items, "\(context): items are not a prefix of the parser's")
    case let error?:
        fail("\(context): unexpected error \(error)")
    }
}

/// Checks that `b` is the same outcome as `a` (`how`: how `b` was parsed, for messages).
func compare(_ input: [UInt8], _ a: Outcome, _ b: Outcome, _ how: @autoclosure () -> String) {
    var context: String { "\(show(input)) \(how())" }
    check(
        a.error == b.error,
        "\(context): error \(String(describing: b.error)), in one chunk \(String(describing: a.error))")
    check(a.items == b.items, "\(context): items differ:\n\(b.items)\nin one chunk:\n\(a.items)")
    check(a.featureCount == b.featureCount, "\(context): featureCount")
    check(b.items.count == b.featureCount, "\(context): \(b.items.count) items, featureCount \(b.featureCount)")
    // Metadata is read when it comes; an error may stop the parse before it.
    if a.error == nil { check(a.metadata == b.metadata, "\(context): metadata") }
    // All of it, unless an error stopped the feeding.
    if a.error == nil { check(b.bytesConsumed == input.count, "\(context): bytesConsumed \(b.bytesConsumed)") }
}

/// A document the parser accepts is JSON; one it refuses as not JSON is not (both parsers nest
/// at most 64 deep, the root being depth 1).
func checkJSONVerdict(_ input: [UInt8], _ outcome: Outcome) {
    var scanner = JSONScanner(input)
    var isJSON = true
    do {
        _ = try scanner.skipValue()
        try scanner.finish()
    } catch {
        isJSON = false
    }
    switch outcome.error?.kind {
    case nil:
        check(isJSON, "\(show(input)): the feed parser accepts it, JSONScanner does not")
    case .invalidJSON?, .invalidUTF8?, .truncated?:
        check(!isJSON, "\(show(input)): the feed parser says \(outcome.error!), JSONScanner accepts it")
    case .tooLarge?, .wrongType?:
        break
    }
}

runFuzzer(fuzzFeedParser)
