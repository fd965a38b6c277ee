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
/// - ``clear(completion:)`` cancels pending optimistic changes and pending debounced level writes, and empties every
///   level.
public final class Store<Key: Hashable & Sendable, Value: Sendable>: Sendable {
    private let levels: [StoreLevel<Key, Value>]
    private let fetcher: LoaderFamily<Key, Value>
    private let coalescedFetcher: LoaderFamily<Key, Value>
    @usableFromInline let now: @Sendable () -> Date
    private let onWriteFailure: @Sendable (any Error) -> Void
    @usableFromInline let state = Locked(State())

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
            // Changes and the policy's failure come from different threads: serialized, they never overlap.
            let serial = SerializedObserver(observer)
            let changes = subject(for: key).stream.compactMap { $0 }.setFailureType(to: (any Error).self)
            changes.subscribe(StreamObserver(lifetime: observer.lifetime) { serial.send($0) })
            guard observer.lifetime.isActive else { return }
            let token = run(policy, for: key) { failure in
                serial.send(.completion(.failure(failure)))
            }
            observer.onTermination { token.cancel() }
        }
    }

    /// The key's shown value now, if the store has one, and after every change, without reading anything: what a
    /// screen that loads on its own terms observes. The stream never fails and never finishes.
    ///
    /// ```swift
    /// let subscription = store.changes(for: "u1").sink { response in render(response.value) }
    /// ```
    @inlinable
    public func changes(for key: Key) -> EventStream<StoreResponse<Value>, Never> {
        // Inlinable, so that what runs for each delivery is specialized where the store is observed.
        EventStream { [self] observer in
            subject(for: key).stream.compactMap { $0 }.subscribe(observer)
        }
    }

    /// The first response `policy` produces for `key`. With ``ReadPolicy/cacheThenNetwork`` that is the cached
    /// value when there is one, and the fetch the policy started goes on and updates the store (observe it with
    /// ``stream(for:policy:)`` or ``changes(for:)``, or ask ``refresh(_:)`` for the fresh value). With
    /// ``ReadPolicy/networkFirst`` and ``ReadPolicy/networkOnly`` it is what the fetch produced (or the value shown
    /// with the fetch's error attached), never the value shown before the read.
    @inlinable
    public func read(_ key: Key, policy: ReadPolicy = .cacheFirst) -> AnyLoader<StoreResponse<Value>> {
        AnyLoader(Read(store: self, key: key, policy: policy))
    }

    /// A read as a loader: it keeps the loader contract itself (one completion at most, none after a cancel), so it
    /// needs no wrapping. Its answer from a value already shown is inlinable, so that it is specialized where it is
    /// used.
    @usableFromInline
    struct Read: Loader {
        @usableFromInline let store: Store
        @usableFromInline let key: Key
        @usableFromInline let policy: ReadPolicy

        @inlinable
        init(store: Store, key: Key, policy: ReadPolicy) {
            self.store = store
            self.key = key
            self.policy = policy
        }

        @inlinable
        func load(completion: @escaping LoadCompletion<StoreResponse<Value>>) -> any CancellationToken {
            let (store, key, policy) = (store, key, policy)
            // The clock is read only when the policy judges age.
            let now = policy.maxAgeSeconds == nil ? Date.distantPast : store.now()
            // A value the policy serves as it is answers at once (cacheThenNetwork still fetches: it runs below).
            let shown = store.state.withLock { state -> Snapshot? in
                guard policy.kind != .cacheThenNetwork else { return nil }
                return state.usableSnapshot(of: key, under: policy, now: now)
            }
            guard let shown else { return store.startRead(key, policy: policy, completion: completion) }
            completion(.success(shown.response))  // computed outside the lock: it runs the pending changes
            return FinishedToken()
        }
    }

    /// Runs `policy` for a read that no value shown could answer.
    @usableFromInline
    func startRead(
        _ key: Key, policy: ReadPolicy, completion: @escaping LoadCompletion<StoreResponse<Value>>
    ) -> any CancellationToken {
        let pending = PendingLoad(completion)
        let running = run(policy, for: key) {
            pending.complete(.success($0))
        } fail: {
            pending.complete(.failure($0))
        }
        // A cancel before the answer stops the policy; once answered, what the policy still does (the fetch of
        // cacheThenNetwork) goes on.
        return AnyCancellationToken {
            if pending.cancelReportingPending() { running.cancel() }
        }
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
        confirm(value, for: key, origin: .local, savedAt: now(), writingTo: levels.indices, loggedAs: { _ in value })
    }

    /// Replaces `key`'s confirmed value with `transform(value)` (a live update applied to a list, say), atomically
    /// with respect to every other change: `transform` runs outside the lock, and again if the value changed
    /// meanwhile. Writes the result to every level (`nil` removes it from them) and shows it. When the key has no
    /// value and `transform` makes none, nothing changes, except that a fetch in flight gets `transform` applied to
    /// the value it brings (a live update that arrives while the first load runs is kept).
    public func update(_ key: Key, _ transform: @escaping @Sendable (Value?) -> Value?) {
        while true {
            let (base, stamp) = state.withLock { state in
                (state.entries[key]?.confirmed?.value, state.entries[key]?.confirmedVersion ?? 0)
            }
            let next = transform(base)
            let outcome = state.withLock { state -> (applied: Bool, Snapshot?, StoredValue<Value>?) in
                guard (state.entries[key]?.confirmedVersion ?? 0) == stamp else { return (false, nil, nil) }
                guard base != nil || next != nil else {
                    // Nothing to change (no value, none made): the levels keep what they hold, and a fetch in flight
                    // gets the change applied to its value.
                    state.fetchLogs[key]?.log(transform)
                    return (true, nil, nil)
                }
                let replaced = state.setConfirmed(
                    next.map { StoredValue(value: $0, origin: .local, savedAt: now()) }, for: key)
                state.fetchLogs[key]?.log(transform)
                state.levelOperations.append(next.map { .save(key, $0, levels.indices) } ?? .remove(key))
                return (true, state.snapshot(for: key), replaced)
            }
            guard outcome.applied else { continue }
            withExtendedLifetime(outcome.2) {}
            publish(outcome.1)
            applyLevelOperations()
            return
        }
    }

    /// Removes `key`'s value from the store and every level; fetches started before are dropped when they complete.
    public func remove(_ key: Key) {
        let (snapshot, removed) = state.withLock { state -> (Snapshot?, StoredValue<Value>?) in
            state.entries[key, default: Entry()].generation += 1
            let removed = state.setConfirmed(nil, for: key)
            state.levelOperations.append(.remove(key))
            return (state.snapshot(for: key), removed)
        }
        withExtendedLifetime(removed) {}  // released after unlocking
        publish(snapshot)
        applyLevelOperations()
    }

    /// Forgets everything (a logout): cancels pending optimistic changes (their commits are cancelled and their
    /// completions receive ``StoreError/cleared``) and debounced writes, empties every level, and shows every observed
    /// key as empty. Nothing fetched or changed before the clear reappears after it. `completion` runs once every
    /// level has been emptied (or failed to be: see `onWriteFailure`).
    public func clear(completion: @escaping @Sendable () -> Void = {}) {
        let (snapshots, forgotten) = state.withLock { state -> ([Snapshot], [Entry]) in
            state.epoch += 1
            var forgotten: [Entry] = []
            for key in state.entries.keys {
                var emptied = Entry()
                emptied.version = state.entries[key]!.version  // versions only grow, so observers take the clear
                emptied.confirmedVersion = state.entries[key]!.confirmedVersion + 1
                forgotten.append(exchange(&state.entries[key]!, with: emptied))
            }
            state.levelOperations.append(.removeAll(completion))
            return (state.entries.keys.compactMap { state.snapshot(for: $0) }, forgotten)
        }
        // Released here, after unlocking: the pending changes' closures, and their commits, cancelled.
        for commit in forgotten.flatMap({ $0.pending.compactMap { $0.commit } }) {
            commit.completeCancellingStep(.failure(StoreError.cleared))
        }
        for snapshot in snapshots { publish(snapshot) }
        applyLevelOperations()
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

    /// Runs `policy` for `key`; calls `answer` with the response it produced first (a level's hit, the fetched
    /// value, or the value shown with the fetch's error attached) and `fail` when it ends with nothing to show.
    private func run(
        _ policy: ReadPolicy,
        for key: Key,
        answer: @escaping @Sendable (StoreResponse<Value>) -> Void = { _ in },
        fail: @escaping @Sendable (any Error) -> Void
    ) -> any CancellationToken {
        let now = now()
        let hasValue = state.withLock { $0.hasUsableValue(for: key, under: policy, now: now) }
        let step = PendingLoad<Void> { _ in }
        let answerWithShownValue = { [self] in
            if let response = currentResponse(for: key) { answer(response) }
        }
        let fetchThenReport: @Sendable (_ fallbackToCache: Bool) -> Void = { [self] fallbackToCache in
            step.startStep {
                fetch(key, sharing: true) { [self] result in
                    let error: any Error
                    switch result {
                    case .success(let response):
                        answer(response)
                        return step.complete(.success(()))
                    case .failure(let failure):
                        guard (failure as? StoreError) != .discarded else {
                            // Dropped on purpose (the key was removed or the store cleared meanwhile): nothing
                            // failed, and what is shown now is the answer.
                            answer(
                                currentResponse(for: key)
                                    ?? StoreResponse(
                                        value: nil, origin: .local, savedAt: nil, hasPendingChanges: false, error: nil,
                                        version: 0))
                            return step.complete(.success(()))
                        }
                        error = failure
                    }
                    if fallbackToCache {
                        step.startStep {
                            readLevels(key, from: 0, error: error) { hit in
                                if let hit { answer(hit) } else { self.reportOrFail(key, error, answer, fail) }
                                step.complete(.success(()))
                            }
                        }
                    } else {
                        reportOrFail(key, error, answer, fail)
                        step.complete(.success(()))
                    }
                }
            }
        }
        switch policy.kind {
        case .cacheFirst:
            guard !hasValue else {
                answerWithShownValue()
                return step
            }
            step.startStep {
                readLevels(key, from: 0, error: nil, acceptedBy: policy) { hit in
                    if let hit { answer(hit) } else { fetchThenReport(false) }
                }
            }
        case .cacheThenNetwork:
            if hasValue {
                answerWithShownValue()
                fetchThenReport(false)
            } else {
                step.startStep {
                    readLevels(key, from: 0, error: nil) { hit in
                        if let hit { answer(hit) }
                        fetchThenReport(false)
                    }
                }
            }
        case .networkFirst:
            fetchThenReport(true)
        case .cacheOnly:
            guard !hasValue else {
                answerWithShownValue()
                return step
            }
            step.startStep {
                readLevels(key, from: 0, error: nil) { hit in
                    if let hit { answer(hit) } else { fail(CacheMiss.absent) }
                }
            }
        case .networkOnly:
            fetchThenReport(false)
        }
        return step
    }

    /// Reads the levels from `index` on; the first hit young enough for `policy` (when given) is confirmed (and
    /// written to the faster levels). Calls `done` with the key's response after a hit (what the store shows, when
    /// it learned something newer meanwhile), with `nil` when every level missed.
    private func readLevels(
        _ key: Key,
        from index: Int,
        error: (any Error)?,
        acceptedBy policy: ReadPolicy? = nil,
        done: @escaping @Sendable (StoreResponse<Value>?) -> Void
    ) -> any CancellationToken {
        guard index < levels.count else {
            done(nil)
            return FinishedToken()
        }
        let token = AnyCancellationToken()
        // The read is queued behind the level writes and removals already decided, so it never sees data older
        // than the store's; its value is confirmed only if the store learned nothing about the key meanwhile.
        let read: @Sendable (Result<CachedValue<Value>, any Error>, Stamp) -> Void = { [self] result, stamp in
            guard !token.isCancelled else { return }
            switch result {
            case .success(let cached) where policy?.accepts(savedAt: cached.savedAt, now: now()) == false:
                _ = readLevels(key, from: index + 1, error: error, acceptedBy: policy, done: done)
            case .success(let cached):
                let confirmed = confirm(
                    cached.value, for: key, origin: .cache(levels[index].name), savedAt: cached.savedAt,
                    writingTo: 0..<index, error: error, ifUnchangedSince: stamp)
                // A hit, even when the store knew better meanwhile: then what it shows is the answer.
                done(
                    confirmed ?? currentResponse(for: key)
                        ?? StoreResponse(
                            value: cached.value, origin: .cache(levels[index].name), savedAt: cached.savedAt,
                            hasPendingChanges: false, error: error, version: 0))
            case .failure:
                _ = readLevels(key, from: index + 1, error: error, acceptedBy: policy, done: done)
            }
        }
        state.withLock { state in
            let stamp = Stamp(
                epoch: state.epoch, generation: state.entries[key]?.generation ?? 0,
                confirmedVersion: state.entries[key]?.confirmedVersion ?? 0)
            state.levelOperations.append(.read(key, index, stamp, read))
        }
        applyLevelOperations()
        return token
    }

    /// Fetches `key` (sharing a fetch in flight, or not) and confirms the fresh value, with the local changes made
    /// since the fetch started applied to it again (a fetch that started before a change must not undo it).
    ///
    /// A fetch may share the upstream load of one that started earlier, so it counts from the oldest fetch in flight
    /// when it starts: a change it did not miss may be applied twice, which changes that set, insert or remove by
    /// identity tolerate.
    private func fetch(
        _ key: Key,
        sharing: Bool,
        completion: @escaping @Sendable (Result<StoreResponse<Value>, any Error>) -> Void
    ) -> any CancellationToken {
        let (generation, epoch, id) = state.withLock { state -> (Int, Int, Int) in
            state.nextID += 1
            var log = state.fetchLogs[key, default: FetchLog()]
            log.fetches[state.nextID] = min(log.fetches.values.min() ?? .max, log.nextSequence)
            state.fetchLogs[key] = log
            return (state.entries[key]?.generation ?? 0, state.epoch, state.nextID)
        }
        let source = sharing ? coalescedFetcher[key] : fetcher[key]
        let token = source.load { [self] result in
            switch result {
            case .success(let value):
                let confirmed = confirmFetched(value, for: key, fetch: id, epoch: epoch, generation: generation)
                completion(confirmed.map { .success($0) } ?? .failure(StoreError.discarded))
            case .failure(let error):
                endFetch(id, of: key)
                completion(.failure(error))
            }
        }
        return AnyCancellationToken { [weak self] in
            token.cancel()
            self?.endFetch(id, of: key)
        }
    }

    private func endFetch(_ id: Int, of key: Key) {
        let released = state.withLock { state in state.endFetch(id, of: key) }
        withExtendedLifetime(released) {}
    }

    /// Confirms a fetched value unless the store was cleared (or the key removed) since the fetch started, with the
    /// changes logged since then applied to it (outside the lock, and again if the value moved meanwhile).
    private func confirmFetched(
        _ value: Value, for key: Key, fetch id: Int, epoch: Int, generation: Int
    ) -> StoreResponse<Value>? {
        while true {
            let read = state.withLock { state -> (changes: [@Sendable (Value?) -> Value?], stamp: Int)? in
                guard state.epoch == epoch, (state.entries[key]?.generation ?? 0) == generation,
                    let log = state.fetchLogs[key], let start = log.fetches[id]
                else { return nil }
                return (
                    log.changeLog.filter { $0.sequence > start }.map { $0.change },
                    state.entries[key]?.confirmedVersion ?? 0
                )
            }
            guard let read else {
                endFetch(id, of: key)
                return nil
            }
            let rebased = read.changes.reduce(Optional(value)) { value, change in change(value) }
            let savedAt = now()
            let outcome = state.withLock {
                state -> (applied: Bool, Snapshot?, StoredValue<Value>?, [@Sendable (Value?) -> Value?]) in
                guard state.epoch == epoch, (state.entries[key]?.generation ?? 0) == generation,
                    state.fetchLogs[key]?.fetches[id] != nil
                else { return (true, nil, nil, []) }
                guard (state.entries[key]?.confirmedVersion ?? 0) == read.stamp else { return (false, nil, nil, []) }
                let released = state.endFetch(id, of: key)
                let origin: StoreOrigin = read.changes.isEmpty ? .network : .local
                let replaced = state.setConfirmed(
                    rebased.map { StoredValue(value: $0, origin: origin, savedAt: savedAt) }, for: key)
                state.levelOperations.append(rebased.map { .save(key, $0, levels.indices) } ?? .remove(key))
                return (true, state.snapshot(for: key), replaced, released)
            }
            guard outcome.applied else { continue }
            withExtendedLifetime((outcome.2, outcome.3)) {}  // released after unlocking
            guard let snapshot = outcome.1 else {
                endFetch(id, of: key)
                return nil
            }
            publish(snapshot)
            applyLevelOperations()
            return snapshot.response
        }
    }

    /// Attaches `error` to the key's shown value, or fails the read when there is nothing to show.
    private func reportOrFail(
        _ key: Key, _ error: any Error, _ answer: @Sendable (StoreResponse<Value>) -> Void,
        _ fail: @Sendable (any Error) -> Void
    ) {
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
        answer(snapshot.response)
    }

    /// What the key shows now, without publishing anything; `nil` when the store never heard of the key.
    private func currentResponse(for key: Key) -> StoreResponse<Value>? {
        state.withLock { $0.peek(at: key) }?.response
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
        error: (any Error)? = nil,
        ifUnchangedSince stamp: Stamp? = nil,
        loggedAs change: (@Sendable (Value?) -> Value?)? = nil
    ) -> StoreResponse<Value>? {
        let (snapshot, replaced) = state.withLock { state -> (Snapshot?, StoredValue<Value>?) in
            if let epoch, state.epoch != epoch { return (nil, nil) }
            if let generation, (state.entries[key]?.generation ?? 0) != generation { return (nil, nil) }
            if let stamp,
                stamp.epoch != state.epoch || stamp.generation != (state.entries[key]?.generation ?? 0)
                    || stamp.confirmedVersion != (state.entries[key]?.confirmedVersion ?? 0)
            {
                return (nil, nil)
            }
            let replaced = state.setConfirmed(StoredValue(value: value, origin: origin, savedAt: savedAt), for: key)
            if let change { state.fetchLogs[key]?.log(change) }
            if !targets.isEmpty { state.levelOperations.append(.save(key, value, targets)) }
            state.entries[key]!.error = error
            defer { state.entries[key]!.error = nil }
            return (state.snapshot(for: key), replaced)
        }
        withExtendedLifetime(replaced) {}
        guard let snapshot else { return nil }
        publish(snapshot)
        applyLevelOperations()
        return snapshot.response
    }

    /// Settles a pending change: accepted, it joins the confirmed value (written to every level); refused or
    /// cancelled, it is dropped. Either way the key's shown value is published again. The change runs outside the
    /// lock, and again if the confirmed value changed meanwhile.
    private func settle(_ key: Key, mutation id: Int, epoch: Int, accepted: Bool) {
        while true {
            let read = state.withLock { state -> (change: @Sendable (Value?) -> Value?, base: Value?, stamp: Int)? in
                guard state.epoch == epoch, let entry = state.entries[key],
                    let mutation = entry.pending.first(where: { $0.id == id })
                else { return nil }
                return (mutation.change, entry.confirmed?.value, entry.confirmedVersion)
            }
            guard let read else { return }
            let confirmed = accepted ? read.change(read.base) : nil
            let outcome = state.withLock { state -> (settled: Bool, Snapshot?, Mutation?, StoredValue<Value>?) in
                guard state.epoch == epoch, let index = state.entries[key]?.pending.firstIndex(where: { $0.id == id })
                else { return (true, nil, nil, nil) }
                guard state.entries[key]!.confirmedVersion == read.stamp else { return (false, nil, nil, nil) }
                let mutation = state.entries[key]!.pending.remove(at: index)
                var replaced: StoredValue<Value>?
                if accepted {
                    replaced = state.setConfirmed(
                        confirmed.map { StoredValue(value: $0, origin: .local, savedAt: now()) }, for: key)
                    state.fetchLogs[key]?.log(mutation.change)
                    state.levelOperations.append(confirmed.map { .save(key, $0, levels.indices) } ?? .remove(key))
                }
                return (true, state.snapshot(for: key), mutation, replaced)
            }
            guard outcome.settled else { continue }
            withExtendedLifetime((outcome.2, outcome.3)) {}  // the change and the old value, released unlocked
            publish(outcome.1)
            applyLevelOperations()
            return
        }
    }

    // MARK: Levels

    /// Runs the level operations queued by state changes, in the order of those changes, one at a time: whoever
    /// finds the queue idle drains it (outside the lock), others only queue.
    private func applyLevelOperations() {
        let starts = state.withLock { state -> Bool in
            guard !state.isApplyingLevelOperations, !state.levelOperations.isEmpty else { return false }
            state.isApplyingLevelOperations = true
            return true
        }
        guard starts else { return }
        while true {
            let batch = state.withLock { state -> [LevelOperation] in
                let batch = exchange(&state.levelOperations, with: [])
                if batch.isEmpty { state.isApplyingLevelOperations = false }
                return batch
            }
            if batch.isEmpty { return }
            for operation in batch { apply(operation) }
        }
    }

    private func apply(_ operation: LevelOperation) {
        let report: @Sendable (Result<Void, any Error>) -> Void = { [onWriteFailure] result in
            if case .failure(let error) = result { onWriteFailure(error) }
        }
        switch operation {
        case .read(let key, let index, let stamp, let completion):
            levels[index].cache.value(for: key) { completion($0, stamp) }
        case .save(let key, let value, let targets):
            for index in targets {
                guard let interval = levels[index].writeDebounce else {
                    levels[index].cache.save(value, for: key, completion: report)
                    continue
                }
                debounce(value, for: key, level: index, interval: interval)
            }
        case .flush(let key, let index, let id, let value):
            let isCurrent = state.withLock { state -> Bool in
                guard state.debounced[key]?[index]?.id == id else { return false }
                state.debounced[key]![index] = nil
                return true
            }
            if isCurrent { levels[index].cache.save(value, for: key, completion: report) }
        case .remove(let key):
            let timers = state.withLock { state in state.debounced.removeValue(forKey: key) ?? [:] }
            for (_, write) in timers { write.timer.cancel() }
            for level in levels { level.cache.removeValue(for: key, completion: report) }
        case .removeAll(let done):
            let timers = state.withLock { exchange(&$0.debounced, with: [:]) }
            for write in timers.values.flatMap({ $0.values }) { write.timer.cancel() }
            guard !levels.isEmpty else { return done() }
            let remaining = Locked(levels.count)
            for level in levels {
                level.cache.removeAll { result in
                    report(result)
                    let isLast = remaining.withLock { remaining -> Bool in
                        remaining -= 1
                        return remaining == 0
                    }
                    if isLast { done() }
                }
            }
        }
    }

    /// Writes `value` to a debounced level once no newer value for the key came for `interval`.
    private func debounce(_ value: Value, for key: Key, level index: Int, interval: Duration) {
        let id = state.withLock { state -> Int in
            state.nextID += 1
            return state.nextID
        }
        // The timer keeps the store alive until it fires: a store released with a write pending still writes it.
        let timer = levels[index].scheduler.schedule(after: interval) { [self] in
            state.withLock { $0.levelOperations.append(.flush(key, index, id, value)) }
            applyLevelOperations()
        }
        let replaced = state.withLock { state -> DebouncedWrite? in
            exchange(&state.debounced[key, default: [:]][index], with: DebouncedWrite(id: id, timer: timer))
        }
        replaced?.timer.cancel()
    }

    @usableFromInline
    func subject(for key: Key) -> CurrentValueStreamSubject<StoreResponse<Value>?, Never> {
        let (subject, snapshot) = state.withLock {
            state -> (CurrentValueStreamSubject<StoreResponse<Value>?, Never>, Snapshot?) in
            if let subject = state.subjects[key] { return (subject, nil) }
            let subject = CurrentValueStreamSubject<StoreResponse<Value>?, Never>(nil)
            state.subjects[key] = subject
            return (subject, state.snapshot(for: key))
        }
        publish(snapshot)
        return subject
    }

    /// Sends `snapshot` to the key's observers unless a newer version was sent already (publishes from several
    /// threads may arrive out of order). The shown value is computed here, outside the lock: it runs the pending
    /// changes.
    private func publish(_ snapshot: Snapshot?) {
        guard let snapshot, let subject = state.withLock({ $0.subjects[snapshot.key] }) else { return }
        let response = snapshot.response
        subject.update { current in
            guard (current?.version ?? -1) < response.version else { return nil }
            return response
        }
    }

    // MARK: Types

    @usableFromInline
    struct Mutation: Sendable {
        let id: Int
        @usableFromInline let change: @Sendable (Value?) -> Value?
        var commit: PendingLoad<Void>?

        init(id: Int, change: @escaping @Sendable (Value?) -> Value?) {
            self.id = id
            self.change = change
        }
    }

    struct DebouncedWrite: Sendable {
        let id: Int
        let timer: any CancellationToken
    }

    /// What the store knew of a key when an operation started.
    struct Stamp: Sendable {
        let epoch: Int
        let generation: Int
        let confirmedVersion: Int
    }

    enum LevelOperation: Sendable {
        case read(Key, Int, Stamp, @Sendable (Result<CachedValue<Value>, any Error>, Stamp) -> Void)
        case save(Key, Value, Range<Int>)
        case flush(Key, Int, Int, Value)
        case remove(Key)
        case removeAll(@Sendable () -> Void)
    }

    @usableFromInline
    struct Entry: Sendable {
        @usableFromInline var confirmed: StoredValue<Value>?
        /// Counts changes of `confirmed`, so that a change computed outside the lock knows whether it is stale.
        var confirmedVersion = 0
        @usableFromInline var pending: [Mutation] = []
        var generation = 0
        @usableFromInline var version = 0
        @usableFromInline var error: (any Error)?
    }

    /// The fetches of a key in flight, and the local changes made meanwhile, which their values may miss.
    struct FetchLog: Sendable {
        /// The fetches in flight, by id, with the sequence number of the oldest change their value may miss.
        var fetches: [Int: Int] = [:]
        /// The local changes made while fetches were in flight, to apply again to their values.
        var changeLog: [(sequence: Int, change: @Sendable (Value?) -> Value?)] = []
        var nextSequence = 0

        /// Notes `change` (just applied to `confirmed`) for the fetches in flight.
        mutating func log(_ change: @escaping @Sendable (Value?) -> Value?) {
            guard !fetches.isEmpty else { return }
            nextSequence += 1
            changeLog.append((nextSequence, change))
        }

        /// Forgets fetch `id`, and the logged changes no fetch in flight needs any more (returned, to be released
        /// after unlocking).
        mutating func endFetch(_ id: Int) -> [@Sendable (Value?) -> Value?] {
            fetches[id] = nil
            let oldest = fetches.values.min() ?? .max
            let kept = changeLog.filter { $0.sequence > oldest }
            defer { changeLog = kept }
            return changeLog.filter { $0.sequence <= oldest }.map { $0.change }
        }
    }

    /// What the key shows, captured under the lock and computed outside it.
    @usableFromInline
    struct Snapshot: Sendable {
        @usableFromInline let key: Key
        @usableFromInline let version: Int
        @usableFromInline let confirmed: StoredValue<Value>?
        @usableFromInline let changes: [@Sendable (Value?) -> Value?]
        @usableFromInline let error: (any Error)?

        @inlinable
        init(
            key: Key, version: Int, confirmed: StoredValue<Value>?, changes: [@Sendable (Value?) -> Value?],
            error: (any Error)?
        ) {
            self.key = key
            self.version = version
            self.confirmed = confirmed
            self.changes = changes
            self.error = error
        }

        /// What `entry` shows, as version `version`.
        @inlinable @inline(__always)
        init(key: Key, entry: Entry, version: Int) {
            self.init(
                key: key, version: version, confirmed: entry.confirmed, changes: entry.pending.map { $0.change },
                error: entry.error)
        }

        @inlinable
        var response: StoreResponse<Value> {
            StoreResponse(
                value: changes.reduce(confirmed?.value) { value, change in change(value) },
                origin: changes.isEmpty ? confirmed?.origin ?? .local : .local,
                savedAt: confirmed?.savedAt,
                hasPendingChanges: !changes.isEmpty,
                error: error,
                version: version)
        }
    }

    @usableFromInline
    struct State: Sendable {
        @usableFromInline var entries: [Key: Entry] = [:]
        var fetchLogs: [Key: FetchLog] = [:]
        var subjects: [Key: CurrentValueStreamSubject<StoreResponse<Value>?, Never>] = [:]
        var debounced: [Key: [Int: DebouncedWrite]] = [:]
        var levelOperations: [LevelOperation] = []
        var isApplyingLevelOperations = false
        var epoch = 0
        var nextID = 0

        /// Forgets fetch `id` of `key`, and the logged changes no fetch in flight needs any more (returned, to be
        /// released after unlocking).
        mutating func endFetch(_ id: Int, of key: Key) -> [@Sendable (Value?) -> Value?] {
            guard var log = fetchLogs.removeValue(forKey: key) else { return [] }
            let released = log.endFetch(id)
            if !log.fetches.isEmpty { fetchLogs[key] = log }
            return released
        }

        /// Replaces the key's confirmed value and returns the old one (to be released after unlocking).
        mutating func setConfirmed(_ stored: StoredValue<Value>?, for key: Key) -> StoredValue<Value>? {
            entries[key, default: Entry()].confirmedVersion += 1
            return exchange(&entries[key]!.confirmed, with: stored)
        }

        /// Whether the key has a confirmed value that `policy` may serve as it is (for ``ReadPolicy/cacheFirst(maxAge:)``
        /// only while it is young enough).
        @inlinable
        func hasUsableValue(for key: Key, under policy: ReadPolicy, now: Date) -> Bool {
            Self.serves(entries[key]?.confirmed, under: policy, now: now)
        }

        /// What is shown for `key` when `policy` serves it as it is, with one dictionary lookup: see
        /// ``hasUsableValue(for:under:now:)``.
        @inlinable
        func usableSnapshot(of key: Key, under policy: ReadPolicy, now: Date) -> Snapshot? {
            guard let entry = entries[key], Self.serves(entry.confirmed, under: policy, now: now) else { return nil }
            return Snapshot(key: key, entry: entry, version: entry.version)
        }

        @inlinable
        static func serves(_ confirmed: StoredValue<Value>?, under policy: ReadPolicy, now: Date) -> Bool {
            guard let confirmed else { return false }
            switch policy.kind {
            case .networkFirst, .networkOnly: return false
            case .cacheFirst, .cacheThenNetwork, .cacheOnly: return policy.accepts(savedAt: confirmed.savedAt, now: now)
            }
        }

        /// The key's shown value, at its current version.
        @inlinable
        func peek(at key: Key) -> Snapshot? {
            guard let entry = entries[key] else { return nil }
            return Snapshot(key: key, entry: entry, version: entry.version)
        }

        /// The key's shown value, with a new version.
        mutating func snapshot(for key: Key) -> Snapshot? {
            guard let entry = entries[key] else { return nil }
            entries[key]!.version += 1
            return Snapshot(key: key, entry: entry, version: entry.version + 1)
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
    /// one came for `interval` on `scheduler` (a database under a stream of live updates). A write waiting keeps the
    /// store alive until it lands, so releasing the store loses none; a removal or a clear cancels it.
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
    @usableFromInline
    enum Kind: Sendable, Equatable {
        case cacheFirst, cacheThenNetwork, networkFirst, cacheOnly, networkOnly
    }

    @usableFromInline let kind: Kind
    /// For ``cacheFirst(maxAge:)``: how old, in seconds, a value may be to be served (`nil`: any age).
    @usableFromInline let maxAgeSeconds: Double?

    init(kind: Kind, maxAge: Duration? = nil) {
        self.kind = kind
        maxAgeSeconds = maxAge.map { Double($0.components.seconds) + Double($0.components.attoseconds) / 1e18 }
    }

    /// Whether a value saved at `savedAt` is young enough for this policy at `now`: as `CacheExpiry.maxAge` judges,
    /// younger than the age and not stamped in the future.
    @inlinable
    func accepts(savedAt: Date, now: Date) -> Bool {
        guard let maxAgeSeconds else { return true }
        return savedAt <= now && now.timeIntervalSince(savedAt) < maxAgeSeconds
    }

    /// The store's or a level's value when there is one, else the network.
    public static let cacheFirst = ReadPolicy(kind: .cacheFirst)
    /// Like ``cacheFirst``, but the store's own value counts only while it was saved less than `maxAge` ago (the
    /// levels apply their own expiry); an older one is read anew from the levels, else the network, and stays shown
    /// if both fail.
    public static func cacheFirst(maxAge: Duration) -> ReadPolicy {
        ReadPolicy(kind: .cacheFirst, maxAge: maxAge)
    }
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
    // One immutable reference: a response is sent to every observer of its key and through each operator they
    // chain, and a copy is then one retain, even where the store's generic code copies it at run time.
    @usableFromInline let storage: Storage

    @usableFromInline
    final class Storage: Sendable {
        @usableFromInline let value: Value?
        @usableFromInline let origin: StoreOrigin
        @usableFromInline let savedAt: Date?
        @usableFromInline let hasPendingChanges: Bool
        @usableFromInline let error: (any Error)?
        @usableFromInline let version: Int

        @inlinable
        init(
            value: Value?, origin: StoreOrigin, savedAt: Date?, hasPendingChanges: Bool, error: (any Error)?,
            version: Int
        ) {
            self.value = value
            self.origin = origin
            self.savedAt = savedAt
            self.hasPendingChanges = hasPendingChanges
            self.error = error
            self.version = version
        }
    }

    /// The shown value: the confirmed value with the pending changes applied; `nil` when there is none.
    @inlinable
    public var value: Value? { storage.value }
    /// Where the confirmed value came from (``StoreOrigin/local`` while changes are pending).
    @inlinable
    public var origin: StoreOrigin { storage.origin }
    /// When the confirmed value was saved (for a cache hit, when the level saved it).
    @inlinable
    public var savedAt: Date? { storage.savedAt }
    /// Whether optimistic changes are still waiting for their commit.
    @inlinable
    public var hasPendingChanges: Bool { storage.hasPendingChanges }
    /// The failure of the read that produced this response, when it fell back to the value already shown.
    @inlinable
    public var error: (any Error)? { storage.error }
    @inlinable
    var version: Int { storage.version }

    @inlinable
    init(
        value: Value?, origin: StoreOrigin, savedAt: Date?, hasPendingChanges: Bool, error: (any Error)?, version: Int
    ) {
        storage = Storage(
            value: value, origin: origin, savedAt: savedAt, hasPendingChanges: hasPendingChanges, error: error,
            version: version)
    }

    /// How old the confirmed value is at `date`.
    public func age(at date: Date = Date()) -> Duration? {
        savedAt.map { .seconds(date.timeIntervalSince($0)) }
    }
}

/// Errors a ``Store`` reports.
public enum StoreError: Error, Equatable, CustomStringConvertible {
    /// A fetched value was dropped because the key was removed or the store cleared while it was in flight.
    case discarded
    /// An optimistic change was pending when the store was cleared: it was undone and its commit cancelled.
    case cleared

    public var description: String {
        switch self {
        case .discarded:
            "The fetched value was discarded: the key was removed or the store cleared while it was being fetched."
        case .cleared: "The change was undone: the store was cleared before the server confirmed it."
        }
    }
}

/// A confirmed value of a ``Store`` key, with where it came from and when it was saved.
@usableFromInline
struct StoredValue<Value: Sendable>: Sendable {
    @usableFromInline let value: Value
    @usableFromInline let origin: StoreOrigin
    // Seconds since the reference date rather than a `Date`, which (from a resilient module) would make copies
    // run generic code at run time.
    @usableFromInline let savedAtSeconds: Double

    @inlinable
    var savedAt: Date { Date(timeIntervalSinceReferenceDate: savedAtSeconds) }

    @inlinable
    init(value: Value, origin: StoreOrigin, savedAt: Date) {
        self.value = value
        self.origin = origin
        savedAtSeconds = savedAt.timeIntervalSinceReferenceDate
    }
}
