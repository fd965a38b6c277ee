/// The state every composite that owns asynchronous steps keeps for one load: the downstream completion (until it
/// is called or the load is cancelled) and the token of the step in flight.
///
/// It is the token such composites return: cancelling it drops the completion and cancels the current step, and
/// `complete(_:)` calls the completion at most once. Whichever of the two takes the completion first wins; that
/// moment is the load's linearization point.
///
/// A struct around one lock box: copies share the state, and a load costs one allocation for it.
@usableFromInline
package struct PendingLoad<Output: Sendable>: CancellationToken {
    @usableFromInline
    struct State: Sendable {
        @usableFromInline var completion: LoadCompletion<Output>?
        @usableFromInline var step: (any CancellationToken)?
        /// Counts started steps, so that a step that finished synchronously (and started the next one from its
        /// completion) does not overwrite its successor's token when its own start returns.
        @usableFromInline var generation = 0

        @inlinable
        init(completion: LoadCompletion<Output>?) {
            self.completion = completion
        }
    }

    @usableFromInline
    let state: Locked<State>

    @inlinable
    package init(_ completion: @escaping LoadCompletion<Output>) {
        state = Locked(State(completion: completion))
    }

    /// Whether the load has been cancelled or completed.
    @inlinable
    package var isFinished: Bool {
        state.withLock { $0.completion == nil }
    }

    /// Starts a step (a load, a delay) unless the load has finished, and records its token as the step in flight.
    /// If the load is cancelled while `start` runs, the step is cancelled as soon as `start` returns.
    @inlinable
    package func startStep(_ start: () -> any CancellationToken) {
        let generation = state.withLock { state -> Int? in
            guard state.completion != nil else { return nil }
            state.generation += 1
            return state.generation
        }
        guard let generation else { return }
        let token = start()
        let isFinished = state.withLock { state -> Bool in
            guard state.completion != nil else { return true }
            if state.generation == generation { state.step = token }
            return false
        }
        if isFinished { token.cancel() }
    }

    /// Calls the completion with `result`, unless the load was already cancelled or completed.
    @inlinable
    package func complete(_ result: Result<Output, any Error>) {
        takeCompletion()?(result)
    }

    /// Cancels the step in flight and calls the completion with `result`, unless the load already finished.
    @inlinable
    package func completeCancellingStep(_ result: Result<Output, any Error>) {
        let (completion, step) = state.withLock { state -> (LoadCompletion<Output>?, (any CancellationToken)?) in
            defer {
                state.completion = nil
                state.step = nil
            }
            return (state.completion, state.step)
        }
        guard let completion else { return }
        step?.cancel()
        completion(result)
    }

    /// Takes the completion without calling it, so the caller can deliver on its own terms. Returns `nil` when the
    /// load was already cancelled or completed.
    @inlinable
    package func takeCompletion() -> LoadCompletion<Output>? {
        state.withLock { state in
            defer {
                state.completion = nil
                state.step = nil
            }
            return state.completion
        }
    }

    @inlinable
    package func cancel() {
        cancelReportingPending()
    }

    /// Cancels, and tells whether the load was still pending (neither completed nor cancelled before).
    @discardableResult
    @inlinable
    package func cancelReportingPending() -> Bool {
        let (wasPending, step) = state.withLock { state -> (Bool, (any CancellationToken)?) in
            defer {
                state.completion = nil
                state.step = nil
            }
            return (state.completion != nil, state.step)
        }
        step?.cancel()
        return wasPending
    }
}
