import GRDB
import QuakeFeed

extension FeedImport {
    /// Judges the undecided features again against the rows as the document left them, until a
    /// round changes nothing (at most four rounds: ties can in theory chase each other).
    ///
    /// A feature that lost to a row, or a row that another id superseded, is decided by what that
    /// row was at the time. When a later feature of the same document changes that row (a newer
    /// version that no longer lists the id) or removes it (supersedes it), the decision would differ
    /// against the rows the document leaves, and importing the document again would change the
    /// store. Judged again here, the import ends where a second import of it would: importing the
    /// same document again changes nothing. `stale` and `unchanged` keep counting each feature as
    /// it was judged where it stood in the document. A feature stale against its own id's row is
    /// judged again only when that row is gone, so the usual stale feature costs one lookup.
    mutating func settle() throws {
        var rounds = 0
        while !undecided.entries.isEmpty && rounds < 4 {
            rounds += 1
            let pending = undecided.entries
            undecided.entries = []
            let changesBefore = db.totalChangesCount
            let (stale, unchanged, byHash, skipped) = (
                report.stale, report.unchanged, report.unchangedByHash, report.skipped
            )
            for entry in pending {
                // A row from before that was superseded comes back only when the document has no
                // word on its id: otherwise that word decides (it is an entry itself). While its id
                // is stored, only a feature that lost to another id's row is judged again (a stored
                // id was last written by its own version, which stands), and not against a later
                // version of the id in the document unless strictly newer than it (as in the
                // document: the newer wins, and on a tie the later one).
                if entry.kind == .superseded && undecided.documentSpeaks(of: entry.feature.id) { continue }
                if entry.kind == .staleDeletion {
                    position = entry.position
                    try applyDeletion(entry.feature)
                    continue
                }
                let own = try statements.fetch(entry.feature.id)
                if let own {
                    guard entry.kind == .lostToRival || entry.kind == .deletedCopy else { continue }
                    if undecided.laterVersionSeen(of: entry) && !Self.isOlder(own, than: entry.feature) { continue }
                }
                position = entry.position
                _ = try apply(entry.feature, hash: entry.hash)
            }
            (report.stale, report.unchanged, report.unchangedByHash, report.skipped) = (stale, unchanged, byHash, skipped)
            if db.totalChangesCount == changesBefore { break }
        }
    }
}

/// The features an import judges again at its end (see `FeedImport.settle()`), and which of their
/// ids came again later in the document.
struct Undecided {
    struct Entry {
        enum Kind {
            /// A feature of the document that lost to a row of another id.
            case lostToRival
            /// A feature of the document older than its own id's row.
            case staleAgainstOwnRow
            /// A row from before this import, superseded by it.
            case superseded
            /// A row this import wrote (a feature of the document) and then superseded.
            case supersededWritten
            /// A feature of the document skipped as a copy of an event deleted upstream.
            case deletedCopy
            /// A deletion of the document that a newer stored version of its event made stale.
            case staleDeletion
        }

        var feature: FeedFeature
        var hash: UInt64
        var kind: Kind
        /// Where in the document it was decided.
        var position: Int
    }

    /// Keeps the list small when a lagging document is stale throughout: past it, features stale
    /// against their own row are not kept (such a document may take a second import to settle).
    static let maxOwnRowStale = 10_000
    var entries: [Entry] = []
    private var ids: Set<String> = []
    private var spoken: Set<String> = []
    private var lastSeen: [String: Int] = [:]

    /// Whether elements' ids need to be reported with ``saw(_:at:)``.
    var isTracking: Bool { !ids.isEmpty }

    mutating func add(_ feature: FeedFeature, hash: UInt64, as kind: Entry.Kind, position: Int) {
        if kind == .staleAgainstOwnRow && entries.count >= Self.maxOwnRowStale { return }
        entries.append(Entry(feature: feature, hash: hash, kind: kind, position: position))
        ids.insert(feature.id)
        if kind != .superseded { spoken.insert(feature.id) }
    }

    /// Whether a feature of the document with this id is undecided.
    func documentSpeaks(of id: String) -> Bool {
        spoken.contains(id)
    }

    /// An element with this id is at `position` of the document.
    mutating func saw(_ id: String, at position: Int) {
        if ids.contains(id) { lastSeen[id] = position }
    }

    func laterVersionSeen(of entry: Entry) -> Bool {
        (lastSeen[entry.feature.id] ?? -1) > entry.position
    }
}
