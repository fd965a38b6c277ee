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
/// - ``refresh(_:completion:)`` always fetches anew; it never joins a fetch that started before it was asked.
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
    @usableFromInline let levels: [StoreLevel<Key, Value>]
    @usableFromInline let fetcher: LoaderFamily<Key, Value>
    @usableFromInline let now: @Sendable () -> Date
    /// Tells `onWriteFailure` of a failed level operation: made once, as each level write (and each ticket a write
    /// holds) needs it.
    @usableFromInline let reportFailure: Machine.SaveTicket.Report
    /// The maximum age of the values cache-first and cache-then-network reads take as fresh, unless they say.
    @usableFromInline let maxAgeSeconds: Double?
    @usableFromInline let network: NetworkMode
    @usableFromInline let state: Locked<StoreCore<Key>>
    /// The mutation queues over the store, told of each clear.
    @usableFromInline let clearObservers = ClearObservers()
    /// Told what happens (see ``StoreEvent``), when the store was given it.
    @usableFromInline let events: (@Sendable (StoreEvent<Key>) -> Void)?
    /// Where fetches start.
    let fetchContext: FetchContext
    /// How fetches are coordinated with other processes, when they are.
    let coordinator: FetchCoordinator<Key>?
    /// Whether an upstream load is told to `events`, started in a `fetchContext` of the app's, or coordinated.
    @usableFromInline let wrapsFetches: Bool

    @usableFromInline typealias Machine = StoreMachine
    @usableFromInline typealias Snapshot = StoreMachine.Snapshot

    /// Creates a store.
    /// - Parameters:
    ///   - levels: the caches, fastest first (memory, then disk or a database).
    ///   - fetch: the source of fresh values (the network); concurrent reads of one key share one fetch.
    ///   - keptValues: how many values of keys no longer in use the store keeps itself (the last to fall out of use),
    ///     for reads that answer without asking a level. By default a store with levels keeps 256 (0 keeps none: the
    ///     levels hold them), and a store without levels, being its own cache, keeps every value.
    ///   - maxAge: how long a value stays fresh for reads that do not say (``ReadPolicy/cacheFirst`` and
    ///     ``ReadPolicy/cacheThenNetwork``), and for ``revalidate()``; `nil`: until it is invalidated.
    ///   - network: what fetches do while the network cannot be reached (by default, they start anyway).
    ///   - now: the clock responses and the levels' saves are stamped with, and ages and invalidations are judged
    ///     against (give the levels the same one: they judge expiry with theirs).
    ///   - fetchContext: where fetches start: by default in the task of the caller that started each (see
    ///     ``FetchContext``).
    ///   - coordination: how fetches are coordinated with other processes sharing a level, so that each key is
    ///     fetched once across them (see ``FetchCoordination``); by default they are not.
    ///   - onWriteFailure: told of every failed level write or removal (the store's value stays as shown).
    ///   - events: told what happens, for logs, metrics and traces: hits and misses by level, level failures, fetches
    ///     started, joined and ended (see ``StoreEvent``).
    public init(
        levels: [StoreLevel<Key, Value>],
        fetch: LoaderFamily<Key, Value>,
        keptValues: Int? = nil,
        maxAge: Duration? = nil,
        network: NetworkMode = .always,
        now: @escaping @Sendable () -> Date = { Date() },
        fetchContext: FetchContext = .caller,
        coordination: FetchCoordination<Key>? = nil,
        onWriteFailure: @escaping @Sendable (any Error) -> Void = { _ in },
        events: (@Sendable (StoreEvent<Key>) -> Void)? = nil
    ) {
        var levels = events.map { events in levels.map { $0.reporting(to: events) } } ?? levels
        self.events = events
        self.fetchContext = fetchContext
        if let coordination {
            let name = coordination.sharedLevel
            guard let shared = levels.firstIndex(where: { $0.name == name }) else {
                preconditionFailure("The fetch coordination waits in the level “\(name)”; the store has no such level")
            }
            let coordinator = FetchCoordinator(coordination, sharedLevel: shared)
            // A lease is given back once the value fetched under it reached the shared level.
            levels[shared] = levels[shared].runningAfterSaves(coordinator)
            self.coordinator = coordinator
        } else {
            coordinator = nil
        }
        self.levels = levels
        wrapsFetches = events != nil || fetchContext.run != nil || coordination != nil
        // The store looks at the connectivity itself, knowing when each request goes out (`loadUpstream`).
        fetcher = fetch
        maxAgeSeconds = maxAge?.seconds
        self.network = network
        self.now = now
        reportFailure = Machine.SaveTicket.Report { result in
            if case .failure(let error) = result { onWriteFailure(error) }
        }
        let debounced = Set(levels.indices.filter { levels[$0].writeDebounce != nil })
        let kept = keptValues ?? (levels.isEmpty ? .max : 256)
        state = Locked(
            StoreCore(
                machine: Machine(
                    levelNames: levels.map { $0.name }, debouncedLevels: debounced, keptValues: kept,
                    recordsEvictions: events != nil)))
    }

    /// `change` as the machine runs it: on the value it keeps, which the store made from a `Value`.
    @inlinable
    static func erase(_ change: @escaping @Sendable (Value?) -> Value?) -> Machine.Change {
        { box in change(box.map { ($0 as! ValueBox<Value>).value }).map { ValueBox($0) } }
    }

    /// Runs `body` on the machine under the store's lock, and releases what the machine let go of (a dropped
    /// entry, with its key and value) after unlocking: a key's or a value's deinitializer is the caller's code.
    @inlinable
    func locked<Result>(_ body: (inout Machine) -> Result) -> Result {
        let (result, released) = state.withLock { core in
            let result = body(&core.machine)
            core.settle()
            return (result, core.machine.takeReleased())
        }
        if released != nil { release(consume released) }  // handed over, not copied
        return result
    }

    /// ``locked(_:)`` for an event of `key`, which `body` names by its slot.
    @inlinable
    func locked<Result>(_ key: Key, _ body: (inout Machine, Int) -> Result) -> Result {
        let (result, released) = state.withLock { core in
            let (slot, isNew) = core.slots.slot(for: key)
            let result = body(&core.machine, slot)
            if isNew, !core.machine.uses(slot) { core.slots.release(slot) }
            core.settle()
            return (result, core.machine.takeReleased())
        }
        if released != nil { release(consume released) }  // handed over, not copied
        return result
    }

    /// ``locked(_:)`` with the slots of the keys too: for an event that answers with keys, named while their slots
    /// are theirs.
    @inlinable
    func lockedCore<Result>(_ body: (inout StoreCore<Key>) -> Result) -> Result {
        let (result, released) = state.withLock { core in
            let result = body(&core)
            core.settle()
            return (result, core.machine.takeReleased())
        }
        if released != nil { release(consume released) }
        return result
    }

    /// ``locked(_:)`` for an event that answers with keys, by their slots.
    @inlinable
    func lockedKeys(_ body: (inout Machine) -> [Int]) -> [Key] {
        lockedCore { core in body(&core.machine).map { core.slots.key(of: $0) } }
    }

    /// A predicate of invalidations that accepts `key` alone.
    @inlinable
    static func matching(_ key: Key) -> @Sendable (Machine.AnyKey) -> Bool {
        { ($0 as? Key) == key }
    }

    /// Releases what the machine let go of, after unlocking, and publishes the notices it has for state observers
    /// (rarely anything: not inlined).
    @inlinable @inline(never)
    func release(_ released: consuming StoreReleased?) {
        if released?.hasNotices == true { publishNotices() }
    }

    /// The number of keys the store holds in memory: the keys in use (observed, being read, fetched or changed, or
    /// waiting for a level write) and the values it keeps (see `keptValues`).
    @inlinable
    public var count: Int {
        locked { $0.count }
    }

    // MARK: Reading

    /// The key's shown value now and after every change, starting with what `policy` reads.
    ///
    /// The stream fails only when the policy's read finds nothing to show (a cache-only miss, a failed fetch with
    /// nothing cached); a failure after a value was shown is attached to the next response as
    /// ``StoreResponse/error``, and the stream goes on.
    public func stream(for key: Key, policy: ReadPolicy = .cacheFirst) -> EventStream<StoreResponse<Value>, any Error> {
        let policy = policy.defaulting(maxAgeSeconds: maxAgeSeconds)
        return EventStream { [self] observer in
            // Changes and the policy's failure come from different threads: serialized, they never overlap.
            let serial = SerializedObserver(observer)
            let changes = changes(for: key).setFailureType(to: (any Error).self)
            changes.subscribe(StreamObserver(lifetime: observer.lifetime) { serial.send($0) })
            guard observer.lifetime.isActive else { return }
            let token = run(policy, for: key) { failure in
                serial.send(.completion(.failure(failure)))
            }
            observer.onTermination { token.cancel() }
        }
    }

    /// The key's shown value now, if the store has one, and after every change, without reading anything: what a
    /// screen that loads on its own terms observes. The stream never fails and never finishes. While it is
    /// observed, the store holds the key in memory.
    ///
    /// ```swift
    /// let subscription = store.changes(for: "u1").sink { response in render(response.value) }
    /// ```
    @inlinable
    public func changes(for key: Key) -> EventStream<StoreResponse<Value>, Never> {
        // Inlinable, so that what runs for each delivery is specialized where the store is observed.
        EventStream { [self] observer in
            let subject = startObserving(key)
            observer.onTermination { [self] in stopObserving(key) }
            subject.stream.compactMap { $0.map { StoreResponse<Value>($0) } }.subscribe(observer)
        }
    }

    /// The key's state now and after every change: the value shown, whether the store is fetching the key (for
    /// anyone: a screen's read, a refresh, a revalidation), and the failure of the latest fetch. Like
    /// ``changes(for:)``, it reads nothing by itself, never fails and never finishes, and the store holds the key in
    /// memory while it is observed; what a screen binds to.
    ///
    /// ```swift
    /// let subscription = store.states(for: "u1").sink { state in
    ///     switch state.loadingState {
    ///     case .idle: showPlaceholder()
    ///     case .loading(let previous): showSpinner(over: previous)
    ///     case .loaded(let friend): show(friend)
    ///     case .failed(let error, let previous): show(previous, banner: error)
    ///     }
    /// }
    /// store.read("u1").load { _ in }
    /// ```
    public func states(for key: Key) -> EventStream<StoreState<Value>, Never> {
        EventStream { [self] observer in
            let subject = startObservingStates(key)
            observer.onTermination { [self] in stopObservingStates(key) }
            subject.stream.compactMap { $0.map { StoreState<Value>($0) } }.subscribe(observer)
        }
    }

    /// The key's state now, as ``states(for:)`` shows it: for a screen's first frame, before its states arrive.
    ///
    /// ```swift
    /// render(store.state(for: "u1").loadingState)
    /// ```
    public func state(for key: Key) -> StoreState<Value> {
        guard let (snapshot, isLoading) = locked(key, { $0.stateNow($1) }) else {
            let nothing = StoreResponse<Value>(
                value: nil, origin: .local, savedAt: nil, hasPendingChanges: false, error: nil, version: 0)
            return StoreState(response: nothing, isLoading: false)
        }
        return StoreState(response: StoreResponse(snapshot.response), isLoading: isLoading)
    }

    /// The first response `policy` produces for `key`. With ``ReadPolicy/cacheThenNetwork`` that is the cached
    /// value when there is one, and the fetch the policy started goes on and updates the store (observe it with
    /// ``stream(for:policy:)`` or ``changes(for:)``, or ask ``refresh(_:)`` for the fresh value). With
    /// ``ReadPolicy/networkFirst`` and ``ReadPolicy/networkOnly`` it is what the fetch produced (or the value shown
    /// with the fetch's error attached), never the value shown before the read. A read overtaken by a removal or a
    /// clear answers with what the store shows after it (no value), never with what it read before.
    @inlinable
    public func read(_ key: Key, policy: ReadPolicy = .cacheFirst) -> AnyLoader<StoreResponse<Value>> {
        let policy = policy.defaulting(maxAgeSeconds: maxAgeSeconds)
        // A value the policy takes as it is, needing no fetch, answers at once. A key with optimistic changes pending
        // takes the policy's path, which applies them outside the lock. The clock is read only when the policy
        // judges age.
        return AnyLoader(answeringFirst: { [self] in
            let now = policy.maxAgeSeconds == nil ? Date.distantPast : now()
            let held: Bool
            switch locked(key, { $0.firstLook($1, under: policy, now: now) }) {
            case .answer(let response):
                if let events { events(.heldValueRead(key)) }
                return .answered(.success(StoreResponse(response)))
            case .held: held = true
            case .notHeld: held = false
            }
            // The read is made here, so that the closure that starts it captures it alone: no storage of its own.
            let read = PolicyRun(store: self, key: key, policy: policy, began: now, held: held, onFailure: nil)
            return .start { read.begin(HandedCompletion($0)) }
        })
    }

    /// Fetches `key` anew now (never joining a fetch already running), confirms and shows the fresh value, and gives
    /// it to `completion` once it is saved. The returned token drops this caller's interest (the fetch is cancelled
    /// when no one else waits for it).
    ///
    /// ```swift
    /// store.refresh("u1") { result in endRefreshing(result) }   // pull to refresh: observers see the fresh value too
    /// ```
    @discardableResult
    public func refresh(
        _ key: Key, completion: @escaping @Sendable (Result<StoreResponse<Value>, any Error>) -> Void
    ) -> any CancellationToken {
        freshValue(of: key).load(completion: completion)
    }

    /// `key`'s fresh value as a loader: each load does what ``refresh(_:completion:)`` does (to compose, as
    /// `store.freshValue(of: key).fallback(to: store.read(key, policy: .cacheOnly))`).
    @inlinable
    public func freshValue(of key: Key) -> AnyLoader<StoreResponse<Value>> {
        AnyLoader { [self] completion in
            let pending = PendingLoad(completion)
            pending.startStep {
                fetch(key, joining: false) { result in pending.complete(result.map { StoreResponse($0.response) }) }
            }
            return pending
        }
    }

    /// `key`'s fresh value as a loader.
    @available(*, deprecated, renamed: "freshValue(of:)", message: "refresh(_:completion:) fetches at once")
    public func refresh(_ key: Key) -> AnyLoader<StoreResponse<Value>> {
        freshValue(of: key)
    }

    // MARK: Writing

    /// Confirms `value` for `key` (a live update, a local edit), writes it to every level and shows it. A debounced
    /// level gets it with the rest of its burst, when its timer fires or on ``flush(completion:)``.
    @inlinable
    public func write(_ value: Value, for key: Key) {
        let stored = StoredValue(value: value, origin: .local, savedAt: now())
        var save: Machine.LevelOp?
        guard let effects = locked(key, { $0.writeAtOnce(stored.boxed, for: $1, save: &save) }) else {
            return submit(.write(stored.boxed), for: key)
        }
        perform(effects, for: key, issuingFirst: save)
    }

    /// Replaces `key`'s confirmed value with `transform(value)` (a live update applied to a list, say), in order with
    /// every other change of the key: `transform` runs outside the lock, on the value the key has when its turn
    /// comes (read from the levels first when the store does not hold the key). Writes the result to every level
    /// (`nil` removes it from them; a debounced level gets it with the rest of its burst) and shows it. When the key
    /// has no value and `transform` makes none, nothing changes, except that a fetch in flight gets `transform`
    /// applied to the value it brings (a live update that arrives while the first load runs is kept).
    @inlinable
    public func update(_ key: Key, _ transform: @escaping @Sendable (Value?) -> Value?) {
        submit(.update(Self.erase(transform), reply: nil), for: key)
    }

    /// ``update(_:_:)`` with what the network brought (a page appended to a list): written to every level at once;
    /// `completion` receives what the key shows once it is saved, or ``StoreError/discarded`` when a removal or a
    /// clear dropped the change.
    @usableFromInline
    func updateFetched(
        _ key: Key, _ transform: @escaping @Sendable (Value?) -> Value?,
        completion: @escaping @Sendable (Result<StoreResponse<Value>, any Error>) -> Void
    ) {
        submit(.update(Self.erase(transform), reply: { completion($0.map { StoreResponse($0.response) }) }), for: key)
    }

    /// Removes `key`'s value from the store and every level, at once: fetches and level reads started before confirm
    /// nothing, and writes and updates not yet applied are dropped.
    @inlinable
    public func remove(_ key: Key) {
        perform(locked(key) { $0.remove($1) }, for: key)
    }

    /// Writes every debounced write waiting now, without waiting for its timer: what an app calls when it goes to
    /// the background, so that a burst of changes is not lost if the process is ended. Changes asked before the call
    /// are included. `completion` runs once the writes it issued have completed (or failed: see `onWriteFailure`);
    /// a level that runs its writes in order, as a database connection does, has then completed the earlier ones too.
    ///
    /// ```swift
    /// // When the app goes to the background:
    /// store.flush()
    /// ```
    public func flush(completion: @escaping @Sendable () -> Void = {}) {
        let saved = Machine.SaveTicket(.run(completion))
        for key in lockedKeys({ $0.keysToFlush() }) {
            saved.hold()
            submit(.flush(saved), for: key)
        }
        saved.release()
    }

    /// Lets go of the values the store keeps for keys no longer in use (see `keptValues` in
    /// ``init(levels:fetch:keptValues:maxAge:network:now:fetchContext:coordination:onWriteFailure:events:)``): call it
    /// when the system asks for memory, beside emptying your memory levels (``MemoryCache/clear()``). Keys in use
    /// keep their values; a key let go of is read from its levels when it is asked for again.
    public func trimMemory() {
        locked { $0.dropKeptValues() }
    }

    /// Forgets everything (a logout): cancels pending optimistic changes (their commits are cancelled and their
    /// completions receive ``StoreError/cleared``) and debounced writes, empties every level, and shows every observed
    /// key as empty. Nothing fetched, read or changed before the clear reappears after it. `completion` runs once
    /// every level has been emptied (or failed to be: see `onWriteFailure`).
    @inlinable
    public func clear(completion: @escaping @Sendable () -> Void = {}) {
        // The queues over the store stop starting work, and forget their mutations, before anything is cancelled.
        let notice = clearObservers.clearBegins()
        perform(locked { $0.clear(completion: completion) }, for: nil)
        notice.clearEnded()
    }

    /// Shows `change` applied to `key`'s value at once, and sends it upstream with `commit`.
    ///
    /// The shown value is the confirmed value with every pending change applied in order. When `commit` succeeds,
    /// the change joins the confirmed value and is written to every level at once, debounced ones included; when it
    /// fails, only this change is undone, and changes made meanwhile stay. `completion` receives the commit's
    /// outcome: a success once the levels' writes have completed, a failure once the change is undone. Cancelling the
    /// returned token cancels the commit and undoes the change. Made while another change of the key runs, the change
    /// is shown after it.
    @discardableResult
    @inlinable
    public func mutate<Commit: Loader>(
        _ key: Key,
        _ change: @escaping @Sendable (Value?) -> Value?,
        commit: Commit,
        completion: @escaping @Sendable (Result<Void, any Error>) -> Void = { _ in }
    ) -> any CancellationToken {
        // Made with no condition, the change is always added.
        mutate(key, change, commit: commit, order: nil, unlessClearedSince: nil, completion: completion)!
    }

    /// ``mutate(_:_:commit:completion:)`` for a queue's change: placed by `order` among its queue's changes, and
    /// refused (`nil`, nothing shown or started) when the store was cleared since ``clearCount`` was `clears`.
    @inlinable
    func mutate<Commit: Loader>(
        _ key: Key,
        _ change: @escaping @Sendable (Value?) -> Value?,
        commit: Commit,
        order: MutationOrder?,
        unlessClearedSince clears: Int?,
        completion: @escaping @Sendable (Result<Void, any Error>) -> Void
    ) -> (any CancellationToken)? {
        // Kept with the change before its commit starts: a clear fails it wherever it stands.
        let pending = PendingLoad<Void> { result in completion(result) }
        guard
            let (id, shown, loads) = locked(
                key,
                {
                    $0.addMutation(
                        Self.erase(change), commit: pending, to: $1, order: order, unlessClearedSince: clears)
                })
        else { return nil }
        if let shown { publish(shown) }
        if loads { submit(.load, for: key) }
        pending.startStep {
            commit.load { [self] result in
                guard case .success = result else {
                    // Refused: the completion runs once the change is undone, in order with the key's changes.
                    let failure = result.map { _ in () }
                    let undone = Machine.SaveTicket(.run { pending.complete(failure) })
                    return submit(.settle(mutation: id, accepted: false, ticket: undone), for: key)
                }
                // Confirmed: the completion runs once the change is saved to the levels.
                let saved = Machine.SaveTicket(.run { pending.complete(.success(())) })
                submit(.settle(mutation: id, accepted: true, ticket: saved), for: key)
            }
        }
        return AnyCancellationToken { [weak self] in
            guard pending.cancelReportingPending() else { return }
            self?.submit(.settle(mutation: id, accepted: false, ticket: nil), for: key)
        }
    }

    /// What the key shows now (no value when it shows nothing).
    @inlinable
    func shownResponse(_ key: Key) -> StoreResponse<Value> {
        locked(key) { $0.shown($1) }.map { StoreResponse($0.response) }
            ?? StoreResponse(value: nil, origin: .local, savedAt: nil, hasPendingChanges: false, error: nil, version: 0)
    }

    // MARK: Reading the levels

    /// Whether a level read under `policy` takes a value saved at `savedAt`: any value without a policy or for a
    /// cache-only read; otherwise a fresh one (not invalidated, young enough).
    @inlinable
    func takes(_ savedAt: Date, stale: Bool, under policy: ReadPolicy?) -> Bool {
        guard let policy, policy.kind != .cacheOnly else { return true }
        return !stale && policy.accepts(savedAt: savedAt, now: now())
    }

    /// Reads the levels in order for the value of a key the store does not hold, for the change waiting for it.
    @inlinable
    func loadBase(of key: Key, generation: Int) {
        // What the levels hold is as stale as the invalidations made before say (judged outside the lock: a
        // predicate is the caller's code); one made while they are read marks the key's entry, which the change holds.
        let rules = locked(key) { $0.staleRules(for: $1) }
        readBase(of: key, from: 0) { [self] hit, level in
            let staleSince = hit.flatMap { rules?.staleSince(key, savedAt: $0.savedAt) }
            let effects = locked(key) {
                $0.commitBase(hit?.boxed, level: level, generation: generation, staleSince: staleSince, for: $1)
            }
            perform(effects, for: key)
            runChanges(of: key, from: nil)
        }
    }

    @inlinable
    func readBase(
        of key: Key, from index: Int, done: @escaping @Sendable (CachedValue<Value>?, Int) -> Void
    ) {
        guard index < levels.count else { return done(nil, 0) }
        _ = levels[index].read(key) { [self] result in
            guard case .success(let cached) = result else { return readBase(of: key, from: index + 1, done: done) }
            done(cached, index)
        }
    }

    // MARK: Fetching

    /// Fetches `key`, joining the newest fetch in flight when `joining`; the caller that starts the upstream load
    /// starts it on its own thread. The token drops this caller; the last caller out cancels the fetch.
    @inlinable
    func fetch(_ key: Key, joining: Bool, completion: @escaping Machine.FetchCompletion) -> any CancellationToken {
        fetchBegun(locked(key) { $0.beginFetch($1, joining: joining, completion: completion) }, of: key)
    }

    /// Starts the upstream load of a fetch `begun` for `key` when the caller starts it; the token drops the caller.
    @inlinable
    func fetchBegun(_ begun: Machine.FetchStart, of key: Key) -> any CancellationToken {
        // Begun without a read's stamp, a fetch is joined or started, never answered at once.
        guard let (id, caller) = begun.joinedFetch else { preconditionFailure("a fetch without a stamp answered") }
        if begun.starts {
            startUpstream(id, of: key)
        } else if let events {
            events(.fetchJoined(key, fetch: id))
        }
        return AnyCancellationToken { [weak self] in
            guard let self else { return }
            let (garbage, cancel) = locked(key) { $0.leaveFetch(id, caller: caller, of: $1) }
            cancel?.cancel()
            withExtendedLifetime(garbage) {}  // the caller's completion, released after unlocking
        }
    }

    /// Starts fetch `id`'s upstream load, on the caller's thread.
    @inlinable
    func startUpstream(_ id: Int, of key: Key) {
        let token = loadUpstream(id, of: key) { [self] result in fetchEnded(id, of: key, with: result) }
        locked(key) { $0.keepToken(token, ofFetch: id, for: $1) }?.cancel()
    }

    /// Loads `key` from upstream for fetch `id`. A store that watches the connectivity looks at it now, and tells
    /// the machine when the request really goes out (now, or once the network is back, or never: offline, a store
    /// that answers from its cache fails the fetch): what it brings is fresh against every invalidation made before
    /// then, those made since the fetch began among them.
    @inlinable
    func loadUpstream(
        _ id: Int, of key: Key, completion: @escaping LoadCompletion<Value>
    ) -> any CancellationToken {
        if wrapsFetches { return loadUpstreamWrapped(id, of: key, completion: completion) }
        return sendUpstream(id, of: key, completion: completion)
    }

    /// ``loadUpstream(_:of:completion:)`` for a store with `events` (told that the fetch started, and when it ended),
    /// a fetch context of the app's (where the upstream load starts) or a coordination with other processes.
    @usableFromInline
    func loadUpstreamWrapped(
        _ id: Int, of key: Key, completion: @escaping LoadCompletion<Value>
    ) -> any CancellationToken {
        guard let events else { return startInContext(id, of: key, completion: completion) }
        events(.fetchStarted(key, fetch: id))
        // Told once: when the load completes, or when the store cancels it (no caller waits for it any more).
        let started = ContinuousClock.now
        let ended = Locked(false)
        let end: @Sendable ((any Error)?) -> Void = { error in
            guard !ended.withLock({ exchange(&$0, with: true) }) else { return }
            events(.fetchEnded(key, fetch: id, duration: ContinuousClock.now - started, error: error))
        }
        let token = startInContext(id, of: key) { result in
            if case .failure(let error) = result { end(error) } else { end(nil) }
            completion(result)
        }
        return AnyCancellationToken {
            token.cancel()
            end(CancellationError())
        }
    }

    /// Starts fetch `id`'s upstream load in the store's fetch context.
    func startInContext(
        _ id: Int, of key: Key, completion: @escaping LoadCompletion<Value>
    ) -> any CancellationToken {
        guard let run = fetchContext.run else { return coordinatedLoad(id, of: key, completion: completion) }
        // The context may start the load later: a cancel meanwhile means it never starts.
        let pending = PendingLoad(completion)
        run { [self] in pending.startStep { coordinatedLoad(id, of: key) { pending.complete($0) } } }
        return pending
    }

    /// Starts fetch `id`'s upstream load, under the store's coordination with other processes when it has one.
    func coordinatedLoad(
        _ id: Int, of key: Key, completion: @escaping LoadCompletion<Value>
    ) -> any CancellationToken {
        guard let coordinator else { return sendUpstream(id, of: key, completion: completion) }
        return coordinatedLoad(id, of: key, under: coordinator, completion: completion)
    }

    /// Sends the upstream load of fetch `id` (see ``loadUpstream(_:of:completion:)``).
    @inlinable
    func sendUpstream(
        _ id: Int, of key: Key, completion: @escaping LoadCompletion<Value>
    ) -> any CancellationToken {
        guard let connectivity = network.connectivity else { return fetcher[key].load(completion: completion) }
        guard !connectivity.isOnline else {
            locked(key) { $0.fetchSendsNow(id, of: $1) }
            return fetcher[key].load(completion: completion)
        }
        // No request goes out now: the fetch counts as not sent.
        locked(key) { $0.fetchWaits(id, of: $1) }
        guard network.waits else {
            completion(.failure(OfflineError()))
            return AnyCancellationToken()
        }
        let upstream = fetcher[key]
        return AnyLoader<Value> { [self] completion in
            locked(key) { $0.fetchSent(id, of: $1) }
            return upstream.load(completion: completion)
        }
        .waitingForNetwork(connectivity).load(completion: completion)
    }

    @inlinable
    func fetchEnded(_ id: Int, of key: Key, with result: Result<Value, any Error>) {
        switch result {
        case .success(let value):
            let now = now()
            var save: Machine.LevelOp?
            let box = ValueBox(value)
            guard let effects = locked(key, { $0.fetchedAtOnce(box, fetch: id, for: $1, now: now, save: &save) }) else {
                return submit(.fetched(box, fetch: id), for: key)  // it takes its turn
            }
            perform(effects, for: key, issuingFirst: save)
        case .failure(let error): perform(locked(key) { $0.fetchFailed(id, of: $1, with: error) }, for: key)
        }
    }

    // MARK: Changes

    /// Submits a change of `key`'s confirmed value, and runs the key's queue when it was idle.
    @inlinable
    func submit(_ job: Machine.Job, for key: Key) {
        let now = now()
        runChanges(of: key, from: locked(key) { $0.submit(job, for: $1, now: now) })
    }

    /// Runs `key`'s queued changes, starting with `first` (or the next one when `nil`), until the queue is empty
    /// or waits for a level read. A change's closures run here, outside the lock.
    @inlinable
    func runChanges(of key: Key, from first: Machine.Step?) {
        var given = first
        while true {
            // Taken and consumed, not copied: a step's effects hold several arrays.
            let step: Machine.Step
            if let taken = given.take() {
                step = taken
            } else {
                let now = now()
                guard let next = locked(key, { $0.nextChange(of: $1, now: now) }) else { return }
                step = next
            }
            switch consume step {
            case .queued:
                return
            case .loadBase(let generation):
                return loadBase(of: key, generation: generation)
            case .applied(let effects):
                perform(effects, for: key)
                if effects.endsTurn { return }
            case .run(let work):
                let result = work.run()
                let now = now()
                let effects = locked(key) { $0.commit(work, result: result, for: $1, now: now) }
                perform(effects, for: key)
                if effects.endsTurn { return }
            }
        }
    }

    // MARK: Effects

    /// Performs what the machine decided, after unlocking, issuing `save` first when the machine handed one out
    /// (see ``StoreMachine/writeAtOnce(_:for:save:)``); what it dropped is released when `effects` goes.
    @inlinable
    func perform(_ effects: Machine.Effects, for key: Key?, issuingFirst save: Machine.LevelOp? = nil) {
        let more = effects.more
        if let more {
            for token in more.cancels { token.cancel() }
            for commit in more.failedCommits { commit.completeCancellingStep(.failure(StoreError.cleared)) }
        }
        // Borrowed, not copied.
        if effects.published != nil { publish(effects.published!) }
        for index in effects.publishedLater.indices { publish(effects.publishedLater[index]) }
        if let key, let more {
            for write in more.debounce {
                debounce((write.value as! ValueBox<Value>).value, for: key, level: write.level, id: write.id)
            }
        }
        if effects.removeAll { removeAllFromLevels() }
        if effects.issueLevels, let key { issueLevelOps(of: key, first: save) }
        if effects.refetches != 0, let key { startRefetch(effects.refetches, of: key) }
        guard let more else { return }
        for reply in more.fetchReplies { reply.completion(reply.result) }
        for delivery in more.hitReplies { delivery.reply(delivery.snapshot) }
        for ticket in more.released { ticket.release() }
    }

    /// Sends `snapshot` to the key's observers unless a newer version was sent already (publishes from several
    /// threads may arrive out of order). The shown value is computed here, outside the lock: it runs the pending
    /// changes.
    @inlinable
    func publish(_ snapshot: borrowing Snapshot) {
        guard let observed = snapshot.observed else { return }
        let response = snapshot.response
        // What the pending changes gave is remembered: the next change shown applies only itself.
        if let (key, generation, prefix) = snapshot.shownPrefix(response) {
            locked { $0.remember(prefix, for: key, generation: generation) }
        }
        if let subject = observed.changes, !snapshot.isNotice {
            subject.update { current in
                guard (current?.version ?? -1) < response.version else { return nil }
                return response
            }
        }
        if let states = observed.states { publish(response, isLoading: snapshot.isLoading, to: states) }
    }

    /// Sends `response`, loading or not, to the key's state observers unless a newer state was sent already.
    @usableFromInline
    func publish(_ response: StoreResponse<Machine.Value>, isLoading: Bool, to states: Machine.StateSubject) {
        let state = StoreState(response: response, isLoading: isLoading)
        states.update { current in
            guard (current?.version ?? -1) < state.version else { return nil }
            return state
        }
    }

    /// Publishes the notices for state observers of the keys that began or stopped loading during the events before
    /// (rarely any: only keys observed with ``states(for:)``), and tells `events` of the kept values let go of.
    @usableFromInline
    func publishNotices() {
        let (notices, evicted) = lockedCore { core in
            (core.machine.takeNotices(), exchange(&core.evicted, with: []))
        }
        for notice in notices { publish(notice) }
        if let events { for key in evicted { events(.evicted(key)) } }
    }

    @inlinable
    func startObserving(_ key: Key) -> Machine.Subject {
        // A key observed already has its subject: one lock. Otherwise one is made outside the lock.
        let (subject, shown) =
            locked(key) { $0.observe($1, fresh: nil) }
            ?? locked(key) { $0.observe($1, fresh: Machine.Subject(nil)) }!
        if let shown { publish(shown) }
        return subject
    }

    /// Counts a state observer of `key`, and shows it the key's state now.
    func startObservingStates(_ key: Key) -> Machine.StateSubject {
        let (subject, now) =
            locked(key) { $0.observeStates($1, fresh: nil) }
            ?? locked(key) { $0.observeStates($1, fresh: Machine.StateSubject(nil)) }!
        publish(now)
        return subject
    }

    func stopObservingStates(_ key: Key) {
        let subject = locked(key) { $0.stopObservingStates($1) }
        withExtendedLifetime(subject) {}  // released after unlocking
    }

    @inlinable
    func stopObserving(_ key: Key) {
        let subject = locked(key) { $0.stopObserving($1) }
        withExtendedLifetime(subject) {}  // released after unlocking
    }

    // MARK: Levels

    /// Issues `key`'s level operations in the order they were decided, while there are any, starting with `first`
    /// (taken already, with the key's issuing); a clear's `removeAll` waiting for them is issued by the caller that
    /// issues the last.
    @inlinable
    func issueLevelOps(of key: Key, first: Machine.LevelOp? = nil) {
        if let first { issue(first, of: key) }
        while let taken = locked(key, { $0.takeLevelOps(of: $1) }) {
            if taken.removeAll { return removeAllFromLevels() }
            if let first = taken.ops.head { issue(first, of: key) }
            for operation in taken.ops.tail { issue(operation, of: key) }
        }
    }

    /// Sends one level operation to its levels.
    @inlinable
    func issue(_ operation: consuming Machine.LevelOp, of key: Key) {
        let ticket = operation.ticket
        // One closure per operation, capturing the ticket alone (which reports failures itself): it needs no storage
        // of its own. A method reference or an optional chain here would make more.
        let done: @Sendable (Result<Void, any Error>) -> Void =
            if let ticket { { ticket.landed($0) } } else { reportFailure.call }
        switch consume operation {  // its payload moved out, not copied
        case .save(let value, let savedAt, let targets, let skipsDebounced, _, let mark):
            let landed = saveLanded(of: key, mark: mark, then: done)
            let unboxed = (value as! ValueBox<Value>).value
            for index in targets where !skipsDebounced || levels[index].writeDebounce == nil {
                ticket?.hold(reportingTo: reportFailure)
                levels[index].save(unboxed, savedAt, key, landed)
            }
        case .flush(let value, let savedAt, let index, _, let mark):
            ticket?.hold(reportingTo: reportFailure)
            levels[index].save(
                (value as! ValueBox<Value>).value, savedAt, key, saveLanded(of: key, mark: mark, then: done))
        case .remove(_, let mark):
            let landed = saveLanded(of: key, mark: mark, then: done)
            for level in levels {
                ticket?.hold(reportingTo: reportFailure)
                level.removeValue(key, landed)
            }
        }
        ticket?.release()  // the operation's own hold: it is issued
    }

    /// `done`, after telling the machine that a save of `key` landed (see ``StoreMachine/saveLanded(_:mark:failed:at:)``).
    @inlinable
    func saveLanded(
        of key: Key, mark: Machine.SaveMark, then done: @escaping @Sendable (Result<Void, any Error>) -> Void
    ) -> @Sendable (Result<Void, any Error>) -> Void {
        { [self] result in
            let failed = if case .failure = result { true } else { false }
            let now = now()
            let matches = mark.stale ? Self.matching(key) : nil
            let folded = locked(key) { $0.saveLanded($1, matching: matches, mark: mark, failed: failed, at: now) }
            withExtendedLifetime(folded) {}
            done(result)
        }
    }

    /// Empties every level, then issues the level operations held behind the clear; the clears' completions run
    /// once every level is empty.
    @inlinable
    func removeAllFromLevels() {
        let progress = Locked<(remaining: Int, completions: [@Sendable () -> Void]?)>((levels.count, nil))
        let finish: @Sendable () -> Void = {
            let completions = progress.withLock { progress -> [@Sendable () -> Void] in
                guard progress.remaining == 0, let completions = progress.completions else { return [] }
                progress.completions = []
                return completions
            }
            for completion in completions { completion() }
        }
        for level in levels {
            level.removeAll { [reportFailure] result in
                reportFailure.call(result)
                progress.withLock { $0.remaining -= 1 }
                finish()
            }
        }
        let (completions, held) = lockedCore { core in
            let (completions, held) = core.machine.removeAllIssued()
            return (completions, held.map { core.slots.key(of: $0) })
        }
        progress.withLock { $0.completions = completions }
        finish()
        for key in held { issueLevelOps(of: key) }
    }

    /// Starts the timer of a debounced write. The timer keeps the store alive until it fires: a store released with
    /// a write pending still writes it.
    @inlinable
    func debounce(_ value: Value, for key: Key, level: Int, id: Int) {
        guard let interval = levels[level].writeDebounce else { return }
        let timer = levels[level].scheduler.schedule(after: interval) { [self] in
            perform(locked(key) { $0.debounceFired(id, level: level, for: $1) }, for: key)
        }
        locked(key) { $0.keepTimer(timer, ofWrite: id, level: level, for: $1) }?.cancel()
    }
}
