extension LoaderFamily {
    /// A family that remembers, for `window`, each key's failure that `isLasting` accepts (a 404, a body that does not
    /// decode): a load of the key within the window fails at once with the same error, without asking the upstream.
    /// What a server puts in front of an upstream, so that a symbol it does not know costs one call per window, not
    /// one per request.
    ///
    /// A failure `isLasting` refuses (a timeout, a dropped connection) is not remembered: the next load asks again
    /// (retry those with ``Loader/retry(_:scheduler:)``). The window is measured by `scheduler`'s clock, which a wall
    /// clock set back does not move. At most `countLimit` failures are remembered, the oldest forgotten first, so the
    /// memory stays bounded however many keys fail. The memory belongs to this family value and its process: the
    /// instances of a service each ask the upstream once per window.
    ///
    /// ```swift
    /// let quotes = LoaderFamily { (symbol: String) in api.quote(symbol) }
    ///     .rememberingFailures(for: .seconds(30), where: { $0 is UnknownSymbol })
    /// ```
    public func rememberingFailures(
        for window: Duration, where isLasting: @escaping @Sendable (any Error) -> Bool, countLimit: Int = 10_000,
        scheduler: some Scheduler = .global()
    ) -> LoaderFamily {
        let makeLoader = makeLoader
        let failures = RememberedFailures<Key>(window: window, countLimit: countLimit, scheduler: scheduler)
        return LoaderFamily { key in
            AnyLoader<Output> { completion in
                if let error = failures.failure(of: key) {
                    completion(.failure(error))
                    return FinishedToken()
                }
                return makeLoader(key).load { result in
                    if case .failure(let error) = result, isLasting(error) { failures.remember(error, of: key) }
                    completion(result)
                }
            }
        }
    }
}

/// The failures a family remembers (see ``LoaderFamily/rememberingFailures(for:where:countLimit:scheduler:)``): by
/// key, each with when it is forgotten, and the keys in the order they failed, so that the expired and the oldest go
/// in time that does not grow with the count.
final class RememberedFailures<Key: Hashable & Sendable>: Sendable {
    private struct State {
        var failures: [Key: (error: any Error, until: Duration, id: Int)] = [:]
        /// The keys in the order their failures were remembered, by the same ids (a key remembered again is moved).
        var order = OrderedQueue<Key>()
        var lastID = 0
    }

    private let window: Duration
    private let countLimit: Int
    private let scheduler: any Scheduler
    private let state = Locked(State())

    init(window: Duration, countLimit: Int, scheduler: any Scheduler) {
        self.window = window
        self.countLimit = max(1, countLimit)
        self.scheduler = scheduler
    }

    /// The failure of `key` remembered now, if any.
    func failure(of key: Key) -> (any Error)? {
        let now = scheduler.now
        return state.withLock { state in
            guard let failure = state.failures[key] else { return nil }
            return failure.until > now ? failure.error : nil
        }
    }

    /// Remembers `error` as `key`'s failure for the window, from now.
    func remember(_ error: any Error, of key: Key) {
        let now = scheduler.now
        // The errors forgotten are released after unlocking (an error's deinitializer is the app's code).
        let forgotten = state.withLock { state -> [any Error] in
            state.lastID += 1
            let replaced = state.failures.updateValue((error, now + window, state.lastID), forKey: key)
            if let replaced { _ = state.order.remove(id: replaced.id) }
            state.order.append(key, id: state.lastID)
            var forgotten = replaced.map { [$0.error] } ?? []
            // The expired go first, then the oldest beyond the limit.
            while let (_, oldest) = state.order.first,
                let failure = state.failures[oldest],
                failure.until <= now || state.failures.count > countLimit
            {
                _ = state.order.popFirst()
                state.failures[oldest] = nil
                forgotten.append(failure.error)
            }
            return forgotten
        }
        withExtendedLifetime(forgotten) {}
    }
}
