// Fuzzes QuakeSources' QuakeMLReader (libxml2's SAX2 push parser, driven on the caller's thread)
// with arbitrary bytes. It must never crash, hang or leak, and:
// - the document in one chunk and cut into chunks at places derived from the input give the
//   same verdict: the same items, the same skipped events and problems, the same error kind
//   (items before an error may come in other calls, so they are compared only without one);
// - every report's coordinates are in range and finite, its depth and magnitude finite, its
//   id non-empty; every retraction's id is non-empty;
// - a reader dropped before `finish` frees its libxml2 parser context (LeakSanitizer sees it).
//
// The reader comes from the root package's QuakeSources product, instrumented for coverage
// under QUAKED_FUZZ (see the end of ../../../Package.swift).

import FuzzSupport
import QuakeModel
import QuakeSources

struct Outcome: Equatable {
    var items: [SourceItem] = []
    var problems: [SourceProblem] = []
    var skipped = 0
    var error: SourceError.Kind?
}

func run(_ chunks: [ArraySlice<UInt8>], finish: Bool = true) -> Outcome {
    let reader = QuakeMLReader(source: "fuzz")
    var outcome = Outcome()
    do {
        for chunk in chunks { try reader.consume(Array(chunk)) { outcome.items.append($0) } }
        if finish { try reader.finish { outcome.items.append($0) } }
    } catch let error as SourceError {
        outcome.error = error.kind
        check(error.source == "fuzz", "an error without its source: \(error)")
    } catch {
        fail("an error that is not a SourceError: \(error)")
    }
    outcome.problems = reader.problems
    outcome.skipped = reader.skippedCount
    return outcome
}

func checkItems(_ outcome: Outcome, _ input: [UInt8]) {
    for item in outcome.items {
        switch item {
        case .report(let r):
            check(!r.id.isEmpty, "a report without an id: \(show(input))")
            check(r.latitude.isFinite && (-90...90).contains(r.latitude), "latitude \(r.latitude): \(show(input))")
            check(r.longitude.isFinite && (-180...180).contains(r.longitude), "longitude \(r.longitude): \(show(input))")
            check(r.depth?.isFinite ?? true, "depth \(String(describing: r.depth)): \(show(input))")
            check(r.magnitude?.isFinite ?? true, "magnitude \(String(describing: r.magnitude)): \(show(input))")
            check(r.source == "fuzz", "a report of source \(r.source)")
        case .retraction(let source, let id, _):
            check(!id.isEmpty && source == "fuzz", "a retraction without an id: \(show(input))")
        }
    }
    check(outcome.skipped >= outcome.problems.count, "more problems than skipped events")
}

@_cdecl("LLVMFuzzerTestOneInput")
func fuzzQuakeML(_ start: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    let input = bytes(start, count)
    var choices = Choices(seed: input)
    let whole = run([input[...]])
    checkItems(whole, input)
    let chunked = run(choices.chunks(input))
    checkItems(chunked, input)
    check(
        whole.error == chunked.error,
        "error \(String(describing: whole.error)) whole, \(String(describing: chunked.error)) in chunks: \(show(input))")
    if whole.error == nil {
        check(whole == chunked, "in chunks:\n\(chunked)\nwhole:\n\(whole)\ninput: \(show(input))")
    }
    // Abandoned halfway: the reader must free its parser context without `finish`.
    if choices.next() % 4 == 0 { _ = run([input.prefix(input.count / 2)], finish: false) }
    return 0
}

runFuzzer(fuzzQuakeML)
