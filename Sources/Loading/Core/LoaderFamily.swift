/// A family of loaders, one per key: a friend by id, page *n* of a list, an image by URL. Each key's loader is built
/// from the same composites as any other loader, and `family[key]` is a plain ``Loader``.
///
/// ```swift
/// let friend = LoaderFamily { (id: String) in
///     memory[id]
///         .fallback(to: disk[id].caching(to: memory[id]))
///         .fallback(to: api.friend(id).caching(to: disk[id]).caching(to: memory[id]))
/// }
/// .coalesced()  // one upstream load per key in flight, for every caller
///
/// friend["u1"].load { result in show(result) }
/// ```
public struct LoaderFamily<Key: Hashable & Sendable, Output: Sendable>: Sendable {
    @usableFromInline
    let makeLoader: @Sendable (Key) -> AnyLoader<Output>

    /// Creates a family whose loader for a key is the one `makeLoader` builds for it.
    @inlinable
    public init<L: Loader>(_ makeLoader: @escaping @Sendable (Key) -> L) where L.Output == Output {
        self.makeLoader = { AnyLoader(makeLoader($0)) }
    }

    /// The loader for `key`.
    @inlinable
    public subscript(key: Key) -> AnyLoader<Output> {
        makeLoader(key)
    }

    /// The loader for `key`.
    @inlinable
    public func loader(for key: Key) -> AnyLoader<Output> {
        makeLoader(key)
    }

    /// A family whose loads of one key share one upstream load while it is in flight.
    ///
    /// Concurrent loads of a key join the load already running for it; each caller's cancel drops only its own
    /// interest, and the last caller to leave cancels the upstream load. Keys never wait for each other, and a load
    /// that starts after the shared one completed starts a new one. Every caller receives the shared result on the
    /// thread it arrives on. Keep the returned family (for example in a property): the sharing is per family value.
    @inlinable
    public func coalesced() -> LoaderFamily {
        let flights = Flights<Key, Output>(makeLoader: makeLoader)
        return LoaderFamily { key in CoalescedLoader(flights: flights, key: key) }
    }

    /// ``coalesced()``, telling `events` of each shared load as a ``Store`` tells of its fetches: when it started
    /// (``StoreEvent/fetchStarted(_:fetch:)``, in the task of the caller that started it), each caller that joined it
    /// (``StoreEvent/fetchJoined(_:fetch:)``), and when it ended, with its duration and error
    /// (``StoreEvent/fetchEnded(_:fetch:duration:error:)``; a `CancellationError` when the last caller left).
    ///
    /// ```swift
    /// let quotes = LoaderFamily { (symbol: String) in api.quote(symbol) }
    ///     .coalesced(events: { event in
    ///         if case .fetchJoined = event { joins.withLock { $0 += 1 } }
    ///     })
    /// ```
    public func coalesced(events: @escaping @Sendable (StoreEvent<Key>) -> Void) -> LoaderFamily {
        let makeLoader = makeLoader
        let flights = Flights<Key, Output>(
            makeLoader: { key in makeLoader(key) },
            onJoin: { key, flight in events(.fetchJoined(key, fetch: flight)) },
            onStart: { key, flight, load in
                events(.fetchStarted(key, fetch: flight))
                return AnyLoader { completion in
                    StoreEvent.loadTellingEnd(of: key, fetch: flight, to: events, completion: completion) {
                        load.load(completion: $0)
                    }
                }
            })
        return LoaderFamily { key in CoalescedLoader(flights: flights, key: key) }
    }

    /// A family that transforms each key's values with `transform`.
    public func map<NewOutput: Sendable>(
        _ transform: @escaping @Sendable (Output) -> NewOutput
    ) -> LoaderFamily<Key, NewOutput> {
        let makeLoader = self.makeLoader
        return LoaderFamily<Key, NewOutput> { key in makeLoader(key).map(transform) }
    }
}

/// One key's loader in a coalesced family.
@usableFromInline
struct CoalescedLoader<Key: Hashable & Sendable, Output: Sendable>: Loader {
    @usableFromInline let flights: Flights<Key, Output>
    @usableFromInline let key: Key

    @inlinable
    init(flights: Flights<Key, Output>, key: Key) {
        self.flights = flights
        self.key = key
    }

    @inlinable
    func load(completion: @escaping LoadCompletion<Output>) -> any CancellationToken {
        flights.join(key, completion)
    }
}

/// The loads in flight of a coalesced family, by key: each with its callers and the token of its upstream load.
///
/// One lock guards the table; it is held only to look up, add or remove (never while a load starts, completes or is
/// cancelled), so keys do not wait for each other's work.
@usableFromInline
final class Flights<Key: Hashable & Sendable, Output: Sendable>: Sendable {
    /// A flight holds no token: an `any CancellationToken` would make every copy of it (each lookup of a flight's
    /// id) go through run-time value witnesses. The tokens of the flights still running when their load returned
    /// are kept apart, in `State.tokens`.
    @usableFromInline
    struct Flight: Sendable {
        @usableFromInline let id: Int
        @usableFromInline var callers = Callers()
        /// Whether `State.tokens` holds this flight's token.
        @usableFromInline var hasToken = false

        @inlinable
        init(id: Int) {
            self.id = id
        }
    }

    /// A flight's callers in the order they joined (caller ids grow in that order): the first is kept inline, so
    /// that a load nobody else joins allocates nothing for its callers, and each caller joins, leaves or is taken for
    /// delivery in time that does not grow with their number.
    @usableFromInline typealias Callers = OrderedQueue<Caller>

    /// A caller's completion. In a struct, so that the queue keeps it as it is: a function stored as a generic
    /// element would be wrapped in a thunk, one allocation per caller.
    @usableFromInline
    struct Caller: Sendable {
        @usableFromInline let completion: LoadCompletion<Output>

        @inlinable
        init(_ completion: @escaping LoadCompletion<Output>) {
            self.completion = completion
        }
    }

    @usableFromInline
    struct State: Sendable {
        @usableFromInline var flights: [Key: Flight] = [:]
        @usableFromInline var tokens: [Key: any CancellationToken] = [:]
        /// The callers of finished flights not called yet, by flight id: each is taken out just before it is called,
        /// so that one cancelled meanwhile (by an earlier caller's completion, say) is never called.
        @usableFromInline var delivering: [Int: Callers] = [:]
        @usableFromInline var nextID = 0

        /// Removes the flight of `key` with its token, for the caller to release (or cancel) after unlocking.
        @inlinable
        mutating func removeFlight(_ key: Key) -> (Flight?, (any CancellationToken)?) {
            guard let flight = flights.removeValue(forKey: key) else { return (nil, nil) }
            return (flight, flight.hasToken ? tokens.removeValue(forKey: key) : nil)
        }

        @inlinable
        init() {}
    }

    @usableFromInline let state = Locked(State())
    @usableFromInline let makeLoader: @Sendable (Key) -> AnyLoader<Output>
    /// Told of each caller that joins a flight (the family's events), when there are any.
    @usableFromInline let onJoin: (@Sendable (Key, Int) -> Void)?
    /// Wraps each flight's load (to tell the family's events when it starts and ends), when there are events.
    @usableFromInline let onStart: (@Sendable (Key, Int, AnyLoader<Output>) -> AnyLoader<Output>)?

    @inlinable
    init(makeLoader: @escaping @Sendable (Key) -> AnyLoader<Output>) {
        self.makeLoader = makeLoader
        onJoin = nil
        onStart = nil
    }

    /// A table whose flights are told to the family's events.
    init(
        makeLoader: @escaping @Sendable (Key) -> AnyLoader<Output>,
        onJoin: @escaping @Sendable (Key, Int) -> Void,
        onStart: @escaping @Sendable (Key, Int, AnyLoader<Output>) -> AnyLoader<Output>
    ) {
        self.makeLoader = makeLoader
        self.onJoin = onJoin
        self.onStart = onStart
    }

    @inlinable
    func join(_ key: Key, _ completion: @escaping LoadCompletion<Output>) -> any CancellationToken {
        let (flightID, callerID, startsFlight) = state.withLock { state -> (Int, Int, Bool) in
            state.nextID += 1
            let callerID = state.nextID
            if state.flights[key] != nil {
                state.flights[key]!.callers.append(Caller(completion), id: callerID)
                return (state.flights[key]!.id, callerID, false)
            }
            state.nextID += 1
            var flight = Flight(id: state.nextID)
            flight.callers.append(Caller(completion), id: callerID)
            state.flights[key] = flight
            return (flight.id, callerID, true)
        }
        // A flight over by the time its load returned (a memory hit answers at once) has delivered to its caller:
        // there is nothing to leave, and the token costs no allocation.
        if startsFlight, !start(key, flightID) { return FinishedToken() }
        if !startsFlight, let onJoin { onJoin(key, flightID) }
        return AnyCancellationToken { [weak self] in self?.leave(key, flightID, callerID) }
    }

    /// Starts the flight's load; returns whether the flight is still going when the load returned.
    @inlinable
    func start(_ key: Key, _ flightID: Int) -> Bool {
        let token = loader(of: key, flightID).load { [self] result in finish(key, flightID, result) }
        let isCurrent = state.withLock { state -> Bool in
            guard state.flights[key]?.id == flightID else { return false }
            state.flights[key]!.hasToken = true
            state.tokens[key] = token
            return true
        }
        // Not current: the load completed before it returned its token (a memory hit answers at once). It cannot
        // be that every caller left, since the caller starting the flight gets its token only after this returns.
        // A completed load has nothing to cancel, and cancelling it through its existential is not free.
        return isCurrent
    }

    /// The load of flight `flightID` of `key`, told to the family's events when it has any.
    @inlinable
    func loader(of key: Key, _ flightID: Int) -> AnyLoader<Output> {
        onJoin == nil ? makeLoader(key) : reportedLoader(of: key, flightID)
    }

    @usableFromInline
    func reportedLoader(of key: Key, _ flightID: Int) -> AnyLoader<Output> {
        onStart.map { $0(key, flightID, makeLoader(key)) } ?? makeLoader(key)
    }

    @inlinable
    func finish(_ key: Key, _ flightID: Int, _ result: Result<Output, any Error>) {
        let (finished, token) = state.withLock { state -> (Flight?, (any CancellationToken)?) in
            guard state.flights[key]?.id == flightID else { return (nil, nil) }
            return state.removeFlight(key)
        }
        withExtendedLifetime(token) {}  // the completed load's token, released after unlocking
        guard var callers = finished?.callers else { return }
        if callers.count == 1 {
            callers.first?.element.completion(result)  // one caller: no one else to cancel meanwhile
            return
        }
        let flightID = finished!.id
        let first = callers.popFirst()?.element.completion
        state.withLock { $0.delivering[flightID] = callers }
        first?(result)
        while let next = state.withLock({ state -> LoadCompletion<Output>? in
            let next = state.delivering[flightID]?.popFirst()?.element.completion
            if state.delivering[flightID]?.isEmpty ?? false { state.delivering[flightID] = nil }
            return next
        }) {
            next(result)
        }
    }

    @inlinable
    func leave(_ key: Key, _ flightID: Int, _ callerID: Int) {
        let (left, emptied, token) = state.withLock {
            state -> (LoadCompletion<Output>?, Flight?, (any CancellationToken)?) in
            guard state.flights[key]?.id == flightID else {
                // Finished: a caller still waiting for its delivery leaves without being called.
                let left = state.delivering[flightID]?.remove(id: callerID)?.completion
                if state.delivering[flightID]?.isEmpty ?? false { state.delivering[flightID] = nil }
                return (left, nil, nil)
            }
            let left = state.flights[key]!.callers.remove(id: callerID)?.completion
            guard state.flights[key]!.callers.isEmpty else { return (left, nil, nil) }
            let (emptied, token) = state.removeFlight(key)
            return (left, emptied, token)
        }
        token?.cancel()  // the last caller out cancels the upstream load
        withExtendedLifetime((left, emptied)) {}  // released after unlocking
    }
}
