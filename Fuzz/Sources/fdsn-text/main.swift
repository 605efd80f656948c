// Fuzzes QuakeSources' FDSNTextReader with arbitrary bytes. It must never crash or hang, and:
// - the answer in one chunk and cut into chunks at places derived from the input give the same
//   items, skipped rows and problems, and the same error (kind and line);
// - every report's coordinates are in range and finite, its depth and magnitude finite, its
//   id non-empty; every retraction's id is non-empty;
// - a row the reader accepted reads back the same when it is the only row under the header.
//
// The reader's sources are compiled into this target through symlinks to
// ../../../Sources/QuakeSources (the root package has no QuakeSources product yet), so they are
// instrumented for coverage with the target.

import FuzzSupport
import QuakeModel
import QuakeSources

struct Outcome: Equatable {
    var items: [SourceItem] = []
    var problems: [SourceProblem] = []
    var skipped = 0
    var error: SourceError?
}

func run(_ chunks: [ArraySlice<UInt8>]) -> Outcome {
    var reader = FDSNTextReader(source: "fuzz")
    var outcome = Outcome()
    do {
        for chunk in chunks { try reader.consume(Array(chunk)) { outcome.items.append($0) } }
        try reader.finish { outcome.items.append($0) }
    } catch let error as SourceError {
        outcome.error = error
    } catch {
        fail("an error that is not a SourceError: \(error)")
    }
    outcome.problems = reader.problems
    outcome.skipped = reader.skippedCount
    return outcome
}

@_cdecl("LLVMFuzzerTestOneInput")
func fuzzFDSNText(_ start: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    let input = bytes(start, count)
    var choices = Choices(seed: input)
    let whole = run([input[...]])
    for item in whole.items {
        switch item {
        case .report(let r):
            check(!r.id.isEmpty, "a report without an id: \(show(input))")
            check(r.latitude.isFinite && (-90...90).contains(r.latitude), "latitude \(r.latitude): \(show(input))")
            check(r.longitude.isFinite && (-180...180).contains(r.longitude), "longitude \(r.longitude): \(show(input))")
            check(r.depth?.isFinite ?? true, "depth \(String(describing: r.depth)): \(show(input))")
            check(r.magnitude?.isFinite ?? true, "magnitude \(String(describing: r.magnitude)): \(show(input))")
        case .retraction(_, let id, _):
            check(!id.isEmpty, "a retraction without an id: \(show(input))")
        }
    }
    let chunked = run(choices.chunks(input))
    check(whole == chunked, "in chunks:\n\(chunked)\nwhole:\n\(whole)\ninput: \(show(input))")
    return 0
}

runFuzzer(fuzzFDSNText)
