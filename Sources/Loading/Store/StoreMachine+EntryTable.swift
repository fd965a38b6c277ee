extension StoreMachine {
    /// The entries of the keys in use, by slot: an entry is found by indexing, not hashing.
    struct EntryTable: Sequence, Sendable {
        private var slots: [Entry?] = []
        /// The number of entries.
        private(set) var count = 0

        init() {}

        subscript(slot: Int) -> Entry? {
            get { slot < slots.count ? slots[slot] : nil }
            set {
                if slot >= slots.count { slots.append(contentsOf: repeatElement(nil, count: slot - slots.count + 1)) }
                switch (slots[slot] == nil, newValue == nil) {
                case (true, false): count += 1
                case (false, true): count -= 1
                default: break
                }
                slots[slot] = newValue
            }
        }

        mutating func removeValue(forKey slot: Int) -> Entry? {
            guard let entry = self[slot] else { return nil }
            self[slot] = nil
            return entry
        }

        /// The slots that have an entry.
        var keys: [Int] {
            slots.indices.filter { slots[$0] != nil }
        }

        func makeIterator() -> Iterator {
            Iterator(slots: slots)
        }

        /// The entries in the order of their slots.
        struct Iterator: IteratorProtocol {
            let slots: [Entry?]
            var index = 0

            mutating func next() -> (key: Int, value: Entry)? {
                while index < slots.count {
                    defer { index += 1 }
                    if let entry = slots[index] { return (index, entry) }
                }
                return nil
            }
        }
    }
}
