extension EventStream where Failure == any Error {
    /// Saves every value to `cache` as it passes: the stream form of ``Loader/caching(to:policy:)``, with the same
    /// ``CacheSavePolicy``. Failures are never cached.
    ///
    /// ```swift
    /// let fresh = remote.asStream().caching(to: database).caching(to: memory)
    /// ```
    /// With ``CacheSavePolicy/ignoreFailures`` (the default) and ``CacheSavePolicy/reportFailures(to:)`` each save
    /// starts and the value passes on at once. With ``CacheSavePolicy/failLoad`` each value passes on once its save
    /// succeeded, in order; a failed save fails the stream with the save's error and cancels the upstream, and a
    /// failure of the upstream passes on at once, dropping values still waiting for their save.
    ///
    /// A stream with a typed failure caches after `mapError { $0 }`, so that a save's error fits.
    public func caching<C: Cache>(to cache: C, policy: CacheSavePolicy = .ignoreFailures) -> EventStream
    where C.Value == Output {
        switch policy.kind {
        case .ignore:
            return handleEvents(receiveOutput: { value in cache.save(value) { _ in } })
        case .report(let handler):
            return handleEvents(receiveOutput: { value in
                cache.save(value) { saved in
                    if case .failure(let error) = saved { handler(error) }
                }
            })
        case .fail:
            return EventStream { observer in
                let upstream = observer.lifetime.makeChild()
                let saves = OrderedSaves(cache: cache, downstream: SerializedObserver(observer), upstream: upstream)
                subscribe(StreamObserver(lifetime: upstream) { saves.receive($0) })
            }
        }
    }

    /// Saves values to `cache` debounced: the last value of a burst is saved once no newer value has come for
    /// `interval` on `scheduler`, and a value still waiting when the subscription ends (by completion or cancel)
    /// is saved at once, so the last state is always the one saved. Values pass on without waiting.
    ///
    /// ```swift
    /// let saved = liveLists.caching(to: memory).caching(to: database, debounce: .milliseconds(500), scheduler: .global())
    /// ```
    /// `policy` says what a failed save does: nothing (``CacheSavePolicy/ignoreFailures``, the default), call a
    /// handler (``CacheSavePolicy/reportFailures(to:)``), or fail the stream with the save's error
    /// (``CacheSavePolicy/failLoad``; the values have already passed).
    public func caching<C: Cache, S: Scheduler>(
        to cache: C,
        debounce interval: Duration,
        scheduler: S,
        policy: CacheSavePolicy = .ignoreFailures
    ) -> EventStream where C.Value == Output {
        EventStream { observer in
            let serial = SerializedObserver(observer)
            let upstream = observer.lifetime.makeChild()
            let pending = StreamSubject<Output, Never>()
            let saver = pending.stream.debounce(for: interval, scheduler: scheduler).sink { value in
                cache.save(value) { saved in
                    guard case .failure(let error) = saved else { return }
                    switch policy.kind {
                    case .ignore: break
                    case .report(let handler): handler(error)
                    case .fail:
                        serial.send(.completion(.failure(error)))
                        upstream.end()
                    }
                }
            }
            observer.onTermination {
                pending.send(completion: .finished)  // flushes a waiting value
                saver.cancel()
            }
            subscribe(
                StreamObserver(lifetime: upstream) { event in
                    if case .value(let value) = event { pending.send(value) }
                    if event.isCompletion { upstream.end() }
                    serial.send(event)
                })
        }
    }
}

/// The saves of a ``CacheSavePolicy/failLoad`` stream: one at a time, in arrival order, each value passed on once
/// its save succeeded. A save that completes inside the cache's `save` call hands the next one back to the loop
/// that made the call: however many values wait, the saves never nest.
private final class OrderedSaves<C: Cache>: Sendable where C.Value: Sendable {
    typealias Output = C.Value

    private struct State: Sendable {
        /// Values not yet passed on, from `head`; the first is being saved while `isSaving`.
        var waiting: [Output] = []
        var head = 0
        var isSaving = false
        var upstreamFinished = false
        /// Whether a call to the cache's `save` has not returned yet, and the value its loop saves next when the
        /// save completed before it returned.
        var inSaveCall = false
        var nextInCall: Output?

        var first: Output? { head < waiting.count ? waiting[head] : nil }

        /// Forgets the value whose save succeeded; the list is compacted once half of it is passed on.
        mutating func dropFirst() {
            guard head < waiting.count else { return }
            head += 1
            if head == waiting.count {
                waiting.removeAll(keepingCapacity: waiting.capacity <= 64)
                head = 0
            } else if head > 64, head * 2 > waiting.count {
                waiting.removeFirst(head)
                head = 0
            }
        }
    }

    private let state = Locked(State())
    private let cache: C
    private let downstream: SerializedObserver<Output, any Error>
    private let upstream: SubscriptionLifetime

    init(cache: C, downstream: SerializedObserver<Output, any Error>, upstream: SubscriptionLifetime) {
        self.cache = cache
        self.downstream = downstream
        self.upstream = upstream
    }

    func receive(_ event: StreamEvent<Output, any Error>) {
        switch event {
        case .value(let value):
            let startsSave = state.withLock { state -> Bool in
                state.waiting.append(value)
                guard !state.isSaving else { return false }
                state.isSaving = true
                return true
            }
            if startsSave { save(from: value) }
        case .completion(.finished):
            upstream.end()
            let finishesNow = state.withLock { state -> Bool in
                state.upstreamFinished = true
                return !state.isSaving
            }
            if finishesNow { downstream.send(.completion(.finished)) }
        case .completion(.failure):
            upstream.end()
            let dropped = state.withLock { state in
                state.head = 0
                return exchange(&state.waiting, with: [])
            }
            downstream.send(event)
            withExtendedLifetime(dropped) {}
        }
    }

    /// Saves `first`, then, while each save completes before its call returns, the next value waiting.
    private func save(from first: Output) {
        var value = first
        while true {
            state.withLock { $0.inSaveCall = true }
            let saved = value
            cache.save(saved) { [self] result in self.saved(saved, result) }
            let next = state.withLock { state in
                state.inSaveCall = false
                return state.nextInCall.take()
            }
            guard let next else { return }
            value = next
        }
    }

    /// Passes `value` on once its save succeeded, and saves the next value waiting: here when the save completed
    /// later, in the loop that called the cache when it completed during that call.
    private func saved(_ value: Output, _ result: Result<Void, any Error>) {
        if case .failure(let error) = result {
            upstream.end()
            downstream.send(.completion(.failure(error)))
            return
        }
        guard !downstream.downstream.isCancelled else { return }  // a cancel skips the saves not started yet
        // Passed on before the next save starts: the values arrive in order.
        downstream.send(.value(value))
        let (next, finishes) = state.withLock { state -> (Output?, Bool) in
            state.dropFirst()
            guard let next = state.first else {
                state.isSaving = false
                return (nil, state.upstreamFinished)
            }
            guard !state.inSaveCall else {
                state.nextInCall = next
                return (nil, false)
            }
            return (next, false)
        }
        if let next { save(from: next) }
        if finishes { downstream.send(.completion(.finished)) }
    }
}
