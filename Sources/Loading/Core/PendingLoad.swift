/// The state of one load in flight: the building block for writing a ``Loader`` that keeps the contract.
///
/// It holds the load's completion until the load completes or is cancelled, and the token of the step in flight (a
/// request, a timer, another load). Whichever of ``complete(_:)`` and ``cancel()`` comes first wins: the completion
/// runs at most once, no call of it begins after `cancel()` returns, and a cancel reaches the step in flight. Return
/// it as the load's token.
///
/// ```swift
/// struct QuoteLoader: Loader {
///     let session: URLSession
///     let url: URL
///
///     func load(completion: @escaping LoadCompletion<Data>) -> any CancellationToken {
///         let pending = PendingLoad(completion)
///         pending.startStep {
///             let task = session.dataTask(with: url) { data, _, error in
///                 pending.complete(data.map { .success($0) } ?? .failure(error ?? URLError(.badServerResponse)))
///             }
///             task.resume()
///             return AnyCancellationToken { task.cancel() }
///         }
///         return pending
///     }
/// }
/// ```
/// The completion and the step's token are released outside the lock, so their deinitializers may call back into
/// the same load. A struct around one lock box: copies share the state, and a load costs one allocation for it.
public struct PendingLoad<Output: Sendable>: CancellationToken {
    @usableFromInline
    struct State: Sendable {
        @usableFromInline var completion: LoadCompletion<Output>?
        @usableFromInline var step: (any CancellationToken)?
        /// Counts started steps, so that a step that finished synchronously (and started the next one from its
        /// completion) does not overwrite its successor's token when its own start returns.
        @usableFromInline var generation = 0
        /// Whether the load ended by a cancel (or a completion that cancels the step): a step whose start is still
        /// running then gets cancelled when it returns. A step that completed the load is over and is left alone.
        @usableFromInline var cancelsStep = false

        @inlinable
        init(completion: LoadCompletion<Output>?) {
            self.completion = completion
        }

        /// Ends the load: takes the completion and the step out, for the caller to release after unlocking.
        @inlinable
        mutating func finish() -> (LoadCompletion<Output>?, (any CancellationToken)?) {
            defer {
                completion = nil
                step = nil
            }
            return (completion, step)
        }
    }

    @usableFromInline
    let state: Locked<State>

    /// Creates the state of a load that will deliver to `completion`.
    @inlinable
    public init(_ completion: @escaping LoadCompletion<Output>) {
        state = Locked(State(completion: completion))
    }

    /// Whether the load has completed or been cancelled.
    @inlinable
    public var isFinished: Bool {
        state.withLock { $0.completion == nil }
    }

    /// Starts a step (a request, a delay, another load) unless the load has finished, and keeps its token as the
    /// step in flight, so that a cancel reaches it. If the load is cancelled while `start` runs, the step is
    /// cancelled as soon as `start` returns; a step that completed the load before its start returned is not.
    /// Each step replaces the previous one.
    @inlinable
    public func startStep(_ start: () -> any CancellationToken) {
        // The previous step (over by now: steps run one after another) is taken out here and released after
        // unlocking, so that storing the new token below replaces nothing under the lock.
        let (generation, previous) = state.withLock { state -> (Int?, (any CancellationToken)?) in
            guard state.completion != nil else { return (nil, nil) }
            state.generation += 1
            return (state.generation, exchange(&state.step, with: nil))
        }
        withExtendedLifetime(previous) {}
        guard let generation else { return }
        let token = start()
        let isFinished = state.withLock { state -> Bool in
            guard state.completion != nil else { return state.cancelsStep }
            if state.generation == generation { state.step = token }
            return false
        }
        if isFinished { token.cancel() }
    }

    /// ``startStep(_:)`` for the first step of a load this caller just created and has not shared yet: nothing
    /// can have finished it or started a step, so the lock is taken once (after `start`), not twice. The first
    /// step's generation is 0, the one a new load starts with.
    @inlinable
    func startFirstStep(_ start: () -> any CancellationToken) {
        let token = start()
        let isFinished = state.withLock { state -> Bool in
            guard state.completion != nil else { return state.cancelsStep }
            if state.generation == 0 { state.step = token }
            return false
        }
        if isFinished { token.cancel() }
    }

    /// Calls the completion with `result`, unless the load was already cancelled or completed.
    @inlinable @inline(__always)
    public func complete(_ result: Result<Output, any Error>) {
        takeCompletion()?(result)
    }

    /// Cancels the step in flight and calls the completion with `result`, unless the load already finished.
    func completeCancellingStep(_ result: Result<Output, any Error>) {
        let (completion, step) = state.withLock { state in
            state.cancelsStep = true
            return state.finish()
        }
        guard let completion else { return }
        step?.cancel()
        completion(result)
    }

    /// Takes the completion without calling it, so the caller can deliver on its own terms. Returns `nil` when the
    /// load was already cancelled or completed.
    @inlinable @inline(__always)
    func takeCompletion() -> LoadCompletion<Output>? {
        let (completion, step) = state.withLock { $0.finish() }
        withExtendedLifetime(step) {}
        return completion
    }

    /// Cancels the load: the completion is not called, and the step in flight is cancelled.
    @inlinable
    public func cancel() {
        cancelReportingPending()
    }

    /// Cancels, and tells whether the load was still pending (neither completed nor cancelled before).
    @discardableResult
    @inlinable
    func cancelReportingPending() -> Bool {
        let (completion, step) = state.withLock { state in
            state.cancelsStep = true
            return state.finish()
        }
        step?.cancel()
        // Dropped here, after unlocking: releasing the completion may run its captures' deinitializers.
        return withExtendedLifetime(completion) { completion != nil }
    }
}
