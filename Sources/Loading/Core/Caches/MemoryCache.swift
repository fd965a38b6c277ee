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
    /// The table, compiled once: the face only hashes, compares and boxes where `Key` and `Value` are known.
    @usableFromInline let core: MemoryCacheCore
    @usableFromInline let cost: @Sendable (Value) -> Int
    /// How long a value stays fresh.
    public let expiry: CacheExpiry<Value>

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
        self.cost = cost
        self.expiry = expiry
        var isFresh: (@Sendable (any StoreValueBox, Date, Date) -> Bool)?
        if expiry.isFresh != nil {
            isFresh = { box, savedAt, now in
                expiry.isFresh((box as! ValueBox<Value>).value, savedAt: savedAt, now: now)
            }
        }
        core = MemoryCacheCore(countLimit: countLimit, costLimit: costLimit, now: now, isFresh: isFresh)
    }

    /// The number of values held (expired ones included until they are read).
    var count: Int { core.count }

    /// The total cost of the values held.
    var totalCost: Int { core.totalCost }

    /// The value stored for `key` and when it was saved, or why there is none; a hit counts as a use. Inlinable: a
    /// hit hashes and compares the key, and opens the value, where their types are known.
    @inlinable
    func cachedValue(for key: Key) -> Result<CachedValue<Value>, CacheMiss> {
        core.read(hash: key.hashValue, where: { StoreKey.isKey($0, key) }).map { found in
            CachedValue((found.value as! ValueBox<Value>).value, savedAtSeconds: found.savedAtSeconds)
        }
    }

    /// Stores `value` for `key`, stamped now, and evicts the least recently used values beyond the limits.
    @inlinable
    func insert(_ value: Value, for key: Key) {
        insert(value, for: key, savedAt: nil)
    }

    /// Stores `value` for `key` as saved at `savedAt` (now when `nil`), evicting as ``insert(_:for:)`` does.
    /// Inlinable, like a hit: a store writes its memory level on every change.
    @inlinable
    func insert(_ value: Value, for key: Key, savedAt: Date?) {
        core.insert(
            ValueBox(value), cost: max(cost(value), 0), savedAt: savedAt, hash: key.hashValue,
            where: { StoreKey.isKey($0, key) }, making: { StoreKey(key) })
    }

    /// Removes the value for `key`.
    func remove(_ key: Key) {
        core.remove(hash: key.hashValue, where: { StoreKey.isKey($0, key) })
    }

    /// Removes every value.
    public func clear() {
        core.removeAll()
    }

    @inlinable
    public func value(for key: Key, completion: @escaping @Sendable (Result<CachedValue<Value>, any Error>) -> Void) {
        switch cachedValue(for: key) {
        case .success(let cached): completion(.success(cached))
        case .failure(.absent): completion(.failure(CacheMiss.absentError))
        case .failure(let miss): completion(.failure(miss))
        }
    }

    // A save completes at once: inlinable, so that its completion is called where it is made, not stored.
    @inlinable
    public func save(_ value: Value, for key: Key, completion: @escaping @Sendable (Result<Void, any Error>) -> Void) {
        insert(value, for: key, savedAt: nil)
        completion(.success(()))
    }

    /// Saves `value` for `key` as saved at `savedAt` (its age and expiry count from then), evicting the least
    /// recently used values over the limits; completes at once.
    @inlinable
    public func save(
        _ value: Value, for key: Key, savedAt: Date, completion: @escaping @Sendable (Result<Void, any Error>) -> Void
    ) {
        insert(value, for: key, savedAt: savedAt)
        completion(.success(()))
    }

    public func removeValue(for key: Key, completion: @escaping @Sendable (Result<Void, any Error>) -> Void) {
        remove(key)
        completion(.success(()))
    }

    public func removeAll(completion: @escaping @Sendable (Result<Void, any Error>) -> Void) {
        clear()
        completion(.success(()))
    }
}
