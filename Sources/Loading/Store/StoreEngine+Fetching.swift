#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

extension StoreEngine {
    /// Fetches the key with `hash` that `isKey` recognizes (`make` makes its object), joining the newest fetch in
    /// flight when `joining`; the caller that starts the upstream load starts it on its own thread. The token drops
    /// this caller; the last caller out cancels the fetch.
    func fetch(
        hash: Int, where isKey: (AnyStoreKey) -> Bool, making make: () -> AnyStoreKey, joining: Bool,
        completion: @escaping StoreMachine.FetchCompletion
    ) -> any CancellationToken {
        var object: StoreKeyRef?
        let begun = run(hash: hash, where: isKey, making: make, keeping: &object) {
            $0.beginFetch($1, joining: joining, completion: completion)
        }
        return fetchBegun(begun, of: object ?? StoreKeyRef(object: make(), hash: hash))
    }

    /// Starts the upstream load of a fetch `begun` for `key` when the caller starts it; the token drops the caller.
    private func fetchBegun(_ begun: StoreMachine.FetchStart, of key: StoreKeyRef) -> any CancellationToken {
        // Begun without a read's stamp, a fetch is joined or started, never answered at once.
        guard let (id, caller) = begun.joinedFetch else { preconditionFailure("a fetch without a stamp answered") }
        if begun.starts {
            startUpstream(id, of: key)
        } else {
            tellJoined(id, of: key)
        }
        return AnyCancellationToken { [weak self] in
            guard let self else { return }
            let (garbage, cancel) = run(key) { $0.leaveFetch(id, caller: caller, of: $1) }
            cancel?.cancel()
            withExtendedLifetime(garbage) {}  // the caller's completion, released after unlocking
        }
    }

    /// Fetches `key` anew for its observers, unless a fetch in flight brings a fresh value, or one more is owed
    /// already (see ``StoreMachine/beginRefetch(_:completion:)``); a failure is attached to the value shown (which
    /// stays stale).
    func refetch(_ key: StoreKeyRef) {
        // The refetch's events name the key as the store holds it (found by the first): each then finds the key by
        // its object, where another object of the same key is compared by code compiled for every key type.
        var held: StoreKeyRef?
        guard let begun = run(key, keeping: &held, { $0.beginRefetch($1, completion: refetched(key)) }) else {
            return
        }
        _ = fetchBegun(begun, of: held ?? key)
    }

    /// Starts the upstream load of refetch `id` of `key`, which the machine began for the key's observers.
    func startRefetch(_ id: Int, of key: StoreKeyRef) {
        run(key) { $0.addCaller(refetched(key), toFetch: id, of: $1) }
        startUpstream(id, of: key)
    }

    /// What a refetch does with its answer: a failure is attached to the value shown.
    private func refetched(_ key: StoreKeyRef) -> StoreMachine.FetchCompletion {
        { [self] result in
            guard case .failure(let error) = result, !(error is StoreError) else { return }
            if let snapshot = run(key, { $0.attach(error, to: $1) }) { publish(snapshot) }
        }
    }

    /// Starts fetch `id`'s upstream load, on the caller's thread, and gives the fetch the load's token (which
    /// cancels it when every caller leaves), unless the load answered before it returned: the fetch has ended.
    func startUpstream(_ id: Int, of key: StoreKeyRef) {
        // One object carries the load's answer back: the load's completion captures it alone.
        let call = UpstreamCall(engine: self, id: id, key: key, forward: nil)
        let (token, ended) = RunningHere.current.start(fetch: id, of: self) {
            if let hooks {
                hooks.loadUpstreamWrapped(id, of: key, in: self, completion: call.ended)
            } else {
                sendUpstream(call)
            }
        }
        guard !ended else { return }
        run(key) { $0.keepToken(token, ofFetch: id, for: $1) }?.cancel()
    }

    /// Sends the upstream load of fetch `id` of `key`, answering `completion` (for a load the store's face wraps).
    func sendUpstream(
        _ id: Int, of key: StoreKeyRef, completion: @escaping LoadCompletion<any StoreValueBox>
    ) -> any CancellationToken {
        sendUpstream(UpstreamCall(engine: self, id: id, key: key, forward: completion))
    }

    /// Sends the upstream load of `call`. A store that watches the connectivity looks at it now, and tells the
    /// machine when the request really goes out (now, or once the network is back, or never: offline, a store that
    /// answers from its cache fails the fetch): what it brings is fresh against every invalidation made before
    /// then, those made since the fetch began among them.
    private func sendUpstream(_ call: UpstreamCall) -> any CancellationToken {
        let (id, key) = (call.id, call.key)
        guard let connectivity = network.connectivity else { return upstream(call) }
        guard !connectivity.isOnline else {
            run(key) { $0.fetchSendsNow(id, of: $1) }
            return upstream(call)
        }
        // No request goes out now: the fetch counts as not sent.
        run(key) { $0.fetchWaits(id, of: $1) }
        guard network.waits else {
            call.ended(.failure(OfflineError()))
            return AnyCancellationToken {}
        }
        let upstream = upstream
        return AnyLoader<any StoreValueBox> { [self] completion in
            run(key) { $0.fetchSent(id, of: $1) }
            return upstream(UpstreamCall(engine: self, id: id, key: key, forward: completion))
        }
        .waitingForNetwork(connectivity).load(completion: call.ended)
    }

    /// Tells the store's events, when it has some, that a caller joined fetch `id` of `key`.
    func tellJoined(_ id: Int, of key: StoreKeyRef) {
        hooks?.tellJoined(id, of: key)
    }

    /// Tells the store's events, when it has some, that a read of `key` was answered by the value the store holds.
    func tellHeldValueRead(_ key: StoreKeyRef) {
        hooks?.tellHeldValueRead(key)
    }

    /// What the read that starts fetch `id` found in the level the store shares with other processes and did not
    /// take (the date of its value, `-infinity` for none): the coordination takes a value saved there later as the
    /// fetch's answer.
    func noteSharedLevelRead(_ found: Double, beforeFetch id: Int) {
        hooks?.noteSharedLevelRead(found, beforeFetch: id)
    }

    /// What `key` shows now (no value when it shows nothing).
    func shownResponse(of key: StoreKeyRef) -> StoreResponse<any StoreValueBox> {
        let nothing = StoreResponse<any StoreValueBox>(
            box: nil, origin: .local, savedAtSeconds: nil, hasPendingChanges: false, error: nil, version: 0)
        return run(key) { $0.shown($1) }?.response ?? nothing
    }

    /// Fetch `id` of `key` answered.
    func fetchEnded(_ id: Int, of key: StoreKeyRef, with result: Result<any StoreValueBox, any Error>) {
        switch result {
        case .success(let box):
            let now = now()
            var save: StoreMachine.LevelOp?
            let atOnce = run(key) { machine, slot in
                let effects = machine.fetchedAtOnce(box, fetch: id, for: slot, now: now, save: &save)
                place(&save, in: &machine)
                return effects
            }
            guard let effects = consume atOnce else {
                return submit(.fetched(box, fetch: id), of: key)  // it takes its turn
            }
            RunningHere.made?.fetchEnded(id, of: self)
            perform(effects, for: key, issuingFirst: consume save)
        case .failure(let error):
            let effects = run(key) { $0.fetchFailed(id, of: $1, with: error) }
            RunningHere.made?.fetchEnded(id, of: self)
            perform(effects, for: key)
        }
    }
}

/// One upstream load of a store's fetch: the key to load, and where its answer goes (the store's core, or the
/// completion of a load wrapped around it). Made once per load, so that the load's completion captures it alone.
@usableFromInline
final class UpstreamCall: Sendable {
    let engine: StoreEngine
    let id: Int
    let key: StoreKeyRef
    let forward: LoadCompletion<any StoreValueBox>?

    init(engine: StoreEngine, id: Int, key: StoreKeyRef, forward: LoadCompletion<any StoreValueBox>?) {
        self.engine = engine
        self.id = id
        self.key = key
        self.forward = forward
    }

    /// The key to load, as the store's face made it.
    @usableFromInline var keyObject: AnyStoreKey { key.object }

    /// The load answered.
    @usableFromInline
    func ended(_ result: Result<any StoreValueBox, any Error>) {
        if let forward { return forward(result) }
        engine.fetchEnded(id, of: key, with: result)
    }
}
