#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// A thread-safe in-memory cache with count and cost limits, evicting the least recently used values first, and an
/// expiry judged against an injected clock.
///
/// ```swift
/// let memory = MemoryCache<String, Friend>(countLimit: 500, expiry: .maxAge(.seconds(300)))
/// let friend = memory["u1"].fallback(to: api.friend("u1").caching(to: memory["u1"]))
/// ```
/// Reads and writes complete synchronously, on the calling thread. A read that finds an expired value removes it
/// and fails with ``CacheMiss/expired(savedAt:)``.
///
/// - Complexity: O(1) per read, write and removal, eviction included.
public final class MemoryCache<Key: Hashable & Sendable, Value: Sendable>: KeyedCache {
    @usableFromInline let state: Locked<LRUTable<Key, Value>>
    @usableFromInline let countLimit: Int
    @usableFromInline let costLimit: Int
    @usableFromInline let cost: @Sendable (Value) -> Int
    @usableFromInline let expiry: CacheExpiry<Value>
    @usableFromInline let now: @Sendable () -> Date

    /// Creates an empty cache.
    /// - Parameters:
    ///   - countLimit: the most values kept; the least recently used go first.
    ///   - costLimit: the most total cost kept, as `cost` measures each value; the least recently used go first.
    ///     A value costing more than the limit on its own is not kept.
    ///   - cost: the cost of a value (1 by default, so that only the count matters).
    ///   - expiry: how long a value stays fresh.
    ///   - now: the clock saves are stamped with and expiry is judged against.
    public init(
        countLimit: Int = .max,
        costLimit: Int = .max,
        cost: @escaping @Sendable (Value) -> Int = { _ in 1 },
        expiry: CacheExpiry<Value> = .never,
        now: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.countLimit = max(countLimit, 0)
        self.costLimit = max(costLimit, 0)
        self.cost = cost
        self.expiry = expiry
        self.now = now
        state = Locked(LRUTable())
    }

    /// The number of values held (expired ones included until they are read).
    public var count: Int {
        state.withLock { $0.count }
    }

    /// The total cost of the values held.
    public var totalCost: Int {
        state.withLock { $0.totalCost }
    }

    /// The value stored for `key` and when it was saved, or why there is none; a hit counts as a use. Inlinable:
    /// a hit is specialized where it is read.
    @inlinable
    public func cachedValue(for key: Key) -> Result<CachedValue<Value>, CacheMiss> {
        let now = self.now()
        guard let stored = state.withLock({ $0.touch(key) }) else { return .failure(.absent) }
        guard expiry.isFresh(stored.value, savedAt: stored.savedAt, now: now) else {
            return .failure(removeExpired(key, savedAt: stored.savedAt))
        }
        return .success(stored)
    }

    /// Removes `key`'s expired entry, if it is still the same one (a save may have replaced it meanwhile).
    @usableFromInline
    func removeExpired(_ key: Key, savedAt: Date) -> CacheMiss {
        let removed = state.withLock { $0.remove(key, ifSavedAt: savedAt) }
        withExtendedLifetime(removed) {}
        return .expired(savedAt: savedAt)
    }

    /// Stores `value` for `key`, stamped now, and evicts the least recently used values beyond the limits.
    /// Inlinable, like a hit: a store writes its memory level on every change.
    @inlinable
    public func insert(_ value: Value, for key: Key) {
        insert(value, for: key, savedAt: now())
    }

    /// Stores `value` for `key` as saved at `savedAt`, evicting as ``insert(_:for:)`` does.
    @inlinable
    func insert(_ value: Value, for key: Key, savedAt: Date) {
        let valueCost = max(cost(value), 0)
        let stored = CachedValue(value, savedAt: savedAt)
        // The value replaced needs no array, nor does the first value evicted (a full cache evicts one per insert):
        // one is made only when the limits evict more.
        typealias Dropped = (replaced: CachedValue<Value>?, evicted: CachedValue<Value>?, more: [CachedValue<Value>])
        let dropped = state.withLock { table -> Dropped in
            guard valueCost <= costLimit, countLimit > 0 else { return (table.remove(key), nil, []) }
            var dropped: Dropped = (table.insertFirst(key, stored, cost: valueCost), nil, [])
            while table.count > countLimit || table.totalCost > costLimit, let oldest = table.removeLast() {
                if dropped.evicted == nil { dropped.evicted = oldest } else { dropped.more.append(oldest) }
            }
            return dropped
        }
        withExtendedLifetime(dropped) {}  // released after unlocking
    }

    /// Removes the value for `key`.
    @inlinable
    public func remove(_ key: Key) {
        let removed = state.withLock { $0.remove(key) }
        withExtendedLifetime(removed) {}
    }

    /// Removes every value.
    public func clear() {
        let removed = state.withLock { exchange(&$0, with: LRUTable()) }
        withExtendedLifetime(removed) {}
    }

    @inlinable
    public func value(for key: Key, completion: @escaping @Sendable (Result<CachedValue<Value>, any Error>) -> Void) {
        switch cachedValue(for: key) {
        case .success(let cached): completion(.success(cached))
        case .failure(.absent): completion(.failure(CacheMiss.absentError))
        case .failure(let miss): completion(.failure(miss))
        }
    }

    @inlinable
    public func save(_ value: Value, for key: Key, completion: @escaping @Sendable (Result<Void, any Error>) -> Void) {
        insert(value, for: key)
        completion(.success(()))
    }

    /// Saves `value` for `key` as saved at `savedAt` (its age and expiry count from then), evicting as
    /// ``insert(_:for:)`` does; completes at once.
    @inlinable
    public func save(
        _ value: Value, for key: Key, savedAt: Date, completion: @escaping @Sendable (Result<Void, any Error>) -> Void
    ) {
        insert(value, for: key, savedAt: savedAt)
        completion(.success(()))
    }

    @inlinable
    public func removeValue(for key: Key, completion: @escaping @Sendable (Result<Void, any Error>) -> Void) {
        remove(key)
        completion(.success(()))
    }

    public func removeAll(completion: @escaping @Sendable (Result<Void, any Error>) -> Void) {
        clear()
        completion(.success(()))
    }
}

/// A hash table whose entries are also linked in order of use, most recent first, in arrays of slots (no node
/// allocations): O(1) lookup, move-to-front, insert and removal of the least recently used.
@usableFromInline
struct LRUTable<Key: Hashable & Sendable, Value: Sendable>: Sendable {
    @usableFromInline
    struct Slot: Sendable {
        @usableFromInline var key: Key
        @usableFromInline var stored: CachedValue<Value>?
        @usableFromInline var cost: Int
        @usableFromInline var newer: Int
        @usableFromInline var older: Int

        @inlinable
        init(key: Key, stored: CachedValue<Value>?, cost: Int, newer: Int, older: Int) {
            self.key = key
            self.stored = stored
            self.cost = cost
            self.newer = newer
            self.older = older
        }
    }

    @usableFromInline var slots: [Slot] = []
    @usableFromInline var index: [Key: Int] = [:]
    @usableFromInline var free: [Int] = []
    @usableFromInline var newest = -1
    @usableFromInline var oldest = -1
    @usableFromInline var totalCost = 0

    @inlinable
    var count: Int { index.count }

    /// The entry for `key`, marked as the most recently used.
    @inlinable
    mutating func touch(_ key: Key) -> CachedValue<Value>? {
        guard let slot = index[key] else { return nil }
        unlink(slot)
        linkFirst(slot)
        return slots[slot].stored
    }

    /// Stores `stored` for `key` as the most recently used entry, in the key's slot when it has one; returns the
    /// value it replaced.
    @inlinable
    mutating func insertFirst(_ key: Key, _ stored: CachedValue<Value>, cost: Int) -> CachedValue<Value>? {
        // The key is looked up and, when new, given the next slot in one pass over the table (one hash, not two).
        let known = index.count
        let slot = Self.value(of: &index[key, default: free.last ?? slots.count])
        guard index.count > known else {
            unlink(slot)
            totalCost += cost - slots[slot].cost
            slots[slot].cost = cost
            linkFirst(slot)
            return exchange(&slots[slot].stored, with: stored)
        }
        let entry = Slot(key: key, stored: stored, cost: cost, newer: -1, older: -1)
        if free.popLast() != nil { slots[slot] = entry } else { slots.append(entry) }
        totalCost += cost
        linkFirst(slot)
        return nil
    }

    /// The value `slot` refers to: reading a dictionary's entry through this (an `inout` access) inserts the
    /// subscript's default in the same lookup when the key is absent.
    @inlinable
    static func value(of slot: inout Int) -> Int { slot }

    /// Removes `key`'s entry and returns it.
    @inlinable
    mutating func remove(_ key: Key) -> CachedValue<Value>? {
        guard let slot = index.removeValue(forKey: key) else { return nil }
        return release(slot)
    }

    /// Removes `key`'s entry only if it was saved at `savedAt`.
    mutating func remove(_ key: Key, ifSavedAt savedAt: Date) -> CachedValue<Value>? {
        guard let slot = index[key], slots[slot].stored?.savedAt == savedAt else { return nil }
        return remove(key)
    }

    /// Removes the least recently used entry and returns it.
    @inlinable
    mutating func removeLast() -> CachedValue<Value>? {
        guard oldest >= 0 else { return nil }
        index[slots[oldest].key] = nil
        return release(oldest)
    }

    @inlinable
    mutating func release(_ slot: Int) -> CachedValue<Value>? {
        unlink(slot)
        totalCost -= slots[slot].cost
        free.append(slot)
        return exchange(&slots[slot].stored, with: nil)
    }

    @inlinable
    mutating func linkFirst(_ slot: Int) {
        slots[slot].older = newest
        slots[slot].newer = -1
        if newest >= 0 { slots[newest].newer = slot }
        newest = slot
        if oldest < 0 { oldest = slot }
    }

    @inlinable
    mutating func unlink(_ slot: Int) {
        let (newer, older) = (slots[slot].newer, slots[slot].older)
        if newer >= 0 { slots[newer].older = older } else { newest = older }
        if older >= 0 { slots[older].newer = newer } else { oldest = newer }
        slots[slot].newer = -1
        slots[slot].older = -1
    }
}
