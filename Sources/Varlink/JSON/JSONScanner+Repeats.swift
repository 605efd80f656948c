#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Large objects that come again, byte for byte, in the same text: a history page carries each
/// quake as it is now, so a quake changed in several of the page's transactions is the same
/// object each time. Generated decoders of types with many fields (VarlinkIDL's
/// `SwiftGenerator.largeStructFields`: below it, decoding costs too little for the lookup to
/// pay) remember what they decoded and where, and take a repeat from there instead of decoding
/// it again.
///
/// A repeat is recognized by its bytes alone: an object's extent and value follow from its own
/// bytes, so the same bytes at another place are the same value, with the same checks passed
/// (the scanner's `unknownMembers` is the same for the whole text). It is taken only at the
/// nesting depth the first was decoded at, so the depth limit holds as it would have.
extension JSONScanner {
    /// The shortest object remembered: its first `repeatKeyBytes` bytes are its key.
    @usableFromInline static let repeatKeyBytes = 32

    /// Where the next value starts (after white space), with its key when repeats are taken:
    /// for ``repeated(_:at:)`` and then, when it was none, ``remember(_:from:)``.
    public struct ValueStart: Sendable {
        @usableFromInline let index: Int
        @usableFromInline let depth: Int
        /// ``repeatKey(_:at:)`` of the bytes from `index`; nil when repeats are not taken or
        /// fewer than ``repeatKeyBytes`` bytes are left.
        @usableFromInline let key: UInt64?

        @usableFromInline init(index: Int, depth: Int, key: UInt64?) {
            self.index = index
            self.depth = depth
            self.key = key
        }
    }

    @inlinable public mutating func valueStart() -> ValueStart {
        skipSpace()
        let key = takesRepeats && bytes.count - index >= Self.repeatKeyBytes ? Self.repeatKey(bytes, at: index) : nil
        return ValueStart(index: index, depth: depth, key: key)
    }

    /// The `T` decoded earlier from the same bytes as those from `start` (``valueStart()``, here),
    /// moving past them; nil when there is none (then decode as usual).
    public mutating func repeated<T: Sendable>(_ type: T.Type, at start: ValueStart) -> T? {
        guard let key = start.key, let stores = repeats, start.index == index,
            let store = stores.values[ObjectIdentifier(T.self)].map({ unsafeDowncast($0, to: RepeatStore<T>.self) }),
            let entry = store.entries[key], entry.depth == depth
        else { return nil }
        let length = entry.end - entry.start
        guard length <= bytes.count - index else { return nil }
        let same = bytes.withUnsafeBufferPointer { b in
            memcmp(b.baseAddress! + index, b.baseAddress! + entry.start, length) == 0
        }
        guard same else { return nil }
        index += length
        return store.values[entry.value]
    }

    /// Remembers `value`, just decoded from the bytes from `start` to here, for ``repeated(_:at:)``.
    public mutating func remember<T: Sendable>(_ value: T, from start: ValueStart) {
        guard let key = start.key, index - start.index >= Self.repeatKeyBytes else { return }
        let stores: RepeatStores
        if let existing = repeats {
            stores = existing
        } else {
            stores = RepeatStores()
            repeats = stores
        }
        let store: RepeatStore<T>
        if let existing = stores.values[ObjectIdentifier(T.self)] {
            store = unsafeDowncast(existing, to: RepeatStore<T>.self)
        } else {
            store = RepeatStore<T>()
            stores.values[ObjectIdentifier(T.self)] = store
        }
        store.entries[key] = RepeatEntry(
            start: start.index, end: index, depth: start.depth, value: store.values.count)
        store.values.append(value)
    }

    /// FNV-1a (``fnv(_:_:)``) of the object's first ``repeatKeyBytes`` bytes (two objects with the same ones are
    /// told apart by comparing the rest).
    @usableFromInline static func repeatKey(_ bytes: [UInt8], at start: Int) -> UInt64 {
        bytes.withUnsafeBufferPointer { b in
            var hash = fnvBasis
            for i in start..<(start + repeatKeyBytes) { hash = fnv(hash, b[i]) }
            return hash
        }
    }
}

/// The objects remembered in one text, a store per type. A reference held by the scanner alone
/// (made by it, never shared): a scanner is one text's, read by one decoder at a time.
@usableFromInline final class RepeatStores: @unchecked Sendable {
    var values: [ObjectIdentifier: AnyObject] = [:]
}

@usableFromInline struct RepeatEntry {
    let start: Int
    let end: Int
    let depth: Int
    let value: Int
}

@usableFromInline final class RepeatStore<T>: @unchecked Sendable {
    var entries: [UInt64: RepeatEntry] = [:]
    var values: [T] = []
}
