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
///   and writes it to every level; a **cache hit** confirms the level's value and writes it to the faster levels.
/// - ``refresh(_:)`` always fetches anew; it never joins a fetch that started before it was asked.
/// - ``clear()`` cancels pending optimistic changes and pending debounced level writes, and empties every level.
public final class Store<Key: Hashable & Sendable, Value: Sendable>: Sendable {
    private let levels: [StoreLevel<Key, Value>]
    private let fetcher: LoaderFamily<Key, Value>
    private let coalescedFetcher: LoaderFamily<Key, Value>
    private let now: @Sendable () -> Date
    private let onWriteFailure: @Sendable (any Error) -> Void
    private let state = Locked(State())

    /// Creates a store.
    /// - Parameters:
    ///   - levels: the caches, fastest first (memory, then disk or a database).
    ///   - fetch: the source of fresh values (the network); concurrent fetches of one key share one load.
    ///   - now: the clock responses are stamped with.
    ///   - onWriteFailure: told of every failed level write or removal (the store's value stays as shown).
    public init(
        levels: [StoreLevel<Key, Value>],
        fetch: LoaderFamily<Key, Value>,
        now: @escaping @Sendable () -> Date = { Date() },
        onWriteFailure: @escaping @Sendable (any Error) -> Void = { _ in }
    ) {
        self.levels = levels
        fetcher = fetch
        coalescedFetcher = fetch.coalesced()
        self.now = now
        self.onWriteFailure = onWriteFailure
    }

    // MARK: Reading

    /// The key's shown value now and after every change, starting with what `policy` reads.
    ///
    /// The stream fails only when the policy's read finds nothing to show (a cache-only miss, a failed fetch with
    /// nothing cached); a failure after a value was shown is attached to the next response as
    /// ``StoreResponse/error``, and the stream goes on.
    public func stream(for key: Key, policy: ReadPolicy = .cacheFirst) -> EventStream<StoreResponse<Value>, any Error> {
        EventStream { [self] observer in
            let subject = subject(for: key)
            let changes = subject.stream.compactMap { $0 }.setFailureType(to: (any Error).self)
            changes.subscribe(observer)
            guard observer.lifetime.isActive else { return }
            let token = run(policy, for: key) { failure in
                observer.fail(failure)
            }
            observer.onTermination { token.cancel() }
        }
    }

    /// The first response `policy` produces for `key`. With ``ReadPolicy/cacheThenNetwork`` that is the cached
    /// value when there is one (the fetch it starts goes on, and updates the store).
    public func read(_ key: Key, policy: ReadPolicy = .cacheFirst) -> AnyLoader<StoreResponse<Value>> {
        let stream = stream(for: key, policy: policy)
        return AnyLoader(stream.asLoader())
    }

    /// Fetches `key` anew (never joining a fetch already running), confirms and shows the fresh value, and
    /// delivers it.
    public func refresh(_ key: Key) -> AnyLoader<StoreResponse<Value>> {
        AnyLoader { [self] completion in
            fetch(key, sharing: false) { result in completion(result) }
        }
    }

    // MARK: Writing

    /// Confirms `value` for `key` (a live update, a local edit), writes it to every level and shows it.
    public func write(_ value: Value, for key: Key) {
        confirm(value, for: key, origin: .local, savedAt: now(), writingTo: levels.indices)
    }

    /// Removes `key`'s value from the store and every level; fetches started before are dropped when they complete.
    public func remove(_ key: Key) {
        let (snapshot, timers) = state.withLock { state -> (Snapshot?, [any CancellationToken]) in
            var entry = state.entries[key] ?? Entry()
            entry.generation += 1
            entry.confirmed = nil
            let timers = entry.debounced.values.map(\.timer)
            entry.debounced = [:]
            state.entries[key] = entry
            return (state.snapshot(for: key), timers)
        }
        for timer in timers { timer.cancel() }
        publish(snapshot)
        for level in levels {
            level.cache.removeValue(for: key) { [onWriteFailure] result in
                if case .failure(let error) = result { onWriteFailure(error) }
            }
        }
    }

    /// Forgets everything (a logout): cancels pending optimistic changes and debounced writes, empties every level,
    /// and shows every observed key as empty. Nothing fetched or changed before the clear reappears after it.
    public func clear() {
        let (snapshots, cancellations) = state.withLock { state -> ([Snapshot], [any CancellationToken]) in
            state.epoch += 1
            var cancellations: [any CancellationToken] = []
            for key in state.entries.keys {
                var emptied = Entry()
                emptied.version = state.entries[key]!.version  // versions only grow, so observers take the clear
                let entry = exchange(&state.entries[key]!, with: emptied)
                cancellations += entry.debounced.values.map(\.timer)
                cancellations += entry.pending.compactMap(\.commit)
            }
            return (state.entries.keys.compactMap { state.snapshot(for: $0) }, cancellations)
        }
        for token in cancellations { token.cancel() }
        for snapshot in snapshots { publish(snapshot) }
        for level in levels {
            level.cache.removeAll { [onWriteFailure] result in
                if case .failure(let error) = result { onWriteFailure(error) }
            }
        }
    }

    /// Shows `change` applied to `key`'s value at once, and sends it upstream with `commit`.
    ///
    /// The shown value is the confirmed value with every pending change applied in order. When `commit` succeeds,
    /// the change joins the confirmed value (and is written to every level); when it fails, only this change is
    /// undone, and changes made meanwhile stay. `completion` receives the commit's outcome. Cancelling the returned
    /// token cancels the commit and undoes the change.
    @discardableResult
    public func mutate<Commit: Loader>(
        _ key: Key,
        _ change: @escaping @Sendable (Value?) -> Value?,
        commit: Commit,
        completion: @escaping @Sendable (Result<Void, any Error>) -> Void = { _ in }
    ) -> any CancellationToken {
        let (id, epoch, snapshot) = state.withLock { state -> (Int, Int, Snapshot?) in
            state.nextID += 1
            state.entries[key, default: Entry()].pending.append(Mutation(id: state.nextID, change: change))
            return (state.nextID, state.epoch, state.snapshot(for: key))
        }
        publish(snapshot)
        let pending = PendingLoad<Void> { result in completion(result) }
        pending.startStep {
            commit.load { [self] result in
                switch result {
                case .success:
                    settle(key, mutation: id, epoch: epoch, accepted: true)
                    pending.complete(.success(()))
                case .failure(let error):
                    settle(key, mutation: id, epoch: epoch, accepted: false)
                    pending.complete(.failure(error))
                }
            }
        }
        state.withLock { state in
            guard state.epoch == epoch, let index = state.entries[key]?.pending.firstIndex(where: { $0.id == id })
            else { return }
            state.entries[key]!.pending[index].commit = pending
        }
        return AnyCancellationToken { [weak self] in
            guard pending.cancelReportingPending() else { return }
            self?.settle(key, mutation: id, epoch: epoch, accepted: false)
        }
    }

    // MARK: Policies

    /// Runs `policy` for `key`; calls `fail` when it ends with nothing to show.
    private func run(
        _ policy: ReadPolicy,
        for key: Key,
        fail: @escaping @Sendable (any Error) -> Void
    ) -> any CancellationToken {
        let hasValue = state.withLock { $0.entries[key]?.confirmed != nil }
        let step = PendingLoad<Void> { _ in }
        let fetchThenReport: @Sendable (_ fallbackToCache: Bool) -> Void = { [self] fallbackToCache in
            step.startStep {
                fetch(key, sharing: true) { [self] result in
                    guard case .failure(let error) = result else { return step.complete(.success(())) }
                    if fallbackToCache {
                        step.startStep {
                            readLevels(key, from: 0, error: error) { found in
                                if !found { self.reportOrFail(key, error, fail) }
                                step.complete(.success(()))
                            }
                        }
                    } else {
                        reportOrFail(key, error, fail)
                        step.complete(.success(()))
                    }
                }
            }
        }
        switch policy.kind {
        case .cacheFirst:
            guard !hasValue else { return step }
            step.startStep {
                readLevels(key, from: 0, error: nil) { found in
                    if !found { fetchThenReport(false) }
                }
            }
        case .cacheThenNetwork:
            if hasValue {
                fetchThenReport(false)
            } else {
                step.startStep {
                    readLevels(key, from: 0, error: nil) { _ in fetchThenReport(false) }
                }
            }
        case .networkFirst:
            fetchThenReport(true)
        case .cacheOnly:
            guard !hasValue else { return step }
            step.startStep {
                readLevels(key, from: 0, error: nil) { found in
                    if !found { fail(CacheMiss.absent) }
                }
            }
        case .networkOnly:
            fetchThenReport(false)
        }
        return step
    }

    /// Reads the levels from `index` on; the first hit is confirmed (and written to the faster levels). Calls
    /// `done(true)` on a hit, `done(false)` when every level missed.
    private func readLevels(
        _ key: Key,
        from index: Int,
        error: (any Error)?,
        done: @escaping @Sendable (Bool) -> Void
    ) -> any CancellationToken {
        guard index < levels.count else {
            done(false)
            return AnyCancellationToken()
        }
        let epoch = state.withLock { $0.epoch }
        let token = AnyCancellationToken()
        levels[index].cache.value(for: key) { [self] result in
            guard !token.isCancelled else { return }
            switch result {
            case .success(let cached):
                confirm(
                    cached.value, for: key, origin: .cache(levels[index].name), savedAt: cached.savedAt,
                    writingTo: 0..<index, ifEpoch: epoch, error: error)
                done(true)
            case .failure:
                _ = readLevels(key, from: index + 1, error: error, done: done)
            }
        }
        return token
    }

    /// Fetches `key` (sharing a fetch in flight, or not) and confirms the fresh value.
    private func fetch(
        _ key: Key,
        sharing: Bool,
        completion: @escaping @Sendable (Result<StoreResponse<Value>, any Error>) -> Void
    ) -> any CancellationToken {
        let (generation, epoch) = state.withLock { state in (state.entries[key]?.generation ?? 0, state.epoch) }
        let source = sharing ? coalescedFetcher[key] : fetcher[key]
        return source.load { [self] result in
            switch result {
            case .success(let value):
                let confirmed = confirm(
                    value, for: key, origin: .network, savedAt: now(), writingTo: levels.indices, ifEpoch: epoch,
                    generation: generation)
                completion(confirmed.map { .success($0) } ?? .failure(StoreError.discarded))
            case .failure(let error):
                completion(.failure(error))
            }
        }
    }

    /// Attaches `error` to the key's shown value, or fails the read when there is nothing to show.
    private func reportOrFail(_ key: Key, _ error: any Error, _ fail: @Sendable (any Error) -> Void) {
        let snapshot = state.withLock { state -> Snapshot? in
            guard state.entries[key]?.confirmed != nil || !(state.entries[key]?.pending.isEmpty ?? true) else {
                return nil
            }
            state.entries[key]!.error = error
            state.entries[key]!.version += 1
            defer { state.entries[key]!.error = nil }
            return state.snapshot(for: key)
        }
        guard let snapshot else { return fail(error) }
        publish(snapshot)
    }

    // MARK: State

    /// Confirms `value` unless the store was cleared (or the key removed) since `epoch` (and `generation`), writes
    /// it to the levels at `targets` and publishes the key's new shown value, which it returns.
    @discardableResult
    private func confirm(
        _ value: Value,
        for key: Key,
        origin: StoreOrigin,
        savedAt: Date,
        writingTo targets: Range<Int>,
        ifEpoch epoch: Int? = nil,
        generation: Int? = nil,
        error: (any Error)? = nil
    ) -> StoreResponse<Value>? {
        let (snapshot, replaced) = state.withLock { state -> (Snapshot?, StoredValue<Value>?) in
            if let epoch, state.epoch != epoch { return (nil, nil) }
            if let generation, (state.entries[key]?.generation ?? 0) != generation { return (nil, nil) }
            let stored = StoredValue(value: value, origin: origin, savedAt: savedAt)
            let replaced = exchange(&state.entries[key, default: Entry()].confirmed, with: stored)
            state.entries[key]!.error = error
            defer { state.entries[key]!.error = nil }
            return (state.snapshot(for: key), replaced)
        }
        withExtendedLifetime(replaced) {}
        guard let snapshot else { return nil }
        publish(snapshot)
        for index in targets { writeLevel(index, value, for: key) }
        return snapshot.response
    }

    /// Settles a pending change: accepted, it joins the confirmed value (written to every level); refused or
    /// cancelled, it is dropped. Either way the key's shown value is published again.
    private func settle(_ key: Key, mutation id: Int, epoch: Int, accepted: Bool) {
        let (snapshot, confirmed) = state.withLock { state -> (Snapshot?, Value?) in
            guard state.epoch == epoch, let index = state.entries[key]?.pending.firstIndex(where: { $0.id == id })
            else { return (nil, nil) }
            let mutation = state.entries[key]!.pending.remove(at: index)
            var confirmed: Value?
            if accepted {
                let base = state.entries[key]!.confirmed?.value
                confirmed = mutation.change(base)
                state.entries[key]!.confirmed = confirmed.map {
                    StoredValue(value: $0, origin: .local, savedAt: now())
                }
            }
            state.entries[key]!.version += 1
            return (state.snapshot(for: key), confirmed)
        }
        publish(snapshot)
        if let confirmed { for index in levels.indices { writeLevel(index, confirmed, for: key) } }
    }

    private func writeLevel(_ index: Int, _ value: Value, for key: Key) {
        let level = levels[index]
        let onWriteFailure = self.onWriteFailure
        let save: @Sendable () -> Void = {
            level.cache.save(value, for: key) { result in
                if case .failure(let error) = result { onWriteFailure(error) }
            }
        }
        guard let debounce = level.writeDebounce else { return save() }
        // Debounced: the last value of a burst is written once no newer one came for `debounce`; a clear or a
        // removal cancels it.
        let token = state.withLock { state -> Int in
            state.nextID += 1
            return state.nextID
        }
        let timer = level.scheduler.schedule(after: debounce) { [self] in
            let isCurrent = state.withLock { state -> Bool in
                guard state.entries[key]?.debounced[index]?.id == token else { return false }
                state.entries[key]!.debounced[index] = nil
                return true
            }
            if isCurrent { save() }
        }
        let replaced = state.withLock { state -> (any CancellationToken)? in
            exchange(
                &state.entries[key, default: Entry()].debounced[index], with: DebouncedWrite(id: token, timer: timer))?
                .timer
        }
        replaced?.cancel()
    }

    private func subject(for key: Key) -> CurrentValueStreamSubject<StoreResponse<Value>?, Never> {
        state.withLock { state in
            if let subject = state.subjects[key] { return subject }
            let subject = CurrentValueStreamSubject<StoreResponse<Value>?, Never>(state.snapshot(for: key)?.response)
            state.subjects[key] = subject
            return subject
        }
    }

    /// Sends `snapshot` to the key's observers unless a newer version was sent already (publishes from several
    /// threads may arrive out of order).
    private func publish(_ snapshot: Snapshot?) {
        guard let snapshot, let subject = state.withLock({ $0.subjects[snapshot.key] }) else { return }
        subject.update { current in
            guard (current?.version ?? -1) < snapshot.response.version else { return nil }
            return snapshot.response
        }
    }

    // MARK: Types

    private struct Mutation: Sendable {
        let id: Int
        let change: @Sendable (Value?) -> Value?
        var commit: PendingLoad<Void>?

        init(id: Int, change: @escaping @Sendable (Value?) -> Value?) {
            self.id = id
            self.change = change
        }
    }

    private struct DebouncedWrite: Sendable {
        let id: Int
        let timer: any CancellationToken
    }

    private struct Entry: Sendable {
        var confirmed: StoredValue<Value>?
        var pending: [Mutation] = []
        var debounced: [Int: DebouncedWrite] = [:]
        var generation = 0
        var version = 0
        var error: (any Error)?
    }

    private struct Snapshot: Sendable {
        let key: Key
        let response: StoreResponse<Value>
    }

    private struct State: Sendable {
        var entries: [Key: Entry] = [:]
        var subjects: [Key: CurrentValueStreamSubject<StoreResponse<Value>?, Never>] = [:]
        var epoch = 0
        var nextID = 0

        /// The key's shown value, with a new version.
        mutating func snapshot(for key: Key) -> Snapshot? {
            guard var entry = entries[key] else { return nil }
            entry.version += 1
            entries[key]!.version = entry.version
            let shown = entry.pending.reduce(entry.confirmed?.value) { value, mutation in mutation.change(value) }
            let response = StoreResponse(
                value: shown,
                origin: entry.pending.isEmpty ? entry.confirmed?.origin ?? .local : .local,
                savedAt: entry.confirmed?.savedAt,
                hasPendingChanges: !entry.pending.isEmpty,
                error: entry.error,
                version: entry.version)
            return Snapshot(key: key, response: response)
        }
    }
}

/// A cache level of a ``Store``: a keyed cache with a name (reported as the origin of what it serves), written at
/// once or debounced.
public struct StoreLevel<Key: Hashable & Sendable, Value: Sendable>: Sendable {
    /// The level's name, as ``StoreOrigin/cache(_:)`` reports it.
    public let name: String
    let cache: any KeyedCache<Key, Value>
    let writeDebounce: Duration?
    let scheduler: any Scheduler

    /// A level written at once.
    public static func cache(_ cache: some KeyedCache<Key, Value>, name: String) -> StoreLevel {
        StoreLevel(name: name, cache: cache, writeDebounce: nil, scheduler: ImmediateScheduler())
    }

    /// A level whose writes are debounced: the last value of a burst of changes to a key is written once no newer
    /// one came for `interval` on `scheduler` (a database under a stream of live updates).
    public static func cache(
        _ cache: some KeyedCache<Key, Value>,
        name: String,
        debouncingWritesFor interval: Duration,
        scheduler: some Scheduler
    ) -> StoreLevel {
        StoreLevel(name: name, cache: cache, writeDebounce: interval, scheduler: scheduler)
    }
}

/// Where a ``Store`` read comes from and when to go to the network.
public struct ReadPolicy: Sendable, Equatable {
    enum Kind: Sendable, Equatable {
        case cacheFirst, cacheThenNetwork, networkFirst, cacheOnly, networkOnly
    }

    let kind: Kind

    /// The store's or a level's value when there is one, else the network.
    public static let cacheFirst = ReadPolicy(kind: .cacheFirst)
    /// The cached value at once when there is one, then the network's (stale-while-revalidate).
    public static let cacheThenNetwork = ReadPolicy(kind: .cacheThenNetwork)
    /// The network, else the cache.
    public static let networkFirst = ReadPolicy(kind: .networkFirst)
    /// The cache only; a miss fails with ``CacheMiss/absent``.
    public static let cacheOnly = ReadPolicy(kind: .cacheOnly)
    /// The network only (the cache is not read, but still written).
    public static let networkOnly = ReadPolicy(kind: .networkOnly)
}

/// Where a ``Store``'s shown value came from.
public enum StoreOrigin: Sendable, Equatable {
    /// A cache level, by name.
    case cache(String)
    /// The network (a fetch).
    case network
    /// A write or an optimistic change made through the store.
    case local
}

/// What a ``Store`` shows for a key: its value (`nil` when it has none, after a removal or a clear), where it came
/// from and when it was saved.
public struct StoreResponse<Value: Sendable>: Sendable {
    /// The shown value: the confirmed value with the pending changes applied; `nil` when there is none.
    public let value: Value?
    /// Where the confirmed value came from (``StoreOrigin/local`` while changes are pending).
    public let origin: StoreOrigin
    /// When the confirmed value was saved (for a cache hit, when the level saved it).
    public let savedAt: Date?
    /// Whether optimistic changes are still waiting for their commit.
    public let hasPendingChanges: Bool
    /// The failure of the read that produced this response, when it fell back to the value already shown.
    public let error: (any Error)?
    let version: Int

    /// How old the confirmed value is at `date`.
    public func age(at date: Date = Date()) -> Duration? {
        savedAt.map { .seconds(date.timeIntervalSince($0)) }
    }
}

/// Errors a ``Store`` reports.
public enum StoreError: Error, Equatable, CustomStringConvertible {
    /// A fetched value was dropped because the key was removed or the store cleared while it was in flight.
    case discarded

    public var description: String {
        "The fetched value was discarded: the key was removed or the store cleared while it was being fetched."
    }
}

/// A confirmed value of a ``Store`` key, with where it came from and when it was saved.
private struct StoredValue<Value: Sendable>: Sendable {
    let value: Value
    let origin: StoreOrigin
    let savedAt: Date
}
