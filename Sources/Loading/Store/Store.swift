#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// One source of truth per key: every read, write, live update, optimistic edit, removal and clear goes through
/// the store, which writes its cache levels and re-emits to every observer of the key.
///
/// ```swift
/// let store = Store(
///     levels: [.cache(memory, name: "memory"), .cache(disk, name: "disk")],
///     fetch: LoaderFamily { (id: String) in api.friend(id) })
///
/// let subscription = store.stream(for: "u1", policy: .cacheThenNetwork).sink { _ in } receiveValue: { response in
///     render(response.value, from: response.origin)   // the cached value, then the fresh one, then every change
/// }
/// store.write(updatedAda, for: "u1")                      // a live update: saved to both levels and shown
/// store.mutate("u1", { $0.map { $0.renamed("Ada L.") } }, commit: api.rename("u1", to: "Ada L."))
/// store.clear()                                           // logout: nothing written before reappears
/// ```
///
/// - The **shown value** of a key is its confirmed value with every pending optimistic change applied in order.
/// - A **fetch** (the network) confirms its value, unless the key was removed or the store cleared since it started,
///   or a fetch started after it was confirmed first; it writes every level at once, and its readers are answered
///   once those writes have completed. A **cache hit** confirms the level's value and writes it to the faster
///   levels. Only writes and updates wait for a debounced level's timer (or ``flush(completion:)``).
/// - ``refresh(_:)`` always fetches anew; it never joins a fetch that started before it was asked.
/// - ``clear(completion:)`` cancels pending optimistic changes and pending debounced level writes, and empties every
///   level. It and ``remove(_:)`` take effect at once: no read, fetch or change in flight shows anything from before.
/// - **Memory is bounded**: the store holds a key only while it is in use (observed, read, fetched, changed, or
///   being written to a level, until the write lands), plus the values of the last `keptValues` keys to fall out of
///   use. Otherwise the key's value lives in the levels. A value **no level could save** is the exception: the store
///   keeps it (and shows it to later reads) until a save of the key succeeds, the key is removed, or the store is
///   cleared; `onWriteFailure` is told of each failure.
/// - **Work runs where it was asked**: a read's level reads and its fetch start on the caller's thread (in its task,
///   with its task-local values), and a key's work never waits for another key's.
/// - **Freshness**: ``invalidate(_:)`` marks values stale (observed keys are fetched anew at once), `maxAge` says how
///   long a value is fresh, ``revalidate(on:)`` refetches what screens show on the app's triggers, and `network` says
///   what fetches do offline. A key has at most one fetch in flight for its observers and one more owed, however
///   many invalidations and revalidations come. Whether a value is stale is decided by the order in which the store
///   saw the invalidation and the fetch or write that followed it, not by the clock: a clock set back makes nothing
///   stale again.
public final class Store<Key: Hashable & Sendable, Value: Sendable>: Sendable {
    let levels: [StoreLevel<Key, Value>]
    /// The store's lock, its machine and its keys, compiled once.
    @usableFromInline let engine: StoreEngine
    /// The mutation queues over the store, told of each clear.
    let clearObservers = ClearObservers()
    /// The other processes' changes this store follows, with a level shared with them.
    let otherProcesses: OtherProcesses<Key>?
    /// Told what happens (see ``StoreEvent``), when the store was given it.
    let events: (@Sendable (StoreEvent<Key>) -> Void)?
    /// Where fetches start.
    let fetchContext: FetchContext
    /// How fetches are coordinated with other processes, when they are.
    let coordinator: FetchCoordinator<Key>?
    /// The entities the values hold, when the store shares them: an optimistic change of one reaches every key.
    let entityObserver: EntityObserver<Key, Value>?
    /// What fetches do while the network cannot be reached.
    var network: NetworkMode { engine.network }

    typealias Machine = StoreMachine
    typealias Snapshot = StoreMachine.Snapshot

    /// Creates a store.
    /// - Parameters:
    ///   - levels: the caches, fastest first (memory, then disk or a database).
    ///   - fetch: the source of fresh values (the network); concurrent reads of one key share one fetch.
    ///   - keptValues: how many values of keys no longer in use the store keeps itself (the last to fall out of use),
    ///     for reads that answer without asking a level. By default a store with levels keeps 256 (0 keeps none: the
    ///     levels hold them), and a store without levels, being its own cache, keeps every value.
    ///   - maxAge: how long a value stays fresh for reads that do not say (``ReadPolicy/cacheFirst`` and
    ///     ``ReadPolicy/cacheThenNetwork``), and for ``revalidate()``; `nil`: until it is invalidated. A value the
    ///     store holds itself (kept, or shown) is as old as when it was learned, and is not taken as fresh either
    ///     once every level it is saved in has expired it by age (their caches' ``CacheExpiry/maxAge(_:)``): the
    ///     store serves nothing its levels would no longer serve.
    ///   - network: what fetches do while the network cannot be reached (by default, they start anyway).
    ///   - now: the clock responses and the levels' saves are stamped with, and ages and invalidations are judged
    ///     against (give the levels the same one: they judge expiry with theirs).
    ///   - fetchContext: where fetches start: by default in the task of the caller that started each (see
    ///     ``FetchContext``).
    ///   - coordination: how fetches are coordinated with other processes sharing a level, so that each key is
    ///     fetched once across them (see ``FetchCoordination``); by default they are not.
    ///   - sharing: how the store keeps in step with other processes over a level they share, so that what one
    ///     saves, removes or clears there reaches the other's observers (see ``ProcessSharing``); by default it
    ///     does not.
    ///   - entities: the entities the values hold, shared with other keys and stores (see ``SharedEntities``): a
    ///     newer copy learned anywhere reaches every key holding the entity; by default none are.
    ///   - onWriteFailure: told of every failed level write or removal (the store's value stays as shown).
    ///   - events: told what happens, for logs, metrics and traces: hits and misses by level, level failures, fetches
    ///     started, joined and ended (see ``StoreEvent``).
    @inlinable
    public convenience init(
        levels: [StoreLevel<Key, Value>],
        fetch: LoaderFamily<Key, Value>,
        keptValues: Int? = nil,
        maxAge: Duration? = nil,
        network: NetworkMode = .always,
        now: @escaping @Sendable () -> Date = { Date() },
        fetchContext: FetchContext = .caller,
        coordination: FetchCoordination<Key>? = nil,
        sharing: ProcessSharing<Key>? = nil,
        entities: EntitySharing<Value>? = nil,
        onWriteFailure: @escaping @Sendable (any Error) -> Void = { _ in },
        events: (@Sendable (StoreEvent<Key>) -> Void)? = nil
    ) {
        // The upstream load as the store's core starts it, made here, where the key's and value's types are known.
        self.init(
            levels: levels,
            upstream: { call in
                fetch.startLoad(StoreKey<Key>.key(of: call.keyObject)) { call.ended($0.map { ValueBox($0) }) }
            },
            keptValues: keptValues, maxAge: maxAge, network: network, now: now, fetchContext: fetchContext,
            coordination: coordination, sharing: sharing, entities: entities, onWriteFailure: onWriteFailure,
            events: events)
    }

    /// Creates a store whose core loads a key from upstream with `upstream` (see the public initializer).
    @usableFromInline
    init(
        levels: [StoreLevel<Key, Value>],
        upstream: @escaping @Sendable (UpstreamCall) -> any CancellationToken,
        keptValues: Int?,
        maxAge: Duration?,
        network: NetworkMode,
        now: @escaping @Sendable () -> Date,
        fetchContext: FetchContext,
        coordination: FetchCoordination<Key>?,
        sharing: ProcessSharing<Key>?,
        entities: EntitySharing<Value>? = nil,
        onWriteFailure: @escaping @Sendable (any Error) -> Void,
        events: (@Sendable (StoreEvent<Key>) -> Void)?
    ) {
        var levels = events.map { events in levels.map { $0.reporting(to: events) } } ?? levels
        self.events = events
        self.fetchContext = fetchContext
        if let coordination {
            let name = coordination.sharedLevel
            guard let shared = levels.firstIndex(where: { $0.name == name }) else {
                preconditionFailure("The fetch coordination waits in the level “\(name)”; the store has no such level")
            }
            let coordinator = FetchCoordinator(
                coordination, sharedLevel: shared, levelTimeout: levels[shared].boxed.timeout)
            // A lease is given back once the value fetched under it reached the shared level.
            levels[shared] = levels[shared].runningAfterSaves(coordinator)
            self.coordinator = coordinator
        } else {
            coordinator = nil
        }
        var shared: Int?
        var otherProcesses: OtherProcesses<Key>?
        if let sharing {
            let name = sharing.sharedLevel
            guard let index = levels.firstIndex(where: { $0.name == name }) else {
                preconditionFailure("The store shares its level “\(name)” with other processes; it has no such level")
            }
            let order: SharedLevelOrder
            (levels[index], order) = levels[index].journaling(
                to: sharing.journal, encodeKey: sharing.encodeKey, onFailure: onWriteFailure)
            shared = index
            otherProcesses = OtherProcesses(order: order, sharedLevel: index, decodeKey: sharing.decodeKey)
        }
        self.otherProcesses = otherProcesses
        self.levels = levels
        // Made once, as each level write (and each ticket a write holds) needs it.
        let reportFailure = Machine.SaveTicket.Report { result in
            if case .failure(let error) = result { onWriteFailure(error) }
        }
        let hasHooks = events != nil || fetchContext.run != nil || coordination != nil
        let debounced = Set(levels.indices.filter { levels[$0].writeDebounce != nil })
        let kept = keptValues ?? (levels.isEmpty ? .max : 256)
        let entityObserver = entities?.registration.observer(for: Key.self)
        engine = StoreEngine(
            machine: Machine(
                levelNames: levels.map { $0.name }, debouncedLevels: debounced, keptValues: kept,
                recordsEvictions: events != nil, reportsConfirmations: entityObserver != nil,
                levelAgeLimits: levels.map { $0.boxed.ageLimit?.seconds }, sharedLevel: shared),
            levels: levels.map { $0.boxed }, reportFailure: reportFailure, maxAgeSeconds: maxAge?.seconds, now: now,
            upstream: upstream, network: network,
            hooks: hasHooks
                ? TypedStoreHooks(
                    events: events, fetchContext: fetchContext, coordinator: coordinator, levels: levels, now: now)
                : nil,
            confirmations: entityObserver, sharedOrder: otherProcesses?.order)
        self.entityObserver = entityObserver
        entityObserver?.attach(self)
        otherProcesses?.order.onRelearn { [weak self] object in self?.relearn(object) }
        if let sharing, shared != nil {
            // Polls until the store is released.
            _ = followChanges(polling: sharing.polling)
        }
    }

    /// `change` as the machine runs it: on the value it keeps, which the store made from a `Value`.
    /// Unwrapped by hand, not with `Optional.map`: this runs unspecialized, where each generic call looks up the
    /// metadata of its types.
    static func erase(_ change: @escaping @Sendable (Value?) -> Value?) -> Machine.Change {
        { box in
            let value: Value? = if let box { (box as! ValueBox<Value>).value } else { nil }
            guard let changed = change(value) else { return nil }
            return ValueBox(changed)
        }
    }

    /// Runs `body` on the machine under the store's lock; what the machine let go of (a dropped entry, with its key
    /// and value) is released after unlocking: a key's or a value's deinitializer is the caller's code.
    func locked<Result>(_ body: (inout Machine) -> Result) -> Result {
        engine.run(body)
    }

    /// ``locked(_:)`` for an event of `key`, which `body` names by its slot.
    func locked<Result>(_ key: Key, _ body: (inout Machine, Int) -> Result) -> Result {
        let hash = key.hashValue
        return engine.run(
            hash: hash, where: { StoreKey.isKey($0, key) }, making: { StoreKey(key) }, body)
    }

    /// ``locked(_:_:)`` for an event whose effects the caller performs: with the key's object, which they name it by.
    func lockedKeeping<Result>(_ key: Key, _ body: (inout Machine, Int) -> Result) -> (Result, StoreKeyRef?) {
        var kept: StoreKeyRef?
        let result = engine.run(
            hash: key.hashValue, where: { StoreKey.isKey($0, key) }, making: { StoreKey(key) }, keeping: &kept, body)
        return (result, kept)
    }

    /// ``locked(_:)`` with the slots of the keys too: for an event that names keys or answers with them, while their
    /// slots are theirs.
    func lockedWithKeys<Result>(_ body: (inout Machine, inout StoreKeys) -> Result) -> Result {
        engine.runWithKeys(body)
    }

    /// ``locked(_:)`` for an event that answers with keys, by their slots.
    func lockedKeys(_ body: (inout Machine) -> [Int]) -> [Key] {
        lockedWithKeys { machine, keys in body(&machine).map { Self.key(at: $0, in: keys) } }
    }

    /// The key given `slot` in `keys`.
    static func key(at slot: Int, in keys: StoreKeys) -> Key {
        StoreKey.key(of: keys.object(at: slot))
    }

    /// The slot of `key` in `keys`, if it has one.
    static func slot(of key: Key, in keys: StoreKeys) -> Int? {
        keys.slot(hash: key.hashValue, where: { StoreKey.isKey($0, key) })
    }

    /// A predicate of invalidations that accepts `key` alone.
    static func matching(_ key: Key) -> @Sendable (Machine.AnyKey) -> Bool {
        { ($0 as? Key) == key }
    }

    /// The number of keys the store holds in memory: the keys in use (observed, being read, fetched or changed, or
    /// waiting for a level write) and the values it keeps (see `keptValues`).
    public var count: Int {
        locked { $0.count }
    }
}
