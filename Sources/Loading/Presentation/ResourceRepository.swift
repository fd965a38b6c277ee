/// Publishes the loading state of one resource to every observer, and coalesces loads: while a load is in flight,
/// more `load()` calls join it instead of starting another.
///
/// ```swift
/// let repository = ResourceRepository(loader: composer.friendsLoader, refreshLoader: composer.refreshLoader)
/// let subscription = repository.state.sink { state in render(state) } // .idle, .loading, .loaded([...])
/// repository.load()
/// ```
/// The repository is itself a ``Loader``: `load(completion:)` joins the load in flight, and its token cancels only
/// that caller's interest. State changes are delivered on the scheduler given at creation (the main queue by
/// default), in order, to any number of observers.
public final class ResourceRepository<Value: Sendable>: Loader, Sendable {
    /// The error of a load that was in flight when ``wipe()`` was called.
    public struct WipedError: Error, Equatable {
        /// Creates the error.
        public init() {}
    }

    /// A published state and the generation that published it: a load's result is published only if no other
    /// state (a wipe, an optimistic value, another load) was published since the load started.
    private struct Stamped: Sendable {
        var generation: Int
        var state: LoadingState<Value>
    }

    private struct Waiter: Sendable {
        let id: Int
        let completion: LoadCompletion<Value>
    }

    private struct Flight: Sendable {
        var loadID = 0
        var isLoading = false
        var token: (any CancellationToken)?
        var waiters: [Waiter] = []
        var nextWaiterID = 0
    }

    private let loader: AnyLoader<Value>
    private let refreshLoader: AnyLoader<Value>
    private let subject = CurrentValueStreamSubject<Stamped, Never>(Stamped(generation: 0, state: .idle))
    private let deliveredState: EventStream<LoadingState<Value>, Never>
    private let flight = Locked(Flight())

    /// Creates a repository over `loader`; `refresh()` uses `refreshLoader` (for example one that skips the
    /// memory cache), or `loader` when it is `nil`. State is delivered on `scheduler`.
    public init<L: Loader, R: Loader, S: Scheduler>(loader: L, refreshLoader: R?, scheduler: S)
    where L.Output == Value, R.Output == Value {
        self.loader = AnyLoader(loader)
        self.refreshLoader = refreshLoader.map(AnyLoader.init) ?? AnyLoader(loader)
        deliveredState = subject.stream.map(\.state).receive(on: scheduler)
    }

    /// Creates a repository delivering state on the main queue.
    public convenience init<L: Loader, R: Loader>(loader: L, refreshLoader: R?)
    where L.Output == Value, R.Output == Value {
        self.init(loader: loader, refreshLoader: refreshLoader, scheduler: .main)
    }

    /// Creates a repository without a separate refresh loader, delivering state on `scheduler`.
    public convenience init<L: Loader, S: Scheduler>(loader: L, scheduler: S) where L.Output == Value {
        self.init(loader: loader, refreshLoader: L?.none, scheduler: scheduler)
    }

    /// Creates a repository without a separate refresh loader, delivering state on the main queue.
    public convenience init<L: Loader>(loader: L) where L.Output == Value {
        self.init(loader: loader, refreshLoader: L?.none, scheduler: .main)
    }

    /// The loading state: the current one at once, then every change, for any number of observers.
    public var state: EventStream<LoadingState<Value>, Never> {
        deliveredState
    }

    /// The current state, read synchronously.
    public var currentState: LoadingState<Value> {
        subject.value.state
    }

    /// Loads unless a load is in flight (then nothing new starts): the state goes to loading (keeping the value
    /// shown), then to loaded or failed.
    public func load() {
        join(loader, completion: nil)
    }

    /// Loads with the refresh loader, unless a load is in flight.
    public func refresh() {
        join(refreshLoader, completion: nil)
    }

    /// Joins the load in flight, or starts one, and calls `completion` with its result (the state is published
    /// too). Cancelling the token drops this caller's completion only; the shared load goes on.
    @discardableResult
    public func load(completion: @escaping LoadCompletion<Value>) -> any CancellationToken {
        let id = join(loader, completion: completion)
        return AnyCancellationToken { [weak self] in
            let removed = self?.flight.withLock { flight -> Waiter? in
                flight.waiters.firstIndex { $0.id == id }.map { flight.waiters.remove(at: $0) }
            }
            withExtendedLifetime(removed) {}  // the caller's completion is released after unlocking
        }
    }

    /// Publishes `value` as loaded, at once (for optimistic updates). A load in flight still completes its callers,
    /// but no longer publishes, so its older result cannot overwrite `value`.
    public func publish(_ value: Value) {
        publish(state: .loaded(value))
    }

    /// Publishes `state` as is, with the same rule as ``publish(_:)`` for a load in flight.
    public func publish(state newState: LoadingState<Value>) {
        subject.update { Stamped(generation: $0.generation + 1, state: newState) }
    }

    /// Forgets everything: cancels the load in flight (its callers fail with ``WipedError``) and goes back to
    /// idle. Nothing from before the wipe is published afterwards.
    public func wipe() {
        let (token, waiters) = flight.withLock { flight -> ((any CancellationToken)?, [Waiter]) in
            flight.loadID += 1
            flight.isLoading = false
            return (exchange(&flight.token, with: nil), exchange(&flight.waiters, with: []))
        }
        token?.cancel()
        publish(state: .idle)
        for waiter in waiters { waiter.completion(.failure(WipedError())) }
    }

    @discardableResult
    private func join(_ loader: AnyLoader<Value>, completion: LoadCompletion<Value>?) -> Int {
        let (waiterID, loadID) = flight.withLock { flight -> (Int, Int?) in
            let id = flight.nextWaiterID
            flight.nextWaiterID += 1
            if let completion { flight.waiters.append(Waiter(id: id, completion: completion)) }
            guard !flight.isLoading else { return (id, nil) }
            flight.isLoading = true
            flight.loadID += 1
            return (id, flight.loadID)
        }
        guard let loadID else { return waiterID }
        let generation =
            subject.update {
                Stamped(generation: $0.generation + 1, state: $0.state.startingLoad())
            }?.generation ?? 0
        let token = loader.load { [weak self] result in
            self?.finish(loadID: loadID, generation: generation, with: result)
        }
        let isStale = flight.withLock { flight -> Bool in
            guard flight.loadID == loadID, flight.isLoading else { return true }
            flight.token = token
            return false
        }
        if isStale { token.cancel() }
        return waiterID
    }

    private func finish(loadID: Int, generation: Int, with result: Result<Value, any Error>) {
        let finished = flight.withLock { flight -> ([Waiter], (any CancellationToken)?)? in
            guard flight.loadID == loadID, flight.isLoading else { return nil }
            flight.isLoading = false
            return (exchange(&flight.waiters, with: []), exchange(&flight.token, with: nil))
        }
        guard let (waiters, _) = finished else { return }
        subject.update { stamped in
            guard stamped.generation == generation else { return nil }
            return Stamped(generation: generation, state: stamped.state.finishingLoad(with: result))
        }
        for waiter in waiters { waiter.completion(result) }
    }
}
