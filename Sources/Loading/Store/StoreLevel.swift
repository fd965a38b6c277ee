#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// A cache level of a ``Store``: a keyed cache with a name (reported as the origin of what it serves), written at
/// once or debounced.
public struct StoreLevel<Key: Hashable & Sendable, Value: Sendable>: Sendable {
    typealias Completion<Output> = @Sendable (Result<Output, any Error>) -> Void

    /// The level's name, as ``StoreOrigin/cache(_:)`` reports it.
    public let name: String
    /// The cache's operations as the store's core calls them: closures made where the level is made (the
    /// initializer is inlinable), so that they run the cache's code specialized for its types, where a call through
    /// `any KeyedCache` would run it generic.
    @usableFromInline let boxed: BoxedLevel

    @inlinable
    init<Cache: KeyedCache<Key, Value>>(
        cache: Cache, name: String, writeDebounce: Duration?, scheduler: any Scheduler
    ) {
        self.name = name
        if let memory = cache as? MemoryCache<Key, Value> {
            boxed = Self.boxed(memory, writeDebounce: writeDebounce, scheduler: scheduler)
            return
        }
        boxed = BoxedLevel(
            read: { key, completion in
                cache.value(for: StoreKey<Key>.key(of: key)) { completion($0.map { $0.boxed }) }
                return nil
            },
            save: { box, savedAt, key, completion in
                cache.save(
                    (box as! ValueBox<Value>).value, for: StoreKey<Key>.key(of: key),
                    savedAt: Date(timeIntervalSinceReferenceDate: savedAt), completion: completion)
            },
            removeValue: { key, completion in
                cache.removeValue(for: StoreKey<Key>.key(of: key), completion: completion)
            },
            removeAll: { completion in cache.removeAll(completion: completion) },
            writeDebounce: writeDebounce, scheduler: scheduler, ageLimit: cache.expiry.ageLimit)
    }

    /// The operations of a ``MemoryCache`` level, which holds what the store holds: the box of the store's value and
    /// the object of its key, not copies made for it (a save allocates nothing more than the cache's entry, and a hit
    /// answers with the box the cache holds).
    @inlinable
    static func boxed(
        _ memory: MemoryCache<Key, Value>, writeDebounce: Duration?, scheduler: any Scheduler
    ) -> BoxedLevel {
        let core = memory.core
        return BoxedLevel(
            read: { object, completion in
                let key = StoreKey<Key>.key(of: object)
                switch core.read(hash: key.hashValue, where: { $0 === object || StoreKey.isKey($0, key) }) {
                case .success(let found): completion(.success(found))
                case .failure(.absent): completion(.failure(CacheMiss.absentError))
                case .failure(let miss): completion(.failure(miss))
                }
                return nil
            },
            save: { box, savedAt, object, completion in
                let key = StoreKey<Key>.key(of: object)
                core.insert(
                    box, cost: max(memory.cost((box as! ValueBox<Value>).value), 0),
                    savedAt: Date(timeIntervalSinceReferenceDate: savedAt), hash: key.hashValue,
                    where: { $0 === object || StoreKey.isKey($0, key) }, making: { object })
                completion(.success(()))
            },
            removeValue: { object, completion in
                memory.removeValue(for: StoreKey<Key>.key(of: object), completion: completion)
            },
            removeAll: { completion in memory.removeAll(completion: completion) },
            writeDebounce: writeDebounce, scheduler: scheduler, ageLimit: memory.expiry.ageLimit)
    }

    /// A level of these operations, named `name`.
    init(name: String, boxed: BoxedLevel) {
        self.name = name
        self.boxed = boxed
    }

    /// How long the level's writes of changes are debounced, when they are.
    var writeDebounce: Duration? { boxed.writeDebounce }

    /// Reads `key`, answering with its value typed (through the boxed operations, in code that is not specialized).
    func read(
        _ key: Key, completion: @escaping @Sendable (Result<CachedValue<Value>, any Error>) -> Void
    ) -> (@Sendable () -> Void)? {
        boxed.read(StoreKey(key)) { result in
            completion(
                result.map { CachedValue(($0.value as! ValueBox<Value>).value, savedAtSeconds: $0.savedAtSeconds) })
        }
    }

    /// A level written at once.
    @inlinable
    public static func cache(_ cache: some KeyedCache<Key, Value>, name: String) -> StoreLevel {
        StoreLevel(cache: cache, name: name, writeDebounce: nil, scheduler: .immediate)
    }

    /// A level whose writes of changes are debounced: the last value of a burst of ``Store/write(_:for:)`` and
    /// ``Store/update(_:_:)`` calls for a key is written once no newer one came for `interval` on `scheduler` (a
    /// database under a stream of live updates), or at once on ``Store/flush(completion:)``. What the store learns
    /// elsewhere (a fetched value, a confirmed optimistic change, a faster level's hit) is written at once and
    /// replaces the write waiting. The level saves one debounced write of a key at a time: a write whose interval
    /// ends while the level still saves an earlier one waits for it to land, so a slow level saves the latest value
    /// next, never a backlog of the values in between. A write waiting keeps the store alive until it lands, so
    /// releasing the store loses none; a removal or a clear cancels it.
    @inlinable
    public static func cache(
        _ cache: some KeyedCache<Key, Value>,
        name: String,
        debouncingWritesFor interval: Duration,
        scheduler: some Scheduler
    ) -> StoreLevel {
        StoreLevel(cache: cache, name: name, writeDebounce: interval, scheduler: scheduler)
    }
}

extension StoreLevel {
    /// This level, saved in the background: a fetch's callers are answered once the store holds the value, without
    /// waiting for this level to save it. What a server gives its shared level, so that a database that stops
    /// answering costs a cold key the level's read (and the lease's call), not its save too.
    ///
    /// The trade-off: a caller answered may ask another instance before the level holds the value, which then misses
    /// and fetches the key itself (an instance waiting for this one's lease still finds it: a lease is given back
    /// once the save landed); a save that fails is reported to `onWriteFailure` after the callers got the value.
    /// Within the store nothing changes: it keeps the value until the save landed, and a read never finds the
    /// level's older value. Writes, confirmed changes and ``Store/flush(completion:)`` still wait for every level.
    ///
    /// ```swift
    /// let store = Store(
    ///     levels: [
    ///         .cache(MemoryCache(), name: "memory"),
    ///         .cache(sharedTable, name: "shared", timeout: .seconds(1)).savingInBackground(),
    ///     ],
    ///     fetch: LoaderFamily { (symbol: String) in api.quote(symbol) })
    /// ```
    public func savingInBackground() -> StoreLevel {
        var boxed = boxed
        boxed.savesInBackground = true
        return StoreLevel(name: name, boxed: boxed)
    }
}

/// A level as the store's core reads and writes it (the core is not generic): the value in its box, the key as its
/// object. The closures unbox and box them, made with the level, where its types are known.
@usableFromInline
struct BoxedLevel: Sendable {
    @usableFromInline typealias Completion = @Sendable (Result<Void, any Error>) -> Void

    /// Reads a key, answering with its value boxed; returns what asks the read to stop early (it still completes),
    /// when it can.
    let read:
        @Sendable (AnyStoreKey, @escaping @Sendable (Result<CachedValue<any StoreValueBox>, any Error>) -> Void)
            -> (@Sendable () -> Void)?
    /// Saves a boxed value dated by the store (seconds since the reference date).
    let save: @Sendable (any StoreValueBox, Double, AnyStoreKey, @escaping Completion) -> Void
    let removeValue: @Sendable (AnyStoreKey, @escaping Completion) -> Void
    let removeAll: @Sendable (@escaping Completion) -> Void
    let writeDebounce: Duration?
    let scheduler: any Scheduler
    /// The age at which the level's values expire (its cache's ``CacheExpiry/ageLimit``), if any.
    let ageLimit: Duration?
    /// How long each operation of the level may take, when it was given a timeout.
    let timeout: Duration?
    /// Whether the answers of a fetch, and of a change the server confirmed, go out before the level's saves land
    /// (see ``StoreLevel/savingInBackground()``).
    var savesInBackground = false

    @usableFromInline
    init(
        read:
            @escaping @Sendable (
                AnyStoreKey, @escaping @Sendable (Result<CachedValue<any StoreValueBox>, any Error>) -> Void
            ) -> (@Sendable () -> Void)?,
        save: @escaping @Sendable (any StoreValueBox, Double, AnyStoreKey, @escaping Completion) -> Void,
        removeValue: @escaping @Sendable (AnyStoreKey, @escaping Completion) -> Void,
        removeAll: @escaping @Sendable (@escaping Completion) -> Void,
        writeDebounce: Duration?, scheduler: any Scheduler, ageLimit: Duration? = nil, timeout: Duration? = nil
    ) {
        self.read = read
        self.save = save
        self.removeValue = removeValue
        self.removeAll = removeAll
        self.writeDebounce = writeDebounce
        self.scheduler = scheduler
        self.ageLimit = ageLimit
        self.timeout = timeout
    }
}

/// A change a level was asked to make, as a wrapper of it hears of it (see ``BoxedLevel/telling(_:afterCompletion:)``).
enum LevelChange {
    /// A value saved for the key.
    case save(AnyStoreKey)
    /// The key's value removed.
    case removal(AnyStoreKey)
    /// Every value removed.
    case removalOfAll
}

extension BoxedLevel {
    /// This level, telling `told` how each save, removal and emptying ended: before its caller's completion runs, or
    /// after it when `afterCompletion`. Reads go through unchanged.
    func telling(
        _ told: @escaping @Sendable (LevelChange, Result<Void, any Error>) -> Void, afterCompletion: Bool = false
    ) -> BoxedLevel {
        let level = self
        @Sendable func ending(_ change: LevelChange, _ completion: @escaping Completion) -> Completion {
            { result in
                if afterCompletion {
                    completion(result)
                    told(change, result)
                } else {
                    told(change, result)
                    completion(result)
                }
            }
        }
        return wrapped(
            save: { value, savedAt, key, completion in
                level.save(value, savedAt, key, ending(.save(key), completion))
            },
            removeValue: { key, completion in level.removeValue(key, ending(.removal(key), completion)) },
            removeAll: { completion in level.removeAll(ending(.removalOfAll, completion)) })
    }

    /// This level with other operations (each of these by default): a wrapper of the level, which keeps what the
    /// level says of itself (its debounce, expiry, timeout, background saves).
    func wrapped(
        read: (
            @Sendable (AnyStoreKey, @escaping @Sendable (Result<CachedValue<any StoreValueBox>, any Error>) -> Void)
                -> (@Sendable () -> Void)?
        )? = nil,
        save: (@Sendable (any StoreValueBox, Double, AnyStoreKey, @escaping Completion) -> Void)? = nil,
        removeValue: (@Sendable (AnyStoreKey, @escaping Completion) -> Void)? = nil,
        removeAll: (@Sendable (@escaping Completion) -> Void)? = nil
    ) -> BoxedLevel {
        var wrapper = BoxedLevel(
            read: read ?? self.read, save: save ?? self.save, removeValue: removeValue ?? self.removeValue,
            removeAll: removeAll ?? self.removeAll, writeDebounce: writeDebounce, scheduler: scheduler,
            ageLimit: ageLimit, timeout: timeout)
        wrapper.savesInBackground = savesInBackground
        return wrapper
    }
}
