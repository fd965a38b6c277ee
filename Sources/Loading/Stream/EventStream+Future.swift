extension EventStream {
    /// A stream whose work runs once, at once: the first result `attempt` reports wins and is replayed to every
    /// subscriber, early or late (a value then `.finished`, or the failure).
    ///
    /// ```swift
    /// let token = EventStream<Token, any Error>.future { promise in auth.signIn(completion: promise) }
    /// ```
    /// The work runs even if nobody subscribes, and retrying a future replays its failure; wrap it in
    /// ``deferred(_:)`` to run the work per subscription.
    public static func future(
        _ attempt: (@escaping @Sendable (Result<Output, Failure>) -> Void) -> Void
    ) -> EventStream {
        let core = FutureCore<Output, Failure>()
        attempt { core.resolve($0) }
        return EventStream { observer in core.subscribe(observer) }
    }
}

/// The shared state of a future: the subscribers waiting for its result, then the result. A struct around one
/// lock box (copies share it), so a future costs one allocation.
struct FutureCore<Output: Sendable, Failure: Error>: Sendable {
    private enum State: Sendable {
        case pending(nextKey: Int, waiting: [Int: StreamObserver<Output, Failure>])
        case resolved(Result<Output, Failure>)
    }

    private let state = Locked(State.pending(nextKey: 0, waiting: [:]))

    init() {}

    func resolve(_ result: Result<Output, Failure>) {
        let waiting = state.withLock { state -> [Int: StreamObserver<Output, Failure>] in
            guard case .pending = state, case .pending(_, let waiting) = exchange(&state, with: .resolved(result))
            else { return [:] }
            return waiting
        }
        for (_, observer) in waiting.sorted(by: { $0.key < $1.key }) { observer.send(result: result) }
    }

    func subscribe(_ observer: StreamObserver<Output, Failure>) {
        let (key, resolved) = state.withLock { state -> (Int?, Result<Output, Failure>?) in
            switch state {
            case .pending(let nextKey, var waiting):
                waiting[nextKey] = observer
                state = .pending(nextKey: nextKey + 1, waiting: waiting)
                return (nextKey, nil)
            case .resolved(let result):
                return (nil, result)
            }
        }
        if let resolved { return observer.send(result: resolved) }
        if let key {
            observer.onTermination { [self] in remove(key) }
        }
    }

    private func remove(_ key: Int) {
        let removed = state.withLock { state -> StreamObserver<Output, Failure>? in
            guard case .pending(let nextKey, var waiting) = state else { return nil }
            let removed = waiting.removeValue(forKey: key)
            state = .pending(nextKey: nextKey, waiting: waiting)
            return removed
        }
        // Released after unlocking: dropping the observer may run deinits that fulfil this very future.
        withExtendedLifetime(removed) {}
    }
}
