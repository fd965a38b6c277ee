/// The loading state of one resource, for every screen that shows it: a view of one ``Store`` key that adds what a
/// screen needs beside the value (loading, the last failure) and coalesces loads.
///
/// ```swift
/// let repository = ResourceRepository(store: store, key: "u1")
/// let subscription = repository.state.sink { state in render(state) } // .idle, .loading, .loaded(...), .failed
/// repository.load()        // joins a load in flight
/// repository.refresh()     // always fetches anew
/// repository.mutate({ $0?.renamed("Ada L.") }, commit: api.rename("u1", to: "Ada L."))
/// ```
/// The value shown is always the store's: a live update written to the store, an optimistic change, a removal or
/// a clear shows at once, whoever made it. The repository is itself a ``Loader``: `load(completion:)` joins the load
/// in flight, and its token cancels only that caller's interest. State changes are delivered on the scheduler given
/// at creation (the main queue by default), in order, to any number of observers.
@available(
    *, deprecated,
    message: """
        Observe Store.states(for:) or bind a ResourceModel; load with Store.read(_:policy:), fetch anew with \
        Store.refresh(_:completion:), change with Store.mutate(_:_:commit:completion:)
        """
)
public final class ResourceRepository<Value: Sendable>: Loader, Sendable {
    /// The error of a load that was in flight when ``wipe()`` was called.
    public struct WipedError: Error, Equatable {
        /// Creates the error.
        public init() {}
    }

    /// One read or fetch of the key: its completion, and its token.
    private typealias Operation =
        @Sendable (@escaping @Sendable (Result<StoreResponse<Value>, any Error>) -> Void)
        -> any CancellationToken

    /// A published state and the version that published it (publishes from several threads may arrive out of
    /// order: an older one never overwrites a newer one).
    private struct Stamped: Sendable {
        var version: Int
        var state: LoadingState<Value>
    }

    private struct Waiter: Sendable {
        let id: Int
        let completion: LoadCompletion<Value>
    }

    private struct Flights: Sendable {
        /// Bumped by a wipe: what started before it is ignored when it completes.
        var epoch = 0
        /// The load every `load()` joins while it runs.
        var load: (id: Int, token: (any CancellationToken)?)?
        var waiters: [Waiter] = []
        /// The callers of finished loads not called yet, by delivery: each is taken out just before it is called,
        /// so that one cancelled meanwhile (by an earlier caller's completion, say) is never called.
        var delivering: [Int: [Waiter]] = [:]
        /// The refreshes in flight, by id, with their tokens and their callers' completions.
        var refreshes: [Int: (token: (any CancellationToken)?, completion: LoadCompletion<Value>?)] = [:]
        var nextID = 0
        /// The store's latest response for the key.
        var shown: StoreResponse<Value>?
        /// The failure of the latest finished read, until the next one succeeds.
        var error: (any Error)?
        var version = 0

        var isLoading: Bool { load != nil || !refreshes.isEmpty }

        mutating func state() -> Stamped {
            version += 1
            let value = shown?.value
            let state: LoadingState<Value> =
                if isLoading {
                    .loading(previous: value)
                } else if let error {
                    .failed(error, previous: value)
                } else if let value {
                    .loaded(value)
                } else {
                    .idle
                }
            return Stamped(version: version, state: state)
        }
    }

    private let read: Operation
    private let fetchAnew: Operation
    private let change:
        @Sendable (
            _ change: @escaping @Sendable (Value?) -> Value?, _ commit: AnyLoader<Void>,
            _ completion: @escaping @Sendable (Result<Void, any Error>) -> Void
        ) -> any CancellationToken
    private let forget: @Sendable () -> Void
    /// Writes a value to the key (what the deprecated `publish(_:)` forwards to).
    private let write: @Sendable (Value) -> Void
    private let subject = CurrentValueStreamSubject<Stamped, Never>(Stamped(version: 0, state: .idle))
    private let deliveredState: EventStream<LoadingState<Value>, Never>
    private let flights = Locked(Flights())
    private let observation = Locked<StreamSubscription?>(nil)

    /// Creates a repository showing `key` of `store`: `load()` reads it with `policy`, `refresh()` fetches it anew.
    /// State is delivered on `scheduler`.
    public convenience init<Key>(
        store: Store<Key, Value>,
        key: Key,
        policy: ReadPolicy = .cacheFirst,
        scheduler: some Scheduler = .main
    ) {
        self.init(store: store, key: key, policy: policy, scheduler: scheduler, refreshingWith: nil)
    }

    /// The designated initializer: `refresher`, when given, is what `refresh()` runs (its value is written to the
    /// key), instead of the store's fetch.
    init<Key>(
        store: Store<Key, Value>,
        key: Key,
        policy: ReadPolicy,
        scheduler: some Scheduler,
        refreshingWith refresher: AnyLoader<Value>?
    ) {
        read = { completion in store.read(key, policy: policy).load(completion: completion) }
        if let refresher {
            fetchAnew = { completion in Self.refresh(key, of: store, with: refresher, completion: completion) }
        } else {
            fetchAnew = { completion in store.freshValue(of: key).load(completion: completion) }
        }
        change = { change, commit, completion in store.mutate(key, change, commit: commit, completion: completion) }
        forget = { store.remove(key) }
        write = { value in store.write(value, for: key) }
        deliveredState = subject.stream.map { $0.state }.receive(on: scheduler)
        let subscription = store.changes(for: key).sink { [weak self] response in self?.show(response) }
        observation.withLock { $0 = subscription }
    }

    /// Creates a repository over `loader` alone: `load()` runs it (joining a load in flight) and `refresh()` runs it
    /// anew; the last value stays shown when a later load fails. State is delivered on `scheduler`.
    public convenience init<L: Loader>(loader: L, scheduler: some Scheduler = .main) where L.Output == Value {
        let store = Store<LoaderKey, Value>(levels: [], fetch: LoaderFamily { _ in loader })
        self.init(store: store, key: LoaderKey(), policy: .networkFirst, scheduler: scheduler)
    }

    /// Creates a repository over `loader` whose `refresh()` runs `refreshLoader` (or `loader` when it is `nil`).
    @available(
        *, deprecated, message: "Use init(loader:scheduler:); for a separate refresh source, a Store whose fetch is it"
    )
    public convenience init<L: Loader, R: Loader, S: Scheduler>(loader: L, refreshLoader: R?, scheduler: S)
    where L.Output == Value, R.Output == Value {
        let store = Store<LoaderKey, Value>(levels: [], fetch: LoaderFamily { _ in loader })
        self.init(
            store: store, key: LoaderKey(), policy: .networkFirst, scheduler: scheduler,
            refreshingWith: refreshLoader.map { AnyLoader($0) })
    }

    /// Creates a repository over `loader` whose `refresh()` runs `refreshLoader`, delivering on the main queue.
    @available(
        *, deprecated, message: "Use init(loader:scheduler:); for a separate refresh source, a Store whose fetch is it"
    )
    public convenience init<L: Loader, R: Loader>(loader: L, refreshLoader: R?)
    where L.Output == Value, R.Output == Value {
        self.init(loader: loader, refreshLoader: refreshLoader, scheduler: .main)
    }

    /// Runs `refresher`, writes its value to `key` and answers with what the key shows then.
    private static func refresh<Key>(
        _ key: Key, of store: Store<Key, Value>, with refresher: AnyLoader<Value>,
        completion: @escaping @Sendable (Result<StoreResponse<Value>, any Error>) -> Void
    ) -> any CancellationToken {
        let pending = PendingLoad(completion)
        pending.startStep {
            refresher.load { result in
                switch result {
                case .success(let value):
                    store.write(value, for: key)
                    pending.startStep { store.read(key, policy: .cacheOnly).load { pending.complete($0) } }
                case .failure(let error):
                    pending.complete(.failure(error))
                }
            }
        }
        return pending
    }

    deinit {
        observation.withLock { $0 }?.cancel()
    }

    /// The loading state: the current one at once, then every change, for any number of observers.
    public var state: EventStream<LoadingState<Value>, Never> {
        deliveredState
    }

    /// The current state, read synchronously.
    public var currentState: LoadingState<Value> {
        subject.value.state
    }

    /// The states with the version that orders them, as they are published (on the publishing thread): for a model
    /// that delivers them on its own terms and must never take an older one after a newer one.
    var versionedStates: EventStream<(version: Int, state: LoadingState<Value>), Never> {
        subject.stream.map { ($0.version, $0.state) }
    }

    /// The current state, with its version.
    var currentVersionedState: (version: Int, state: LoadingState<Value>) {
        let stamped = subject.value
        return (stamped.version, stamped.state)
    }

    /// Loads unless a load is in flight (then nothing new starts): the state goes to loading (keeping the value
    /// shown), then to loaded or failed.
    public func load() {
        join(completion: nil)
    }

    /// Joins the load in flight, or starts one, and returns what it loaded (the state is published too): what
    /// `try await repository.load()` calls.
    ///
    /// ```swift
    /// let friend = try await repository.load()
    /// ```
    @discardableResult
    public func load() async throws -> Value {
        // Through the loaders' async bridge: cancelling the task drops this caller, as its token would.
        try await AnyLoader(self).load()
    }

    /// Fetches anew, even while a load is in flight (it is never absorbed by a load that started before it): the
    /// state goes to loading (keeping the value shown) until every load and refresh has finished. `completion`, when
    /// given, receives this refresh's result (after the state is published).
    public func refresh(completion: LoadCompletion<Value>? = nil) {
        let (id, epoch, stamped) = flights.withLock { flights -> (Int, Int, Stamped) in
            flights.nextID += 1
            flights.refreshes[flights.nextID] = (nil, completion)
            return (flights.nextID, flights.epoch, flights.state())
        }
        publish(stamped)
        let token = fetchAnew { [weak self] result in
            self?.finish(epoch: epoch, with: result) { flights in
                guard let refresh = flights.refreshes.removeValue(forKey: id) else { return nil }
                return refresh.completion.map { [Waiter(id: id, completion: $0)] } ?? []
            }
        }
        keep(token, epoch: epoch) { flights in
            guard flights.refreshes[id] != nil else { return false }
            flights.refreshes[id]?.token = token
            return true
        }
    }

    /// Joins the load in flight, or starts one, and calls `completion` with its result (the state is published
    /// too). Cancelling the token drops this caller's completion only; the shared load goes on.
    @discardableResult
    public func load(completion: @escaping LoadCompletion<Value>) -> any CancellationToken {
        let id = join(completion: completion)
        return AnyCancellationToken { [weak self] in
            let removed = self?.flights.withLock { flights -> Waiter? in
                if let index = flights.waiters.firstIndex(where: { $0.id == id }) {
                    return flights.waiters.remove(at: index)
                }
                for (delivery, waiters) in flights.delivering {
                    guard let index = waiters.firstIndex(where: { $0.id == id }) else { continue }
                    return flights.delivering[delivery]!.remove(at: index)
                }
                return nil
            }
            withExtendedLifetime(removed) {}  // the caller's completion is released after unlocking
        }
    }

    /// Shows `change` applied to the value at once and sends it upstream with `commit`: an optimistic edit made
    /// through the store. When `commit` fails only this change is undone; see ``Store/mutate(_:_:commit:completion:)``.
    @discardableResult
    public func mutate<Commit: Loader>(
        _ change: @escaping @Sendable (Value?) -> Value?,
        commit: Commit,
        completion: @escaping @Sendable (Result<Void, any Error>) -> Void = { _ in }
    ) -> any CancellationToken {
        let commit = AnyLoader<Void>(commit.map { _ in () })
        return self.change(change, commit, completion)
    }

    /// Shows `value` at once: writes it to the key, so every view of the key shows it (a load in flight gets it
    /// applied to what it brings).
    @available(*, deprecated, message: "Use mutate(_:commit:completion:), or write the value to the store")
    public func publish(_ value: Value) {
        write(value)
    }

    /// Shows `state`: a value it carries is written to the key (the error of `.failed` is shown beside it); `.idle`
    /// forgets the key, as ``wipe()`` does.
    @available(*, deprecated, message: "Use mutate(_:commit:completion:), or write to or remove the key in the store")
    public func publish(state newState: LoadingState<Value>) {
        if case .idle = newState { return wipe() }
        if let value = newState.value { write(value) }
        guard let error = newState.error else { return }
        let stamped = flights.withLock { flights -> Stamped in
            flights.error = error
            return flights.state()
        }
        publish(stamped)
    }

    /// Forgets the resource: cancels the loads in flight (their callers fail with ``WipedError``), removes the key
    /// from the store (and its levels), and goes back to idle. Nothing from before the wipe is shown afterwards.
    public func wipe() {
        let (tokens, delivery, stamped) = flights.withLock {
            flights -> ([any CancellationToken], Int, Stamped) in
            flights.epoch += 1
            var tokens = flights.refreshes.values.compactMap { $0.token }
            if let token = flights.load?.token { tokens.append(token) }
            let refreshes = exchange(&flights.refreshes, with: [:]).sorted { $0.key < $1.key }
                .compactMap { id, refresh in refresh.completion.map { Waiter(id: id, completion: $0) } }
            flights.load = nil
            flights.error = nil
            flights.nextID += 1
            flights.delivering[flights.nextID] = exchange(&flights.waiters, with: []) + refreshes
            return (tokens, flights.nextID, flights.state())
        }
        for token in tokens { token.cancel() }
        publish(stamped)
        forget()
        deliver(.failure(WipedError()), to: delivery)
    }

    // MARK: Flights

    @discardableResult
    private func join(completion: LoadCompletion<Value>?) -> Int {
        let (waiterID, start) = flights.withLock { flights -> (Int, (id: Int, epoch: Int, Stamped)?) in
            flights.nextID += 1
            let id = flights.nextID
            if let completion { flights.waiters.append(Waiter(id: id, completion: completion)) }
            guard flights.load == nil else { return (id, nil) }
            flights.load = (id, nil)
            return (id, (id, flights.epoch, flights.state()))
        }
        guard let (loadID, epoch, stamped) = start else { return waiterID }
        publish(stamped)
        let token = read { [weak self] result in
            self?.finish(epoch: epoch, with: result) { flights in
                guard flights.load?.id == loadID else { return nil }
                flights.load = nil
                return exchange(&flights.waiters, with: [])
            }
        }
        keep(token, epoch: epoch) { flights in
            guard flights.load?.id == loadID else { return false }
            flights.load?.token = token
            return true
        }
        return waiterID
    }

    /// Keeps `token` where `store` puts it while its flight runs; cancels it when a wipe came first.
    private func keep(
        _ token: any CancellationToken, epoch: Int, in store: @Sendable (inout Flights) -> Bool
    ) {
        let isWiped = flights.withLock { flights -> Bool in
            guard flights.epoch == epoch else { return true }
            _ = store(&flights)  // false when the flight already finished: nothing to keep
            return false
        }
        if isWiped { token.cancel() }
    }

    /// Ends a flight: `ending` returns its callers, or `nil` when the flight is over already. The callers are called
    /// in order, each taken out just before: one whose token is cancelled meanwhile is not called.
    private func finish(
        epoch: Int,
        with result: Result<StoreResponse<Value>, any Error>,
        ending: @Sendable (inout Flights) -> [Waiter]?
    ) {
        let outcome: Result<Value, any Error>? =
            switch result {
            case .success(let response):
                if let error = response.error {
                    .failure(error)
                } else if let value = response.value {
                    .success(value)
                } else {
                    .failure(CacheMiss.absent)
                }
            case .failure(let error as StoreError) where error == .discarded:
                nil  // the key was removed or the store cleared meanwhile: nothing went wrong
            case .failure(let error):
                .failure(error)
            }
        let finished = flights.withLock { flights -> (delivery: Int, Stamped)? in
            guard flights.epoch == epoch, let callers = ending(&flights) else { return nil }
            flights.nextID += 1
            if !callers.isEmpty { flights.delivering[flights.nextID] = callers }
            if case .success(let response) = result, response.version > (flights.shown?.version ?? -1) {
                flights.shown = response
            }
            switch outcome {
            case .failure(let error)?: flights.error = error
            case .success?: flights.error = nil
            case nil: break
            }
            return (flights.nextID, flights.state())
        }
        guard let (delivery, stamped) = finished else { return }
        publish(stamped)
        deliver(outcome ?? .failure(StoreError.discarded), to: delivery)
    }

    /// Calls the callers of `delivery` in order, each taken out just before it is called.
    private func deliver(_ result: Result<Value, any Error>, to delivery: Int) {
        while let caller = flights.withLock({ flights -> Waiter? in
            guard var waiters = flights.delivering.removeValue(forKey: delivery), !waiters.isEmpty else { return nil }
            let caller = waiters.removeFirst()
            if !waiters.isEmpty { flights.delivering[delivery] = waiters }
            return caller
        }) {
            caller.completion(result)
        }
    }

    /// Takes the store's latest response for the key. While a load runs, what a read or a fetch brought is shown
    /// when the load finishes (one state change, not two); local changes, removals and clears show at once.
    private func show(_ response: StoreResponse<Value>) {
        let (stamped, replaced) = flights.withLock { flights -> (Stamped?, StoreResponse<Value>?) in
            guard response.version > (flights.shown?.version ?? -1) else { return (nil, nil) }
            let replaced = exchange(&flights.shown, with: response)
            let clearsError = response.value == nil && flights.error != nil
            if clearsError { flights.error = nil }  // removed or cleared: nothing failed to show
            let changes = response.value != nil || replaced?.value != nil || clearsError
            let showsNow = !flights.isLoading || response.origin == .local || response.value == nil
            return (changes && showsNow ? flights.state() : nil, replaced)
        }
        withExtendedLifetime(replaced) {}  // released after unlocking
        guard let stamped else { return }
        publish(stamped)
    }

    private func publish(_ stamped: Stamped) {
        subject.update { current in current.version < stamped.version ? stamped : nil }
    }
}
