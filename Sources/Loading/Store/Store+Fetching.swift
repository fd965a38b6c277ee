#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

extension Store {
    /// Fetches `key`, joining the newest fetch in flight when `joining`; the caller that starts the upstream load
    /// starts it on its own thread. The token drops this caller; the last caller out cancels the fetch.
    func fetch(_ key: Key, joining: Bool, completion: @escaping Machine.FetchCompletion) -> any CancellationToken {
        let hash = key.hashValue
        return engine.fetch(
            hash: hash, where: { StoreKey.isKey($0, key) }, making: { StoreKey(key) },
            joining: joining, completion: completion)
    }
}

/// The work of a store's core that needs the store's key and value types and more than a load: telling fetches to
/// the store's events, starting them in the store's fetch context, coordinating them with other processes. Made by
/// the store when it has any of these; it holds neither the store nor its core (the core holds it).
final class TypedStoreHooks<Key: Hashable & Sendable, Value: Sendable>: StoreHooks {
    let events: (@Sendable (StoreEvent<Key>) -> Void)?
    let fetchContext: FetchContext
    let coordinator: FetchCoordinator<Key>?
    let levels: [StoreLevel<Key, Value>]
    let now: @Sendable () -> Date

    init(
        events: (@Sendable (StoreEvent<Key>) -> Void)?, fetchContext: FetchContext, coordinator: FetchCoordinator<Key>?,
        levels: [StoreLevel<Key, Value>], now: @escaping @Sendable () -> Date
    ) {
        self.events = events
        self.fetchContext = fetchContext
        self.coordinator = coordinator
        self.levels = levels
        self.now = now
    }

    func tellJoined(_ id: Int, of key: StoreKeyRef) {
        events?(.fetchJoined(StoreKey<Key>.key(of: key.object), fetch: id))
    }

    func tellHeldValueRead(_ key: StoreKeyRef) {
        events?(.heldValueRead(StoreKey<Key>.key(of: key.object)))
    }

    func tellEvicted(_ keys: [StoreKeys.Object]) {
        guard let events else { return }
        for key in keys { events(.evicted(StoreKey<Key>.key(of: key))) }
    }

    /// Loads `key` (kept by the store's core as `object`) from upstream for fetch `id`, for a store with `events`
    /// (told that the fetch started, and when it ended), a fetch context of the app's (where the upstream load
    /// starts) or a coordination with other processes.
    func loadUpstreamWrapped(
        _ id: Int, of object: StoreKeyRef, in engine: StoreEngine,
        completion: @escaping LoadCompletion<any StoreValueBox>
    ) -> any CancellationToken {
        let key = StoreKey<Key>.key(of: object.object)
        guard let events else { return startInContext(id, of: key, object: object, in: engine, completion: completion) }
        events(.fetchStarted(key, fetch: id))
        // Told once: when the load completes, or when the store cancels it (no caller waits for it any more).
        return StoreEvent.loadTellingEnd(of: key, fetch: id, to: events, completion: completion) {
            startInContext(id, of: key, object: object, in: engine, completion: $0)
        }
    }

    /// Starts fetch `id`'s upstream load in the store's fetch context.
    private func startInContext(
        _ id: Int, of key: Key, object: StoreKeyRef, in engine: StoreEngine,
        completion: @escaping LoadCompletion<any StoreValueBox>
    ) -> any CancellationToken {
        guard let run = fetchContext.run else {
            return coordinatedLoad(id, of: key, object: object, in: engine, completion: completion)
        }
        // The context may start the load later: a cancel meanwhile means it never starts.
        let pending = PendingLoad(completion)
        run { [self] in
            pending.startStep { coordinatedLoad(id, of: key, object: object, in: engine) { pending.complete($0) } }
        }
        return pending
    }

    /// Starts fetch `id`'s upstream load, under the store's coordination with other processes when it has one.
    private func coordinatedLoad(
        _ id: Int, of key: Key, object: StoreKeyRef, in engine: StoreEngine,
        completion: @escaping LoadCompletion<any StoreValueBox>
    ) -> any CancellationToken {
        guard let coordinator else {
            return callUpstream(id, of: key, object: object, in: engine, completion: completion)
        }
        return coordinatedLoad(id, of: key, object: object, in: engine, under: coordinator, completion: completion)
    }

    /// Sends fetch `id`'s upstream load, telling the store's events, when it has some, when the call ended.
    func callUpstream(
        _ id: Int, of key: Key, object: StoreKeyRef, in engine: StoreEngine,
        completion: @escaping LoadCompletion<any StoreValueBox>
    ) -> any CancellationToken {
        guard let events else { return engine.sendUpstream(id, of: object, completion: completion) }
        let started = ContinuousClock.now
        return engine.sendUpstream(id, of: object) { result in
            events(.upstreamCalled(key, fetch: id, duration: ContinuousClock.now - started, error: result.failure))
            completion(result)
        }
    }
}
