#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

extension Store {
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
        return StoreEvent.loadTellingEnd(of: key, fetch: id, to: events, completion: completion) {
            startInContext(id, of: key, completion: $0)
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
}
