extension StoreMachine {
    /// What the store holds of each key, by slot: an entry is found by indexing, not hashing. A key in use has its
    /// ``Entry``; a key that fell out of use with a value the store keeps has its ``KeyRecord`` alone, which a hit
    /// reads and changes as it is and any other event of the key makes an entry again (``StoreMachine/entry(_:)``).
    struct EntryTable: Sequence, Sendable {
        /// What the table holds of one key.
        enum Slot: Sendable {
            case inUse(Entry)
            case kept(KeyRecord)

            /// What the key keeps, in use or not.
            var record: KeyRecord {
                switch self {
                case .inUse(let entry): entry
                case .kept(let record): record
                }
            }

            /// The key's entry, when it is in use.
            var entry: Entry? {
                if case .inUse(let entry) = self { entry } else { nil }
            }
        }

        private var slots: [Slot?] = []
        /// The number of keys held, in use or kept.
        private(set) var count = 0

        init() {}

        subscript(slot: Int) -> Slot? {
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

        /// The record of the key in `slot`, in use or kept.
        func record(at slot: Int) -> KeyRecord? {
            self[slot]?.record
        }

        /// The entry of the key in `slot`, when it is in use.
        func entry(at slot: Int) -> Entry? {
            self[slot]?.entry
        }

        mutating func removeValue(forKey slot: Int) -> KeyRecord? {
            guard let record = record(at: slot) else { return nil }
            self[slot] = nil
            return record
        }

        /// The slots that hold a key.
        var keys: [Int] {
            slots.indices.filter { slots[$0] != nil }
        }

        func makeIterator() -> Iterator {
            Iterator(slots: slots)
        }

        /// The keys held in the order of their slots.
        struct Iterator: IteratorProtocol {
            let slots: [Slot?]
            var index = 0

            mutating func next() -> (key: Int, value: Slot)? {
                while index < slots.count {
                    defer { index += 1 }
                    if let slot = slots[index] { return (index, slot) }
                }
                return nil
            }
        }
    }
}
