#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// The table behind ``MemoryCache``: not generic, so compiled once, here. A key is kept as the object the cache's face
/// made of it (a ``StoreKey``), found by its hash value and recognized by the face's own comparison; a value is kept in
/// a box (a ``ValueBox``) the face opens with a class cast. Entries are linked in order of use, most recent first, in
/// an array of slots: O(1) lookup, move to the front, insert and removal of the least recently used.
///
/// What the table lets go of (a value replaced, evicted or expired, a key removed) is released after unlocking: a
/// deinitializer may call back into the cache.
@usableFromInline
final class MemoryCacheCore: Sendable {
    private struct Slot {
        var key: AnyStoreKey?
        var value: (any StoreValueBox)?
        var savedAtSeconds: Double
        var cost: Int
        var newer = -1
        var older = -1
    }

    /// An entry the table dropped, to release after unlocking.
    private typealias Dropped = (key: AnyStoreKey?, value: (any StoreValueBox)?)

    private struct Table {
        private var slots: [Slot] = []
        /// The slots of the keys held, found by their key's hash value (hashed once, by the key's type, not again by a
        /// dictionary), as the store finds its keys.
        private var chains = HashChains()
        private var free: [Int] = []
        private var newest = -1
        private var oldest = -1
        private(set) var count = 0
        private(set) var totalCost = 0

        private func find(hash: Int, where isKey: (AnyStoreKey) -> Bool) -> Int? {
            chains.slot(hash: hash) { slot in slots[slot].key.map(isKey) ?? false }
        }

        /// The entry of the key, marked as the most recently used.
        mutating func touch(hash: Int, where isKey: (AnyStoreKey) -> Bool) -> CachedValue<any StoreValueBox>? {
            guard let slot = find(hash: hash, where: isKey), let value = slots[slot].value else { return nil }
            unlink(slot)
            linkFirst(slot)
            return CachedValue(value, savedAtSeconds: slots[slot].savedAtSeconds)
        }

        /// Stores `value` as the key's entry, the most recently used; returns what it replaced.
        mutating func insert(
            _ value: any StoreValueBox, savedAtSeconds: Double, cost: Int, hash: Int,
            where isKey: (AnyStoreKey) -> Bool, making make: () -> AnyStoreKey
        ) -> (any StoreValueBox)? {
            if let slot = find(hash: hash, where: isKey) {
                unlink(slot)
                linkFirst(slot)
                totalCost += cost - slots[slot].cost
                slots[slot].cost = cost
                slots[slot].savedAtSeconds = savedAtSeconds
                return exchange(&slots[slot].value, with: value)
            }
            let entry = Slot(key: make(), value: value, savedAtSeconds: savedAtSeconds, cost: cost)
            let slot: Int
            if let reused = free.popLast() {
                slot = reused
                slots[slot] = entry
            } else {
                slot = chains.addSlot()
                slots.append(entry)
            }
            chains.link(slot, hash: hash)
            linkFirst(slot)
            count += 1
            totalCost += cost
            return nil
        }

        /// Removes the key's entry, only if it was saved at `savedAtSeconds` when that is given.
        mutating func remove(
            hash: Int, where isKey: (AnyStoreKey) -> Bool, ifSavedAt savedAtSeconds: Double? = nil
        ) -> Dropped? {
            guard let slot = find(hash: hash, where: isKey) else { return nil }
            if let savedAtSeconds, slots[slot].savedAtSeconds != savedAtSeconds { return nil }
            return release(slot)
        }

        /// Removes the least recently used entries while the table holds more than the limits allow (a full cache
        /// evicts one per insert: a list of one allocates nothing).
        mutating func evict(countLimit: Int, costLimit: Int) -> InlineFirstArray<Dropped> {
            var dropped = InlineFirstArray<Dropped>()
            while count > countLimit || totalCost > costLimit, oldest >= 0 {
                dropped.append(release(oldest))
            }
            return dropped
        }

        private mutating func release(_ slot: Int) -> Dropped {
            unlink(slot)
            chains.unlink(slot)
            count -= 1
            totalCost -= slots[slot].cost
            free.append(slot)
            return (exchange(&slots[slot].key, with: nil), exchange(&slots[slot].value, with: nil))
        }

        private mutating func linkFirst(_ slot: Int) {
            slots[slot].older = newest
            slots[slot].newer = -1
            if newest >= 0 { slots[newest].newer = slot }
            newest = slot
            if oldest < 0 { oldest = slot }
        }

        private mutating func unlink(_ slot: Int) {
            let (newer, older) = (slots[slot].newer, slots[slot].older)
            if newer >= 0 { slots[newer].older = older } else if newest == slot { newest = older }
            if older >= 0 { slots[older].newer = newer } else if oldest == slot { oldest = newer }
            slots[slot].newer = -1
            slots[slot].older = -1
        }
    }

    private let table = Locked(Table())
    private let countLimit: Int
    private let costLimit: Int
    private let now: @Sendable () -> Date
    /// Whether a boxed value saved at a date is still fresh at another, as the cache's expiry says; `nil`: always.
    private let isFresh: (@Sendable (any StoreValueBox, _ savedAt: Date, _ now: Date) -> Bool)?

    init(
        countLimit: Int, costLimit: Int, now: @escaping @Sendable () -> Date,
        isFresh: (@Sendable (any StoreValueBox, _ savedAt: Date, _ now: Date) -> Bool)?
    ) {
        self.countLimit = max(countLimit, 0)
        self.costLimit = max(costLimit, 0)
        self.now = now
        self.isFresh = isFresh
    }

    var count: Int { table.withLock { $0.count } }

    var totalCost: Int { table.withLock { $0.totalCost } }

    /// The entry of the key with `hash` that `isKey` recognizes, or why there is none; a hit counts as a use. An
    /// expired entry is removed.
    @usableFromInline
    func read(hash: Int, where isKey: (AnyStoreKey) -> Bool) -> Result<CachedValue<any StoreValueBox>, CacheMiss> {
        guard let found = table.withLock({ $0.touch(hash: hash, where: isKey) }) else { return .failure(.absent) }
        guard let isFresh, !isFresh(found.value, found.savedAt, now()) else { return .success(found) }
        let dropped = table.withLock { $0.remove(hash: hash, where: isKey, ifSavedAt: found.savedAtSeconds) }
        withExtendedLifetime(dropped) {}
        return .failure(.expired(savedAt: found.savedAt))
    }

    /// Stores `value` for the key (made by `make` when the table has no entry for it), saved at `savedAt` (now when
    /// `nil`), and evicts the least recently used entries beyond the limits. A value costing more than the cost limit
    /// on its own is not kept, nor anything when the count limit is 0.
    @usableFromInline
    func insert(
        _ value: any StoreValueBox, cost: Int, savedAt: Date?, hash: Int,
        where isKey: (AnyStoreKey) -> Bool, making make: () -> AnyStoreKey
    ) {
        let savedAtSeconds = (savedAt ?? now()).timeIntervalSinceReferenceDate
        typealias Outcome = (replaced: (any StoreValueBox)?, removed: Dropped?, evicted: InlineFirstArray<Dropped>)
        let (replaced, removed, evicted) = table.withLock { table -> Outcome in
            guard cost <= costLimit, countLimit > 0 else {
                return (nil, table.remove(hash: hash, where: isKey), InlineFirstArray())
            }
            let replaced = table.insert(
                value, savedAtSeconds: savedAtSeconds, cost: cost, hash: hash, where: isKey, making: make)
            return (replaced, nil, table.evict(countLimit: countLimit, costLimit: costLimit))
        }
        withExtendedLifetime((replaced, removed, evicted)) {}
    }

    /// Removes the entry of the key with `hash` that `isKey` recognizes.
    func remove(hash: Int, where isKey: (AnyStoreKey) -> Bool) {
        let dropped = table.withLock { $0.remove(hash: hash, where: isKey) }
        withExtendedLifetime(dropped) {}
    }

    /// Removes every entry.
    func removeAll() {
        let dropped = table.withLock { exchange(&$0, with: Table()) }
        withExtendedLifetime(dropped) {}
    }
}
