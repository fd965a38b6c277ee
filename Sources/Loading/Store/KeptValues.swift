extension StoreMachine {
    /// The keys that fell out of use with a value the store keeps (``Store/init(levels:fetch:keptValues:)``), oldest
    /// first, so that the oldest are let go of once more than the bound are kept.
    ///
    /// An entry is kept while it has a `keptStamp`; the record made with that stamp is its place in the order. A key
    /// back in use keeps its stamp (its value is still kept); kept again, it gets a new stamp and record, and its old
    /// record goes stale: stale records are skipped and compacted away once they outnumber the live ones.
    struct KeptValues: Sendable {
        private var records: [KeptRecord] = []
        private var head = 0
        /// The entries with a `keptStamp`.
        private(set) var count = 0

        /// Keeps `entry`'s value under `stamp`, as the newest.
        mutating func keep(_ entry: Entry, key: Key, stamp: Int) {
            if entry.keptStamp == nil { count += 1 }
            entry.keptStamp = stamp
            records.append(KeptRecord(key: key, stamp: stamp))
        }

        /// Takes the oldest kept entry out while more than `bound` are kept (`entries` finds it); `nil` once at most
        /// `bound` are, the records then compacted. Call it until it returns `nil`.
        mutating func takeOldest(beyond bound: Int, of entries: EntryTable) -> (key: Key, entry: Entry)? {
            while count > bound, head < records.count {
                let oldest = records[head]
                head += 1
                guard let entry = current(oldest, in: entries) else { continue }
                count -= 1
                entry.keptStamp = nil
                return (oldest.key, entry)
            }
            compact(entries)
            return nil
        }

        /// `entry` is dropped: it no longer counts.
        mutating func forget(_ entry: Entry) {
            if entry.keptStamp.take() != nil { count -= 1 }
        }

        /// Forgets every record (a clear, which takes every entry's stamp itself).
        mutating func removeAll() {
            self = KeptValues()
        }

        /// The entry `record` keeps, when the record is not stale.
        private func current(_ record: KeptRecord, in entries: EntryTable) -> Entry? {
            guard let entry = entries[record.key], entry.keptStamp == record.stamp else { return nil }
            return entry
        }

        // Records go stale as keys come back into use: compacted once they outnumber the live ones.
        private mutating func compact(_ entries: EntryTable) {
            if records.count - head > 2 * count + 64 {
                records = records[head...].filter { current($0, in: entries) != nil }
                head = 0
            } else if head > 64, head * 2 > records.count {
                records.removeFirst(head)
                head = 0
            }
        }
    }
}
