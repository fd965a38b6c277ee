#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

extension Store {
    /// The key's shown value now and after every change, starting with what `policy` reads.
    ///
    /// The stream fails only when the policy's read finds nothing to show (a cache-only miss, a failed fetch with
    /// nothing cached); a failure after a value was shown is attached to the next response as
    /// ``StoreResponse/error``, and the stream goes on.
    public func stream(for key: Key, policy: ReadPolicy = .cacheFirst) -> EventStream<StoreResponse<Value>, any Error> {
        let policy = engine.defaulted(policy)
        return EventStream { [self] observer in
            // Changes and the policy's failure come from different threads: serialized, they never overlap.
            let serial = SerializedObserver(observer)
            let changes = changes(for: key).setFailureType(to: (any Error).self)
            changes.subscribe(StreamObserver(lifetime: observer.lifetime) { serial.send($0) })
            guard observer.lifetime.isActive else { return }
            let read = StoreRead(
                engine: engine, key: StoreKeyRef(object: StoreKey(key), hash: key.hashValue), policy: policy,
                began: nil, held: true, onFailure: { failure in serial.send(.completion(.failure(failure))) })
            read.start()
            observer.onTermination { read.cancel() }
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
            subject.stream.map { StoreResponse<Value>($0) }.subscribe(observer)
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
        // A value the policy takes as it is, needing no fetch, answers at once. A key with optimistic changes pending
        // takes the policy's path, which applies them outside the lock. The store's maximum age and the clock apply
        // in its core: the clock is read only when the policy judges age.
        AnyLoader(answeringFirst: { [self] in
            let hash = key.hashValue
            var began = Date.distantPast
            var held: AnyStoreKey?
            let look = engine.firstLook(
                hash: hash, where: { StoreKey.isKey($0, key) }, under: policy, began: &began, held: &held)
            if case .answer(let response) = look { return .answered(.success(StoreResponse(response))) }
            // The read is made here, so that the closure that starts it captures it alone: no storage of its own.
            let read = LoadAnsweringRead<Value>(
                engine: engine, key: held ?? StoreKey(key), hash: hash, policy: policy, began: began,
                held: held != nil)
            return .start { read.begin(HandedCompletion($0)) }
        })
    }

    /// What a cache-only read of `key` answers at once: the value the store holds, when no optimistic change of it is
    /// pending; `nil` when the read would have to go on (to the levels, or to apply pending changes).
    func heldResponse(_ key: Key) -> StoreResponse<Value>? {
        var began = Date.distantPast
        var held: AnyStoreKey?
        let look = engine.firstLook(
            hash: key.hashValue, where: { StoreKey.isKey($0, key) }, under: .cacheOnly, began: &began, held: &held)
        guard case .answer(let response) = look else { return nil }
        return StoreResponse(response)
    }

    /// Fetches `key` anew now (never joining a fetch already running), confirms and shows the fresh value, and
    /// returns it once it is saved.
    /// Cancelling the task drops this caller's interest (the fetch is cancelled when no one else waits for it); this
    /// then throws `CancellationError`.
    ///
    /// ```swift
    /// let fresh = try await store.refresh("u1")   // pull to refresh: observers see the fresh value too
    /// ```
    @discardableResult
    public func refresh(_ key: Key) async throws -> StoreResponse<Value> {
        try await freshValue(of: key).load()
    }

    /// `key`'s fresh value as a loader: each load does what ``refresh(_:)`` does (to compose, as
    /// `store.freshValue(of: key).fallback(to: store.read(key, policy: .cacheOnly))`, or to load with a completion).
    /// The token a load returns drops that caller's interest (the fetch is cancelled when no one else waits for it).
    public func freshValue(of key: Key) -> AnyLoader<StoreResponse<Value>> {
        AnyLoader { [self] completion in
            let pending = PendingLoad(completion)
            pending.startStep {
                fetch(key, joining: false) { result in pending.complete(result.map { StoreResponse($0.response) }) }
            }
            return pending
        }
    }
}
