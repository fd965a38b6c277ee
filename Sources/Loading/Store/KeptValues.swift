extension StoreMachine {
    /// The keys that fell out of use with a value the store keeps (``Store/init(levels:fetch:keptValues:)``), oldest
    /// first, so that the oldest are let go of once more than the bound are kept.
    ///
    /// A key is kept while its ``KeyRecord`` has a `keptStamp`; the place made with that stamp is its place in the
    /// order. A key back in use keeps its stamp (its value is still kept); kept again, it gets a new stamp and place,
    /// and its old place goes stale: stale places are skipped and compacted away once they outnumber the live ones.
    struct KeptValues: Sendable {
        private var places: [StampedKey] = []
        private var head = 0
        /// The records with a `keptStamp`.
        private(set) var count = 0

        /// Keeps `record`'s value under `stamp`, as the newest.
        mutating func keep(_ record: KeyRecord, key: Key, stamp: Int) {
            if record.keptStamp == nil { count += 1 }
            record.keptStamp = stamp
            places.append(StampedKey(key: key, stamp: stamp))
        }

        /// Takes the oldest kept key out while more than `bound` are kept (`entries` finds its record, whose stamp
        /// it takes); `nil` once at most `bound` are, the places then compacted. Call it until it returns `nil`.
        mutating func takeOldest(beyond bound: Int, of entries: EntryTable) -> Key? {
            while count > bound, head < places.count {
                let oldest = places[head]
                head += 1
                guard let record = current(oldest, in: entries) else { continue }
                count -= 1
                record.keptStamp = nil
                return oldest.key
            }
            compact(entries)
            return nil
        }

        /// `record`'s key is dropped: it no longer counts.
        mutating func forget(_ record: KeyRecord) {
            if record.keptStamp.take() != nil { count -= 1 }
        }

        /// Forgets every place (a clear, which takes every record's stamp itself).
        mutating func removeAll() {
            self = KeptValues()
        }

        /// The record of the key `place` keeps, when the place is not stale.
        private func current(_ place: StampedKey, in entries: EntryTable) -> KeyRecord? {
            guard let record = entries.record(at: place.key), record.keptStamp == place.stamp else { return nil }
            return record
        }

        // Places go stale as keys come back into use: compacted once they outnumber the live ones.
        private mutating func compact(_ entries: EntryTable) {
            if places.count - head > 2 * count + 64 {
                places = places[head...].filter { current($0, in: entries) != nil }
                head = 0
            } else if head > 64, head * 2 > places.count {
                places.removeFirst(head)
                head = 0
            }
        }
    }
}
