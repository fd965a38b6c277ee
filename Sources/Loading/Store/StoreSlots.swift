/// The keys of a store, each given a slot (an `Int`) while the store's machine uses it: the machine, which is not
/// generic, knows keys by their slots. A slot is given back once the machine no longer holds the key (no entry, and
/// not among the keys it remembers as refreshed) and reused for another key.
@usableFromInline
struct StoreSlots<Key: Hashable & Sendable>: Sendable {
    @usableFromInline var slots: [Key: Int] = [:]
    @usableFromInline var keys: [Key?] = []
    @usableFromInline var free: [Int] = []

    @inlinable
    init() {}

    /// `key`'s slot, and whether it was given now.
    @inlinable
    mutating func slot(for key: Key) -> (slot: Int, isNew: Bool) {
        if let slot = slots[key] { return (slot, false) }
        let slot: Int
        if let reused = free.popLast() {
            slot = reused
            keys[slot] = key
        } else {
            slot = keys.count
            keys.append(key)
        }
        slots[key] = slot
        return (slot, true)
    }

    /// The key `slot` was given to.
    @inlinable
    func key(of slot: Int) -> Key {
        guard let key = keys[slot] else { preconditionFailure("A slot the store's machine holds has no key") }
        return key
    }

    @inlinable
    mutating func release(_ slot: Int) {
        guard let key = keys[slot] else { return }
        keys[slot] = nil
        slots[key] = nil
        free.append(slot)
    }
}

/// What a store's lock guards: its machine, and the slots of its keys.
@usableFromInline
struct StoreCore<Key: Hashable & Sendable>: Sendable {
    @usableFromInline var machine: StoreMachine
    @usableFromInline var slots = StoreSlots<Key>()
    /// Keys whose kept values the bound let go of, for `events`.
    @usableFromInline var evicted: [Key] = []

    @inlinable
    init(machine: StoreMachine) {
        self.machine = machine
    }

    /// Gives back the slots of the keys the machine let go of during the event, after naming the evicted ones.
    @inlinable
    mutating func settle() {
        guard machine.hasDropped else { return }
        for slot in machine.takeEvictions() { evicted.append(slots.key(of: slot)) }
        for slot in machine.takeDropped() where !machine.uses(slot) { slots.release(slot) }
    }
}

extension StoreMachine {
    /// The entries of the keys in use, by slot: an entry is found by indexing, not hashing.
    @usableFromInline
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

        @usableFromInline
        func makeIterator() -> Iterator {
            Iterator(slots: slots)
        }

        /// The entries in the order of their slots.
        @usableFromInline
        struct Iterator: IteratorProtocol {
            let slots: [Entry?]
            var index = 0

            @usableFromInline
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
