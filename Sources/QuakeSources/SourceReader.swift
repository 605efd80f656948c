import QuakeModel

/// What every reader of an agency's answer does, whatever the format: takes the body in chunks as
/// it arrives, calls `body` for each finished item, and keeps the events it skipped. A source
/// picks its reader by format and drives it through this one shape.
///
/// `consume` and `finish` throw a ``SourceError`` when the whole answer is rejected, or what
/// `body` throws (the reader then stays usable: nothing is lost). After `finish`, the reader is
/// done. An empty body is no items and no error (an FDSN service's 204).
public protocol SourceReader {
    /// The configured source's name, which every item carries.
    var source: String { get }
    /// Events skipped so far, whatever the reason.
    var skippedCount: Int { get }
    /// The first ``SourceProblem/keptLimit`` of the skipped events' problems.
    var problems: [SourceProblem] { get }
    mutating func consume(_ chunk: [UInt8], _ body: (SourceItem) throws -> Void) throws
    mutating func finish(_ body: (SourceItem) throws -> Void) throws
}

extension QuakeMLReader: SourceReader {}
extension FDSNTextReader: SourceReader {}
extension GeoNetReader: SourceReader {}
extension EMSCGeoJSONReader: SourceReader {}
