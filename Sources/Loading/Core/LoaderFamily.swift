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
    /// Loads a key with the loader built for it as it is, not wrapped in an ``AnyLoader`` (the store's fetches): a
    /// load that needs no wrapper pays for none.
    @usableFromInline
    let startLoad: @Sendable (Key, @escaping LoadCompletion<Output>) -> any CancellationToken

    /// Creates a family whose loader for a key is the one `makeLoader` builds for it.
    @inlinable
    public init<L: Loader>(_ makeLoader: @escaping @Sendable (Key) -> L) where L.Output == Output {
        self.makeLoader = { AnyLoader(makeLoader($0)) }
        startLoad = { makeLoader($0).load(completion: $1) }
    }

    /// A family whose loader for a key is the one `makeLoader` builds, and whose loads `startLoad` starts.
    init(
        makeLoader: @escaping @Sendable (Key) -> AnyLoader<Output>,
        startLoad: @escaping @Sendable (Key, @escaping LoadCompletion<Output>) -> any CancellationToken
    ) {
        self.makeLoader = makeLoader
        self.startLoad = startLoad
    }

    /// Loads `key` with its loader, calling `completion` with the result, as `family[key].load(completion:)` does.
    @discardableResult
    func load(_ key: Key, completion: @escaping LoadCompletion<Output>) -> any CancellationToken {
        startLoad(key, completion)
    }

    /// The loader for `key`.
    @inlinable
    public subscript(key: Key) -> AnyLoader<Output> {
        makeLoader(key)
    }

    /// A family whose loads of one key share one upstream load while it is in flight.
    ///
    /// Concurrent loads of a key join the load already running for it; each caller's cancel drops only its own
    /// interest, and the last caller to leave cancels the upstream load. Keys never wait for each other, and a load
    /// that starts after the shared one completed starts a new one. Every caller receives the shared result on the
    /// thread it arrives on. Keep the returned family (for example in a property): the sharing is per family value.
    ///
    /// `events`, when given, hears of each shared load as a ``Store`` tells of its fetches: when it started
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
    public func coalesced(events: (@Sendable (StoreEvent<Key>) -> Void)? = nil) -> LoaderFamily {
        guard let events else { return Flights(loading: self).family }
        let flights = Flights(
            loading: self,
            onJoin: { key, flight in events(.fetchJoined(key, fetch: flight)) },
            onStart: { key, flight, load in
                events(.fetchStarted(key, fetch: flight))
                return AnyLoader { completion in
                    StoreEvent.loadTellingEnd(of: key, fetch: flight, to: events, completion: completion) {
                        load.load(completion: $0)
                    }
                }
            })
        return flights.family
    }

    /// A family that transforms each key's values with `transform`.
    func map<NewOutput: Sendable>(
        _ transform: @escaping @Sendable (Output) -> NewOutput
    ) -> LoaderFamily<Key, NewOutput> {
        let makeLoader = self.makeLoader
        return LoaderFamily<Key, NewOutput> { key in makeLoader(key).map(transform) }
    }
}

/// The typed face of a coalesced family's flights: it makes each caller's object, starts a flight's load and calls
/// its callers with the result; the table (``FlightTable``, not generic) keeps what is in flight.
final class Flights<Key: Hashable & Sendable, Output: Sendable>: Sendable {
    /// A caller as the table holds it: its key, by which its flight is recognized, and its completion, in the form
    /// `AnyLoader` hands it over.
    final class Caller: Sendable {
        let key: Key
        let completion: LoadCompletion<Output>

        init(_ key: Key, _ completion: @escaping LoadCompletion<Output>) {
            self.key = key
            self.completion = completion
        }
    }

    private let table = FlightTable()
    /// The family whose loads the flights share.
    private let source: LoaderFamily<Key, Output>
    /// Told of each caller that joins a flight (the family's events), when there are any.
    private let onJoin: (@Sendable (Key, Int) -> Void)?
    /// Wraps each flight's load (to tell the family's events when it starts and ends), when there are events.
    private let onStart: (@Sendable (Key, Int, AnyLoader<Output>) -> AnyLoader<Output>)?

    init(
        loading source: LoaderFamily<Key, Output>,
        onJoin: (@Sendable (Key, Int) -> Void)? = nil,
        onStart: (@Sendable (Key, Int, AnyLoader<Output>) -> AnyLoader<Output>)? = nil
    ) {
        self.source = source
        self.onJoin = onJoin
        self.onStart = onStart
    }

    /// The load of `key` for a caller: the flight of `key` in flight, or a new one.
    func loader(for key: Key) -> AnyLoader<Output> {
        AnyLoader(.start { [self] completion in join(key, completion) })
    }

    /// The family whose loads are the flights' callers.
    var family: LoaderFamily<Key, Output> {
        LoaderFamily(makeLoader: loader(for:), startLoad: { [self] key, completion in join(key, completion) })
    }

    /// Adds a caller to the flight of `key`, starting one when the key has none; returns the caller's token.
    private func join(_ key: Key, _ completion: @escaping LoadCompletion<Output>) -> any CancellationToken {
        let hash = key.hashValue
        let (flight, caller, startsFlight) = table.join(Caller(key, completion), hash: hash) { other in
            (other as? Caller)?.key == key
        }
        if startsFlight {
            let finished: LoadCompletion<Output> = { [self] result in finish(flight, hash: hash, result) }
            let token =
                if let onStart {
                    onStart(key, flight, source[key]).load(completion: finished)
                } else {
                    source.load(key, completion: finished)
                }
            // Not kept: the load completed before it returned its token (a memory hit answers at once) and has
            // delivered to its caller. It cannot be that every caller left, since the caller starting the flight gets
            // its token only after this returns. There is nothing to leave, and the token costs no allocation.
            guard table.keepToken(token, of: flight, hash: hash) else { return FinishedToken() }
        } else if let onJoin {
            onJoin(key, flight)
        }
        return table.ticket(for: caller, of: flight, hash: hash)
    }

    /// Calls the callers of flight `flight` with its result, in the order they joined: each is taken out of the table
    /// just before it is called (and released after), so that one that left meanwhile is not called.
    private func finish(_ flight: Int, hash: Int, _ result: Result<Output, any Error>) {
        let (first, hasMore) = table.finish(flight, hash: hash)
        var next = first
        while let caller = next as? Caller {
            caller.completion(result)
            next = hasMore ? table.nextCaller(of: flight) : nil
        }
    }
}
