// Fuzzes QuakeSources' EMSC readers with arbitrary bytes. They must never crash or hang, and:
// - EMSCMessageReader (one websocket message): an item, nil with one problem counted, or a
//   SourceError (malformed-json with a byte offset within the message, or wrong-shape); never
//   another error;
// - EMSCGeoJSONReader (EMSC's FDSN format=json, streamed): the answer in one chunk and cut into
//   chunks at places derived from the input give the same items, skipped features and
//   problems, and the same error (kind, offset, message); a reader that threw keeps throwing;
// - every report's coordinates are finite and in range, its depth and magnitude finite, its
//   id non-empty; a message `{"action":"create","data":DATA}` gives the same report as the FDSN
//   reader makes of `{"type":"FeatureCollection","features":[DATA]}`.

import FuzzSupport
import QuakeModel
import QuakeSources

struct Outcome: Equatable {
    var items: [SourceItem] = []
    var problems: [SourceProblem] = []
    var skipped = 0
    var error: SourceError?
}

func checkItem(_ item: SourceItem, _ input: [UInt8]) {
    switch item {
    case .report(let r):
        check(!r.id.isEmpty, "a report without an id: \(show(input))")
        check(r.latitude.isFinite && (-90...90).contains(r.latitude), "latitude \(r.latitude): \(show(input))")
        check(r.longitude.isFinite && (-180...180).contains(r.longitude), "longitude \(r.longitude): \(show(input))")
        check(r.depth?.isFinite ?? true, "depth \(String(describing: r.depth)): \(show(input))")
        check(r.magnitude?.isFinite ?? true, "magnitude \(String(describing: r.magnitude)): \(show(input))")
        check(r.source == "fuzz", "source \(r.source)")
    case .retraction(_, let id, _):
        check(!id.isEmpty, "a retraction without an id: \(show(input))")
    }
}

func runGeoJSON(_ chunks: [ArraySlice<UInt8>]) -> Outcome {
    var reader = EMSCGeoJSONReader(source: "fuzz")
    var outcome = Outcome()
    do {
        for chunk in chunks { try reader.consume(Array(chunk)) { outcome.items.append($0) } }
        try reader.finish { outcome.items.append($0) }
    } catch let error as SourceError {
        outcome.error = error
        do {
            try reader.finish { _ in fail("an item after the reader threw") }
            fail("a reader that threw \(error) finished")
        } catch let again as SourceError {
            check(again == error, "threw \(error), then \(again)")
        } catch {
            fail("an error that is not a SourceError: \(error)")
        }
    } catch {
        fail("an error that is not a SourceError: \(error)")
    }
    outcome.problems = reader.problems
    outcome.skipped = reader.skippedCount
    return outcome
}

@_cdecl("LLVMFuzzerTestOneInput")
func fuzzEMSC(_ start: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    let input = bytes(start, count)
    var choices = Choices(seed: input)

    var messages = EMSCMessageReader(source: "fuzz")
    var messageItem: SourceItem?
    do {
        messageItem = try messages.read(input)
        if let messageItem {
            checkItem(messageItem, input)
            check(messages.skippedCount == 0, "an item and a problem")
        } else {
            check(messages.skippedCount == 1 && messages.problems.count == 1, "nil without a problem: \(show(input))")
            check(messages.problems[0].source == "fuzz", "a problem's source")
        }
    } catch {
        check(error.kind == .malformedJSON || error.kind == .wrongShape, "error kind \(error.kind): \(show(input))")
        if error.kind == .malformedJSON {
            check(
                (error.byteOffset ?? -1) >= 0 && (error.byteOffset ?? .max) <= input.count,
                "offset \(String(describing: error.byteOffset)) of \(input.count): \(show(input))")
        }
    }

    let whole = runGeoJSON([input[...]])
    for item in whole.items { checkItem(item, input) }
    check(whole.skipped == whole.problems.count || whole.problems.count == SourceProblem.keptLimit, "problem count")
    let chunked = runGeoJSON(choices.chunks(input))
    check(whole == chunked, "in chunks:\n\(chunked)\nwhole:\n\(whole)\ninput: \(show(input))")

    // The message's data, as the one feature of an FDSN answer, gives the same report.
    if case .report? = messageItem, let data = dataBytes(input) {
        let wrapped = Array(#"{"type":"FeatureCollection","features":["#.utf8) + data + Array("]}".utf8)
        let fdsn = runGeoJSON([wrapped[...]])
        // When the cut is not the data alone (members after it), the wrapped answer is no JSON.
        check(
            fdsn.error != nil || fdsn.items == [messageItem!],
            "message gives \(String(describing: messageItem)), the FDSN answer \(fdsn): \(show(input))")
    }
    return 0
}

/// The bytes of a message's `data` when the message is exactly `{"action":"create","data":`
/// (or `"update"`), then the data, then the root's closing `}` as its last byte.
func dataBytes(_ input: [UInt8]) -> [UInt8]? {
    guard input.last == UInt8(ascii: "}") else { return nil }
    for action in ["create", "update"] {
        let prefix = Array(#"{"action":"\#(action)","data":"#.utf8)
        if input.count > prefix.count, input.starts(with: prefix) {
            return Array(input[prefix.count..<(input.count - 1)])
        }
    }
    return nil
}

runFuzzer(fuzzEMSC)
