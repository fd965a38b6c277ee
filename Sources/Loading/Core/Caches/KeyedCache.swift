#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// A cache of values by key that can be read, written and cleared: ``MemoryCache``, ``DiskCache``, or your own
/// (an actor, a database table).
///
/// `cache[key]` is the ``CacheEntry`` for one key: a ``Loader`` of the value (its miss is a ``CacheMiss``) and a
/// ``Cache`` to save it to, so keyed caches compose with every loader composite:
/// ```swift
/// let friend = memory[id].fallback(to: api.friend(id).caching(to: memory[id]))
/// ```
/// Every method calls its completion exactly once; a failed write leaves what was stored before intact.
/// `LoadingTestSupport`'s `KeyedCacheContract` checks these rules on any implementation.
public protocol KeyedCache<Key, Value>: Sendable {
    /// The type of the keys.
    associatedtype Key: Hashable & Sendable
    /// The type of the stored values.
    associatedtype Value: Sendable

    /// Reads the value stored for `key` with the date it was saved; fails with ``CacheMiss`` when there is none or
    /// it has expired.
    func value(for key: Key, completion: @escaping @Sendable (Result<CachedValue<Value>, any Error>) -> Void)

    /// Saves `value` for `key`, stamped with the cache's current date, replacing what was stored.
    func save(_ value: Value, for key: Key, completion: @escaping @Sendable (Result<Void, any Error>) -> Void)

    /// Saves `value` for `key` as saved at `savedAt`, replacing what was stored: a ``Store`` saves every value with
    /// the date it learned it, so that a value copied from a slower level to a faster one keeps its age. By default
    /// the cache dates it itself (with ``save(_:for:completion:)``); ``MemoryCache`` and ``DiskCache`` keep the date.
    func save(
        _ value: Value, for key: Key, savedAt: Date, completion: @escaping @Sendable (Result<Void, any Error>) -> Void)

    /// Removes the value stored for `key`, if any.
    func removeValue(for key: Key, completion: @escaping @Sendable (Result<Void, any Error>) -> Void)

    /// Removes every value.
    func removeAll(completion: @escaping @Sendable (Result<Void, any Error>) -> Void)

    /// How long the cache keeps a value fresh. A ``Store`` judges the values it holds itself by the maximum age
    /// (``CacheExpiry/maxAge(_:)``) of the levels they are saved in, so that it serves none its levels expired. By
    /// default ``CacheExpiry/never``.
    var expiry: CacheExpiry<Value> { get }
}

extension KeyedCache {
    /// Values never expire (see ``KeyedCache/expiry``).
    public var expiry: CacheExpiry<Value> { .never }

    /// Saves `value` for `key` with ``save(_:for:completion:)``: the cache dates it itself, ignoring `savedAt`.
    public func save(
        _ value: Value, for key: Key, savedAt: Date, completion: @escaping @Sendable (Result<Void, any Error>) -> Void
    ) {
        save(value, for: key, completion: completion)
    }

    /// Reads the value stored for `key` with the date it was saved, as ``value(for:completion:)`` does; throws
    /// ``CacheMiss`` when there is none or it has expired. A read is not cancelled: cancelling the task ends the wait
    /// at once, with `CancellationError`.
    ///
    /// ```swift
    /// let friend = try await disk.value(for: "u1").value
    /// ```
    public func value(for key: Key) async throws -> CachedValue<Value> {
        try await AnyLoader { completion in
            self.value(for: key, completion: completion)
            return AnyCancellationToken {}
        }.load()
    }

    /// Saves `value` for `key`, as ``save(_:for:completion:)`` does, and returns once it is stored; throws the
    /// cache's error when it is not (what was stored before stays). A save is not cancelled: cancelling the task
    /// ends the wait at once, with `CancellationError`.
    public func save(_ value: Value, for key: Key) async throws {
        try await AnyLoader<Void> { completion in
            self.save(value, for: key, completion: completion)
            return AnyCancellationToken {}
        }.load()
    }

    /// Saves `value` for `key` as saved at `savedAt`, as ``save(_:for:savedAt:completion:)`` does, and returns once it
    /// is stored. A save is not cancelled: cancelling the task ends the wait at once, with `CancellationError`.
    public func save(_ value: Value, for key: Key, savedAt: Date) async throws {
        try await AnyLoader<Void> { completion in
            self.save(value, for: key, savedAt: savedAt, completion: completion)
            return AnyCancellationToken {}
        }.load()
    }

    /// Removes the value stored for `key`, if any, as ``removeValue(for:completion:)`` does. Cancelling the task ends
    /// the wait at once, with `CancellationError`; the removal goes on.
    public func removeValue(for key: Key) async throws {
        try await AnyLoader<Void> { completion in
            self.removeValue(for: key, completion: completion)
            return AnyCancellationToken {}
        }.load()
    }

    /// Removes every value, as ``removeAll(completion:)`` does. Cancelling the task ends the wait at once, with
    /// `CancellationError`; the removal goes on.
    public func removeAll() async throws {
        try await AnyLoader<Void> { completion in
            self.removeAll(completion: completion)
            return AnyCancellationToken {}
        }.load()
    }

    /// The entry for `key`: a loader of its value and a cache to save it to.
    @inlinable
    public subscript(key: Key) -> CacheEntry<Self> {
        CacheEntry(self, key)
    }
}

/// A value read from a cache, with the date it was saved.
public struct CachedValue<Value: Sendable>: Sendable {
    /// The stored value.
    public var value: Value
    // The date as seconds since the reference date, which `Date` holds exactly: a `Date` stored here would make
    // every copy of the value go through run-time generic code, `Date` coming from a resilient module.
    @usableFromInline var savedAtSeconds: Double

    /// When it was saved, by the cache's clock.
    @inlinable
    public var savedAt: Date {
        get { Date(timeIntervalSinceReferenceDate: savedAtSeconds) }
        set { savedAtSeconds = newValue.timeIntervalSinceReferenceDate }
    }

    /// Creates a cached value saved at `savedAt`.
    @inlinable
    public init(_ value: Value, savedAt: Date) {
        self.value = value
        savedAtSeconds = savedAt.timeIntervalSinceReferenceDate
    }

    @inlinable
    init(_ value: Value, savedAtSeconds: Double) {
        self.value = value
        self.savedAtSeconds = savedAtSeconds
    }

    /// The value as a store's core keeps it.
    @inlinable
    var boxed: CachedValue<any StoreValueBox> {
        CachedValue<any StoreValueBox>(ValueBox(value), savedAtSeconds: savedAtSeconds)
    }
}

extension CachedValue: Equatable where Value: Equatable {}

/// Why a cache read found nothing to deliver.
public enum CacheMiss: Error, Equatable, CustomStringConvertible {
    /// Nothing is stored for the key.
    case absent
    /// A value saved at `savedAt` is stored, but it is no longer fresh (it was removed).
    case expired(savedAt: Date)

    /// ``absent`` as an `any Error`, boxed once: a miss reported as a `Result<_, any Error>` allocates nothing.
    @usableFromInline static let absentError: any Error = CacheMiss.absent

    public var description: String {
        switch self {
        case .absent: "The cache holds no value for this key."
        case .expired(let savedAt): "The cached value saved at \(savedAt) has expired."
        }
    }
}

/// One key of a ``KeyedCache``: a ``Loader`` of the value stored for the key and a ``Cache`` that saves to it.
///
/// ```swift
/// let entry = memory["u1"]
/// entry.load { result in show(result) } // the value, or CacheMiss
/// entry.save(ada) { _ in }             // stored under "u1"
/// ```
public struct CacheEntry<Storage: KeyedCache>: Loader, Cache {
    /// The cache.
    @usableFromInline let cache: Storage
    /// The key.
    @usableFromInline let key: Storage.Key

    @inlinable
    init(_ cache: Storage, _ key: Storage.Key) {
        self.cache = cache
        self.key = key
    }

    /// Loads the value stored for the key; fails with ``CacheMiss`` when there is none or it expired.
    @inlinable @discardableResult
    public func load(completion: @escaping LoadCompletion<Storage.Value>) -> any CancellationToken {
        let pending = PendingLoad(completion)
        cache.value(for: key) { result in pending.complete(result.map { $0.value }) }
        return pending
    }

    /// Saves `value` for the key.
    public func save(_ value: Storage.Value, completion: @escaping @Sendable (Result<Void, any Error>) -> Void) {
        cache.save(value, for: key, completion: completion)
    }
}

/// How long a cached value stays fresh: for ever, for a maximum age, or as a validator says, judged against the
/// cache's clock. A value stamped in the future (saved while the clock was ahead) is expired under every rule but
/// ``never``, never fresh for ever.
///
/// ```swift
/// let memory = MemoryCache<String, Friend>(expiry: .maxAge(.seconds(300)))
/// let disk = DiskCache<String, Friend>(directory: folder, expiry: .validate { friend, savedAt, now in friend.isPinned })
/// ```
public struct CacheExpiry<Value: Sendable>: Sendable {
    let isFresh: (@Sendable (Value, _ savedAt: Date, _ now: Date) -> Bool)?
    /// The age at which every value expires, for an expiry made by ``maxAge(_:)``; `nil` for the others (a value
    /// of ``validate(_:)`` expires when it says).
    @usableFromInline package let ageLimit: Duration?

    init(isFresh: (@Sendable (Value, _ savedAt: Date, _ now: Date) -> Bool)?, ageLimit: Duration? = nil) {
        self.isFresh = isFresh
        self.ageLimit = ageLimit
    }

    /// Values never expire.
    public static var never: CacheExpiry { CacheExpiry(isFresh: nil) }

    /// A value is fresh while less than `age` has passed since it was saved; at `age` exactly it has expired.
    public static func maxAge(_ age: Duration) -> CacheExpiry {
        let seconds = age.seconds
        return CacheExpiry(isFresh: { _, savedAt, now in now.timeIntervalSince(savedAt) < seconds }, ageLimit: age)
    }

    /// A value is fresh while `isValid(value, savedAt, now)` says so.
    public static func validate(_ isValid: @escaping @Sendable (Value, _ savedAt: Date, _ now: Date) -> Bool)
        -> CacheExpiry
    {
        CacheExpiry(isFresh: isValid)
    }

    /// Whether `value`, saved at `savedAt`, is still fresh at `now`.
    public func isFresh(_ value: Value, savedAt: Date, now: Date) -> Bool {
        guard let isFresh else { return true }
        guard savedAt <= now else { return false }  // stamped in the future: the clock was ahead
        return isFresh(value, savedAt, now)
    }
}
