// Fuzzes QuakeSources' GeoNetReader (GeoNet's quake API GeoJSON) with arbitrary bytes. It must
// never crash or hang, and:
// - the answer in one chunk and cut into chunks at places derived from the input give the same
//   items, skipped features and problems, and the same error (kind, offset, message);
// - a reader that threw keeps throwing the same error; errors are SourceErrors only, and a
//   malformed-json error's offset lies within the input;
// - every report's coordinates are finite and in range, its depth and magnitude finite, its id
//   non-empty, its agency WEL; every retraction's id is non-empty; every problem names a feature.

import FuzzSupport
import QuakeModel
import QuakeSources

struct Outcome: Equatable {
    var items: [SourceItem] = []
    var problems: [SourceProblem] = []
    var skipped = 0
    var error: SourceError?
}

func run(_ chunks: [ArraySlice<UInt8>], total: Int) -> Outcome {
    var reader = GeoNetReader(source: "fuzz")
    var outcome = Outcome()
    do {
        for chunk in chunks { try reader.consume(Array(chunk)) { outcome.items.append($0) } }
        try reader.finish { outcome.items.append($0) }
    } catch let error as SourceError {
        outcome.error = error
        if error.kind == .malformedJSON {
            check(
                (error.byteOffset ?? -1) >= 0 && (error.byteOffset ?? .max) <= total,
                "offset \(String(describing: error.byteOffset)) of \(total)")
        }
        do {
            try reader.consume([0x20]) { _ in fail("an item after the reader threw") }
            fail("a reader that threw \(error) went on")
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
func fuzzGeoNet(_ start: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    let input = bytes(start, count)
    var choices = Choices(seed: input)
    let whole = run([input[...]], total: input.count)
    for item in whole.items {
        switch item {
        case .report(let r):
            check(!r.id.isEmpty, "a report without an id: \(show(input))")
            check(r.latitude.isFinite && (-90...90).contains(r.latitude), "latitude \(r.latitude): \(show(input))")
            check(r.longitude.isFinite && (-180...180).contains(r.longitude), "longitude \(r.longitude): \(show(input))")
            check(r.depth?.isFinite ?? true, "depth \(String(describing: r.depth)): \(show(input))")
            check(r.magnitude?.isFinite ?? true, "magnitude \(String(describing: r.magnitude)): \(show(input))")
            check(r.agency == GeoNetReader.agency, "agency \(String(describing: r.agency))")
        case .retraction(_, let id, _):
            check(!id.isEmpty, "a retraction without an id: \(show(input))")
        }
    }
    for problem in whole.problems {
        check(problem.path?.hasPrefix("features[") == true, "a problem without its feature: \(problem)")
    }
    check(whole.skipped >= whole.problems.count, "more problems than skipped features")
    let chunked = run(choices.chunks(input), total: input.count)
    check(whole == chunked, "in chunks:\n\(chunked)\nwhole:\n\(whole)\ninput: \(show(input))")
    return 0
}

runFuzzer(fuzzGeoNet)
